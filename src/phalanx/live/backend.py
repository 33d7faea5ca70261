"""The live :class:`~phalanx.framework.backend.Backend`: a cycle's decisions, through the API.

Design: :func:`~phalanx.framework.backend.apply` first changes the long-lived state (binds are
*assumed*: the pods hold their nodes at once), then calls this backend, which only queues the
API work; :meth:`LiveBackend.finish` (awaited by the loop after ``apply``) does it:

- ``bind``: every pod of the gang concurrently (``pods/NAME/binding`` with the pod's uid, at
  most ``bind_concurrency`` requests in flight, gangs in turn; under ``serve`` in the
  background, so the next cycle need not wait). Failures with a retriable error (5xx, 429,
  transport) are retried up to ``bind_retries`` times with a short doubling delay, stopping
  early enough to respect ``partial_bind_limit`` (counted from the gang's first request sent:
  a gang queued behind a thousand other binds has nothing bound yet); refusals for good (404
  gone, 409 re-created) are not retried; a 409 for the very pod (same uid) already bound, or a
  last attempt that failed but did commit (checked with a GET), counts as bound. A pod whose
  bind failed is ``forget``-ten by the state (pending again, its room free); the watch
  ``confirm``-s the others. A gang still below its minimum goes to
  :class:`~phalanx.live.recovery.PartialBinds` (undo, event, requeue with backoff).
- ``evict``: a ``policy/v1`` Eviction (``pods/NAME/eviction``, so PodDisruptionBudgets are
  honoured; a server without that subresource gets a ``DELETE`` with the pod's uid); a refused
  eviction (e.g. 429 while a budget forbids it) puts the pod back as the watch last showed it.
  Once every eviction of the cycle is answered, the accepted ones are reported
  (:class:`~phalanx.live.preemption.Preemptions`: Events on victims and preemptors, metrics).
- ``write_status``: the waiting gang's explanation (``PodScheduled=False`` on its pending
  pods, ``FailedScheduling`` Events, :mod:`phalanx.live.waiting`); its PodGroup's status is
  planned again (:mod:`phalanx.live.status`).
- ``timed_out``: a Warning ``Timeout`` Event on the gang's PodGroup.
- ``wake_at``: the loop's next wake-up (it sleeps until the earlier of that and its period).
- ``attempts``: metrics.
- ``reserve`` / ``release``: coscheduling's Permit holds are a simulator baseline; the live
  scheduler refuses that action at start-up (:class:`~phalanx.live.loop.LiveScheduler`), so
  reaching these is a programming error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from phalanx.cluster.workloads import Condition, GangInfo, PodInfo
from phalanx.live.errors import ApiError, LiveError, TransportError
from phalanx.live.preemption import Preemptions
from phalanx.live.resources import PODS
from phalanx.live.writes import bind, evict

if TYPE_CHECKING:
    from phalanx.live.loop import LiveScheduler

logger = logging.getLogger(__name__)

#: The Event reason on a gang that passed its ``scheduleTimeoutSeconds``.
TIMEOUT = "Timeout"
DEADLINE_MISS = "DeadlineMiss"


class _GangClock:
    """How long a gang's binds may still take: ``limit`` seconds from its first bind sent
    (waiting for a free slot behind other gangs' binds does not count — nothing of the gang
    is bound then), so a hung request cannot keep its bound members waiting past
    ``partial_bind_limit`` / 2 (:class:`~phalanx.live.recovery.RecoveryConfig`)."""

    __slots__ = ("limit", "started")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.started: float | None = None

    def left(self) -> float:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        return max(0.01, self.limit - (now - self.started))

    def began(self) -> float:
        return time.monotonic() if self.started is None else self.started


def retriable(exc: LiveError) -> bool:
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ApiError) and (exc.status >= 500 or exc.status in (0, 429))


class LiveBackend:
    """One cycle's backend of a :class:`LiveScheduler` (see the module doc)."""

    def __init__(self, scheduler: LiveScheduler, now: float) -> None:
        self.scheduler = scheduler
        self.cache = scheduler.cache
        self.clock = now
        self.semaphore = scheduler.semaphore
        self.waiting: dict[str, Condition] = {}
        self._work: list[Coroutine[Any, Any, None]] = []
        self._evictions: list[Coroutine[Any, Any, tuple[str, bool]]] = []
        self.preemptions = Preemptions(self.cache.state, self.cache.pods)

    # -- the Backend protocol (called by apply) ---------------------------------------------
    def now(self) -> float:
        return self.clock

    def bind(self, gang: GangInfo, binds: Sequence[tuple[PodInfo, int]]) -> None:
        self._touch(gang)
        self._work.append(self._bind_gang(gang.ident, list(binds)))

    def evict(self, pod: PodInfo, gang: GangInfo) -> None:
        self._touch(gang)
        self.preemptions.add(pod, gang, self.clock)
        self._evictions.append(self._evict(pod))

    def reserve(self, pod: PodInfo, node: int) -> None:
        raise LiveError("the live scheduler does not hold pods at Permit (coscheduling)")

    def release(self, pod: PodInfo, node: int) -> None:
        raise LiveError("the live scheduler does not hold pods at Permit (coscheduling)")

    def write_status(self, gang: GangInfo, condition: Condition) -> None:
        self._touch(gang)
        self.waiting[gang.ident] = condition

    def timed_out(self, gang: GangInfo) -> None:
        status = self.scheduler.status
        timeout = gang.timeout
        note = f"not placed within scheduleTimeoutSeconds ({timeout:g} s)" if timeout else ""
        logger.info("gang %s timed out: %s", gang.ident, note)
        if status is not None and not gang.implicit:
            status.warning(self.scheduler.group_reference(gang.ident), TIMEOUT, note)

    def wake_at(self, at: float) -> None:
        self.scheduler.wake_at(at)

    def recheck_at(self, at: float) -> None:
        """Reservations want a look at ``at``: the loop wakes then (at the latest, its period)."""
        self.scheduler.wake_at(at)

    def expected(self, gang: GangInfo, at: float | None, why: str) -> None:
        """Shown live through the waiting condition's message (PodGroup condition, events,
        ``explain``) and the ``phalanx_gang_expected_start_seconds`` gauge, both written from
        the cycle's result; nothing more to do per gang here."""

    def deadline_miss(self, gang: GangInfo, late: float, why: str) -> None:
        """A Warning ``DeadlineMiss`` Event on the gang's PodGroup; the waiting condition's
        message says it too (its expected start), and the metrics count it."""
        status = self.scheduler.status
        logger.info("gang %s will miss its deadline: %s", gang.ident, why)
        if status is not None and not gang.implicit:
            status.warning(self.scheduler.group_reference(gang.ident), DEADLINE_MISS, why)
        self.scheduler.on_deadline_miss(gang.ident, late)

    def attempts(self, count: int) -> None:
        self.scheduler.on_attempts(count)

    # -- carrying it out ---------------------------------------------------------------------
    async def finish(self, *, wait: bool = True) -> None:
        """Bind and evict (concurrently), then explain the waiting gangs. Without ``wait`` the
        binds and evictions go on in the background (the state holds the pods assumed, so
        the next cycle may start at once, as kube-scheduler's binding cycle)."""
        scheduler = self.scheduler
        if self._evictions:
            self._work.append(self._evict_all(self._evictions))
            self._evictions = []
        if self._work:
            work, self._work = asyncio.gather(*self._work), []
            if wait:
                await work
            else:
                scheduler.in_background(work)
        await scheduler.explainer.explain(
            self.cache.snapshot,
            self.waiting,
            group_of=scheduler.group,
            semaphore=self.semaphore,
        )

    def _touch(self, gang: GangInfo) -> None:
        self.cache.touched.add(gang.ident)
        if gang.spec is not None:
            self.cache.groups_touched.add((gang.spec.api, gang.key))

    async def _evict_all(self, evictions: list[Coroutine[Any, Any, tuple[str, bool]]]) -> None:
        """Every eviction of the cycle, then the report of those the API accepted."""
        outcomes = await asyncio.gather(*evictions)
        scheduler = self.scheduler
        self.preemptions.report(
            [key for key, accepted in outcomes if accepted],
            self.clock,
            scheduler.status,
            scheduler.group,
            scheduler.on_disruption,
        )

    async def _evict(self, pod: PodInfo) -> tuple[str, bool]:
        """Evict ``pod``; (its key, whether the API accepted it)."""
        uid = self.cache.snapshot.uid(pod.key)
        namespace, name = pod.spec.namespace, pod.spec.name
        client = self.scheduler.client
        async with self.semaphore:
            try:
                try:
                    await evict(client, namespace, name, uid)
                except ApiError as exc:
                    if exc.status not in (404, 405):
                        raise
                    await client.delete(PODS, name, namespace, uid=uid)  # no Eviction API here
            except ApiError as exc:
                if exc.not_found:
                    return pod.key, False  # gone already: the watch removes it
                self._refused(pod, exc)  # e.g. 429: a PodDisruptionBudget forbids it now
                return pod.key, False
            except LiveError as exc:
                self._refused(pod, exc)
                return pod.key, False
        return pod.key, True

    def _refused(self, pod: PodInfo, exc: LiveError) -> None:
        logger.warning("eviction of %s refused: %s", pod.key, exc)
        self.cache.resync(pod.key, self.clock)  # it keeps its node, as the API says

    async def _bind_gang(self, ident: str, binds: list[tuple[PodInfo, int]]) -> None:
        config = self.scheduler.recovery
        partial = self.scheduler.partial
        clock = _GangClock(config.partial_bind_limit / 2)
        names = self.cache.state.table.names
        todo = [(pod, names[node]) for pod, node in binds]
        bound_now: list[tuple[PodInfo, str]] = []
        unbound: set[str] = set()  # refused for good (404, 409...) or out of retries
        for attempt in range(config.bind_retries + 1):
            sent = (self._bind_pod(pod, node, clock) for pod, node in todo)
            outcomes = await asyncio.gather(*sent)
            failed = [(item, error) for item, error in zip(todo, outcomes, strict=True) if error]
            bound_now += [item for item, error in zip(todo, outcomes, strict=True) if not error]
            if not failed and not unbound:
                if attempt:
                    logger.info("gang %s fully bound after %d retries", ident, attempt)
                partial.scheduled(ident)
                self._scheduled(ident, bound_now)
                return
            for (pod, node), error in failed:
                logger.warning("bind %s to %s failed (gang %s): %s", pod.key, node, ident, error)
            todo = [item for item, error in failed if retriable(error)]
            unbound |= {pod.key for (pod, _), error in failed if not retriable(error)}
            delay = config.retry_delay * 2**attempt
            if not todo or attempt == config.bind_retries or clock.left() <= delay:
                break
            await asyncio.sleep(delay)
        for pod, _node in todo:  # out of retries or time: the last attempt may have committed
            where = await self._already_bound(pod, self.cache.snapshot.uid(pod.key))
            if where is None:
                unbound.add(pod.key)
            else:
                bound_now.append((pod, where))
        for key in unbound:
            self.cache.state.forget(key)  # pending again; its room is free
        if not unbound:
            partial.scheduled(ident)
            self._scheduled(ident, bound_now)
        elif await partial.settle(
            self.cache.snapshot, ident, unbound, clock.began(), self.clock, self.semaphore
        ):
            self._scheduled(ident, bound_now)

    def _scheduled(self, ident: str, binds: list[tuple[PodInfo, str]]) -> None:
        status = self.scheduler.status
        if status is None or not binds:
            return
        pods = self.cache.pods
        status.scheduled(
            self.scheduler.group(ident),
            [(pods[pod.key], node) for pod, node in binds if pod.key in pods],
        )

    async def _bind_pod(self, pod: PodInfo, node: str, clock: _GangClock) -> LiveError | None:
        uid = self.cache.snapshot.uid(pod.key)
        async with self.semaphore:  # queued behind other gangs' binds: not yet the gang's time
            error = await self._try_bind(pod, node, uid, clock)
        self.scheduler.on_bind(error is None)
        return error

    async def _try_bind(
        self, pod: PodInfo, node: str, uid: str | None, clock: _GangClock
    ) -> LiveError | None:
        """Bind ``pod`` within what is left of its gang's clock (the request's own timeout:
        past it, a :class:`TransportError`, retriable)."""
        try:
            client, namespace, name = self.scheduler.client, pod.spec.namespace, pod.spec.name
            await bind(client, namespace, name, node, uid=uid, answer=False, timeout=clock.left())
        except ApiError as exc:
            if not exc.conflict:
                return exc
            bound_to = await self._already_bound(pod, uid, clock.left())
            if bound_to is None:
                return exc
            logger.info("bind %s: already bound to %s (an earlier attempt)", pod.key, bound_to)
        except LiveError as exc:
            return exc
        return None

    async def _already_bound(
        self, pod: PodInfo, uid: str | None, timeout: float | None = None
    ) -> str | None:
        """After a 409 on a bind: the node this very pod (same uid) is bound to, if it is.

        The API server answers 409 when the pod is already assigned — e.g. an earlier attempt
        that timed out had in fact committed, or a stopped scheduler's bind landed late. That
        pod is bound, not refused; a 409 for a re-created pod (another uid) is a refusal.
        """
        path = PODS.path(pod.spec.namespace, pod.spec.name)
        try:
            current = await self.scheduler.client.request("GET", path, timeout=timeout)
        except LiveError:
            return None
        meta = current.get("metadata") or {}
        node = (current.get("spec") or {}).get("nodeName")
        if node and (uid is None or meta.get("uid") == uid):
            return str(node)
        return None
