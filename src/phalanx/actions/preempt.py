"""Preempt: a waiting gang takes the room of lower-priority gangs of its own queue.

Victims are gangs of the preemptor's queue with a strictly lower priority: their elastic
surplus first, then whole gangs (:mod:`phalanx.actions.victims`). The attempt loop, the
commit and the memo of attempts known to fail are shared with ``reclaim``
(:class:`~phalanx.actions.takeback.Takeback`).

The victim class of a preemptor is its queue and priority. Two quick tests let a cycle skip
planning: a per-queue lowest running priority (no gang of its queue below the preemptor's
priority runs: no candidates), and, for the gangs parked after failing for room, the highest
priority that ever failed for room against the lowest that runs (every parked gang failed so
once, and is woken when its priority changes).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

from phalanx.actions.takeback import Preemptor, Takeback
from phalanx.actions.victims import Chunk
from phalanx.cluster.queues import QueueBook
from phalanx.cluster.workloads import GangInfo
from phalanx.framework.session import Session


class Preempt(Takeback):
    name = "preempt"
    reason = "preempt"

    def __init__(self) -> None:
        super().__init__()
        self._highest = -(1 << 62)  # the highest priority that failed for room
        self._seeded = False

    def victim_class(self, book: QueueBook, gang: GangInfo) -> Hashable:
        return (book.queue_of(gang), gang.priority)

    def _rank(self, book: QueueBook, gang: GangInfo) -> tuple[str, int]:
        return cast(tuple[str, int], self._victim_class(book, gang))

    def no_victims(self, session: Session, gang: GangInfo) -> bool:
        book = session.state.queues
        queue, priority = self._rank(book, gang)
        if book.lowest_priority is None or priority <= book.lowest_priority:
            return True  # no gang below it ever ran
        return bool(self._lowest(session).get(queue, priority) >= priority)

    def note_waiting(self, book: QueueBook, gang: GangInfo) -> None:
        self._highest = max(self._highest, self._rank(book, gang)[1])

    def parked_hopeless(self, session: Session) -> bool:
        """No running gang is below the highest priority that ever failed for room (every
        parked gang failed so once, and is woken when its priority changes)."""
        if not self._seeded:
            self._seeded = True
            for gang in session.state.blocked.values():  # parked before this action existed
                self.note_waiting(session.state.queues, gang)
        ever = session.state.queues.lowest_priority
        if ever is None or ever >= self._highest:
            return True  # no gang below any that waited ever ran
        lowest = self._lowest(session)
        return not lowest or min(lowest.values()) >= self._highest

    def _lowest(self, session: Session) -> dict[str, int]:
        """Per queue, the lowest priority of its running gangs."""
        running = self.running(session)
        stamp = (session.state.queues.generation, sum(g.generation for g in running))
        if self._floor is None or stamp != self._floor_at:  # a running pod's spec changed
            book, self._floor, self._floor_at = session.state.queues, {}, stamp
            for g in self.running(session):
                queue, priority = self._rank(book, g)
                self._floor[queue] = min(priority, self._floor.get(queue, priority))
        return self._floor

    def candidates(self, who: Preemptor) -> list[Chunk]:
        session, book, gang = who.session, who.book, who.gang
        queue, priority = self._rank(book, gang)
        gangs = []
        for g in self.running(session):
            victim_queue, victim_priority = self._rank(book, g)
            if g is not gang and victim_priority < priority and victim_queue == queue:
                gangs.append(g)
        return self.chunks_of(who, gangs)
