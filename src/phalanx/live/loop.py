"""The live scheduling loop: the simulator's engine, binding through the Kubernetes API.

:class:`LiveScheduler` runs informers for Nodes, Pods, PriorityClasses and every gang API
(PodGroups of ``scheduling.x-k8s.io``, ``scheduling.sigs.k8s.io`` and ``scheduling.volcano.sh``
with Volcano's Queues, ``scheduling.k8s.io`` Workloads). One cycle (:meth:`LiveScheduler.run_once`):

1. rebuild a :class:`~phalanx.cluster.state.ClusterState` from the stores
   (:class:`~phalanx.live.cache.ClusterCache`, assume cache included);
2. run the same :class:`~phalanx.policies.Scheduler` the simulator runs — gangs are placed
   all-or-nothing, so a cycle's binds only ever hold whole gangs;
3. bind every pod of every committed gang concurrently (``pods/NAME/binding`` with the pod's
   uid, at most ``bind_concurrency`` requests in flight) and assume each success; binds that
   fail with a retriable error (5xx, 429, transport) are retried up to ``bind_retries`` times
   with a short doubling delay, stopping early enough to respect ``partial_bind_limit``;
   refusals for good (404 gone, 409 re-created) are not retried; a 409 for the very pod (same
   uid) already bound, or a last attempt that failed but did commit (checked with a GET),
   counts as bound. Every attempt is abandoned once half of ``partial_bind_limit`` has passed.
   A gang still below its minimum is handed to :class:`~phalanx.live.recovery.PartialBinds`
   (undo, event, requeue with backoff);
4. for each waiting gang, set ``PodScheduled=False, reason=Unschedulable`` with the gang's
   explanation on every pending member — only when the condition changed
   (:mod:`phalanx.live.waiting`);
5. with ``write_status`` (default), :class:`~phalanx.live.status.StatusWriter` writes
   ``Scheduled`` / ``FailedScheduling`` Events and each PodGroup's status in its API's
   vocabulary (:mod:`phalanx.live.group_status`).

:meth:`LiveScheduler.serve` runs cycles on informer events that pass the queueing hints
(:mod:`phalanx.live.hints`; debounced) and every ``period``.
Nothing is kept that the API cannot rebuild: a restarted scheduler lists, finds gangs bound
in full, in part or not at all, and carries on (:meth:`PartialBinds.watch` undoes what a
stopped scheduler left half bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Coroutine, Iterable, Sequence
from functools import partial
from typing import Any

from phalanx.cluster.workloads import PodInfo
from phalanx.framework.backend import MemoryBackend, apply
from phalanx.framework.session import CycleResult
from phalanx.live.cache import ClusterCache, Obj, Snapshot
from phalanx.live.client import KubeClient
from phalanx.live.errors import ApiError, LiveError, TransportError
from phalanx.live.hints import WakeHints, pod_event_wakes
from phalanx.live.informer import Backoff, Informer
from phalanx.live.recovery import (
    PARTIAL_BIND_RECOVERED,
    PartialBinds,
    RecoveryConfig,
    Requeue,
    Undo,
)
from phalanx.live.resources import (
    DEFAULT_SCHEDULER_NAME,
    KAI_TOPOLOGIES,
    KUEUE_TOPOLOGIES,
    NODES,
    PODGROUP_RESOURCES,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    TOPOLOGY_RESOURCES,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    Resource,
)
from phalanx.live.status import StatusWriter, plan, podgroup_resource, with_kind
from phalanx.live.waiting import Explainer
from phalanx.live.writes import bind
from phalanx.policies import Scheduler, Scorer, get_policy

logger = logging.getLogger(__name__)

#: After an informer event, wait this long for more before running a cycle.
DEFAULT_DEBOUNCE = 0.05

__all__ = [
    "DEFAULT_DEBOUNCE",
    "PARTIAL_BIND_RECOVERED",
    "LiveScheduler",
    "RecoveryConfig",
    "pod_event_wakes",
]


def _retriable(exc: LiveError) -> bool:
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ApiError) and (exc.status >= 500 or exc.status in (0, 429))


class LiveScheduler:
    """Use as ``async with LiveScheduler(client) as scheduler`` (starts and syncs informers)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        policy: str = "phalanx",
        scorers: Sequence[Scorer] | None = None,
        actions: Sequence[str] | None = None,
        seed: int = 0,
        bind_concurrency: int = 16,
        backoff: Backoff | None = None,
        recovery: RecoveryConfig | None = None,
        write_status: bool = True,
        recheck_missing: float | None = 60.0,
        topology: Sequence[str] = (),
    ) -> None:
        """``recheck_missing``: seconds between lists of an API the server does not serve
        (e.g. a CRD installed after the start); None: never look again. ``topology``: the
        settings' topology levels (node labels, top first)."""
        self.client = client
        self.scheduler_name = scheduler_name
        self.scheduler = Scheduler(get_policy(policy), seed=seed, scorers=scorers, actions=actions)
        self.scheduler.config = dataclasses.replace(
            self.scheduler.config, scheduler_names=frozenset({scheduler_name})
        )
        self.cache = ClusterCache(scheduler_name, topology=topology)
        self.bind_concurrency = bind_concurrency
        self.informers: dict[Resource, Informer] = {
            resource: Informer(
                client,
                resource,
                partial(self._on_event, resource),
                backoff=backoff,
                recheck_missing=recheck_missing,
            )
            for resource in (
                NODES,
                PODS,
                PODGROUPS,
                PODGROUPS_SIGS,
                VOLCANO_PODGROUPS,
                VOLCANO_QUEUES,
                WORKLOADS,
                PRIORITY_CLASSES,
                *TOPOLOGY_RESOURCES,
            )
        }
        self.recovery = recovery or RecoveryConfig()
        self.partial = PartialBinds(
            client,
            self.recovery,
            group_of=self._group_reference,
            forget=self.cache.forget,
            on_recovered=self.on_partial_bind_recovered,
            concurrency=bind_concurrency,
        )
        #: PodGroup status and Scheduled/FailedScheduling events (``write_status=False``: off).
        self.status = StatusWriter(client, controller=scheduler_name) if write_status else None
        self.cycles = 0
        self._snapshot: Snapshot | None = None
        self.explainer = Explainer(client, scheduler_name, self.status)
        self.hints = WakeHints(scheduler_name)
        self._wake = asyncio.Event()

    # -- recovery state (kept by :class:`PartialBinds`) -------------------------------------
    @property
    def requeued(self) -> dict[str, Requeue]:
        return self.partial.requeued

    @property
    def undo_pending(self) -> dict[str, Undo]:
        return self.partial.undo_pending

    @property
    def recovered(self) -> list[str]:
        return self.partial.recovered

    @property
    def partial_since(self) -> dict[str, float]:
        return self.partial.partial_since

    def on_partial_bind_recovered(self, ident: str) -> None:
        """Called once per gang whose partial bind was undone (a hook for metrics)."""

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, timeout: float | None = 30.0) -> None:
        """Start the informers and wait for their first lists."""
        for informer in self.informers.values():
            informer.start()
        await asyncio.gather(*(i.wait_synced(timeout) for i in self.informers.values()))

    async def stop(self) -> None:
        """Stop the informers; Events still queued are written first (bounded wait)."""
        if self.status is not None:
            await self.status.aclose()
        await asyncio.gather(*(i.stop() for i in self.informers.values()))

    async def __aenter__(self) -> LiveScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _on_event(self, resource: Resource, kind: str, obj: Obj) -> None:
        if self.hints.wakes(resource, kind, obj):
            self._wake.set()

    def objects(self, resource: Resource) -> Iterable[Obj]:
        return list(self.informers[resource].store.values())

    # -- gangs and their PodGroups ---------------------------------------------------------
    def _group(self, ident: str) -> Obj | None:
        """The PodGroup object (with kind) of gang ``ident`` in this cycle, if it has one."""
        gang = self._snapshot.state.gangs.get(ident) if self._snapshot else None
        resource = podgroup_resource(gang) if gang is not None else None
        if resource is None:
            return None
        group = self.informers[resource].store.get(ident)
        return None if group is None else with_kind(group, resource)

    def _group_reference(self, ident: str) -> Obj:
        """What an Event about gang ``ident`` regards: its PodGroup, or a reference to one."""
        group = self._group(ident)
        if group is not None:
            return group
        namespace, _, name = ident.partition("/")
        return with_kind({"metadata": {"name": name, "namespace": namespace}}, PODGROUPS)

    # -- one cycle -------------------------------------------------------------------------
    def snapshot(self, now: float) -> Snapshot:
        return self.cache.build(
            nodes=self.objects(NODES),
            pods=self.objects(PODS),
            podgroups=self.objects(PODGROUPS),
            podgroups_sigs=self.objects(PODGROUPS_SIGS),
            volcano_podgroups=self.objects(VOLCANO_PODGROUPS),
            workloads=self.objects(WORKLOADS),
            priority_classes=self.objects(PRIORITY_CLASSES),
            volcano_queues=(
                None if self.informers[VOLCANO_QUEUES].missing else self.objects(VOLCANO_QUEUES)
            ),
            topologies=[*self.objects(KUEUE_TOPOLOGIES), *self.objects(KAI_TOPOLOGIES)],
            hypernodes=self.objects(VOLCANO_HYPERNODES),
            now=now,
        )

    async def run_once(self, now: float | None = None, *, flush_events: bool = True) -> CycleResult:
        """Rebuild, run one cycle, bind the committed gangs, explain the waiting ones.

        Events are written in the background; with ``flush_events`` (the default, for callers
        that look at them next) the cycle returns once they are written. :meth:`serve` does
        not wait for them.
        """
        now = time.time() if now is None else now
        self.cycles += 1
        snapshot = self._snapshot = self.snapshot(now)
        await self.partial.retry_undos(snapshot, now)
        if self.status is not None:
            self.status.invalid(self.cache.rejected_objects, self.cache.rejected)
        self.partial.apply_backoff(snapshot.state, now)
        result = self.scheduler.cycle(snapshot.state, now)
        apply(result, snapshot.state, MemoryBackend(snapshot.state, now))
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
        await self.explainer.explain(
            snapshot,
            result.waiting,
            group_of=self._group,
            rejected=self.cache.rejected,
            semaphore=semaphore,
        )
        await self.partial.watch(snapshot, now, semaphore, self.cache.assumed)
        if self.status is not None:
            groups = {r: self.objects(r) for r in PODGROUP_RESOURCES.values()}
            pods = self.objects(PODS)
            assumed = self.cache.assumed.keys()
            await self.status.sync(plan(groups, pods, snapshot, self.status, assumed))
            if flush_events:
                await self.status.flush()
        return result

    async def _bind_gang(
        self,
        snapshot: Snapshot,
        ident: str,
        binds: list[tuple[PodInfo, int]],
        semaphore: asyncio.Semaphore,
        now: float,
    ) -> None:
        config = self.recovery
        started = time.monotonic()
        names = snapshot.state.table.names
        todo = [(pod, names[node]) for pod, node in binds]
        bound_now: list[tuple[PodInfo, str]] = []
        unbound: set[str] = set()  # refused for good (404, 409...) or out of retries
        for attempt in range(config.bind_retries + 1):
            budget = max(0.01, config.partial_bind_limit / 2 - (time.monotonic() - started))
            outcomes = await asyncio.gather(
                *(
                    self._within(budget, pod, self._bind_pod(snapshot, pod, node, semaphore, now))
                    for pod, node in todo
                )
            )
            failed = [(item, error) for item, error in zip(todo, outcomes, strict=True) if error]
            bound_now += [item for item, error in zip(todo, outcomes, strict=True) if not error]
            if not failed and not unbound:
                if attempt:
                    logger.info("gang %s fully bound after %d retries", ident, attempt)
                self.partial.scheduled(ident)
                self._scheduled(snapshot, ident, bound_now)
                return
            for (pod, node), error in failed:
                logger.warning("bind %s to %s failed (gang %s): %s", pod.key, node, ident, error)
            todo = [item for item, error in failed if _retriable(error)]
            unbound |= {pod.key for (pod, _), error in failed if not _retriable(error)}
            delay = config.retry_delay * 2**attempt
            if (
                not todo
                or attempt == config.bind_retries
                or time.monotonic() + delay - started >= config.partial_bind_limit / 2
            ):
                break
            await asyncio.sleep(delay)
        for pod, _ in todo:  # out of retries or time: the last attempt may have committed
            uid = snapshot.uid(pod.key)
            where = await self._already_bound(pod, uid)
            if where is None:
                unbound.add(pod.key)
            else:
                self.cache.assume(pod.key, uid or "", where, now)
                bound_now.append((pod, where))
        if not unbound:
            self.partial.scheduled(ident)
            self._scheduled(snapshot, ident, bound_now)
        elif await self.partial.settle(snapshot, ident, unbound, started, now, semaphore):
            self._scheduled(snapshot, ident, bound_now)

    @staticmethod
    async def _within(
        seconds: float, pod: PodInfo, attempt: Coroutine[Any, Any, LiveError | None]
    ) -> LiveError | None:
        """One bind ``attempt``, abandoned after ``seconds`` (a hung request must not keep
        the gang's other members bound past ``partial_bind_limit``, nor stall the loop)."""
        try:
            return await asyncio.wait_for(attempt, seconds)
        except TimeoutError:
            return TransportError(f"bind of {pod.key} not answered within {seconds:.2f} s")

    def _scheduled(self, snapshot: Snapshot, ident: str, binds: list[tuple[PodInfo, str]]) -> None:
        if self.status is None or not binds:
            return
        pods = [(snapshot.pods[pod.key], node) for pod, node in binds if pod.key in snapshot.pods]
        self.status.scheduled(self._group(ident), pods)

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
            except ApiError as exc:
                if not exc.conflict:
                    return exc
                bound_to = await self._already_bound(pod, uid)
                if bound_to is None:
                    return exc
                logger.info("bind %s: already bound to %s (an earlier attempt)", pod.key, bound_to)
                node = bound_to
            except LiveError as exc:
                return exc
        self.cache.assume(pod.key, uid or "", node, now)
        return None

    async def _already_bound(self, pod: PodInfo, uid: str | None) -> str | None:
        """After a 409 on a bind: the node this very pod (same uid) is bound to, if it is.

        The API server answers 409 when the pod is already assigned — e.g. an earlier attempt
        that timed out had in fact committed, or a stopped scheduler's bind landed late. That
        pod is bound, not refused; a 409 for a re-created pod (another uid) is a refusal.
        """
        try:
            current = await self.client.get(PODS, pod.spec.name, pod.spec.namespace)
        except LiveError:
            return None
        meta = current.get("metadata") or {}
        node = (current.get("spec") or {}).get("nodeName")
        if node and (uid is None or meta.get("uid") == uid):
            return str(node)
        return None

    # -- the loop --------------------------------------------------------------------------
    async def serve(
        self, stop: asyncio.Event, period: float = 1.0, debounce: float = DEFAULT_DEBOUNCE
    ) -> None:
        """Run cycles on informer events (debounced) and every ``period`` until ``stop``."""
        stopping = asyncio.create_task(stop.wait())
        try:
            # no time limit on the first lists (an unreachable server is retried with
            # backoff), but a stop during them ends the wait
            starting = asyncio.create_task(self.start(timeout=None))
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                return
            starting.result()
            while not stop.is_set():
                self._wake.clear()
                try:
                    await self.run_once(flush_events=False)
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
