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
   explanation on every pending member — only when the condition changed;
5. with ``write_status`` (default), :class:`~phalanx.live.status.StatusWriter` writes
   ``Scheduled`` / ``FailedScheduling`` Events and each PodGroup's status (phase and counts).

:meth:`LiveScheduler.serve` runs cycles on informer events (debounced) and every ``period``.

Partial binds (:class:`RecoveryConfig`): binds that fail with a retriable error (5xx, 429,
transport) are retried up to ``bind_retries`` times with a short doubling delay; refusals for
good (404 gone, 409 already bound or re-created) are not retried. If the gang then holds fewer
than ``minMember`` bound members (or misses a role minimum) and none of them has started
(pod phase past ``Pending``: a running gang is never torn down), the bound members are undone —
``DELETE`` with the pod's uid as precondition (its controller re-creates it), or with
``undo="evict"`` the ``pods/NAME/eviction`` subresource, falling back to ``DELETE`` when the
server does not serve it — a ``PartialBindRecovered`` Warning Event is written on the PodGroup,
and the gang is requeued with a doubling backoff (on the cycle clock). The retries stop early
so that no gang stays partially bound longer than ``partial_bind_limit`` seconds; an undo that
fails (e.g. 5xx) is retried at the start of every following cycle until it succeeds. A gang
found waiting below its minimum with bound members that have not started (e.g. the scheduler
stopped in the middle of a bind) is undone the same way once that lasts ``partial_bind_limit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from phalanx.cluster.workloads import PLACED, Condition, GangInfo, PodInfo, PodStatus
from phalanx.framework.session import CycleResult
from phalanx.live import events
from phalanx.live.cache import ClusterCache, Obj, Snapshot
from phalanx.live.client import KubeClient
from phalanx.live.errors import ApiError, LiveError, TransportError
from phalanx.live.informer import Backoff, Informer
from phalanx.live.resources import (
    DEFAULT_SCHEDULER_NAME,
    NODES,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    WORKLOADS,
    Resource,
)
from phalanx.live.status import StatusWriter
from phalanx.live.writes import bind, patch_pod_status, pod_condition
from phalanx.policies import Scheduler, get_policy

logger = logging.getLogger(__name__)

#: After an informer event, wait this long for more before running a cycle.
DEFAULT_DEBOUNCE = 0.05
#: The Event reason written on a PodGroup whose partial bind was undone.
PARTIAL_BIND_RECOVERED = "PartialBindRecovered"


@dataclass(frozen=True, slots=True)
class RecoveryConfig:
    """How :class:`LiveScheduler` recovers from a gang bound only in part."""

    #: retries of a bind that failed with a retriable error (after the first attempt).
    bind_retries: int = 3
    #: seconds before the first retry; doubled for each further retry.
    retry_delay: float = 0.05
    #: the longest a gang may stay partially bound before its bound members are undone.
    partial_bind_limit: float = 30.0
    #: ``delete`` the bound members (uid precondition) or ``evict`` them (fallback: delete).
    undo: Literal["delete", "evict"] = "delete"
    #: requeue backoff of an undone gang, in cycle-clock seconds: initial, doubled, capped.
    requeue_initial: float = 1.0
    requeue_max: float = 60.0

    def __post_init__(self) -> None:
        if self.bind_retries < 0 or self.retry_delay < 0 or self.partial_bind_limit <= 0:
            raise ValueError("bind_retries, retry_delay >= 0 and partial_bind_limit > 0")
        if self.undo not in ("delete", "evict"):
            raise ValueError(f"undo must be 'delete' or 'evict', not {self.undo!r}")

    def requeue_delay(self, failures: int) -> float:
        return float(min(self.requeue_max, self.requeue_initial * 2 ** max(0, failures - 1)))


@dataclass(slots=True)
class _Requeue:
    failures: int = 0
    until: float = 0.0


@dataclass(slots=True)
class _Undo:
    """Bound members of a gang still to be removed (an earlier undo failed)."""

    since: float  # time.monotonic() of the first bind of the gang
    pods: list[tuple[str, str, str | None]] = field(default_factory=list)  # ns, name, uid


def _retriable(exc: LiveError) -> bool:
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ApiError) and (exc.status >= 500 or exc.status in (0, 429))


def _scheduled_condition(obj: Obj) -> Obj | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return condition
    return None


def _started(snapshot: Snapshot, pods: Iterable[PodInfo]) -> bool:
    """Whether any of ``pods`` has started (pod phase past ``Pending``): never undone."""
    return any(
        ((snapshot.pods.get(pod.key) or {}).get("status") or {}).get("phase")
        not in (None, "Pending")
        for pod in pods
    )


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
        recovery: RecoveryConfig | None = None,
        write_status: bool = True,
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
            for resource in (
                NODES,
                PODS,
                PODGROUPS,
                PODGROUPS_SIGS,
                VOLCANO_PODGROUPS,
                WORKLOADS,
                PRIORITY_CLASSES,
            )
        }
        self.recovery = recovery or RecoveryConfig()
        #: PodGroup status and Scheduled/FailedScheduling events (``write_status=False``: off).
        self.status = StatusWriter(client, controller=scheduler_name) if write_status else None
        #: gang ident → requeue backoff after an undone partial bind.
        self.requeued: dict[str, _Requeue] = {}
        #: gang ident → bound members whose undo has not succeeded yet.
        self.undo_pending: dict[str, _Undo] = {}
        #: gang idents undone (recovered) so far, in order.
        self.recovered: list[str] = []
        #: gang ident → time.monotonic() when it was first seen waiting partially bound.
        self.partial_since: dict[str, float] = {}
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
            podgroups_sigs=self.objects(PODGROUPS_SIGS),
            volcano_podgroups=self.objects(VOLCANO_PODGROUPS),
            workloads=self.objects(WORKLOADS),
            priority_classes=self.objects(PRIORITY_CLASSES),
            now=now,
        )

    async def run_once(self, now: float | None = None) -> CycleResult:
        """Rebuild, run one cycle, bind the committed gangs, explain the waiting ones."""
        now = time.time() if now is None else now
        self.cycles += 1
        await self._retry_undos()
        snapshot = self.snapshot(now)
        for ident, requeue in self.requeued.items():
            gang = snapshot.state.gangs.get(ident)
            if gang is not None:
                gang.backoff_until = max(gang.backoff_until, requeue.until)
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
        await self._watch_partial(snapshot, result.waiting, semaphore, now)
        if self.status is not None:
            await self.status.sync(self.objects(PODGROUPS), self.objects(PODS))
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
        failed: list[tuple[tuple[PodInfo, str], LiveError]] = []
        bound_now: list[tuple[PodInfo, str]] = []
        unbound: set[str] = set()  # refused for good (404, 409...) or out of retries
        for attempt in range(config.bind_retries + 1):
            outcomes = await asyncio.gather(
                *(self._bind_pod(snapshot, pod, node, semaphore, now) for pod, node in todo)
            )
            failed = [(item, error) for item, error in zip(todo, outcomes, strict=True) if error]
            bound_now += [item for item, error in zip(todo, outcomes, strict=True) if not error]
            if not failed and not unbound:
                if attempt:
                    logger.info("gang %s fully bound after %d retries", ident, attempt)
                self.requeued.pop(ident, None)
                await self._scheduled(snapshot, ident, bound_now)
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
        unbound |= {pod.key for pod, _ in todo}
        gang = snapshot.state.gangs.get(ident)
        if gang is None or gang.implicit:
            self._requeue(ident, now)
            return
        members = self._bound_members(gang, unbound)
        roles = Counter(pod.spec.role for pod in members)
        if len(members) >= gang.min_member and gang.roles_ready(roles):
            logger.info("gang %s is bound to its minimum; %d members wait", ident, len(unbound))
            await self._scheduled(snapshot, ident, bound_now)
            return
        self._requeue(ident, now)
        if not members:
            return
        if _started(snapshot, members):
            logger.warning(
                "gang %s is below its minimum but has started members: not undoing it", ident
            )
            return
        undo = _Undo(
            started, [(p.spec.namespace, p.spec.name, snapshot.uid(p.key)) for p in members]
        )
        logger.warning(
            "gang %s is bound below its minimum (%d of %d): undoing %d bound members",
            ident,
            len(members),
            gang.min_member,
            len(members),
        )
        for pod in members:
            self.cache.forget(pod.key)
        await self._undo(ident, undo, len(unbound), semaphore)

    async def _scheduled(
        self, snapshot: Snapshot, ident: str, binds: list[tuple[PodInfo, str]]
    ) -> None:
        if self.status is None or not binds:
            return
        group = self.informers[PODGROUPS].store.get(ident)
        pods = [(snapshot.pods[pod.key], node) for pod, node in binds if pod.key in snapshot.pods]
        await self.status.scheduled(group, pods)

    async def _watch_partial(
        self,
        snapshot: Snapshot,
        waiting: dict[str, Condition],
        semaphore: asyncio.Semaphore,
        now: float,
    ) -> None:
        """Undo gangs left waiting partially bound for longer than ``partial_bind_limit``.

        This catches what :meth:`_bind_gang` cannot see, e.g. a scheduler that stopped in the
        middle of binding a gang. Only gangs none of whose bound members has started (pod
        phase still ``Pending``) count: a running gang that lost a member is not touched.
        """
        seen: set[str] = set()
        for ident in waiting:
            gang = snapshot.state.gangs.get(ident)
            if gang is None or gang.implicit or ident in self.undo_pending:
                continue
            members = self._bound_members(gang, set())
            if not members or len(members) >= gang.min_member:
                continue
            if any(pod.key in snapshot.assumed for pod in members) or _started(snapshot, members):
                continue
            seen.add(ident)
            since = self.partial_since.setdefault(ident, time.monotonic())
            if time.monotonic() - since < self.recovery.partial_bind_limit:
                continue
            logger.warning(
                "gang %s waited partially bound (%d of %d) for over %g s: undoing it",
                ident,
                len(members),
                gang.min_member,
                self.recovery.partial_bind_limit,
            )
            self._requeue(ident, now)
            undo = _Undo(
                since, [(p.spec.namespace, p.spec.name, snapshot.uid(p.key)) for p in members]
            )
            await self._undo(ident, undo, len(gang.pending()), semaphore)
        for ident in [i for i in self.partial_since if i not in seen]:
            del self.partial_since[ident]

    @staticmethod
    def _bound_members(gang: GangInfo, unbound: set[str]) -> list[PodInfo]:
        return [
            pod
            for pod in gang.members
            if pod.status in PLACED
            and pod.status is not PodStatus.SUCCEEDED
            and pod.key not in unbound
        ]

    def _requeue(self, ident: str, now: float) -> None:
        requeue = self.requeued.setdefault(ident, _Requeue())
        requeue.failures += 1
        requeue.until = now + self.recovery.requeue_delay(requeue.failures)

    async def _undo(
        self, ident: str, undo: _Undo, unbound: int, semaphore: asyncio.Semaphore | None = None
    ) -> bool:
        """Remove ``undo``'s pods; True when none is left (then the Event is written)."""
        semaphore = semaphore or asyncio.Semaphore(self.bind_concurrency)
        outcomes = await asyncio.gather(
            *(self._remove(ns, name, uid, semaphore) for ns, name, uid in undo.pods)
        )
        removed = len(undo.pods)
        undo.pods = [item for item, ok in zip(undo.pods, outcomes, strict=True) if not ok]
        if undo.pods:
            self.undo_pending[ident] = undo
            late = time.monotonic() - undo.since > self.recovery.partial_bind_limit
            (logger.error if late else logger.warning)(
                "gang %s: %d bound members could not be undone yet", ident, len(undo.pods)
            )
            return False
        self.undo_pending.pop(ident, None)
        self.recovered.append(ident)
        self.on_partial_bind_recovered(ident)
        await self._recovered_event(ident, removed, unbound)
        return True

    def on_partial_bind_recovered(self, ident: str) -> None:
        """Called once per gang whose partial bind was undone (a hook for metrics)."""

    async def _retry_undos(self) -> None:
        for ident, undo in list(self.undo_pending.items()):
            await self._undo(ident, undo, 0)

    async def _remove(
        self, namespace: str, name: str, uid: str | None, semaphore: asyncio.Semaphore
    ) -> bool:
        """Delete (or evict) one bound member; True when it is gone or was re-created."""
        async with semaphore:
            try:
                if self.recovery.undo == "evict" and await self._evict(namespace, name, uid):
                    return True
                await self.client.delete(PODS, name, namespace, uid=uid)
            except ApiError as exc:
                if exc.not_found or exc.conflict:  # gone, or another incarnation
                    return True
                logger.warning("could not undo the bind of %s/%s: %s", namespace, name, exc)
                return False
            except LiveError as exc:
                logger.warning("could not undo the bind of %s/%s: %s", namespace, name, exc)
                return False
        return True

    async def _evict(self, namespace: str, name: str, uid: str | None) -> bool:
        """POST an Eviction; False when the server has no eviction subresource."""
        options: Obj = {"preconditions": {"uid": uid}} if uid else {}
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if options:
            body["deleteOptions"] = options
        try:
            await self.client.request("POST", PODS.path(namespace, name, "eviction"), body=body)
        except ApiError as exc:
            if exc.status in (404, 405):
                return False  # not served here (or the pod is gone): DELETE decides
            raise
        return True

    async def _recovered_event(self, ident: str, removed: int, unbound: int) -> None:
        group = self.informers[PODGROUPS].store.get(ident)
        if group is None:
            namespace, _, name = ident.partition("/")
            group = {
                "apiVersion": PODGROUPS.api_version,
                "kind": PODGROUPS.kind,
                "metadata": {"name": name, "namespace": namespace},
            }
        else:
            group = {"apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind, **group}
        verb = "evicted" if self.recovery.undo == "evict" else "deleted"
        note = (
            f"gang bound only in part ({unbound} binds failed after "
            f"{self.recovery.bind_retries} retries): {removed} bound members {verb}; "
            "the gang is requeued"
        )
        try:
            await events.create(
                self.client,
                events.event(group, reason=PARTIAL_BIND_RECOVERED, note=note, type_=events.WARNING),
            )
        except LiveError as exc:
            logger.warning(
                "could not write the %s event on %s: %s", PARTIAL_BIND_RECOVERED, ident, exc
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
        patches: list[Coroutine[Any, Any, object]] = []
        for ident, condition in waiting.items():
            gang = snapshot.state.gangs.get(ident)
            if gang is None:
                continue
            if self.status is not None:
                waiting_pods = [
                    snapshot.pods[pod.key]
                    for pod in gang.members
                    if pod.status is PodStatus.PENDING
                    and pod.spec.scheduler_name == self.scheduler_name
                    and pod.key in snapshot.pods
                ]
                group = None if gang.implicit else self.informers[PODGROUPS].store.get(ident)
                patches.append(
                    self.status.failed_scheduling(group, waiting_pods, condition.message)
                )
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
