"""PodGroup status of KAI-Scheduler and of the Kubernetes Workload API, in their own words.

Design: pure functions, like :mod:`phalanx.live.group_status` (which they extend): they compute
the managed status fields from the group, its member pods and the engine's
:class:`~phalanx.live.group_status.Verdict`; :class:`~phalanx.live.status.StatusWriter` compares
and writes them. No verdict (the engine has not looked at the gang yet) keeps the conditions as
they are.

**Workload API PodGroup** (``scheduling.k8s.io``, standard ``metav1.Condition`` entries with
``type``, ``status``, ``reason``, ``message``, ``lastTransitionTime``, ``observedGeneration``):

- ``v1alpha2`` (1.36) names its condition ``PodGroupScheduled``: ``True`` once the gang's
  required pods are bound, ``False`` while it waits, with reason ``Unschedulable`` (room,
  affinity, too few members, a gate...) or ``SchedulerError`` (phalanx's ``InternalError``)
  and the engine's explanation as the message. It follows the gang both ways, as a pod's
  ``PodScheduled`` does.
- ``v1beta1`` (1.37) names it ``PodGroupInitiallyScheduled`` and it is terminal: once ``True``
  it is never set back to ``False``, whatever happens to the pods afterwards.
- The API lists reasons only for ``False``; a ``True`` condition needs one too, and phalanx
  writes ``Scheduled``. ``DisruptionTarget`` (preemption) is not written.
- Conditions of other types (set by controllers) are kept as they are.

**KAI-Scheduler PodGroup** (``scheduling.run.ai/v2alpha2``):

- ``schedulingConditions``: while the gang waits, one ``UnschedulableOnNodePool`` entry for
  node pool ``default`` (phalanx has no node pools), ``status: "True"``, reason
  ``Unschedulable`` and the explanation as ``message``, and ``reasons`` with one
  ``{reason, message}`` naming phalanx's own reason (``NotEnoughResources``,
  ``NotEnoughMembers``, ``SchedulingGated``...). The entry goes once the gang is placed.
  Entries for other node pools are kept. ``transitionID`` is not written.
- ``pending``, ``running``, ``succeeded``, ``failed``: member pods by phase.
- ``phase`` and ``resourcesStatus`` (written by KAI's own controllers) are not written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from phalanx.live.group_status import Verdict
from phalanx.live.writes import rfc3339

Obj = dict[str, Any]

#: Workload API version → the name of its scheduling condition.
WORKLOAD_CONDITIONS = {
    "v1alpha2": "PodGroupScheduled",
    "v1beta1": "PodGroupInitiallyScheduled",
}
#: Versions whose scheduling condition never goes back to False once True.
TERMINAL_VERSIONS = frozenset({"v1beta1"})
WORKLOAD_FIELDS = ("conditions",)
KAI_FIELDS = ("schedulingConditions", "pending", "running", "succeeded", "failed")
KAI_CONDITION = "UnschedulableOnNodePool"
KAI_NODE_POOL = "default"
#: phalanx's reason for a failure inside the engine (not about the gang).
INTERNAL_ERROR = "InternalError"


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("status")
    return value if isinstance(value, dict) else {}


def _conditions(raw: object) -> list[Obj]:
    return [dict(c) for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []


def workload_condition_type(group: Mapping[str, Any]) -> str:
    version = str(group.get("apiVersion") or "").rpartition("/")[2]
    return WORKLOAD_CONDITIONS.get(version, WORKLOAD_CONDITIONS["v1beta1"])


def workload_status(group: Obj, verdict: Verdict | None, now: str | None = None) -> Obj:
    """The managed status fields (``conditions``) of a Workload-API PodGroup."""
    conditions = _conditions(_status(group).get("conditions"))
    kind = workload_condition_type(group)
    index = next((i for i, c in enumerate(conditions) if c.get("type") == kind), None)
    existing = conditions[index] if index is not None else None
    version = str(group.get("apiVersion") or "").rpartition("/")[2]
    terminal = version in TERMINAL_VERSIONS and existing and existing.get("status") == "True"
    if verdict is None or terminal:
        return {"conditions": _status(group).get("conditions")}  # as it is: nothing to write
    if verdict.placed:
        status, reason, message = "True", "Scheduled", "the gang's required pods are bound"
    else:
        status = "False"
        reason = "SchedulerError" if verdict.reason == INTERNAL_ERROR else "Unschedulable"
        message = f"{verdict.pending}/{verdict.members} pods unschedulable: {verdict.message}"
    since = existing.get("lastTransitionTime") if existing else None
    condition: Obj = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since
        if existing and existing.get("status") == status and since
        else (now or rfc3339()),
    }
    generation = (group.get("metadata") or {}).get("generation")
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    if index is None:
        conditions.append(condition)
    else:
        conditions[index] = condition
    return {"conditions": conditions}


def kai_status(
    group: Obj, pods: Iterable[Obj], verdict: Verdict | None, now: str | None = None
) -> Obj:
    """The managed status fields of a KAI PodGroup given its pods and the engine's verdict."""
    counts = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if phase in counts:
            counts[phase] += 1
    current = _conditions(_status(group).get("schedulingConditions"))
    ours = [
        c for c in current if c.get("type") == KAI_CONDITION and c.get("nodePool") == KAI_NODE_POOL
    ]
    kept = [c for c in current if c not in ours]
    if verdict is not None and not verdict.placed:
        since = ours[0].get("lastTransitionTime") if ours else None
        message = f"{verdict.pending}/{verdict.members} pods unschedulable: {verdict.message}"
        kept.append(
            {
                "type": KAI_CONDITION,
                "nodePool": KAI_NODE_POOL,
                "reason": "Unschedulable",
                "message": message,
                "reasons": [{"reason": verdict.reason, "message": verdict.message}],
                "status": "True",
                "lastTransitionTime": since or now or rfc3339(),
            }
        )
    raw = _status(group).get("schedulingConditions")
    return {
        "schedulingConditions": raw if verdict is None else kept,  # no verdict: as it is
        "pending": counts["Pending"],
        "running": counts["Running"],
        "succeeded": counts["Succeeded"],
        "failed": counts["Failed"],
    }
