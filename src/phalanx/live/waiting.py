"""Telling waiting pods why they wait: ``PodScheduled=False`` and ``FailedScheduling``.

Design: after each cycle, every pending pod of this scheduler that the cycle did not place gets
the condition ``PodScheduled=False``, reason ``Unschedulable``, with its gang's explanation —
patched only when the message changed, so a steady cluster costs no writes — and (through the
:class:`~phalanx.live.status.StatusWriter`, when status writing is on) a ``FailedScheduling``
Event on the pod and on its PodGroup. Two kinds of pods wait: members of gangs the engine
reports as waiting (the live backend's ``write_status``: a gang parked by the queueing hints is
not reported again, so an unchanged explanation is not redone), and pods whose gang object is
missing or was rejected (orphans), which the engine never sees as gangs — explained only in
cycles after the cache changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from phalanx.cluster.workloads import Condition, PodInfo, PodStatus
from phalanx.live.cache import Obj, Snapshot, orphan_message
from phalanx.live.client import KubeClient
from phalanx.live.errors import LiveError
from phalanx.live.status import StatusWriter
from phalanx.live.writes import patch_pod_status, pod_condition

logger = logging.getLogger(__name__)


def scheduled_condition(obj: Obj) -> Obj | None:
    """The pod's ``PodScheduled`` condition, if it has one."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return condition
    return None


def explained(obj: Obj, message: str) -> bool:
    """Whether the pod already shows ``PodScheduled=False/Unschedulable`` with ``message``."""
    current = scheduled_condition(obj)
    return (
        current is not None
        and current.get("status") == "False"
        and current.get("reason") == "Unschedulable"
        and current.get("message") == message
    )


class Explainer:
    """Writes the explanations of one scheduler's waiting pods."""

    def __init__(
        self, client: KubeClient, scheduler_name: str, status: StatusWriter | None
    ) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.status = status

    async def explain(
        self,
        snapshot: Snapshot,
        waiting: Mapping[str, Condition],
        *,
        group_of: Callable[[str], Obj | None],
        semaphore: asyncio.Semaphore,
    ) -> None:
        """Explain the members of the ``waiting`` gangs (``group_of``: a gang's PodGroup)."""
        patches: list[Coroutine[Any, Any, None]] = []
        for ident, condition in waiting.items():
            gang = snapshot.state.gangs.get(ident)
            if gang is not None:
                group = None if gang.implicit else group_of(ident)
                patches += self._pods(snapshot, gang.members, condition.message, group, semaphore)
        await asyncio.gather(*patches)

    async def orphans(
        self, snapshot: Snapshot, rejected: Mapping[str, str], semaphore: asyncio.Semaphore
    ) -> None:
        """Explain the pods whose gang object is missing or rejected (``rejected``: the
        cache's rejections). The loop calls this only after a change: unchanged orphans
        have their explanation already."""
        patches: list[Coroutine[Any, Any, None]] = []
        for key, pods in snapshot.state.orphans.items():
            message = orphan_message(key, pods, rejected)
            patches += self._pods(snapshot, pods, message, None, semaphore)
        await asyncio.gather(*patches)

    def _pods(
        self,
        snapshot: Snapshot,
        members: Iterable[PodInfo],
        message: str,
        group: Obj | None,
        semaphore: asyncio.Semaphore,
    ) -> list[Coroutine[Any, Any, None]]:
        pending = [
            snapshot.pods[pod.key]
            for pod in members
            if pod.status is PodStatus.PENDING
            and pod.spec.scheduler_name == self.scheduler_name
            and pod.key in snapshot.pods
        ]
        if self.status is not None:
            self.status.failed_scheduling(group, pending, message)
        return [
            self._patch(obj, message, semaphore) for obj in pending if not explained(obj, message)
        ]

    async def _patch(self, obj: Obj, message: str, semaphore: asyncio.Semaphore) -> None:
        condition = pod_condition("PodScheduled", "False", reason="Unschedulable", message=message)
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", str(meta.get("name"))
        async with semaphore:
            try:
                await patch_pod_status(self.client, namespace, name, conditions=[condition])
            except LiveError as exc:
                logger.warning("could not set PodScheduled on %s/%s: %s", namespace, name, exc)
