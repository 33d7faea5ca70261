"""Volcano Queue status, written live: its PodGroups counted by phase, and what it holds.

Design: Volcano's queue controller keeps ``status.pending``, ``running``, ``unknown``,
``inqueue`` and ``completed`` (the number of the queue's PodGroups in each phase) and, since
Volcano 1.10, ``status.allocated`` (the resources its running pods hold). phalanx writes the
same fields, so ``kubectl get queue -o yaml`` and dashboards built on Volcano read the same
numbers when phalanx schedules Volcano PodGroups:

- :func:`desired` counts each Volcano PodGroup under its ``spec.queue`` (``default`` when
  unset) by the phase phalanx last wrote (:meth:`~phalanx.live.status.StatusWriter.current`,
  so a lagging informer does not count the old phase), and sums the requests of the pods the
  state holds bound (or being evicted) for those groups, as Kubernetes quantities (CPU and
  GPUs in milli-units when fractional; ``pods`` left out). Only Queues that exist are written.
- :class:`QueueStatusWriter` merge-patches ``/status`` with those six fields, only when they
  differ from both the informer's copy and the last status it wrote. ``state`` (Open, Closed)
  and ``reservation`` stay the queue controller's.

The loop plans them after the PodGroup statuses, when the state or an object changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from phalanx.api.quantity import is_milli
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.k8s.objects import VOLCANO_GROUP
from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import LiveError
from phalanx.live.group_status import COMPLETED, INQUEUE, PENDING, RUNNING, UNKNOWN
from phalanx.live.resources import VOLCANO_QUEUES, object_key
from phalanx.live.writes import patch_status

logger = logging.getLogger(__name__)

#: Volcano QueueStatus field → the PodGroup phase it counts.
PHASE_FIELDS = {
    "pending": PENDING,
    "running": RUNNING,
    "unknown": UNKNOWN,
    "inqueue": INQUEUE,
    "completed": COMPLETED,
}
#: The fields phalanx writes (``state`` and ``reservation`` are the queue controller's).
QUEUE_FIELDS = (*PHASE_FIELDS, "allocated")
DEFAULT_QUEUE = "default"


def quantity(name: str, amount: int) -> str:
    """An exact Kubernetes quantity of an integer amount (milli-units for CPU and GPUs)."""
    if is_milli(name):
        whole, rest = divmod(amount, 1000)
        return str(whole) if rest == 0 else f"{amount}m"
    return str(amount)


def desired(queues: Iterable[str], groups: Iterable[Obj], state: ClusterState) -> dict[str, Obj]:
    """Queue name → the managed status it should have (``groups``: every Volcano PodGroup,
    with the status last written)."""
    names = list(queues)
    counts: dict[str, dict[str, int]] = {name: dict.fromkeys(PHASE_FIELDS, 0) for name in names}
    held: dict[str, Any] = {}
    phase_field = {phase: f for f, phase in PHASE_FIELDS.items()}
    for group in groups:
        spec = group.get("spec") if isinstance(group.get("spec"), dict) else {}
        queue = str((spec or {}).get("queue") or DEFAULT_QUEUE)
        if queue not in counts:
            continue
        phase = (group.get("status") or {}).get("phase") or PENDING
        if phase in phase_field:
            counts[queue][phase_field[phase]] += 1
        gang = state.gangs.get(object_key(group))
        if gang is None or gang.spec is None or gang.spec.api != VOLCANO_GROUP:
            continue
        for pod in gang.members:
            if pod.status in (PodStatus.BOUND, PodStatus.RELEASING):
                total = held.get(queue)
                held[queue] = pod.request.copy() if total is None else total + pod.request
    index = state.index
    out: dict[str, Obj] = {}
    for name in names:
        status: Obj = dict(counts[name])
        total = held.get(name)
        status["allocated"] = (
            {}
            if total is None
            else {
                resource: quantity(resource, int(total[i]))
                for i, resource in enumerate(index.names)
                if i < total.size and int(total[i]) > 0 and resource != "pods"
            }
        )
        out[name] = status
    return out


class QueueStatusWriter:
    """Writes the managed fields of Volcano Queue statuses that changed."""

    def __init__(self, client: KubeClient, *, concurrency: int = 8) -> None:
        self.client = client
        self._semaphore = asyncio.Semaphore(concurrency)
        self._written: dict[str, Obj] = {}

    async def sync(self, queues: Mapping[str, Obj], wanted: Mapping[str, Obj]) -> int:
        """Write each queue's status in ``wanted`` that differs; the number of writes."""
        writes = []
        for name, status in wanted.items():
            obj = queues.get(name)
            if obj is None:
                continue
            current = obj.get("status") or {}
            managed = {f: current.get(f, {} if f == "allocated" else 0) for f in QUEUE_FIELDS}
            if status == managed or status == self._written.get(name):
                continue
            gone = set(managed["allocated"] or {}) | set(
                self._written.get(name, {}).get("allocated", {})
            )
            patch = {  # a merge patch removes a resource no longer held only with null
                **status,
                "allocated": {
                    **{k: None for k in gone - set(status["allocated"])},
                    **status["allocated"],
                },
            }
            writes.append(self._write(name, status, patch))
        for name in [n for n in self._written if n not in queues]:
            del self._written[name]
        return sum(await asyncio.gather(*writes))

    async def _write(self, name: str, status: Obj, patch: Obj) -> bool:
        async with self._semaphore:
            try:
                await patch_status(self.client, VOLCANO_QUEUES, name, patch)
            except LiveError as exc:
                logger.warning("could not write the status of Volcano Queue %s: %s", name, exc)
                return False
        self._written[name] = status
        return True
