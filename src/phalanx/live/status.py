"""PodGroup status and scheduling Events, in the vocabulary of the gang API.

Design:

- :func:`group_status` computes a scheduler-plugins PodGroup (``scheduling.x-k8s.io``) status
  the way its PodGroup controller does (``podgroup_controller.go`` ``Reconcile``): counts of the
  group's pods by phase (``running``, ``succeeded``, ``failed``) and ``phase`` — ``Pending``
  while fewer than ``minMember`` pods exist, then ``Scheduling``; ``Running`` once
  ``running + succeeded >= minMember``; ``Failed`` once some failed and
  ``failed + running + succeeded >= minMember``; ``Finished`` once ``succeeded >= minMember``
  (later rules win). ``Finished`` and ``Failed`` are terminal. ``scheduleStartTime`` is set when
  the group first leaves ``Pending``. (``Unknown`` is declared by the API but never set.)
- :class:`StatusWriter` writes it through the ``/status`` subresource with a JSON merge patch
  (CRDs refuse strategic merge); the patch always carries every field it manages (the status
  has no lists today; a list would be sent whole since merge patches replace lists). It writes
  only when the status differs from both the informer's copy and the last status it wrote, so
  a lagging informer causes no duplicate writes.
- Events (``events.k8s.io/v1``, as kube-scheduler writes them): ``Scheduled`` on each bound
  pod and on the group when a gang binds; ``FailedScheduling`` (Warning) with the gang's
  explanation on the group and its pending pods when it waits — only when the message changed
  since the last one for that object (remembered in memory, so a restart repeats it once).
- Only the scheduler-plugins API is covered; Volcano's PodGroup (phases ``Inqueue``/
  ``Completed``, ``conditions`` list) is not written yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from phalanx.live import events
from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import LiveError
from phalanx.live.resources import PODGROUPS, PODS, Resource, object_key
from phalanx.live.writes import patch_status, rfc3339

logger = logging.getLogger(__name__)

PENDING = "Pending"
SCHEDULING = "Scheduling"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"
UNKNOWN = "Unknown"
TERMINAL = frozenset({FINISHED, FAILED})

#: Labels naming a pod's scheduler-plugins PodGroup (current group first).
GROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
#: The status fields this module manages.
MANAGED = ("phase", "running", "succeeded", "failed", "scheduleStartTime")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def group_of(pod: Obj) -> str | None:
    """The ``namespace/name`` key of the PodGroup ``pod`` belongs to, if any."""
    labels = _meta(pod).get("labels") or {}
    for label in GROUP_LABELS:
        name = labels.get(label)
        if name:
            return f"{_meta(pod).get('namespace') or 'default'}/{name}"
    return None


def min_member(group: Obj) -> int:
    spec = group.get("spec") or {}
    value = spec.get("minMember") if isinstance(spec, dict) else None
    return value if isinstance(value, int) and value > 0 else 1


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
    """The managed status fields of ``group`` given its member pods."""
    current = group.get("status") or {}
    counts = {"Running": 0, "Succeeded": 0, "Failed": 0}
    total = 0
    for pod in pods:
        total += 1
        phase = (pod.get("status") or {}).get("phase")
        if phase in counts:
            counts[phase] += 1
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


def _managed(status: Mapping[str, Any]) -> Obj:
    return {field: status.get(field) for field in MANAGED}


def _with_kind(obj: Obj, resource: Resource) -> Obj:
    """Listed built-in items lack ``kind``/``apiVersion``; events need them in references."""
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


class StatusWriter:
    """Writes PodGroup statuses and the scheduling Events of one scheduler."""

    def __init__(
        self,
        client: KubeClient,
        *,
        controller: str = "phalanx",
        resource: Resource = PODGROUPS,
        concurrency: int = 16,
    ) -> None:
        self.client = client
        self.controller = controller
        self.resource = resource
        self._semaphore = asyncio.Semaphore(concurrency)
        #: group key → the managed status last written.
        self._written: dict[str, Obj] = {}
        #: (kind, key) → the last FailedScheduling message emitted about it.
        self._failed: dict[tuple[str, str], str] = {}

    # -- status ----------------------------------------------------------------------------
    async def sync(self, groups: Iterable[Obj], pods: Iterable[Obj]) -> int:
        """Write every group whose status changed; the number of writes."""
        members: dict[str, list[Obj]] = {}
        for pod in pods:
            key = group_of(pod)
            if key is not None:
                members.setdefault(key, []).append(pod)
        writes = []
        live: set[str] = set()
        for group in groups:
            key = object_key(group)
            live.add(key)
            desired = group_status(group, members.get(key, ()))
            current = _managed(group.get("status") or {})
            written = self._written.get(key) or {}
            if desired["scheduleStartTime"] and not current["scheduleStartTime"]:
                # the informer may not show our last write yet: keep the time we wrote
                desired["scheduleStartTime"] = (
                    written.get("scheduleStartTime") or desired["scheduleStartTime"]
                )
            if desired == current or desired == self._written.get(key):
                continue
            writes.append(self._write(key, group, desired))
        for key in [k for k in self._written if k not in live]:
            del self._written[key]
        done = await asyncio.gather(*writes)
        return sum(done)

    async def _write(self, key: str, group: Obj, status: Obj) -> bool:
        meta = _meta(group)
        async with self._semaphore:
            try:
                await patch_status(
                    self.client, self.resource, str(meta.get("name")), status, meta.get("namespace")
                )
            except LiveError as exc:
                logger.warning("could not write the status of PodGroup %s: %s", key, exc)
                return False
        self._written[key] = status
        return True

    # -- events ----------------------------------------------------------------------------
    async def _emit(self, regarding: Obj, reason: str, note: str, type_: str) -> None:
        body = events.event(
            regarding,
            reason=reason,
            note=note,
            type_=type_,
            controller=self.controller,
            instance=self.controller,
        )
        async with self._semaphore:
            try:
                await events.create(self.client, body)
            except LiveError as exc:
                logger.warning("could not write a %s event: %s", reason, exc)

    async def scheduled(self, group: Obj | None, binds: Iterable[tuple[Obj, str]]) -> None:
        """``Scheduled`` on each ``(pod, node)`` and on ``group`` (when it is a PodGroup)."""
        binds = list(binds)
        emits = [
            self._emit(
                _with_kind(pod, PODS),
                events.SCHEDULED,
                f"Successfully assigned {object_key(pod)} to {node}",
                events.NORMAL,
            )
            for pod, node in binds
        ]
        for pod, _ in binds:
            self._failed.pop(("Pod", object_key(pod)), None)
        if group is not None:
            nodes = sorted({node for _, node in binds})
            emits.append(
                self._emit(
                    _with_kind(group, self.resource),
                    events.SCHEDULED,
                    f"gang of {len(binds)} pods bound to {len(nodes)} nodes: {', '.join(nodes)}",
                    events.NORMAL,
                )
            )
            self._failed.pop((self.resource.kind, object_key(group)), None)
        await asyncio.gather(*emits)

    async def failed_scheduling(self, group: Obj | None, pods: Iterable[Obj], message: str) -> int:
        """``FailedScheduling`` on ``group`` and ``pods`` whose last message differs; how many."""
        targets = [_with_kind(pod, PODS) for pod in pods]
        if group is not None:
            targets.append(_with_kind(group, self.resource))
        emits = []
        for obj in targets:
            marker = (str(obj["kind"]), object_key(obj))
            if self._failed.get(marker) == message:
                continue
            self._failed[marker] = message
            emits.append(self._emit(obj, events.FAILED_SCHEDULING, message, events.WARNING))
        await asyncio.gather(*emits)
        return len(emits)


__all__ = [
    "FAILED",
    "FINISHED",
    "PENDING",
    "RUNNING",
    "SCHEDULING",
    "StatusWriter",
    "group_of",
    "group_status",
    "phase_for",
]
