"""Queueing hints: which parked gangs a release of resources could let fit.

A gang that failed for room is *parked* with a :class:`Hint` — its failure class (gangs of
equal pending shapes and equal need share one), the pod shapes it still has to place and how
many pods must be placed at once (``need``) — and its order key, which does not change while
it waits. The cycle reports both (``CycleResult.hints``); the backend's applier parks the gang
with them (``ClusterState.block``).
Binds only take room away, so a parked gang is worth another attempt only after resources
were freed (or nodes changed), and even then only if the room could hold it:

    bound = Σ_shape min(count_shape, capacity_shape)   ≥ need

where ``capacity_shape`` counts how many pods of that shape the free room of the nodes the
shape may use (selector, tolerations, not cordoned) holds. That bound is necessary for any
attempt to succeed, so a class below it is left asleep without changing a decision.

Each pod placed lowers ``Σ capacity`` by at least one, and every success places at least
``need`` pods, so at most ``Σ capacity // need`` gangs of a class can succeed before the
room runs out. Only that many gangs are woken, first in order: in the reference engine the
rest would be tried after them, fail, and (sharing the failure) change nothing. A release
thus wakes a handful of gangs however long the queue. (Except for a reservation gate, which
notices failures: the gangs it watches wake after any release, as in the reference.)

The class with key ``None`` is the coarse hint (any release wakes it): gangs whose order may
move while they wait, gangs in timeout backoff, and every gang when hints are switched off.

A gang that fits but that a reservation gate refused (it would delay a reservation ranked
ahead of it) is parked :class:`Gated`, in the class of its failure signature
(:class:`GatedClass`): the gate's decision depends on the gate's own state as well as on the
room, so the class is worth another look when the gate's *stamp* moves (the gate says what it
covers: for the reservation book, any take or release of room and any change of its plan).
Its gangs are placed alike, so a look is a *walk* in order: the first gang is woken; when the
gate refuses it, the gangs after it that the gate would refuse alike (they rank after it and
run at least as long: ``refuses_alike``) are judged without an attempt and the first that is
not is woken; when one is placed the next is woken; when one no longer fits, so does none of
them and all are woken (to wait for room). A long queue of refused gangs thus costs a few
attempts per change, not one per gang, and the walks of one stamp go on where the last one
stopped (the gangs it passed over were judged at that stamp), so a chain of them reads the
class once. With hints off no gang is parked Gated: the reference retries it every cycle.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

from phalanx.api.specs import Placement
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import Vector

#: Capacity reported for a shape that requests nothing (it fits anywhere).
UNBOUNDED = 1 << 40


@dataclass(frozen=True, slots=True)
class Hint:
    """Why a gang failed for room, as the class it shares with gangs of equal shape."""

    key: Hashable  # the failure signature; gangs with equal keys have equal shapes and need
    shapes: tuple[tuple[Vector, Placement, int], ...]  # request, placement, pods pending
    need: int  # pods that must be placed in one attempt for it to succeed


@dataclass(frozen=True, slots=True)
class Gated:
    """A gate refused a gang of failure signature ``key`` while its stamp was ``stamp``."""

    stamp: Hashable
    key: Hashable = None


@dataclass(frozen=True, slots=True)
class GatedClass:
    """Where gangs of one failure signature that a gate refused are parked."""

    key: Hashable


#: The stamp of a gated class whose gangs were judged at different stamps (never current).
MIXED = object()


class Parked:
    """The gangs of one failure class, in order (a heap with lazy removal)."""

    def __init__(self, hint: Hint | None, freed: int) -> None:
        self.hint = hint
        self.checked = freed  # ``ClusterState.freed`` at the last capacity check
        self.members: dict[str, tuple[int, object]] = {}  # ident → (token, gang)
        self._heap: list[tuple[tuple[float, ...], str, int]] = []
        self._tokens = 0
        self._sorted = True  # the heap is a sorted list (a walk keeps it so)
        self._resume: tuple[Hashable, int] | None = None  # (stamp, where a walk goes on)

    def __len__(self) -> int:
        return len(self.members)

    def add(self, ident: str, gang: object, order: tuple[float, ...]) -> None:
        self._tokens += 1
        self.members[ident] = (self._tokens, gang)
        heapq.heappush(self._heap, (order, ident, self._tokens))
        self._sorted, self._resume = False, None

    def remove(self, ident: str) -> None:
        self.members.pop(ident, None)
        if not self.members:
            self._heap.clear()

    def gangs(self) -> Iterator[tuple[str, object]]:
        for ident, (_, gang) in list(self.members.items()):
            yield ident, gang

    def first_unlike(
        self, alike: Callable[[object], bool], stamp: Hashable = None
    ) -> tuple[str, object] | None:
        """Take out of the class its first gang, in order, for which ``alike`` is false (the
        others looked at stay in the class). With a ``stamp``, the gangs an earlier walk at
        that same stamp passed over were judged then (refused alike) and are not looked at
        again: a chain of walks at one stamp costs the length of the class once."""
        if len(self._heap) > 2 * len(self.members) + 16:
            self._heap = [e for e in self._heap if self.members.get(e[1], (0,))[0] == e[2]]
            self._sorted, self._resume = False, None
        if not self._sorted:
            self._heap.sort()  # a sorted list is a heap: walked in order, nothing re-pushed
            self._sorted, self._resume = True, None
        resume = self._resume
        begin = resume[1] if stamp is not None and resume is not None and resume[0] == stamp else 0
        heap, members = self._heap, self.members
        for index in range(begin, len(heap)):
            entry = heap[index]
            member = members.get(entry[1])
            if member is None or member[0] != entry[2]:
                continue  # removed or re-added since: a stale entry
            if not alike(member[1]):
                del members[entry[1]]  # its entry is stale from now on
                if stamp is not None:
                    self._resume = (stamp, index + 1)
                return entry[1], member[1]
        if stamp is not None:
            self._resume = (stamp, len(heap))
        return None

    def first(self, count: int) -> list[tuple[str, object]]:
        """Take the first ``count`` gangs in order out of the class."""
        out: list[tuple[str, object]] = []
        self._sorted, self._resume = False, None  # popping re-orders the list
        while self._heap and len(out) < count:
            _, ident, token = heapq.heappop(self._heap)
            entry = self.members.get(ident)
            if entry is not None and entry[0] == token:
                del self.members[ident]
                out.append((ident, entry[1]))
        return out


def wake_count(hint: Hint, free: CapacityOf) -> int:
    """How many gangs of ``hint``'s class could succeed now (0: none can)."""
    caps = [free(request, placement) for request, placement, _ in hint.shapes]
    bound = sum(min(count, cap) for (_, _, count), cap in zip(hint.shapes, caps, strict=True))
    if bound < hint.need:
        return 0
    return max(1, sum(caps) // max(hint.need, 1))


class CapacityOf:
    """Pods of a shape that the free room of its usable nodes holds (masks cached)."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._known: dict[tuple[bytes, Placement], int] = {}  # shapes shared by classes

    def __call__(self, request: Vector, placement: Placement) -> int:
        if not request.any():
            return UNBOUNDED
        key = (request.tobytes(), placement)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = self._count(request, placement)
        return known

    def _count(self, request: Vector, placement: Placement) -> int:
        return self.table.capacity_for(request, self.table.facts.usable(placement))


class Failures:
    """Preemption attempts known to fail (used by the ``preempt`` and ``reclaim`` actions).

    A failed attempt is remembered under its failure class — what the preemptor needs (its
    queue, priority and the shapes of its minimum, in order) — with the *stamp* of the world
    it failed in: the release count, the room being released, the candidate victims, and
    what the action's rule reads (queue shares, budgets). While the stamp is unchanged, the
    same attempt would fail again: binds of gangs that are not candidates only take room
    away, as for allocate's hints. Gangs of one class so share one failed attempt.
    """

    LIMIT = 4096  # classes remembered at most (the memo is cleared past it)

    def __init__(self) -> None:
        self._stamps: dict[Hashable, Hashable] = {}

    def __len__(self) -> int:
        return len(self._stamps)

    def known(self, key: Hashable, stamp: Hashable) -> bool:
        """Did the class ``key`` fail in a world with this ``stamp``?"""
        return self._stamps.get(key, _NEVER) == stamp

    def failed(self, key: Hashable, stamp: Hashable) -> None:
        if len(self._stamps) >= self.LIMIT:
            self._stamps.clear()
        self._stamps[key] = stamp

    def clear(self) -> None:
        self._stamps.clear()


_NEVER = object()
