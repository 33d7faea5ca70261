"""QueueTally: what the tracked gangs of each queue hold and ask, kept as gangs change.

:meth:`QueueBook.refresh <phalanx.cluster.queues.QueueBook.refresh>` needs, per queue, the
requests of pods holding a node (usage), those plus the requests of the members that may
still be placed (demand) and how many gangs wait. Walking every tracked gang and its members
for that costs O(gangs × members) in every cycle, even in one where nothing moved.

The tally keeps each tracked gang's *part* (its queue, what it holds, what it asks, whether it
waits) and per queue the sums of the parts. A tracked gang says when it changes: its
``watcher`` is the tally's ``dirty`` set, which :class:`~phalanx.cluster.workloads.GangInfo`
``add``, ``remove`` and ``move`` (every status change) put its ident into; the state touches
it (:meth:`~phalanx.cluster.workloads.GangInfo.touched`) on the changes that go around them
(a spec, a resize, a pod found valid). A refresh recomputes the parts of those gangs only and
moves the sums by the difference; a new queue binding (the book's generation) or a new
resource (the index's width) recomputes every part.

Requests are integers held in float64, so the sums are exact in any order (below 2**53) and
equal those of a walk over every gang.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from phalanx.cluster.fairshare import Floats
from phalanx.cluster.workloads import HOLDING, GangInfo


@dataclass(slots=True)
class Part:
    """One gang's share of its queue's figures."""

    queue: str
    held: Floats  # requests of its members holding a node
    asked: Floats  # requests of its valid members that may still be placed
    waits: bool  # it asks and is not ready


@dataclass(slots=True)
class Sums:
    """A queue's figures before the tree's roll-up: the sums of its gangs' parts."""

    usage: Floats
    demand: Floats
    waiting: int = 0
    gangs: int = 0


class QueueTally:
    def __init__(self) -> None:
        self.dirty: set[str] = set()  # tracked gangs changed since the last refresh
        self.parts: dict[str, Part] = {}
        self.sums: dict[str, Sums] = {}
        self.width = -1  # the index width the parts are computed at
        self.generation = -1  # the book's generation the parts' queues were resolved at

    def stale(self, width: int, generation: int) -> bool:
        """Must every part be computed again (a resource or a queue binding appeared)?"""
        return width != self.width or generation != self.generation

    def reset(self, width: int, generation: int) -> None:
        self.parts.clear()
        self.sums.clear()
        self.width, self.generation = width, generation

    def update(self, gang: GangInfo, queue_of: Callable[[GangInfo], str]) -> bool:
        """Compute ``gang``'s part again; False if it neither holds nor asks anything (the
        book stops tracking it)."""
        self.drop(gang.ident)
        width = self.width
        held = np.zeros(width)
        asked = np.zeros(width)
        for pod in gang.members:
            if pod.status in HOLDING:
                held[: pod.request[:width].size] += pod.request[:width]
        for pod in gang.placeable():  # up to its max-member
            if not pod.invalid:
                asked[: pod.request[:width].size] += pod.request[:width]
        if not held.any() and not asked.any():
            return False
        part = Part(queue_of(gang), held, asked, bool(asked.any()) and not gang.ready())
        self.parts[gang.ident] = part
        sums = self.sums.get(part.queue)
        if sums is None:
            sums = self.sums[part.queue] = Sums(np.zeros(width), np.zeros(width))
        sums.usage += held
        sums.demand += held + asked
        sums.waiting += part.waits
        sums.gangs += 1
        return True

    def drop(self, ident: str) -> None:
        """Take ``ident``'s part out of its queue's sums."""
        part = self.parts.pop(ident, None)
        if part is None:
            return
        sums = self.sums[part.queue]
        sums.gangs -= 1
        if sums.gangs == 0:
            del self.sums[part.queue]
            return
        sums.usage -= part.held
        sums.demand -= part.held + part.asked
        sums.waiting -= part.waits

    def key(self) -> tuple[object, ...]:
        """The sums as a value (equal keys: equal figures before the roll-up)."""
        return tuple(
            (name, s.usage.tobytes(), s.demand.tobytes(), s.waiting)
            for name, s in sorted(self.sums.items())
        )
