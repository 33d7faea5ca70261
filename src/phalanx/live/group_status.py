"""PodGroup status in each gang API's own vocabulary, as pure functions of what the loop knows.

Design: one function per vocabulary computes the status fields phalanx manages from the
group, its member pods (as the informer sees them) and, for Volcano, the engine's verdict on
the gang. :class:`~phalanx.live.status.StatusWriter` compares and writes; nothing here talks
to the API, so every rule is unit-tested without a server.

**scheduler-plugins** (``scheduling.x-k8s.io`` and the older ``scheduling.sigs.k8s.io``), as its
PodGroup controller computes it: counts of the group's pods by phase (``running``,
``succeeded``, ``failed``) and ``phase`` — ``Pending`` while fewer than ``minMember`` pods exist,
then ``Scheduling``; ``Running`` once ``running + succeeded >= minMember``; ``Failed`` once some
failed and ``failed + running + succeeded >= minMember``; ``Finished`` once
``succeeded >= minMember`` (later rules win). ``Finished`` and ``Failed`` are terminal.
``scheduleStartTime`` is set when the group first leaves ``Pending``. (``Unknown`` is declared by
the API but never set.)

**Volcano** (``scheduling.volcano.sh/v1beta1``), as its scheduler's session close computes it:

- ``phase``: ``Running`` once the allocated members (bound — or assumed bound — and not
  finished, plus succeeded) reach ``minMember``; ``Completed`` if moreover every allocated
  member succeeded; ``Unknown`` when members run but the engine says the gang cannot be
  placed; otherwise ``Inqueue`` once admitted, else ``Pending``. Admission (Volcano's
  ``enqueue`` action, which its Job controller waits for before it creates pods) is decided by
  the caller: phalanx admits a group whose ``minResources`` fit the cluster's free resources
  less those of groups already admitted and not yet running (no overcommit factor), or at once
  when it has no ``minResources``. Once ``Inqueue``, a group is never sent back to ``Pending``.
- ``conditions``: ``Unschedulable`` (status ``True``) with the engine's reason —
  ``NotEnoughMembers`` is spelt ``NotEnoughTasks`` as in Volcano; ``NotEnoughResources``,
  ``Timeout``, validation reasons are kept — and the message
  ``"N/M tasks in gang unschedulable: <explanation>"``; ``Scheduled`` (``True``, reason
  ``tasks in gang are ready to be scheduled`` as Volcano writes it) once the gang is placed.
  Unlike Volcano, which leaves a stale ``Unschedulable=True`` beside ``Scheduled=True``,
  placing a gang turns ``Unschedulable`` to ``False`` (reason ``Scheduled``).
  ``lastTransitionTime`` changes only when a condition's status does; ``transitionID`` (a
  Volcano session uid) is not written.
- ``running``, ``succeeded``, ``failed``: member pods by phase.

KAI-Scheduler's and the Kubernetes Workload API's PodGroups are written by
:mod:`phalanx.live.api_status`; Workloads themselves have no status to write.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from phalanx.live.writes import rfc3339

Obj = dict[str, Any]

PENDING = "Pending"
SCHEDULING = "Scheduling"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"
UNKNOWN = "Unknown"
TERMINAL = frozenset({FINISHED, FAILED})

#: Volcano's phases beyond Pending/Running/Unknown.
INQUEUE = "Inqueue"
COMPLETED = "Completed"
#: Volcano's condition types and the reason it writes on ``Scheduled``.
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
VOLCANO_READY_REASON = "tasks in gang are ready to be scheduled"
#: phalanx reason → Volcano reason, where Volcano has its own word.
VOLCANO_REASONS = {"NotEnoughMembers": "NotEnoughTasks"}

#: The status fields each vocabulary manages.
SCHEDULER_PLUGINS_FIELDS = ("phase", "running", "succeeded", "failed", "scheduleStartTime")
VOLCANO_FIELDS = ("phase", "conditions", "running", "succeeded", "failed")


def min_member(group: Mapping[str, Any]) -> int:
    spec = group.get("spec") or {}
    value = spec.get("minMember") if isinstance(spec, dict) else None
    return value if isinstance(value, int) and value > 0 else 1


def _phase_counts(pods: Iterable[Obj]) -> tuple[int, dict[str, int]]:
    counts = {"Running": 0, "Succeeded": 0, "Failed": 0}
    total = 0
    for pod in pods:
        total += 1
        phase = (pod.get("status") or {}).get("phase")
        if phase in counts:
            counts[phase] += 1
    return total, counts


# -- scheduler-plugins -----------------------------------------------------------------------
def phase_for(
    minimum: int, pods: int, running: int, succeeded: int, failed: int, current: str = ""
) -> str:
    """The scheduler-plugins controller's phase rule (see the module doc)."""
    if current in TERMINAL:
        return current
    if pods == 0 or pods < minimum:
        return PENDING
    phase = SCHEDULING
    if running + succeeded >= minimum:
        phase = RUNNING
    if failed and failed + running + succeeded >= minimum:
        phase = FAILED
    if succeeded >= minimum:
        phase = FINISHED
    return phase


def group_status(group: Obj, pods: Iterable[Obj], now: str | None = None) -> Obj:
    """The managed scheduler-plugins status fields of ``group`` given its member pods."""
    current = group.get("status") or {}
    total, counts = _phase_counts(pods)
    phase = phase_for(
        min_member(group),
        total,
        counts["Running"],
        counts["Succeeded"],
        counts["Failed"],
        str(current.get("phase") or ""),
    )
    status: Obj = {
        "phase": phase,
        "running": counts["Running"],
        "succeeded": counts["Succeeded"],
        "failed": counts["Failed"],
    }
    start = current.get("scheduleStartTime")
    if start or phase != PENDING:
        status["scheduleStartTime"] = start or now or rfc3339()
    else:
        status["scheduleStartTime"] = None
    return status


# -- Volcano ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verdict:
    """What the engine said about a gang this cycle (its carried-over condition)."""

    placed: bool  # the gang's required members are placed
    reason: str = ""  # why it waits, when not placed
    message: str = ""
    pending: int = 0  # members still waiting for a node
    members: int = 0  # members the scheduler knows


def _allocated(pod: Obj, assumed: bool) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return True
    if phase == "Failed":
        return False
    return assumed or bool((pod.get("spec") or {}).get("nodeName"))


def volcano_phase(
    group: Obj, pods: list[Obj], assumed: Collection[int], verdict: Verdict | None, admitted: bool
) -> str:
    """Volcano's phase rule (module doc); ``assumed`` holds indexes into ``pods``."""
    allocated = [i for i, pod in enumerate(pods) if _allocated(pod, i in assumed)]
    succeeded = sum((pods[i].get("status") or {}).get("phase") == "Succeeded" for i in allocated)
    running = sum((pod.get("status") or {}).get("phase") == "Running" for pod in pods)
    if running and verdict is not None and not verdict.placed:
        return UNKNOWN
    if allocated and len(allocated) >= min_member(group):
        return COMPLETED if succeeded == len(allocated) else RUNNING
    current = (group.get("status") or {}).get("phase")
    return INQUEUE if admitted or current == INQUEUE else PENDING


def _condition(type_: str, status: str, reason: str, message: str, now: str) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": now,
    }


def volcano_conditions(current: Iterable[Any], verdict: Verdict | None, now: str) -> list[Obj]:
    """The ``conditions`` list after ``verdict``; other condition types are kept as they are."""
    existing = [c for c in current if isinstance(c, dict)]
    if verdict is None:
        return existing
    if verdict.placed:
        updates = [
            _condition(SCHEDULED, "True", VOLCANO_READY_REASON, "", now),
            _condition(
                UNSCHEDULABLE,
                "False",
                "Scheduled",
                verdict.message or "all required members placed",
                now,
            ),
        ]
        if not any(c.get("type") == UNSCHEDULABLE for c in existing):
            updates.pop()  # never unschedulable: nothing to clear
    else:
        reason = VOLCANO_REASONS.get(verdict.reason, verdict.reason or "NotEnoughResources")
        message = (
            f"{verdict.pending}/{verdict.members} tasks in gang unschedulable: {verdict.message}"
        )
        updates = [_condition(UNSCHEDULABLE, "True", reason, message, now)]
        updates += [
            {**c, "status": "False", "lastTransitionTime": now} if c.get("status") != "False" else c
            for c in existing
            if c.get("type") == SCHEDULED
        ]
    by_type = {c["type"]: c for c in updates}
    out: list[Obj] = []
    for condition in existing:
        update = by_type.pop(str(condition.get("type")), None)
        if update is None:
            out.append(condition)
            continue
        if update.get("status") == condition.get("status"):
            update = {**update, "lastTransitionTime": condition.get("lastTransitionTime", now)}
        out.append(update)
    out.extend(by_type.values())
    return out


def volcano_status(
    group: Obj,
    pods: list[Obj],
    *,
    assumed: Collection[int] = (),
    verdict: Verdict | None = None,
    admitted: bool = False,
    now: str | None = None,
) -> Obj:
    """The managed Volcano status fields of ``group`` given its pods and the engine's verdict."""
    current = group.get("status") or {}
    _, counts = _phase_counts(pods)
    return {
        "phase": volcano_phase(group, pods, assumed, verdict, admitted),
        "conditions": volcano_conditions(
            current.get("conditions") or (), verdict, now or rfc3339()
        ),
        "running": counts["Running"],
        "succeeded": counts["Succeeded"],
        "failed": counts["Failed"],
    }
