"""Partial-bind recovery: a gang is never left bound below its minimum.

Design: the bind loop (:mod:`phalanx.live.loop`) retries failed binds itself; what happens when
retries are exhausted lives here, in :class:`PartialBinds`, so that the loop stays about binding
and this module about undoing. Its state is in memory only — after a restart the API is the
truth, and :meth:`PartialBinds.watch` finds what a stopped scheduler left half done.

- :meth:`PartialBinds.settle` decides after a gang's binds: at its minimum (``minMember`` and
  every role minimum) it is scheduled; below it, if none of its bound members has started (pod
  phase past ``Pending``: a running gang is never torn down), the bound members are undone —
  ``DELETE`` with the pod's uid as precondition (its controller re-creates it), or with
  ``undo="evict"`` the ``pods/NAME/eviction`` subresource, falling back to ``DELETE`` when the
  server does not serve it. A ``PartialBindRecovered`` Warning Event is written on the
  PodGroup and the gang is requeued with a doubling backoff (on the cycle clock).
- An undo that fails (e.g. 5xx) is retried at the start of every following cycle
  (:meth:`PartialBinds.retry_undos`) until it succeeds; meanwhile the gang is held (not placed
  again), its still-bound members stay assumed (they hold their room), and the undo is dropped
  if the gang turns out to be bound to its minimum after all.
- :meth:`PartialBinds.watch` undoes any gang found below its minimum with bound members that
  have not started (e.g. the scheduler stopped in the middle of a bind, or a member was
  deleted) once that has lasted ``partial_bind_limit`` seconds — whether the gang is waiting,
  in backoff after a ``scheduleTimeoutSeconds`` timeout, or has no pending member left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Literal

from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PLACED, GangInfo, PodInfo, PodStatus
from phalanx.live import events
from phalanx.live.cache import Obj, Snapshot
from phalanx.live.client import KubeClient
from phalanx.live.errors import ApiError, LiveError
from phalanx.live.resources import PODS
from phalanx.live.writes import evict

logger = logging.getLogger(__name__)

#: The Event reason written on a PodGroup whose partial bind was undone.
PARTIAL_BIND_RECOVERED = "PartialBindRecovered"


@dataclass(frozen=True, slots=True)
class RecoveryConfig:
    """How the live scheduler recovers from a gang bound only in part."""

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
class Requeue:
    failures: int = 0
    until: float = 0.0


@dataclass(slots=True)
class Undo:
    """Bound members of a gang still to be removed (an earlier undo failed)."""

    since: float  # time.monotonic() of the first bind of the gang
    pods: list[tuple[str, str, str | None]] = field(default_factory=list)  # ns, name, uid


def started(snapshot: Snapshot, pods: Iterable[PodInfo]) -> bool:
    """Whether any of ``pods`` has started (pod phase past ``Pending``): never undone."""
    return any(
        ((snapshot.pods.get(pod.key) or {}).get("status") or {}).get("phase")
        not in (None, "Pending")
        for pod in pods
    )


def bound_members(gang: GangInfo, unbound: Container[str] = ()) -> list[PodInfo]:
    """Members of ``gang`` holding a node (not finished), minus the keys in ``unbound``."""
    return [
        pod
        for pod in gang.members
        if pod.status in PLACED and pod.status is not PodStatus.SUCCEEDED and pod.key not in unbound
    ]


class PartialBinds:
    """Requeue backoff, undo and watch of gangs bound only in part (see the module doc)."""

    def __init__(
        self,
        client: KubeClient,
        config: RecoveryConfig,
        *,
        group_of: Callable[[str], Obj],
        forget: Callable[[str], None],
        on_recovered: Callable[[str], None],
        concurrency: int = 16,
    ) -> None:
        self.client = client
        self.config = config
        self._group_of = group_of
        self._forget = forget
        self._on_recovered = on_recovered
        self._concurrency = concurrency
        #: gang ident → requeue backoff after an undone partial bind.
        self.requeued: dict[str, Requeue] = {}
        #: gang ident → bound members whose undo has not succeeded yet.
        self.undo_pending: dict[str, Undo] = {}
        #: gang idents undone (recovered) so far, in order.
        self.recovered: list[str] = []
        #: gang ident → time.monotonic() when it was first seen waiting partially bound.
        self.partial_since: dict[str, float] = {}

    # -- backoff -----------------------------------------------------------------------------
    def requeue(self, ident: str, now: float) -> None:
        requeue = self.requeued.setdefault(ident, Requeue())
        requeue.failures += 1
        requeue.until = now + self.config.requeue_delay(requeue.failures)

    def scheduled(self, ident: str) -> None:
        """``ident`` is bound to its minimum: its backoff ends."""
        self.requeued.pop(ident, None)

    def apply_backoff(self, state: ClusterState, now: float) -> None:
        """Hold requeued gangs of a freshly built state until their backoff ends, and gangs
        whose undo is still pending until it is done (placing one again while its old members
        are being deleted would have the undo tear down the new placement)."""
        for ident, requeue in self.requeued.items():
            gang = state.gangs.get(ident)
            if gang is not None:
                gang.backoff_until = max(gang.backoff_until, requeue.until)
        for ident in self.undo_pending:
            gang = state.gangs.get(ident)
            if gang is not None:
                gang.backoff_until = max(gang.backoff_until, now + self.config.requeue_initial)

    # -- after a gang's binds ----------------------------------------------------------------
    async def settle(
        self,
        snapshot: Snapshot,
        ident: str,
        unbound: set[str],
        since: float,
        now: float,
        semaphore: asyncio.Semaphore,
    ) -> bool:
        """Some binds of ``ident`` failed for good: True when it still reached its minimum;
        otherwise it is requeued and (unless a member started) its bound members are undone."""
        gang = snapshot.state.gangs.get(ident)
        if gang is None or gang.implicit:
            self.requeue(ident, now)
            return False
        members = bound_members(gang, unbound)
        roles = Counter(pod.spec.role for pod in members)
        if len(members) >= gang.min_member and gang.roles_ready(roles):
            logger.info("gang %s is bound to its minimum; %d members wait", ident, len(unbound))
            return True
        self.requeue(ident, now)
        if not members:
            return False
        if started(snapshot, members):
            logger.warning(
                "gang %s is below its minimum but has started members: not undoing it", ident
            )
            return False
        logger.warning(
            "gang %s is bound below its minimum (%d of %d): undoing %d bound members",
            ident,
            len(members),
            gang.min_member,
            len(members),
        )
        await self.undo(ident, self._undo_of(snapshot, since, members), len(unbound), semaphore)
        return False

    async def watch(
        self,
        snapshot: Snapshot,
        now: float,
        semaphore: asyncio.Semaphore,
        touched: Iterable[str] | None = None,
    ) -> None:
        """Undo gangs left partially bound for longer than ``partial_bind_limit``.

        This catches what :meth:`settle` cannot see, e.g. a scheduler that stopped in the
        middle of binding a gang. The gangs looked at are those ``touched`` since the last
        call (None: every gang of the state) and those already seen partially bound — waiting,
        in backoff (a timed-out gang leaves the waiting list) or with no pending member left
        (a member was deleted). A gang counts when it holds bound members below its minimum,
        none of which has started or is still only assumed (bound by this scheduler, the
        watch not caught up).
        """
        gangs = snapshot.state.gangs
        idents = set(gangs if touched is None else touched) | set(self.partial_since)
        seen: set[str] = set()
        limit = self.config.partial_bind_limit
        for ident in idents:
            gang = gangs.get(ident)
            if gang is None or gang.implicit or ident in self.undo_pending:
                continue
            members = bound_members(gang)
            if not members or len(members) >= gang.min_member:
                continue
            if any(p.key in snapshot.assumed for p in members):
                continue
            if started(snapshot, members):
                continue
            seen.add(ident)
            since = self.partial_since.setdefault(ident, time.monotonic())
            if time.monotonic() - since < limit:
                continue
            logger.warning(
                "gang %s waited partially bound (%d of %d) for over %g s: undoing it",
                ident,
                len(members),
                gang.min_member,
                limit,
            )
            self.requeue(ident, now)
            undo = self._undo_of(snapshot, since, members)
            await self.undo(ident, undo, len(gang.pending()), semaphore)
        for ident in [i for i in self.partial_since if i in idents and i not in seen]:
            del self.partial_since[ident]

    @staticmethod
    def _undo_of(snapshot: Snapshot, since: float, members: list[PodInfo]) -> Undo:
        return Undo(since, [(p.spec.namespace, p.spec.name, snapshot.uid(p.key)) for p in members])

    # -- undo --------------------------------------------------------------------------------
    async def undo(
        self, ident: str, undo: Undo, unbound: int, semaphore: asyncio.Semaphore | None = None
    ) -> bool:
        """Remove ``undo``'s pods; True when none is left (then the Event is written)."""
        semaphore = semaphore or asyncio.Semaphore(self._concurrency)
        outcomes = await asyncio.gather(
            *(self._remove(ns, name, uid, semaphore) for ns, name, uid in undo.pods)
        )
        removed = len(undo.pods)
        for (namespace, name, _), ok in zip(undo.pods, outcomes, strict=True):
            if ok:  # gone: its room is free; one still bound stays assumed, holding its room
                self._forget(f"{namespace}/{name}")
        undo.pods = [item for item, ok in zip(undo.pods, outcomes, strict=True) if not ok]
        if undo.pods:
            self.undo_pending[ident] = undo
            late = time.monotonic() - undo.since > self.config.partial_bind_limit
            (logger.error if late else logger.warning)(
                "gang %s: %d bound members could not be undone yet", ident, len(undo.pods)
            )
            return False
        self.undo_pending.pop(ident, None)
        self.recovered.append(ident)
        self._on_recovered(ident)
        await self._recovered_event(ident, removed, unbound)
        return True

    async def retry_undos(self, snapshot: Snapshot, now: float) -> None:
        """Retry the undos that failed — unless the gang is bound to its minimum again (then
        undoing would tear a whole gang down; its pending undo is dropped). A gang whose undo
        goes through is requeued from now: ``snapshot`` still shows the removed pods bound."""
        for ident, undo in list(self.undo_pending.items()):
            gang = snapshot.state.gangs.get(ident)
            if gang is not None and len(bound_members(gang)) >= gang.min_member:
                logger.info("gang %s is bound to its minimum again: its undo is dropped", ident)
                del self.undo_pending[ident]
                continue
            if await self.undo(ident, undo, 0):
                self.requeue(ident, now)

    async def _remove(
        self, namespace: str, name: str, uid: str | None, semaphore: asyncio.Semaphore
    ) -> bool:
        """Delete (or evict) one bound member; True when it is gone or was re-created."""
        async with semaphore:
            try:
                if self.config.undo == "evict" and await self._evict(namespace, name, uid):
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
        try:
            await evict(self.client, namespace, name, uid)
        except ApiError as exc:
            if exc.status in (404, 405):
                return False  # not served here (or the pod is gone): DELETE decides
            raise
        return True

    async def _recovered_event(self, ident: str, removed: int, unbound: int) -> None:
        verb = "evicted" if self.config.undo == "evict" else "deleted"
        note = (
            f"gang bound only in part ({unbound} binds failed after "
            f"{self.config.bind_retries} retries): {removed} bound members {verb}; "
            "the gang is requeued"
        )
        body = events.event(
            self._group_of(ident), reason=PARTIAL_BIND_RECOVERED, note=note, type_=events.WARNING
        )
        try:
            await events.create(self.client, body)
        except LiveError as exc:
            logger.warning(
                "could not write the %s event on %s: %s", PARTIAL_BIND_RECOVERED, ident, exc
            )
