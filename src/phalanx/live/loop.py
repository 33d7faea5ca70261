"""The live scheduling loop: the simulator's engine, binding through the Kubernetes API.

:class:`LiveScheduler` runs informers for Nodes, Pods, PriorityClasses, PodDisruptionBudgets and
every gang API
(PodGroups of ``scheduling.x-k8s.io``, ``scheduling.sigs.k8s.io``, ``scheduling.volcano.sh``
with Volcano's Queues, and ``scheduling.run.ai`` (KAI); the Workload API's Workloads and
PodGroups of the newest version the server's discovery lists, looked up again every
``recheck_missing`` seconds while one is not served), and every queue API (KAI Queues,
ElasticQuotas, Kueue's Cohorts, and its ClusterQueues and LocalQueues in the newest version
served, discovered likewise). At start-up, once the informers have listed,
:class:`~phalanx.live.cache.ClusterCache` builds the one
:class:`~phalanx.cluster.state.ClusterState`; from then on every watch event changes it in
place (never a rebuild). One cycle (:meth:`LiveScheduler.run_once`):

1. run the same :class:`~phalanx.policies.Scheduler` the simulator runs on that state — gangs
   are placed all-or-nothing, so a cycle's binds only ever hold whole gangs;
2. :func:`~phalanx.framework.backend.apply` the result: every field goes to the state (binds
   are assumed at once) and to a :class:`~phalanx.live.backend.LiveBackend`, whose queued API
   work is then awaited — binds with retries and partial-bind recovery, evictions, the waiting
   gangs' explanations (:mod:`phalanx.live.waiting`), Timeout Events, wake-ups, metrics;
3. pods waiting for a missing or rejected gang object are explained (only after a change);
4. the gangs the watch touched are checked for partial binds left behind
   (:meth:`PartialBinds.watch`);
5. with ``write_status`` (default), :class:`~phalanx.live.status.StatusWriter` writes the
   status of the PodGroups whose object, members or gang changed, in its API's vocabulary
   (:mod:`phalanx.live.group_status`), and the ``Scheduled`` / ``FailedScheduling`` Events;
   then Volcano Queues get their PodGroup counts (:mod:`phalanx.live.queue_status`).
   Under :meth:`~LiveScheduler.serve` neither binds nor status writes hold up the next cycle:
   they go on in the background (status writes one sync at a time, each group planned when
   its turn comes, so a group touched by several cycles meanwhile is written once).

A cycle where nothing changed therefore does no work proportional to the cluster.
:meth:`LiveScheduler.serve` runs cycles on informer events that pass the queueing hints
(:mod:`phalanx.live.hints`; debounced), at the wake-ups the cycles asked for (a backoff ends),
and every ``period``. Nothing is kept that the API cannot rebuild: a restarted scheduler lists,
finds gangs bound in full, in part or not at all, and carries on (:meth:`PartialBinds.watch`
undoes what a stopped scheduler left half bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import heapq
import logging
import time
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from phalanx.framework.backend import apply
from phalanx.framework.session import CycleResult
from phalanx.live.backend import LiveBackend
from phalanx.live.cache import ClusterCache, Obj, Snapshot
from phalanx.live.client import KubeClient
from phalanx.live.discovery import newest_served
from phalanx.live.errors import LiveError
from phalanx.live.gang_events import GROUP_ORDER
from phalanx.live.hints import WakeHints, pod_event_wakes
from phalanx.live.informer import DELETED, Backoff, Informer
from phalanx.live.queue_status import QueueStatusWriter
from phalanx.live.queue_status import desired as queue_desired
from phalanx.live.recovery import (
    PARTIAL_BIND_RECOVERED,
    PartialBinds,
    RecoveryConfig,
    Requeue,
    Undo,
)
from phalanx.live.resources import (
    DEFAULT_SCHEDULER_NAME,
    KAI_PODGROUPS,
    KAI_TOPOLOGIES,
    KUEUE_TOPOLOGIES,
    NODES,
    PDBS,
    POD_GROUP_VERSIONS,
    PODGROUP_RESOURCES,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    QUEUE_OBJECT_RESOURCES,
    QUEUE_OBJECT_VERSIONS,
    QUEUE_OBJECTS,
    TOPOLOGY_RESOURCES,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_VERSIONS,
    Resource,
)
from phalanx.live.status import (
    StatusWriter,
    awaiting_admission,
    plan,
    podgroup_resource,
    with_kind,
)
from phalanx.live.waiting import Explainer
from phalanx.policies import Scheduler, Scorer, get_policy

logger = logging.getLogger(__name__)

#: After an informer event, wait this long for more before running a cycle.
DEFAULT_DEBOUNCE = 0.05
#: Actions whose decisions the live scheduler cannot carry out (Permit holds).
REFUSED_ACTIONS = frozenset({"coscheduling"})

__all__ = [
    "DEFAULT_DEBOUNCE",
    "PARTIAL_BIND_RECOVERED",
    "LiveScheduler",
    "RecoveryConfig",
    "pod_event_wakes",
]


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
        orderings: Sequence[str] | None = None,
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
        chosen = get_policy(policy)
        refused = REFUSED_ACTIONS & set(chosen.actions if actions is None else actions)
        if refused:
            raise ValueError(f"the live scheduler cannot run the {sorted(refused)} action")
        self.client = client
        self.scheduler_name = scheduler_name
        self.scheduler = Scheduler(
            chosen, seed=seed, scorers=scorers, actions=actions, orderings=orderings
        )
        self.scheduler.config = dataclasses.replace(
            self.scheduler.config, scheduler_names=frozenset({scheduler_name})
        )
        self.cache = ClusterCache(scheduler_name, topology=topology)
        self.bind_concurrency = bind_concurrency
        self._backoff = backoff
        self.recheck_missing = recheck_missing
        self.informers: dict[Resource, Informer] = {}
        for resource in (
            NODES,
            PODS,
            PODGROUPS,
            PODGROUPS_SIGS,
            VOLCANO_PODGROUPS,
            VOLCANO_QUEUES,
            KAI_PODGROUPS,
            PRIORITY_CLASSES,
            PDBS,
            *QUEUE_OBJECTS,
            *TOPOLOGY_RESOURCES,
        ):
            self._inform(resource)
        #: the Workload API's resources being watched (discovered at start-up; None: not served)
        self.workloads: Resource | None = None
        self.pod_groups: Resource | None = None
        #: API group → the PodGroup resource watched for it (status writes, Events)
        self.group_resources = dict(PODGROUP_RESOURCES)
        self._discovering: asyncio.Task[None] | None = None
        self.recovery = recovery or RecoveryConfig()
        self.partial = PartialBinds(
            client,
            self.recovery,
            group_of=self.group_reference,
            forget=lambda key: self.cache.state.forget(key),
            on_recovered=self.on_partial_bind_recovered,
            concurrency=bind_concurrency,
        )
        #: PodGroup status and Scheduled/FailedScheduling events (``write_status=False``: off).
        self.status = StatusWriter(client, controller=scheduler_name) if write_status else None
        #: Volcano Queue status counts (with ``write_status``)
        self.queue_status = QueueStatusWriter(client) if write_status else None
        self._queues_planned: tuple[int, int] | None = None
        self.cycles = 0
        self.attempts = 0  # placement attempts, over all cycles
        self.explainer = Explainer(client, scheduler_name, self.status)
        self.hints = WakeHints(scheduler_name)
        self._wake = asyncio.Event()
        self._semaphore: asyncio.Semaphore | None = None
        self._background: set[asyncio.Future[Any]] = set()
        #: PodGroups touched whose status is still to write, and the task writing them (serve)
        self._unwritten: set[tuple[str, str]] = set()
        self._writing: asyncio.Task[None] | None = None
        self._write_again = False
        self._wakeups: list[float] = []  # a heap of the times cycles asked to run again
        self._explained = -1  # the cache's change count when orphans were last explained
        #: the state's version when Volcano admission was last planned (None: plan again)
        self._planned: int | None = None

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

    # -- hooks (for metrics) ---------------------------------------------------------------
    def on_partial_bind_recovered(self, ident: str) -> None:
        """Called once per gang whose partial bind was undone."""

    def on_bind(self, ok: bool) -> None:
        """Called after every bind request (retries included)."""

    def on_attempts(self, count: int) -> None:
        """Called after every cycle with its placement attempts."""
        self.attempts += count

    def on_disruption(self, reason: str, pods: int, stopped: bool, lost_gpu_hours: float) -> None:
        """Called once the API accepted a victim gang's evictions: ``pods`` evicted for
        ``reason`` (preempt, reclaim, shrink); ``stopped``: the gang fell below its minimum
        (its work restarts, ``lost_gpu_hours`` lost)."""

    def on_deadline_miss(self, ident: str, late: float) -> None:
        """Called when a gang is found to miss its deadline by ``late`` seconds."""

    def wake_at(self, at: float) -> None:
        """A cycle is needed again at ``at`` (the backend's ``wake_at``)."""
        heapq.heappush(self._wakeups, at)

    def next_wakeup(self, now: float) -> float | None:
        """The earliest wake-up still ahead (those passed are dropped)."""
        while self._wakeups and self._wakeups[0] <= now:
            heapq.heappop(self._wakeups)
        return self._wakeups[0] if self._wakeups else None

    @property
    def semaphore(self) -> asyncio.Semaphore:
        """Bounds the API writes in flight (binds, undos, explanations) to ``bind_concurrency``."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.bind_concurrency)
        return self._semaphore

    def in_background(self, work: asyncio.Future[Any]) -> None:
        """Let ``work`` (a cycle's binds) finish while the loop goes on; the loop wakes when
        it is done (statuses to write, room given back by failed binds)."""
        self._background.add(work)
        work.add_done_callback(self._done)

    def _done(self, work: asyncio.Future[Any]) -> None:
        self._background.discard(work)
        error = None if work.cancelled() else work.exception()
        if error is not None and not isinstance(error, asyncio.CancelledError):  # (killed)
            logger.error("binding failed", exc_info=error)
        self._wake.set()

    async def settle(self) -> None:
        """Wait for the binds and status writes still going on in the background."""
        while self._background or self._writing is not None:
            pending = [*self._background, *([self._writing] if self._writing else [])]
            await asyncio.gather(*pending, return_exceptions=True)

    # -- lifecycle -------------------------------------------------------------------------
    def _inform(self, resource: Resource) -> Informer:
        informer = Informer(
            self.client,
            resource,
            partial(self._on_event, resource),
            backoff=self._backoff,
            recheck_missing=self.recheck_missing,
        )
        self.informers[resource] = informer
        return informer

    async def discover(self) -> bool:
        """Watch the newest Workload and PodGroup versions of the Workload API the server
        serves, and the newest of Kueue's queue objects (informers started at once once the
        state is built); True when all were found, so there is nothing left to look for."""
        try:
            found = [await newest_served(self.client, WORKLOAD_VERSIONS)]
            found.append(await newest_served(self.client, POD_GROUP_VERSIONS))
            families = [f for f in QUEUE_OBJECT_VERSIONS if not self.informers.keys() & set(f)]
            queues = [await newest_served(self.client, family) for family in families]
        except LiveError as exc:
            logger.debug("discovery of the Workload API or Kueue failed: %s", exc)
            return False
        workloads, pod_groups = found
        if workloads is not None and self.workloads is None:
            self.workloads = workloads
        if pod_groups is not None and self.pod_groups is None:
            self.pod_groups = pod_groups
            self.group_resources[pod_groups.group] = pod_groups
        for resource in (self.workloads, self.pod_groups, *queues):
            if resource is not None and resource not in self.informers:
                logger.info("the server serves %s; watching it", resource)
                informer = self._inform(resource)
                if self.cache.started:
                    informer.start()
        queues_found = all(self.informers.keys() & set(f) for f in QUEUE_OBJECT_VERSIONS)
        return self.workloads is not None and self.pod_groups is not None and queues_found

    async def _rediscover(self) -> None:
        """Look for the Workload API again until it is served (a version enabled later)."""
        assert self.recheck_missing is not None
        delay = min(1.0, self.recheck_missing)
        while True:
            await asyncio.sleep(delay)
            if await self.discover():
                return
            delay = min(delay * 2, self.recheck_missing)

    async def start(self, timeout: float | None = 30.0) -> None:
        """Find which Workload API versions are served, start the informers, wait for their
        first lists, and build the state from them (once: from then on the watch changes
        it)."""
        complete = await self.discover()
        for informer in self.informers.values():
            informer.start()
        await asyncio.gather(*(i.wait_synced(timeout) for i in self.informers.values()))
        if not self.cache.started:
            queues = self.informers[VOLCANO_QUEUES]
            self.cache.start(
                nodes=self.objects(NODES),
                pods=self.objects(PODS),
                groups={r: self.objects(r) for r in self.group_resources.values()},
                workloads=self.objects(self.workloads) if self.workloads else (),
                priority_classes=self.objects(PRIORITY_CLASSES),
                volcano_queues=None if queues.missing else self.objects(VOLCANO_QUEUES),
                queue_objects={
                    r: self.objects(r) for r in self.informers if r in QUEUE_OBJECT_RESOURCES
                },
                topologies=[*self.objects(KUEUE_TOPOLOGIES), *self.objects(KAI_TOPOLOGIES)],
                hypernodes=self.objects(VOLCANO_HYPERNODES),
                budgets=self.objects(PDBS),
                now=time.time(),
            )
            gc.freeze()  # the start-up objects live on: full collections need not walk them
        if not complete and self.recheck_missing is not None and self._discovering is None:
            self._discovering = asyncio.create_task(self._rediscover())

    async def stop(self) -> None:
        """Stop the informers once binds in flight are done; Events still queued are written
        first (bounded wait)."""
        await self.settle()
        discovering, self._discovering = self._discovering, None
        if discovering is not None:
            discovering.cancel()  # (a gather: a cancellation of this task is not swallowed)
            await asyncio.gather(discovering, return_exceptions=True)
        if self.status is not None:
            await self.status.aclose()
        await asyncio.gather(*(i.stop() for i in list(self.informers.values())))

    async def __aenter__(self) -> LiveScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _on_event(self, resource: Resource, kind: str, obj: Obj) -> None:
        self.cache.event(resource, kind, obj, time.time())
        if kind == DELETED and self.status is not None and resource in GROUP_ORDER:
            self.status.forget(resource, obj)
        if self.hints.wakes(resource, kind, obj):
            self._wake.set()

    def objects(self, resource: Resource) -> Iterable[Obj]:
        return list(self.informers[resource].store.values())

    @property
    def snapshot(self) -> Snapshot:
        return self.cache.snapshot

    # -- gangs and their PodGroups ---------------------------------------------------------
    def group(self, ident: str) -> Obj | None:
        """The PodGroup object (with kind) of gang ``ident``, if it has one."""
        gang = self.cache.state.gangs.get(ident)
        resource = podgroup_resource(gang, self.group_resources) if gang is not None else None
        if resource is None:
            return None
        group = self.informers[resource].store.get(ident)
        return None if group is None else with_kind(group, resource)

    def group_reference(self, ident: str) -> Obj:
        """What an Event about gang ``ident`` regards: its PodGroup, or a reference to one."""
        group = self.group(ident)
        if group is not None:
            return group
        namespace, _, name = ident.partition("/")
        return with_kind({"metadata": {"name": name, "namespace": namespace}}, PODGROUPS)

    # -- one cycle -------------------------------------------------------------------------
    async def run_once(
        self, now: float | None = None, *, flush_events: bool = True, wait_binds: bool = True
    ) -> CycleResult:
        """Run one cycle on the state and carry out everything it decided.

        Events are written in the background; with ``flush_events`` (the default, for callers
        that look at them next) the cycle returns once they are written. With ``wait_binds``
        (the default) it returns once its binds are done. :meth:`serve` waits for neither.
        """
        now = time.time() if now is None else now
        self.cycles += 1
        cache = self.cache
        if not cache.started:
            await self.start()
        cache.queues_served(not self.informers[VOLCANO_QUEUES].missing)
        for ident in cache.take_fresh():  # first seen by a cycle now
            gang = cache.state.gangs.get(ident)
            if gang is not None:
                gang.created = now
        await self.partial.retry_undos(cache.snapshot, now)
        if self.status is not None:
            self.status.invalid(cache.rejected_objects, cache.rejected)
        self.partial.apply_backoff(cache.state, now)
        result = self.scheduler.cycle(cache.state, now)
        backend = LiveBackend(self, now)
        apply(result, cache.state, backend)
        await backend.finish(wait=wait_binds)
        if cache.changes != self._explained:
            self._explained = cache.changes
            await self.explainer.orphans(cache.snapshot, cache.rejected, self.semaphore)
        touched, groups = cache.drain()
        await self.partial.watch(cache.snapshot, now, self.semaphore, touched)
        if self.status is not None:
            if wait_binds:
                await self._write_statuses(groups)
                await self._write_queue_statuses()
            else:
                self._write_in_background(groups)
            if flush_events:
                await self.status.flush()
        return result

    def _write_in_background(self, groups: set[tuple[str, str]]) -> None:
        """Under :meth:`serve`, the cycle does not wait for PodGroup status writes (on a busy
        API server they took longer than the cycle): one task writes them, a sync at a time,
        each group's status planned when its turn comes (so a group touched by several cycles
        meanwhile is planned, and written, once)."""
        self._unwritten |= groups
        self._write_again = True  # also: Volcano admissions may change with the state
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_unwritten())
            self._writing.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        if self._writing is task:  # (even if cancelled before it ran)
            self._writing = None

    async def _write_unwritten(self) -> None:
        while self._write_again:
            self._write_again = False
            groups, self._unwritten = self._unwritten, set()
            try:
                await self._write_statuses(groups)
                await self._write_queue_statuses()
            except Exception:  # one failed write must not stop the others
                logger.exception("writing PodGroup statuses failed")

    async def _write_statuses(self, touched: set[tuple[str, str]]) -> None:
        """Plan and write the status of the PodGroups touched since the last cycle (and of
        the Volcano groups awaiting admission, after the state changed)."""
        assert self.status is not None
        targets: dict[tuple[str, str], tuple[Resource, Obj]] = {}
        for api, key in touched:
            resource = self.group_resources.get(api)
            obj = self.informers[resource].store.get(key) if resource is not None else None
            if resource is not None and obj is not None:
                targets[(api, key)] = (resource, obj)
        volcano = self.informers[VOLCANO_PODGROUPS].store
        admission = VOLCANO_PODGROUPS.group in {api for api, _ in targets}
        if volcano and (admission or self.cache.state.version != self._planned):
            self._planned = self.cache.state.version
            for key, obj in volcano.items():
                current = self.status.current(VOLCANO_PODGROUPS, obj)
                if awaiting_admission(current):
                    targets[(VOLCANO_PODGROUPS.group, key)] = (VOLCANO_PODGROUPS, obj)
        if not targets:
            return
        desired = plan(
            targets.values(),
            self.cache.members,
            self.cache.state,
            self.status,
            self.cache.assumed,
            volcano.values(),
        )
        if await self.status.sync(desired, prune=False) and admission:
            self._planned = None  # admissions read the statuses just written

    async def _write_queue_statuses(self) -> None:
        """Volcano Queue status counts, when the state or an object changed since the last
        time (our own status writes come back as events: the next cycle finds nothing new)."""
        assert self.status is not None and self.queue_status is not None
        queues = self.informers[VOLCANO_QUEUES].store
        marker = (self.cache.state.version, self.cache.changes)
        if not queues or marker == self._queues_planned:
            return
        self._queues_planned = marker
        groups = [
            self.status.current(VOLCANO_PODGROUPS, group)
            for group in self.informers[VOLCANO_PODGROUPS].store.values()
        ]
        await self.queue_status.sync(queues, queue_desired(queues, groups, self.cache.state))

    # -- the loop --------------------------------------------------------------------------
    async def serve(
        self, stop: asyncio.Event, period: float = 1.0, debounce: float = DEFAULT_DEBOUNCE
    ) -> None:
        """Run cycles on informer events (debounced), at the wake-ups cycles asked for, and
        every ``period``, until ``stop``."""
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
                    await self.run_once(flush_events=False, wait_binds=False)
                except Exception:  # one failed cycle must not stop the scheduler
                    logger.exception("scheduling cycle failed")
                timeout = period
                wakeup = self.next_wakeup(time.time())
                if wakeup is not None:
                    timeout = min(period, max(debounce, wakeup - time.time()))
                woken = asyncio.create_task(self._wake.wait())
                done, _ = await asyncio.wait(
                    {stopping, woken}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                woken.cancel()
                if woken in done and not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), debounce)
        except asyncio.CancelledError:  # killed: binds in flight die with it, as in a process
            for work in [*self._background, *([self._writing] if self._writing else [])]:
                work.cancel()
            raise
        finally:
            stopping.cancel()
            await self.stop()
