"""Preempt (within a queue, by priority) and reclaim (across queues, by share).

Both run after ``allocate``, over the gangs that it left waiting for room
(``NotEnoughResources``), best first, at most ``MAX_PREEMPTORS`` per cycle. For each, the
:class:`~phalanx.actions.victims.Planner` plans the gang's minimum with victims; when it fits,
the evictions are committed, the preemptor's placement is pipelined for the rest of the cycle
(so no later preemptor plans on the same room), and a hold is recorded so the freed room is
kept for it until its victims are gone (``QueueBook.holds``); a wake-up at once lets the
simulator bind it in the next cycle of the same instant.

- **preempt**: victims are gangs of the same queue with a strictly lower priority. A
  preemptor whose pods say ``preemptionPolicy: Never`` (their own, or their PriorityClass's,
  as admission copies it; or annotation ``phalanx.dev/preemption-policy: Never``) never
  preempts.
- **reclaim**: the preemptor's queue must be below its deserved share; victims are gangs of
  other, reclaimable queues further into their deserved share than the preemptor's (a queue
  over its share, or one below it but less so: room fragmented by small gangs of a queue at
  75 % of its share may so go to a whole gang of a queue at 30 %), never taking a queue below
  its ``guarantee``, and only while every victim's queue stays at least as far into its
  deserved share as the preemptor's queue gets with the gang placed (dominant ratios). A gang
  larger than what its queue deserves may so still take back room, as long as the result is
  fairer. Ratios are those the cycle has left so far (binds, evictions and holds committed
  since the book was computed, then each reclaim's). No cycles: afterwards the preemptor's
  queue is no further into its share than any victim's, so a victim's queue never finds the
  preemptor's further in than its own (it cannot reclaim back); and
  ``Σ usage² / deserved`` over the queues strictly falls with every reclaim, so no longer
  cycle exists either while the deserved shares stay the same.

``volcano`` variants model Volcano's ``preempt``/``reclaim`` with its gang plugin: a job is
never taken below ``minAvailable`` (only surplus members or single-pod jobs are victims),
candidates by priority only, no minimal-set pruning, and reclaim only from queues over their
deserved share (Volcano's ``overused``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from phalanx.actions.victims import Chunk, Plan, Planner, chunks, eligible_at
from phalanx.cluster.fairshare import Floats
from phalanx.cluster.queues import Hold, QueueBook
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit
from phalanx.plugins.predicates import Predicates

MAX_PREEMPTORS = 4
NO_ROOM = "NotEnoughResources"
POLICY = "phalanx.dev/preemption-policy"


@dataclass(frozen=True, slots=True)
class Preemptor:
    session: Session
    book: QueueBook
    gang: GangInfo
    pods: list[PodInfo]


class _Takeback:
    name = "preempt"
    reason = "preempt"
    gang_aware = True

    def __init__(self) -> None:
        self.predicates = Predicates()
        #: the earliest time a victim refused for its min-runtime becomes eligible
        self.recheck_at = float("inf")

    def execute(self, session: Session) -> None:
        book = session.state.queues
        tried = 0
        recheck = session.now >= self.recheck_at
        if recheck:
            self.recheck_at = float("inf")
        elif not any(c.reason == NO_ROOM for c in session.result.waiting.values()):
            return
        for unit in self._preemptors(session, recheck):
            if tried >= MAX_PREEMPTORS:
                break
            gang = unit.gang
            if gang.ident in book.holds or _never(unit):
                continue
            pods = _minimum(unit)
            if not pods:
                continue
            tried += 1
            self._try(session, book, gang, pods)

    @staticmethod
    def _preemptors(session: Session, parked: bool) -> list[Unit]:
        """Gangs waiting for room: those allocate just failed, and (``parked``) those parked
        since an earlier failure, best first."""
        units = [
            u
            for u in session.units()
            if (c := session.result.waiting.get(u.gang.ident)) is not None and c.reason == NO_ROOM
        ]
        if parked:
            for gang in session.state.blocked.values():
                pending = gang.placeable()
                if pending and gang.condition is not None and gang.condition.reason == NO_ROOM:
                    units.append(Unit.of_gang(gang, pending))
            units.sort(key=session.order_key)
        return units

    def _try(self, session: Session, book: QueueBook, gang: GangInfo, pods: list[PodInfo]) -> None:
        who = Preemptor(session, book, gang, pods)
        candidates = self.candidates(who)
        self._note_young(who)
        if not candidates:
            return
        plan = Planner(session, self.predicates).plan(
            pods, candidates, partial(self.allows, who), minimal=self.gang_aware
        )
        if plan is not None:
            self._commit(session, gang, plan)

    # -- overridden per action ----------------------------------------------------------------
    def candidates(self, who: Preemptor) -> list[Chunk]:
        raise NotImplementedError

    def allows(self, who: Preemptor, chosen: list[Chunk], chunk: Chunk) -> bool:
        return True

    def _note_young(self, who: Preemptor) -> None:
        """Wake up when a running gang protected by its min-runtime becomes a candidate."""
        for gang in self.running(who.session):
            at = eligible_at(gang)
            if at is not None and at > who.session.now and at < self.recheck_at:
                self.recheck_at = at
                who.session.result.wake_at.append(at)

    # -- shared --------------------------------------------------------------------------------
    def _commit(self, session: Session, gang: GangInfo, plan: Plan) -> None:
        evict = session.statement()
        for chunk in plan.victims:
            for pod in chunk.pods:
                evict.evict(pod)
                session.result.disruptions[pod.key] = (
                    "shrink" if chunk.surplus else self.reason,
                    gang.ident,
                )
        evict.commit()
        claim = session.statement()  # left open: discarded when the session closes
        rows: dict[int, np.ndarray] = {}
        for pod, row in plan.placement:
            claim.pipeline(pod, row)
            rows[row] = rows.get(row, np.zeros(pod.request.size)) + pod.request
        victims = tuple(sorted({c.gang.ident for c in plan.victims}))
        planned = {pod.key: row for pod, row in plan.placement}
        session.result.holds.append(Hold(gang.ident, rows, session.now, victims, planned))
        session.result.wake_at.append(session.now)

    @staticmethod
    def running(session: Session) -> list[GangInfo]:
        return session.state.queues.running()


class Preempt(_Takeback):
    name = "preempt"
    reason = "preempt"

    def candidates(self, who: Preemptor) -> list[Chunk]:
        session, book, gang = who.session, who.book, who.gang
        queue = book.queue_of(gang)
        gangs = [
            g
            for g in self.running(session)
            if g is not gang and g.priority < gang.priority and book.queue_of(g) == queue
        ]
        return chunks(gangs, session.table.gpu_col, session.now, whole=self.gang_aware)


class Reclaim(_Takeback):
    name = "reclaim"
    reason = "reclaim"

    def candidates(self, who: Preemptor) -> list[Chunk]:
        session, book, gang = who.session, who.book, who.gang
        if not book.active:
            return []
        queue = book.queue_of(gang)
        ratio = book.ratio(queue)
        if ratio >= 1.0:
            return []
        floor = ratio if self.gang_aware else 1.0  # Volcano: only overused queues are victims
        gangs = []
        for g in self.running(session):
            victim_queue = book.queue_of(g)
            if victim_queue == queue or not book.spec(victim_queue).reclaimable:
                continue
            if book.ratio(victim_queue) <= floor:
                continue
            gangs.append(g)
        return chunks(gangs, session.table.gpu_col, session.now, whole=self.gang_aware)

    def execute(self, session: Session) -> None:
        """Reclaim on the queues' usage as this cycle has left it so far: the book is computed
        when the cycle opens, so the binds, evictions and holds committed since are added
        first, and each reclaim's are added as it commits (the next cycle computes it anew).
        Share ratios compared on stale usage could let a cycle take more than the rule allows
        and a later cycle take it back."""
        book = session.state.queues
        if book.active:
            pods = session.state.pods
            placed = [pod for pod, _ in session.result.binds]
            placed += [pods[k] for hold in session.result.holds for k in hold.pods if k in pods]
            self._move(session, placed, session.result.evictions)
        super().execute(session)

    def _commit(self, session: Session, gang: GangInfo, plan: Plan) -> None:
        super()._commit(session, gang, plan)
        evicted = [pod for chunk in plan.victims for pod in chunk.pods]
        self._move(session, [pod for pod, _ in plan.placement], evicted)

    @staticmethod
    def _move(session: Session, placed: list[PodInfo], evicted: list[PodInfo]) -> None:
        """Add ``placed`` to their queues' usage in the book and take ``evicted`` off."""
        book, width = session.state.queues, len(session.state.index)
        for pods, sign in ((placed, 1.0), (evicted, -1.0)):
            for pod in pods:
                use = book.uses.get(book.queue_of(pod.gang))
                if use is not None:
                    use.usage = use.usage + sign * _sum([pod], width)

    def allows(self, who: Preemptor, chosen: list[Chunk], chunk: Chunk) -> bool:
        session, book, gang, pods = who.session, who.book, who.gang, who.pods
        width = len(session.state.index)
        queue = book.queue_of(gang)
        after = book.ratio(queue, _sum(pods, width))
        taken: dict[str, Floats] = {}
        for c in [*chosen, chunk]:
            name = book.queue_of(c.gang)
            taken[name] = taken.get(name, np.zeros(width)) + _sum(c.pods, width)
        for name, amount in taken.items():
            use = book.use(name, width)
            if np.any(use.usage - amount < book.guarantee(name, session.state.index) - 1e-9):
                return False
            if self.gang_aware and book.ratio(name, -amount) < after:
                return False
        return True


class VolcanoPreempt(Preempt):
    name = "volcano-preempt"
    gang_aware = False


class VolcanoReclaim(Reclaim):
    name = "volcano-reclaim"
    gang_aware = False


def _sum(pods: list[PodInfo], width: int) -> Floats:
    total = np.zeros(width)
    for pod in pods:
        total[: pod.request.size] += pod.request[:width]
    return total


def _minimum(unit: Unit) -> list[PodInfo]:
    """The pods the preemptor needs: its pending pods up to its minimum (all of them when it
    has role minimums)."""
    gang = unit.gang
    if gang.role_minimums or gang.implicit:
        return list(unit.pods)
    missing = gang.min_member - gang.placed
    return list(unit.pods[: max(missing, 0)])


def _never(unit: Unit) -> bool:
    return any(
        p.spec.preemption_policy == "Never" or p.spec.annotations.get(POLICY) == "Never"
        for p in unit.pods
    )
