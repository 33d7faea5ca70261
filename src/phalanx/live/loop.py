"""The live scheduling loop: the simulator's engine, binding through the Kubernetes API.

:class:`LiveScheduler` runs informers for Nodes, Pods, PodGroups (``scheduling.x-k8s.io``) and
PriorityClasses. One cycle (:meth:`LiveScheduler.run_once`):

1. rebuild a :class:`~phalanx.cluster.state.ClusterState` from the stores
   (:class:`~phalanx.live.cache.ClusterCache`, assume cache included);
2. run the same :class:`~phalanx.policies.Scheduler` the simulator runs — gangs are placed
   all-or-nothing, so a cycle's binds only ever hold whole gangs;
3. bind every pod of every committed gang concurrently (``pods/NAME/binding`` with the pod's
   uid, at most ``bind_concurrency`` requests in flight) and assume each success;
4. for each waiting gang, set ``PodScheduled=False, reason=Unschedulable`` with the gang's
   explanation on every pending member — only when the condition changed.

:meth:`LiveScheduler.serve` runs cycles on informer events (debounced) and every ``period``.

Partial binds (minimal for now): a bind that fails with a retriable error (5xx, 429, transport)
is retried once; a bind still failing — or refused for good (404 gone, 409 already bound or
re-created) — is logged and its pod left pending for the next cycle, where the gang's bound
members already count as placed. Full recovery (unbinding, i.e. deleting the bound members of
a gang that cannot complete, and backoff per gang) is future work.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterable

from phalanx.cluster.workloads import Condition, PodInfo, PodStatus
from phalanx.framework.session import CycleResult
from phalanx.live.cache import ClusterCache, Obj, Snapshot
from phalanx.live.client import KubeClient
from phalanx.live.errors import ApiError, LiveError, TransportError
from phalanx.live.informer import Backoff, Informer
from phalanx.live.resources import NODES, PODGROUPS, PODS, PRIORITY_CLASSES, Resource
from phalanx.live.writes import bind, patch_pod_status, pod_condition
from phalanx.policies import Scheduler, get_policy

logger = logging.getLogger(__name__)

DEFAULT_SCHEDULER_NAME = "phalanx"
#: After an informer event, wait this long for more before running a cycle.
DEFAULT_DEBOUNCE = 0.05


def _retriable(exc: LiveError) -> bool:
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ApiError) and (exc.status >= 500 or exc.status in (0, 429))


def _scheduled_condition(obj: Obj) -> Obj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return condition
    return None


class LiveScheduler:
    """Use as ``async with LiveScheduler(client) as scheduler`` (starts and syncs informers)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        policy: str = "phalanx",
        seed: int = 0,
        bind_concurrency: int = 16,
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.scheduler = Scheduler(get_policy(policy), seed=seed)
        self.scheduler.config = dataclasses.replace(
            self.scheduler.config, scheduler_names=frozenset({scheduler_name})
        )
        self.cache = ClusterCache(scheduler_name)
        self.bind_concurrency = bind_concurrency
        self.informers: dict[Resource, Informer] = {
            resource: Informer(client, resource, self._on_event, backoff=backoff)
            for resource in (NODES, PODS, PODGROUPS, PRIORITY_CLASSES)
        }
        self.cycles = 0
        self._wake = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, timeout: float | None = 30.0) -> None:
        """Start the informers and wait for their first lists."""
        for informer in self.informers.values():
            informer.start()
        await asyncio.gather(*(i.wait_synced(timeout) for i in self.informers.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self.informers.values()))

    async def __aenter__(self) -> LiveScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _on_event(self, kind: str, obj: Obj) -> None:
        self._wake.set()

    def objects(self, resource: Resource) -> Iterable[Obj]:
        return list(self.informers[resource].store.values())

    # -- one cycle -------------------------------------------------------------------------
    def snapshot(self, now: float) -> Snapshot:
        return self.cache.build(
            nodes=self.objects(NODES),
            pods=self.objects(PODS),
            podgroups=self.objects(PODGROUPS),
            priority_classes=self.objects(PRIORITY_CLASSES),
            now=now,
        )

    async def run_once(self, now: float | None = None) -> CycleResult:
        """Rebuild, run one cycle, bind the committed gangs, explain the waiting ones."""
        now = time.time() if now is None else now
        self.cycles += 1
        snapshot = self.snapshot(now)
        result = self.scheduler.cycle(snapshot.state, now)
        semaphore = asyncio.Semaphore(self.bind_concurrency)
        gangs: dict[str, list[tuple[PodInfo, int]]] = {}
        for pod, node in result.binds:
            gangs.setdefault(pod.gang.ident, []).append((pod, node))
        await asyncio.gather(
            *(
                self._bind_gang(snapshot, ident, binds, semaphore, now)
                for ident, binds in gangs.items()
            )
        )
        await self._explain(snapshot, result.waiting, semaphore, now)
        return result

    async def _bind_gang(
        self,
        snapshot: Snapshot,
        ident: str,
        binds: list[tuple[PodInfo, int]],
        semaphore: asyncio.Semaphore,
        now: float,
    ) -> None:
        names = snapshot.state.table.names
        todo = [(pod, names[node]) for pod, node in binds]
        for attempt in range(2):
            outcomes = await asyncio.gather(
                *(self._bind_pod(snapshot, pod, node, semaphore, now) for pod, node in todo)
            )
            failed = [(item, error) for item, error in zip(todo, outcomes, strict=True) if error]
            if not failed:
                if attempt:
                    logger.info("gang %s fully bound after a retry", ident)
                return
            todo = [item for item, error in failed if _retriable(error)]
            for (pod, node), error in failed:
                logger.warning("bind %s to %s failed (gang %s): %s", pod.key, node, ident, error)
            if not todo:
                break
        logger.warning(
            "gang %s is partially bound; its pending members wait for the next cycle", ident
        )

    async def _bind_pod(
        self,
        snapshot: Snapshot,
        pod: PodInfo,
        node: str,
        semaphore: asyncio.Semaphore,
        now: float,
    ) -> LiveError | None:
        uid = snapshot.uid(pod.key)
        async with semaphore:
            try:
                await bind(self.client, pod.spec.namespace, pod.spec.name, node, uid=uid)
            except LiveError as exc:
                return exc
        self.cache.assume(pod.key, uid or "", node, now)
        return None

    async def _explain(
        self,
        snapshot: Snapshot,
        waiting: dict[str, Condition],
        semaphore: asyncio.Semaphore,
        now: float,
    ) -> None:
        patches = []
        for ident, condition in waiting.items():
            gang = snapshot.state.gangs.get(ident)
            if gang is None:
                continue
            for pod in gang.members:
                if pod.status is not PodStatus.PENDING:
                    continue
                if pod.spec.scheduler_name != self.scheduler_name:
                    continue
                obj = snapshot.pods.get(pod.key)
                if obj is None:
                    continue
                current = _scheduled_condition(obj)
                if (
                    current is not None
                    and current.get("status") == "False"
                    and current.get("reason") == "Unschedulable"
                    and current.get("message") == condition.message
                ):
                    continue
                patches.append(self._patch(pod, condition.message, semaphore))
        await asyncio.gather(*patches)

    async def _patch(self, pod: PodInfo, message: str, semaphore: asyncio.Semaphore) -> None:
        condition = pod_condition("PodScheduled", "False", reason="Unschedulable", message=message)
        async with semaphore:
            try:
                await patch_pod_status(
                    self.client, pod.spec.namespace, pod.spec.name, conditions=[condition]
                )
            except LiveError as exc:
                logger.warning("could not set PodScheduled on %s: %s", pod.key, exc)

    # -- the loop --------------------------------------------------------------------------
    async def serve(
        self, stop: asyncio.Event, period: float = 1.0, debounce: float = DEFAULT_DEBOUNCE
    ) -> None:
        """Run cycles on informer events (debounced) and every ``period`` until ``stop``."""
        await self.start()
        stopping = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                self._wake.clear()
                try:
                    await self.run_once()
                except Exception:  # one failed cycle must not stop the scheduler
                    logger.exception("scheduling cycle failed")
                woken = asyncio.create_task(self._wake.wait())
                done, _ = await asyncio.wait(
                    {stopping, woken}, timeout=period, return_when=asyncio.FIRST_COMPLETED
                )
                woken.cancel()
                if woken in done and not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), debounce)
        finally:
            stopping.cancel()
            await self.stop()
