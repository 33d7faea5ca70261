"""Writing PodGroup statuses and scheduling Events for every gang API.

Design:

- :func:`plan` turns the state into the desired status of the PodGroups it is given — the loop
  gives those whose object, members or gang changed since the last cycle (and the Volcano
  groups awaiting admission once the state changed), so an unchanged cluster is not scanned —
  in each API's vocabulary (:mod:`phalanx.live.group_status`: scheduler-plugins phases and
  counts for ``scheduling.x-k8s.io`` and ``scheduling.sigs.k8s.io``; Volcano phases,
  ``Inqueue`` admission and ``Unschedulable``/``Scheduled`` conditions for
  ``scheduling.volcano.sh``; :mod:`phalanx.live.api_status`: KAI's ``schedulingConditions``
  and counts for ``scheduling.run.ai``, the Workload API's ``PodGroupScheduled`` or
  ``PodGroupInitiallyScheduled`` condition by version for ``scheduling.k8s.io``). Pods join
  their group by the same keys the converter reads; the cache keeps that index
  (:attr:`~phalanx.live.cache.ClusterCache.members`).
- :class:`StatusWriter` writes a desired status through the ``/status`` subresource with a
  JSON merge patch (CRDs refuse strategic merge) that carries every managed field (lists, such
  as Volcano's ``conditions``, are sent whole: merge patches replace lists). It writes only
  when the status differs from both the informer's copy and the last status it wrote, and it
  computes from the status it last wrote while the informer has not caught up, so a lagging
  informer causes neither duplicate writes nor flapping timestamps.
- Events (``events.k8s.io/v1``, as kube-scheduler writes them): ``Scheduled`` on each bound
  pod and on the group when a gang binds; ``FailedScheduling`` (Warning) with the gang's
  explanation on the group and its pending pods when it waits — only when the message changed
  since the last one for that object (remembered in memory, so a restart repeats it once).
  A Warning ``Invalid`` Event goes on every object the cache rejected, once per version (its
  ``metadata.generation`` when it has one: our own status writes do not repeat it).
  They go through an :class:`~phalanx.live.events.EventRecorder`: queued, written in the
  background, so binds never wait for them. Under pressure (many Events queued) a gang's
  per-pod ``Scheduled`` Events are folded into its PodGroup's, which then names each pod's
  node (kube-scheduler's broadcaster drops Events when its queue is full; this keeps the
  information in fewer writes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo
from phalanx.k8s import WORKLOAD_GROUP
from phalanx.k8s.apis import kai
from phalanx.live import events
from phalanx.live.api_status import KAI_FIELDS, WORKLOAD_FIELDS, kai_status, workload_status
from phalanx.live.cache import group_of
from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import LiveError
from phalanx.live.group_status import (
    FAILED,
    FINISHED,
    INQUEUE,
    PENDING,
    RUNNING,
    SCHEDULER_PLUGINS_FIELDS,
    SCHEDULING,
    VOLCANO_FIELDS,
    Verdict,
    group_status,
    phase_for,
    volcano_status,
)
from phalanx.live.resources import PODGROUP_RESOURCES, PODS, VOLCANO_PODGROUPS, Resource
from phalanx.live.resources import object_key as _object_key
from phalanx.live.writes import patch_status

logger = logging.getLogger(__name__)

#: The Event reason on an object phalanx cannot use (a malformed PodGroup, Pod, Node...).
INVALID = "Invalid"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def with_kind(obj: Obj, resource: Resource) -> Obj:
    """Listed built-in items lack ``kind``/``apiVersion``; events need them in references."""
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


@dataclass(frozen=True, slots=True)
class Desired:
    """The managed status fields one PodGroup should have."""

    resource: Resource
    group: Obj
    status: Obj


#: API group → the status fields phalanx manages, where not scheduler-plugins'.
FIELDS = {
    VOLCANO_PODGROUPS.group: VOLCANO_FIELDS,
    kai.API: KAI_FIELDS,
    WORKLOAD_GROUP: WORKLOAD_FIELDS,
}


def _fields(resource: Resource) -> tuple[str, ...]:
    return FIELDS.get(resource.group, SCHEDULER_PLUGINS_FIELDS)


class StatusWriter:
    """Writes PodGroup statuses and the scheduling Events of one scheduler."""

    def __init__(
        self, client: KubeClient, *, controller: str = "phalanx", concurrency: int = 16
    ) -> None:
        self.client = client
        self.controller = controller
        self._semaphore = asyncio.Semaphore(concurrency)
        #: Events are written in the background, never on the bind path.
        self.recorder = events.EventRecorder(client)
        #: (API group, group key) → the managed status last written.
        self._written: dict[tuple[str, str], Obj] = {}
        #: (kind/key, resourceVersion) of rejected objects already given an ``Invalid`` Event.
        self._invalid: set[tuple[str, str]] = set()
        #: (kind, key) → the last FailedScheduling message emitted about it.
        self._failed: dict[tuple[str, str], str] = {}

    # -- status ----------------------------------------------------------------------------
    def current(self, resource: Resource, group: Obj) -> Obj:
        """``group`` with the status it has, or the one last written if the informer lags."""
        status = group.get("status") or {}
        written = self._written.get((resource.group, _object_key(group)))
        if written is None or all(status.get(f) == written.get(f) for f in written):
            return group
        return {**group, "status": {**status, **written}}

    async def sync(self, desired: Iterable[Desired], *, prune: bool = True) -> int:
        """Write every status that changed; the number of writes. With ``prune``, ``desired``
        covers every existing group: the memory of the others (deleted) is dropped (without
        it, :meth:`forget` a deleted group)."""
        writes = []
        keep: set[tuple[str, str]] = set()
        for item in desired:
            marker = (item.resource.group, _object_key(item.group))
            keep.add(marker)
            current = item.group.get("status") or {}
            managed = {f: current.get(f) for f in _fields(item.resource)}
            if item.status == managed or item.status == self._written.get(marker):
                continue
            writes.append(self._write(marker, item))
        for marker in [m for m in self._written if prune and m not in keep]:
            del self._written[marker]
        done = await asyncio.gather(*writes)
        return sum(done)

    def forget(self, resource: Resource, group: Obj) -> None:
        """``group`` was deleted: drop what was written to it."""
        self._written.pop((resource.group, _object_key(group)), None)

    async def _write(self, marker: tuple[str, str], item: Desired) -> bool:
        meta = _meta(item.group)
        async with self._semaphore:
            try:
                await patch_status(
                    self.client,
                    item.resource,
                    str(meta.get("name")),
                    item.status,
                    meta.get("namespace"),
                    answer=False,
                )
            except LiveError as exc:
                logger.warning("could not write the status of PodGroup %s: %s", marker[1], exc)
                return False
        self._written[marker] = item.status
        return True

    # -- events ----------------------------------------------------------------------------
    def _emit(
        self,
        regarding: Obj,
        reason: str,
        note: str,
        type_: str,
        action: str = "Scheduling",
        related: Obj | None = None,
    ) -> None:
        self.recorder.emit(
            events.event(
                regarding,
                reason=reason,
                note=note,
                type_=type_,
                action=action,
                related=related,
                controller=self.controller,
                instance=self.controller,
            )
        )

    def notice(
        self,
        regarding: Obj,
        reason: str,
        note: str,
        *,
        action: str = "Scheduling",
        related: Obj | None = None,
    ) -> None:
        """A Normal Event with its ``action`` and ``related`` object (preemption, reclaim)."""
        self._emit(regarding, reason, note, events.NORMAL, action, related)

    async def flush(self) -> None:
        """Wait until every Event emitted so far is written."""
        await self.recorder.flush()

    async def aclose(self) -> None:
        await self.recorder.aclose()

    def scheduled(self, group: Obj | None, binds: Iterable[tuple[Obj, str]]) -> None:
        """``Scheduled`` on each ``(pod, node)`` and on ``group`` (a PodGroup with its kind).

        While the Events queue is long (:meth:`~phalanx.live.events.EventRecorder.pressed`),
        a gang with a PodGroup gets one Event, on the group, naming each pod's node, instead
        of one per pod: binding never waits for Events, and Events do not pile up behind it."""
        binds = list(binds)
        fold = group is not None and len(binds) > 1 and self.recorder.pressed()
        for pod, _node in binds:
            self._failed.pop(("Pod", _object_key(pod)), None)
        if not fold:
            for pod, node in binds:
                note = f"Successfully assigned {_object_key(pod)} to {node}"
                self._emit(with_kind(pod, PODS), events.SCHEDULED, note, events.NORMAL)
        if group is None:
            return
        nodes = sorted({node for _, node in binds})
        note = f"gang of {len(binds)} pods bound to {len(nodes)} nodes: {', '.join(nodes)}"
        if fold:
            self.recorder.folded += len(binds)
            note = _assignments(binds)
        self._emit(group, events.SCHEDULED, note, events.NORMAL)
        self._failed.pop((str(group.get("kind")), _object_key(group)), None)

    def warning(self, regarding: Obj, reason: str, note: str) -> None:
        """A Warning Event (e.g. a gang's ``Timeout``) on ``regarding``."""
        self._emit(regarding, reason, note, events.WARNING)

    def invalid(self, objects: Mapping[str, Obj], why: Mapping[str, str]) -> int:
        """A Warning ``Invalid`` Event on each object the cache rejected (``objects`` and
        ``why``: ``kind/key`` → the object, → its one-line error), once per object version."""
        emitted = 0
        for marker, obj in objects.items():
            meta = _meta(obj)  # the spec's generation: a status write must not repeat it
            version = (marker, str(meta.get("generation") or meta.get("resourceVersion") or ""))
            if version in self._invalid:
                continue
            self._invalid.add(version)
            self._emit(obj, INVALID, why.get(marker, "invalid"), events.WARNING)
            emitted += 1
        return emitted

    def failed_scheduling(self, group: Obj | None, pods: Iterable[Obj], message: str) -> int:
        """``FailedScheduling`` on ``group`` and ``pods`` whose last message differs; how many."""
        targets = [with_kind(pod, PODS) for pod in pods]
        if group is not None:
            targets.append(group)
        emitted = 0
        for obj in targets:
            marker = (str(obj.get("kind")), _object_key(obj))
            if self._failed.get(marker) == message:
                continue
            self._failed[marker] = message
            self._emit(obj, events.FAILED_SCHEDULING, message, events.WARNING)
            emitted += 1
        return emitted


def _assignments(binds: list[tuple[Obj, str]], limit: int = 1024) -> str:
    """``gang of N pods bound: NS/POD to NODE, ...`` within ``limit`` characters (an Event's
    note), ending ``... and K more`` when they do not all fit."""
    head = f"gang of {len(binds)} pods bound (one Event for the gang: many Events queued): "
    parts: list[str] = []
    size = len(head)
    for i, (pod, node) in enumerate(binds):
        part = f"{_object_key(pod)} to {node}"
        rest = len(binds) - i - 1
        tail = len(f", ... and {rest} more") if rest else 0
        if size + len(part) + 2 + tail > limit:
            return head + ", ".join([*parts, f"... and {len(binds) - i} more"])
        parts.append(part)
        size += len(part) + 2
    return head + ", ".join(parts)


# -- planning ------------------------------------------------------------------------------
def _verdict(gang: GangInfo | None) -> Verdict | None:
    if gang is None or gang.condition is None:
        return None
    condition = gang.condition
    placed = gang.ready() or condition.type == "Scheduled"
    return Verdict(
        placed=placed,
        reason=condition.reason,
        message=condition.message,
        pending=len(gang.pending()),
        members=len(gang.members),
    )


def _free(state: ClusterState) -> dict[str, int]:
    table = state.table
    schedulable = ~table.facts.unschedulable
    free = np.maximum(table.free()[schedulable], 0).sum(axis=0)
    return {name: int(free[i]) for i, name in enumerate(state.index.names)}


def _admissions(volcano: list[Obj], state: ClusterState) -> set[str]:
    """Volcano groups admitted (``Inqueue``) this cycle: their ``minResources`` fit what is free
    less the ``minResources`` of groups admitted before and not yet running. ``volcano``: the
    groups with the status the writer knows (:meth:`StatusWriter.current`)."""
    free = _free(state)
    waiting: list[tuple[str, str, dict[str, int]]] = []
    for group in volcano:
        key = _object_key(group)
        gang = state.gangs.get(key)
        want = dict(gang.spec.min_resources) if gang is not None and gang.spec else {}
        phase = (group.get("status") or {}).get("phase")
        if phase == INQUEUE:
            for name, amount in want.items():
                free[name] = free.get(name, 0) - amount
        elif phase in (None, "", PENDING):
            created = str(_meta(group).get("creationTimestamp") or "")
            waiting.append((created, key, want))
    admitted: set[str] = set()
    for _, key, want in sorted(waiting):
        if all(free.get(name, 0) >= amount for name, amount in want.items()):
            admitted.add(key)
            for name, amount in want.items():
                free[name] = free.get(name, 0) - amount
    return admitted


def awaiting_admission(group: Obj) -> bool:
    """A Volcano group whose admission (``Inqueue``) may change when room frees."""
    return (group.get("status") or {}).get("phase") in (None, "", PENDING)


def plan(
    targets: Iterable[tuple[Resource, Obj]],
    members: Mapping[tuple[str, str], Mapping[str, Obj]],
    state: ClusterState,
    writer: StatusWriter,
    assumed: Container[str] = (),
    volcano: Iterable[Obj] = (),
) -> list[Desired]:
    """The desired status of the PodGroups in ``targets`` (resource, group): only those need
    looking at (the loop passes the groups whose object, members or gang changed).
    ``members``: (API group, group key) → the pods that name it (any phase); ``assumed``: keys
    of pods bound by this scheduler whose watch event has not come yet; ``volcano``: every
    Volcano group (admission is decided over all of them)."""
    targets = list(targets)
    admitted: set[str] = set()
    if any(resource is VOLCANO_PODGROUPS for resource, _ in targets):
        current = [writer.current(VOLCANO_PODGROUPS, group) for group in volcano]
        admitted = _admissions(current, state)
    out: list[Desired] = []
    for resource, obj in targets:
        group = writer.current(resource, obj)
        key = _object_key(group)
        mine = list(members.get((resource.group, key), {}).values())
        if resource.group not in FIELDS:
            out.append(Desired(resource, group, group_status(group, mine)))
            continue
        gang = state.gangs.get(key)
        if gang is not None and (gang.spec is None or gang.spec.api != resource.group):
            gang = None  # a same-named group of another API owns the gang
        if resource.group == kai.API:
            out.append(Desired(resource, group, kai_status(group, mine, _verdict(gang))))
            continue
        if resource.group == WORKLOAD_GROUP:
            out.append(Desired(resource, group, workload_status(group, _verdict(gang))))
            continue
        bound = [i for i, pod in enumerate(mine) if _object_key(pod) in assumed]
        status = volcano_status(
            group, mine, assumed=bound, verdict=_verdict(gang), admitted=key in admitted
        )
        out.append(Desired(resource, group, status))
    return out


def podgroup_resource(
    gang: GangInfo, resources: Mapping[str, Resource] = PODGROUP_RESOURCES
) -> Resource | None:
    """The PodGroup resource of ``gang``'s API in ``resources`` (API group → the resource
    watched; None: an implicit gang, or an API not watched)."""
    if gang.spec is None:
        return None
    return resources.get(gang.spec.api)


__all__ = [
    "FAILED",
    "FINISHED",
    "PENDING",
    "RUNNING",
    "SCHEDULING",
    "Desired",
    "StatusWriter",
    "awaiting_admission",
    "group_of",
    "group_status",
    "phase_for",
    "plan",
    "podgroup_resource",
    "with_kind",
]
