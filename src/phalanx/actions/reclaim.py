"""Reclaim: a gang of a queue below its deserved share takes room back from other queues.

The preemptor's queue must be below its deserved share; victims are gangs of other,
reclaimable queues further into their deserved share than the preemptor's (a queue over its
share, or one below it but less so: room fragmented by small gangs of a queue at 75 % of its
share may so go to a whole gang of a queue at 30 %), never taking a queue below its
``guarantee``, and only while every victim's queue stays at least as far into its deserved
share as the preemptor's queue gets with the gang placed (dominant ratios). A gang larger than
what its queue deserves may so still take back room, as long as the result is fairer.

Ratios are those the cycle has left so far (binds, evictions and holds committed since the
book was computed, then each reclaim's). No cycles: afterwards the preemptor's queue is no
further into its share than any victim's, so a victim's queue never finds the preemptor's
further in than its own (it cannot reclaim back); and ``Σ usage² / deserved`` over the queues
strictly falls with every reclaim, so no longer cycle exists either while the deserved shares
stay the same.

The victim class of a preemptor is its queue; the rule reads the queues' usage and deserved
shares (``rule_stamp``). The attempt loop is shared with ``preempt``
(:class:`~phalanx.actions.takeback.Takeback`).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from phalanx.actions.takeback import Preemptor, Takeback
from phalanx.actions.victims import Chunk, Plan
from phalanx.cluster.fairshare import Floats
from phalanx.cluster.queues import QueueBook
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session


class Reclaim(Takeback):
    name = "reclaim"
    reason = "reclaim"

    def parked_hopeless(self, session: Session) -> bool:
        return not session.state.queues.active

    def no_victims(self, session: Session, gang: GangInfo) -> bool:
        return not session.state.queues.active

    def victim_class(self, book: QueueBook, gang: GangInfo) -> Hashable:
        return book.queue_of(gang)

    def rule_stamp(self, book: QueueBook) -> Hashable:
        uses = tuple(
            (name, use.usage.tobytes(), use.deserved.tobytes())
            for name, use in sorted(book.uses.items())
        )
        return (book.active, uses, book.mask.tobytes())

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
        return self.chunks_of(who, gangs)

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

    def _commit(self, session: Session, gang: GangInfo, plan: Plan, *, pin: bool) -> None:
        super()._commit(session, gang, plan, pin=pin)
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


def _sum(pods: list[PodInfo], width: int) -> Floats:
    total = np.zeros(width)
    for pod in pods:
        total[: pod.request.size] += pod.request[:width]
    return total
