"""The reservation book: Slurm's backfill algorithm over gangs, kept from cycle to cycle.

``plan`` walks the gangs :class:`~phalanx.actions.candidates.Waiters` offers, in rank order,
on the timeline of running gangs (ending at their estimated ends). Each that may hold a
reservation — in ``easy`` mode the first ``depth`` of each queue that cannot start now (and
are at least ``min_gpus`` GPUs) plus the aged gangs (at most ``max_aged`` per queue); in
``conservative`` mode every waiting gang — is *carved* into the ``view`` at the earliest time
it fits, on the nodes it would use then. One of them that fits now is carved too, as an
*intent*, so the reservations behind it account for it; one that fits now only on paper
(parked for room, found unfit this cycle, or in a timeout backoff) is reserved instead from the
next time room comes back (or its backoff ends).

**Cost follows change.** The carves are kept while their inputs hold. The plan is made again
only when it must be: a start or an overrun that overdraws the view, the start of a reserved
gang or of an intent in a queue short of ``depth`` reservations (the next of its queue may hold
one) (``invalid``), an end that
gives room back (``stale``: reservations may move earlier; re-planned when a gate decision or
a due reservation needs it — not for a gang that ranks ahead of every gang a plan may pick:
no plan can hold a reservation ahead of it), a gang the plan would pick arriving or aging. A
start that uses room no reservation needs (backfill) changes nothing.

As the session's gate, the book admits a placement only if every carve ranked ahead of the
unit can still be placed no later than its reserved start with the unit running until its
estimated end (no estimate: forever) — the unit uses room no reservation needs, or ends in
time. Relaxed backfill (``slack``): a reserved start that rests on learned estimates may move
later by ``slack`` × the time until it (learned medians under-estimate heavy tails), unless
it is a big head's (``big_first``). Elastic growth of a gang already running ranks after every
reservation; a preemptor whose victims were evicted for it (it holds their room) is admitted.
``strict`` mode (``fifo-reserve``) admits nothing ranked after a reservation, nor after a head
whose start is unknown (something it waits for has no estimate): it blocks its queue, as
strict FIFO does. A gang its capped queue has no room for now is passed over instead (no
reservation, blocking nobody), as Slurm passes over a job held by a QOS or association
limit. A gang whose reservation is due starts on the nodes it reserved
(``nodes_for``).

A gang that starts after it has aged (on its reservation, or on room it found; either way it
ranked ahead of every gang not aged), or as a big gang ranked first (``big_first``: ahead of
higher priorities too, which would otherwise preempt it at once), is ``protected`` for its
estimated runtime (none, or only its queue's, ``pooled``: at least the aging threshold):
preemption spares it unless the preemptor aged too (:mod:`phalanx.actions.guard`).

Known gap: a gang's unit places its members beyond ``minMember`` in the same statement as its
minimum; a reservation ranked behind it assumed only the minimum, so it may move later.

Expected starts are told by :mod:`phalanx.actions.expect` when the session closes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from phalanx.actions.candidates import (
    GROWTH,
    OTHER,
    Candidate,
    Rank,
    Settings,
    Waiters,
    clock,
    nodes_text,
    rank_of,
)
from phalanx.actions.queueroom import Held, queue_room_at
from phalanx.actions.timeline import Found, Memo, Plan, Slot, Timeline
from phalanx.cluster.workloads import GangInfo
from phalanx.framework.session import Session
from phalanx.framework.statement import Op, Statement
from phalanx.framework.unit import Unit
from phalanx.plugins.estimates import POOLED

if TYPE_CHECKING:
    from phalanx.actions.reserve import Reserve

__all__ = ["Book", "Carve", "Settings", "plan_of"]


@dataclass(eq=False, slots=True)
class Carve:
    who: Candidate
    start: float
    plan: Plan
    intent: bool = False  # carved as fitting now, not as a reservation
    slack: tuple[float, float] | None = None  # (when, ``Book.slack`` then)

    @property
    def end(self) -> float:
        return self.start + self.who.duration


#: what a placement starts from besides the room (``Book._before``)
_Before = tuple[Mapping[str, Any], int, int, object]


class _Standing(NamedTuple):
    """What a refusal rests on under an order that moves (``Book._standing``)."""

    world: tuple[object, ...]
    duration: float
    ahead: tuple[tuple[str, float, float, bool], ...]  # carves ranked ahead, in order


class Book:
    def __init__(self, reserve: Reserve, settings: Settings, waiters: Waiters) -> None:
        self.reserve = reserve
        self.settings = settings
        self.waiters = waiters
        self.view: Timeline | None = None  # the running gangs' timeline and every carve
        self.carved: dict[str, Carve] = {}  # gang ident → its carve
        #: ``strict``: the picks the plan found no start for (a holder has no estimate): each
        #: still blocks the gangs ranked behind it, as strict FIFO does
        self.blocked: dict[str, Candidate] = {}
        self.invalid = True  # the view is overdrawn or its picks changed: plan again
        self.stale = False  # room came back: reservations may move earlier
        self.planned = False  # planned in this cycle
        self.session: Session | None = None
        self.now = 0.0
        self.begun: set[str] = set()
        self._ranked: tuple[Unit, Rank] | None = None  # the unit being placed, ranked before
        self.unfit: set[str] = set()  # gangs allocate found no room for this cycle
        #: pod shapes refused this cycle → the shortest duration refused (a longer run of the
        #: same shape, placed alike, delays the same reservation at least as much)
        self.refused: dict[tuple[bytes, int], tuple[float, str]] = {}
        #: moves whenever the carves may have changed (see ``stamp``)
        self.epoch = 0
        #: gangs that started aged → the end of their protection (``protected``)
        self.shields: dict[str, float] = {}
        self._shield_ends: list[tuple[float, str]] = []  # (until, ident), a heap
        self._found = Memo()  # by (shape, duration), on the running gangs' timeline
        #: not static order: gang ident → (what its last refusal rested on, the refusal), and
        #: the unit ``admits`` last judged with how often (see ``standing_refusal``)
        self._stands: dict[str, tuple[_Standing, str | None]] = {}
        self._judged: tuple[Unit | None, int] = (None, 0)
        #: the unit ``admits`` judges, and what it was placed from (``_before``)
        self._placed: tuple[Unit | None, _Before | None] = (None, None)

    @property
    def carves(self) -> list[Carve]:
        """Every carve (reservations and intents)."""
        return list(self.carved.values())

    @property
    def waiting(self) -> Iterable[Candidate]:
        """The waiting gangs it knows, each with its rank and estimated duration."""
        return self.waiters.by_ident.values()

    @property
    def ends(self) -> Mapping[str, float]:
        """Running gang ident → its estimated end (∞: no estimate)."""
        return _Ends(self.reserve)

    def protected(self, gang: GangInfo) -> bool:
        """Did ``gang`` start after it had aged (it then ranked ahead of every gang not aged,
        reserved for or not), or as a big gang ranked first, less than its estimated runtime
        ago (none: the aging threshold)? Preempting it for a gang it outranked would only start
        the starvation again."""
        until = self.shields.get(gang.ident)
        if until is None:
            return False
        run = self.reserve.running.get(gang.ident)
        if run is None or not run.aged or self.now >= until:
            del self.shields[gang.ident]  # ended, restarted without it, or ran its time
            return False
        return True

    def shield_ends(self) -> list[float]:
        """When the first protection in force ends (none: empty), a wake-up for
        preemptors; those that ended (the gang ran its time, or is no longer running) are
        forgotten on the way, so a call costs what ended, not how many are in force."""
        heap = self._shield_ends
        while heap:
            until, ident = heap[0]
            run = self.reserve.running.get(ident)
            if self.shields.get(ident) == until:
                if run is not None and run.aged and self.now < until:
                    return [until]
                del self.shields[ident]
            heapq.heappop(heap)
        return []

    @property
    def base(self) -> Timeline:
        assert self.reserve.base is not None
        return self.reserve.base

    def open(self, session: Session) -> None:
        """A new cycle: carves ranked again in this session's order."""
        self.session, self.now = session, session.now
        self.begun, self.refused, self.planned, self.unfit = set(), {}, False, set()
        if self.view is not None:
            self.view.advance(self.now)
        for carve in self.carved.values():
            carve.who.rank = carve.who.rank_in(session)

    # -- changes from outside ----------------------------------------------------------------
    def took(self, start: float, end: float, plan: Plan) -> None:
        """The running gangs' timeline took this room (a start or an overrun)."""
        if self.view is not None and self.view.take(start, end, plan):
            self.invalid = True

    def gave(self, start: float, end: float, plan: Plan) -> None:
        """The running gangs' timeline got this room back (an early end)."""
        if self.view is not None and plan and end > start:
            self.view.give_back(start, end, plan)
            self.stale = True

    # -- plan ------------------------------------------------------------------------------
    def ensure(self, *, stale_ok: bool = False) -> None:
        if self.view is None or self.invalid or (self.stale and not stale_ok):
            self.plan()

    def refuses_alike(self, unit: Unit) -> Callable[[GangInfo], bool]:
        """Would the gate refuse a gang as it refused ``unit``? A gang of ``unit``'s class
        (same pending shapes, so placed alike) later in the order ranks after it, so every
        carve ahead of ``unit`` is ahead of it too; if it also runs at least as long, it
        delays them at least as much. Not so sure when it holds a carve, ranks in a tier
        before ``unit``'s (aged, or big with ``big_first``: it may rank first) or holds room
        from a preemption."""
        assert self.session is not None
        carved, waiters, by_ident = self.carved, self.waiters, self.waiters.by_ident
        holds = self.session.state.queues.holds
        first = by_ident.get(unit.gang.ident)
        first_tier = OTHER if first is None else first.tier
        refused = self._duration(unit, carved.get(unit.gang.ident))

        def alike(gang: GangInfo) -> bool:
            ident = gang.ident
            who = by_ident.get(ident)
            if who is None or ident in carved or ident in holds or who.tier < first_tier:
                return False
            waiters.re_estimate(who)  # its estimate now, not when it was last looked at
            estimate = who.estimate
            return (math.inf if estimate is None else estimate.seconds) >= refused

        return alike

    def watched(self) -> list[str]:
        """The gangs whose failures the book notices (``failed``; a plan reserves a gang
        found unfit or parked for room only from the next time room comes back): those
        holding a carve and those a plan may pick."""
        return [*self.carved, *self.waiters.leading()]

    def stamp(self) -> Hashable | None:
        """A refusal stands while no room was taken or released, the carves did not change,
        none fell due and no re-plan is pending: the unit's placement, its rank and every
        carve ahead of it are then as they were, and time alone only makes a refusal surer
        (the unit would run later into the reserved starts). While the order is not static
        (fair shares, least slack) ranks move with any change: no stamp."""
        session = self.session
        if session is None or not session.static_order:
            return None
        if self.invalid or self.stale:
            self.epoch += 1  # a re-plan is due: refused gangs are tried against it
        due = sum(1 for carve in self.carved.values() if carve.start <= self.now)
        return (session.state.freed, session.state.taken, self.epoch, due)

    def plan(self) -> None:
        assert self.session is not None
        session, now, settings = self.session, self.now, self.settings
        before, self.carved = self.carved, {}
        self.blocked = {}
        was = _carving(before)
        self.view = self.base.copy()
        self.invalid = self.stale = False
        self.planned = True
        self.refused.clear()
        heads: dict[str, int] = {}
        every = settings.mode == "conservative"
        for who in self.waiters.picks(session):
            held = heads.get(who.queue, 0)
            if not (every or who.aged or held < settings.depth):
                continue
            found = self._earliest(who)
            room_at = queue_room_at(
                session, who.gang, who.requests, self.reserve.running.values(), self.held
            )
            if settings.mode == "strict" and room_at > now:
                continue  # held by its queue's limit it blocks nobody, as in Slurm
            if found is not None and room_at > found[0]:
                found = self._from(who, room_at)  # its queue has room only then
            if found is None:
                if settings.mode == "strict":
                    self.blocked[who.gang.ident] = who
                    heads[who.queue] = held + 1
                continue
            start, plan = found
            if start <= now and (
                who.gang.backoff_until > now
                or who.gang.ident in self.unfit
                or session.state.parked_for_room(who.gang.ident)
            ):
                # in a timeout backoff, or found no room now (filters, topology, or room a
                # unit being admitted takes): no intent now, a reservation when room comes
                # back (or its backoff ends)
                found = self._later(who)
                if found is None:
                    continue
                start, plan = found
            if start > now:
                heads[who.queue] = held + 1
            self._carve(Carve(who, start, plan, intent=start <= now))
        for ident, carve in before.items():
            if ident not in self.carved and not carve.who.gone:
                carve.who.told = None  # no longer reserved: tell its start again
        if _carving(self.carved) != was:
            self.epoch += 1

    def _earliest(self, who: Candidate) -> Found:
        """The earliest start of ``who`` on the view. Until the plan carves, the view holds
        what the running gangs' timeline holds: an answer found on that timeline in an
        earlier plan is reused while it stands (:class:`Memo`)."""
        view = self.view
        assert view is not None

        def search() -> Found:
            return view.earliest(who.requests, who.masks, who.duration, domains=who.domains)

        if self.carved:
            return search()
        return self._found.earliest((who.shape, who.duration), self.base.version, self.now, search)

    def _later(self, who: Candidate) -> tuple[float, Plan] | None:
        """The earliest start of ``who`` after now (and after its timeout backoff)."""
        if who.gang.backoff_until > self.now:
            return self._from(who, who.gang.backoff_until)
        assert self.view is not None
        return self.view.earliest(
            who.requests, who.masks, who.duration, after=self.now, domains=who.domains
        )

    def _from(self, who: Candidate, at: float) -> Found:
        """The earliest start of ``who`` at ``at`` or later (∞: none)."""
        assert self.view is not None
        return self.view.earliest_from(
            at, who.requests, who.masks, who.duration, domains=who.domains
        )

    def _carve(self, carve: Carve) -> None:
        assert self.view is not None
        self.carved[carve.who.gang.ident] = carve
        self.view.take(carve.start, carve.end, carve.plan, check=False)

    def _uncarve(self, carve: Carve) -> None:
        assert self.view is not None
        self.epoch += 1
        del self.carved[carve.who.gang.ident]
        self.view.give_back(carve.start, carve.end, carve.plan)

    # -- the gate --------------------------------------------------------------------------
    def nodes_for(self, unit: Unit) -> dict[str, int]:
        """Pod key → node of the unit's reservation when it is due now: a gang that held a
        reservation starts on the nodes it kept for it (others are placed by the scores)."""
        own = self.carved.get(unit.gang.ident)
        self._ranked = None
        assert self.session is not None
        if self._placed[0] is not unit and not self.session.static_order:
            self._placed = (unit, self._before(unit))  # before it is placed (``_standing``)
        if self.carved or self.blocked or self.invalid or self.stale:
            # ranked before the unit's pods are allocated: once they are, a waiting gang
            # looks ready, and would be ranked as elastic growth behind every reservation
            # (a gang with a carve now may lose it when the gate plans again), and in strict
            # mode behind its own entry among ``blocked``: it then waited behind itself
            self._ranked = (unit, self._rank(unit))
        if own is None or own.intent or own.start > self.now:
            return {}
        return {pod.key: slot.node for pod, slot in zip(own.who.pods, own.plan, strict=True)}

    def admits(self, unit: Unit, stmt: Statement) -> str | None:
        calls = self._judged[1] + 1 if self._judged[0] is unit else 1
        self._judged = (unit, calls)
        if calls > 1:  # several placements of one unit (domains): not one refusal to keep
            self._stands.pop(unit.gang.ident, None)
        if not self.carved and not self.blocked and not self.invalid and not self.stale:
            return None
        assert self.session is not None
        if unit.gang.ident in self.session.state.queues.holds:
            return None  # its victims were evicted for it: the room is its own
        if self.stale and not self.invalid and self._first_of_picks(unit):
            return None  # no plan, however fresh, has a reservation ahead of it
        self.ensure()
        own = self.carved.get(unit.gang.ident)
        rank = self._rank_of_unit(unit, own)
        blocker = next((b for b in self.blocked.values() if b.rank < rank), None)
        if blocker is not None:
            return f"strict order: waits behind {blocker.gang.key} (its start is unknown)"
        ahead = [c for c in self.carved.values() if c is not own and c.who.rank < rank]
        if not ahead:
            return None
        if self.settings.mode == "strict":
            first = next((c for c in ahead if c.start > self.now), None)
            if first is not None:
                return f"strict order: waits behind the reservation of {first.who.gang.key}"
        duration = self._duration(unit, own)
        end = self.now + duration
        if all(c.start > self.now and end <= c.start + self.slack(c) for c in ahead):
            return None  # ends before any reservation ahead starts
        shape = (b"".join(pod.request.tobytes() for pod in unit.pods), len(ahead))
        known = self.refused.get(shape)
        if known is not None and duration >= known[0]:
            self._keep(unit, own, rank, calls, None)  # refused as a gang of its shape was
            return known[1]
        refusal = self._trial(sorted(ahead, key=lambda c: c.who.rank), end, stmt)
        if refusal is not None and (known is None or duration < known[0]):
            self.refused[shape] = (duration, refusal)
        if refusal is not None:
            self._keep(unit, own, rank, calls, refusal)
        return refusal

    # -- refusals under an order that moves (fair shares) ---------------------------------
    # With a static order a refused gang is parked until ``stamp`` moves. Fair shares move
    # the ranks with any change of usage, so there the gang stays in the queue, is ordered
    # every cycle, and its refusal by ``_trial`` is kept with what it rests on
    # (``_standing``): while that is equal, the same placement would meet the same carves
    # in the same order on the same timeline, and is not made again.
    def standing_refusal(self, unit: Unit) -> str | None:
        """What ``admits`` would answer for ``unit`` now, when its last refusal still stands
        (None: unknown, make the attempt). It is answered as ``admits`` does: with the
        refusal of a gang of its shape this cycle, if there is one, else with the refusal its
        own trial gave, which later gangs of its shape then get."""
        kept = self._stands.get(unit.gang.ident)
        if kept is None:
            return None
        own = self.carved.get(unit.gang.ident)
        standing = self._standing(unit, own, self._rank_of_unit(unit, own), self._before(unit))
        if standing is None or standing != kept[0]:
            del self._stands[unit.gang.ident]
            return None
        shape = (b"".join(pod.request.tobytes() for pod in unit.pods), len(standing.ahead))
        known = self.refused.get(shape)
        if known is not None and standing.duration >= known[0]:
            return known[1]
        if kept[1] is None:  # it was refused as a gang of its shape was: only a trial knows
            return None
        self.refused[shape] = (standing.duration, kept[1])
        return kept[1]

    def _keep(
        self, unit: Unit, own: Carve | None, rank: Rank, calls: int, refusal: str | None
    ) -> None:
        """Keep ``unit``'s refusal with what it rests on (None: it was the refusal of a gang
        of its shape this cycle, which answers for it only while there is one)."""
        before = self._placed[1] if self._placed[0] is unit else None
        standing = None if calls > 1 else self._standing(unit, own, rank, before)
        if standing is not None:
            self._stands[unit.gang.ident] = (standing, refusal)

    def _before(self, unit: Unit) -> _Before:
        """What ``unit``'s placement starts from besides the room (read before it is placed:
        placing its pods moves its gang): the tie-break draws, its gang's members and spec."""
        assert self.session is not None
        gang = unit.gang
        return (self.session.rng.bit_generator.state, gang.generation, gang.placed, gang.spec)

    def _standing(
        self, unit: Unit, own: Carve | None, rank: Rank, before: _Before | None
    ) -> _Standing | None:
        """What a refusal of ``unit`` (ranked ``rank``) rests on when the order is not
        static (None: nothing to keep): the stamp's parts (room taken or released, the
        carves, those due, no re-plan pending), the nodes and queue objects, the running
        gangs' timeline, the held room, the unit's pods, its estimate (as ``admits`` takes
        it), the carves ranked ahead of it in order with their starts, and what its placement
        started from (``before``); only while nothing was placed or evicted this cycle (the
        room is then the state's, which ``freed`` and ``taken`` cover). Time alone only
        makes a refusal surer (see ``stamp``)."""
        session = self.session
        assert session is not None
        result, state = session.result, session.state
        if not state.hints:
            return None  # the coarse reference: every refused gang is attempted every cycle
        if session.static_order or self.invalid or self.stale or self.blocked or self.begun:
            return None
        if result.binds or result.evictions or result.reservations:
            return None
        holds = state.queues.holds
        if unit.gang.ident in holds or self.settings.mode == "strict" or before is None:
            return None
        ahead = sorted(
            (c for c in self.carved.values() if c is not own and c.who.rank < rank),
            key=lambda c: c.who.rank,
        )
        world = (
            state.freed,
            state.taken,
            state.table.facts,  # the nodes (a node added, changed or removed)
            state.queues.generation,
            self.epoch,
            sum(1 for carve in self.carved.values() if carve.start <= self.now),
            self.base.version,
            tuple(holds),
            tuple(unit.pods),  # a pod changed is a new one, a pending pod resized too
            before,
        )
        ahead_of = tuple((c.who.gang.ident, c.start, c.who.duration, c.intent) for c in ahead)
        return _Standing(world, self._duration(unit, own), ahead_of)

    def _rank_of_unit(self, unit: Unit, own: Carve | None) -> Rank:
        if own is not None:
            return own.who.rank
        if self._ranked is not None and self._ranked[0] is unit:
            return self._ranked[1]
        return self._rank(unit)

    def _first_of_picks(self, unit: Unit) -> bool:
        """Does ``unit`` rank ahead of every gang a plan may reserve for, and of every carve?
        Then a stale plan (room came back since it was made) need not be made again for it:
        reservations only move earlier, and none can rank ahead of it. The re-plan waits for
        a gate decision that needs it (the gangs a plan picks are few, except in
        ``conservative`` mode, where every waiting gang is one: there it is made now)."""
        assert self.session is not None
        if self.settings.mode == "conservative":
            return False
        ident = unit.gang.ident
        rank = self._rank_of_unit(unit, self.carved.get(ident))
        if any(c.who.rank < rank for i, c in self.carved.items() if i != ident):
            return False
        picks = self.waiters.picks(self.session)
        return all(rank < who.rank for who in picks if who.gang.ident != ident)

    def _trial(self, ahead: list[Carve], end: float, stmt: Statement) -> str | None:
        trial = self.base.copy()
        trial.take(self.now, end, plan_of(stmt), check=False)
        for carve in ahead:
            who = carve.who
            until = carve.start + self.slack(carve)
            found = trial.earliest(
                who.requests, who.masks, who.duration, until=until, domains=who.domains
            )
            if found is None:
                assert self.session is not None
                return (
                    f"would delay the reservation of {who.gang.key} "
                    f"(start {clock(carve.start, self.now)} on "
                    f"{nodes_text(self.session.table, [s.node for s in carve.plan])})"
                )
            trial.take(found[0], found[0] + who.duration, found[1], check=False)
        return None

    def slack(self, carve: Carve) -> float:
        """How much later than its reserved start a backfill may make ``carve`` start
        (relaxed backfill): ``slack`` × the time until that start when the start rests on
        learned estimates (``_guessed``) and ``carve`` is not a big head ranked first
        (``big_first``), else none. Learned medians under-estimate heavy-tailed runtimes:
        such a start is mostly later than it looks, and holding its room idle for it costs
        more than a bounded delay; a big head's reservation stays strict, as it is what keeps
        the big gangs from starving."""
        if self.settings.slack <= 0 or carve.start <= self.now or not self.reserve.learned:
            return 0.0
        if carve.who.big:
            return 0.0  # a big head's reservation is what keeps big gangs from starving
        if carve.slack is None or carve.slack[0] != self.now:
            value = self.settings.slack * (carve.start - self.now) if self._guessed(carve) else 0.0
            carve.slack = (self.now, value)
        return carve.slack[1]

    def _guessed(self, carve: Carve) -> bool:
        """Does ``carve``'s start rest on learned estimates: is a running gang with a learned
        estimate expected to end by then on a node it reserved?"""
        nodes = {slot.node for slot in carve.plan}
        return any(
            run.learned and run.end <= carve.start and any(s.node in nodes for s in run.plan)
            for run in self.reserve.running.values()
        )

    def started(self, unit: Unit, stmt: Statement) -> None:
        gang = unit.gang
        own = self.carved.get(gang.ident)
        who = self.waiters.by_ident.get(gang.ident)
        duration = self._duration(unit, own)
        if own is not None:
            self._uncarve(own)
            # the picks changed: the next gang of its queue may now hold a reservation
            self.invalid |= not own.intent or self._short_of_heads(own.who.queue)
        elif self.blocked.pop(gang.ident, None) is not None:
            self.invalid = True  # the next gang of its queue is now the head
        self.begun.add(gang.ident)
        self._stands.pop(gang.ident, None)
        self.waiters.drop(gang.ident)
        self.refused.clear()
        ops = [op for op in stmt.operations if op.op is Op.ALLOCATE]
        plan = tuple(Slot(op.node, op.pod.request, op.gpus) for op in ops)
        source = "no estimate" if who is None or who.estimate is None else None
        source = source or f"estimate: {who.estimate.source}"  # type: ignore[union-attr]
        # it ranked ahead of every gang not aged (or, big with ``big_first``, of every other
        # gang of its queue, higher priorities too): its rank is not to be undone by preemption
        aged = who is not None and (who.aged or who.big)
        self.reserve.started(gang, [op.pod for op in ops], plan, self.now + duration, source)
        self.reserve.running[gang.ident].aged |= aged
        if aged:
            window = duration if math.isfinite(duration) else self.settings.aging or 0.0
            if who is not None and who.estimate is not None and who.estimate.source == POOLED:
                window = max(window, self.settings.aging or 0.0)  # not its own shape's runtimes
            self.shields[gang.ident] = self.now + window
            heapq.heappush(self._shield_ends, (self.now + window, gang.ident))

    def _short_of_heads(self, queue: str) -> bool:
        """Does ``queue`` hold fewer reservations than ``depth`` (its picks may all have
        fitted now, as intents, leaving the gangs behind them unseen)?"""
        held = sum(1 for c in self.carved.values() if not c.intent and c.who.queue == queue)
        return held < self.settings.depth

    def failed(self, unit: Unit) -> None:
        self.unfit.add(unit.gang.ident)
        own = self.carved.get(unit.gang.ident)
        if own is not None and own.start <= self.now:
            self._uncarve(own)  # it did not fit after all: no intent to hold
            self.stale = True

    def _rank(self, unit: Unit) -> Rank:
        """A waiting gang's rank; elastic growth of a ready gang ranks after every reservation
        (it is optional: it never takes what a reservation needs)."""
        assert self.session is not None
        if unit.gang.ready():
            return rank_of(self.session, unit, GROWTH)
        who = self.waiters.by_ident.get(unit.gang.ident)
        return rank_of(self.session, unit, OTHER if who is None else who.tier)

    def _duration(self, unit: Unit, own: Carve | None) -> float:
        if own is not None:
            return own.who.duration
        who = self.waiters.by_ident.get(unit.gang.ident)
        if who is not None:
            self.waiters.re_estimate(who)  # its estimate now, not when it was last looked at
            return who.duration
        run = self.reserve.running.get(unit.gang.ident)
        if run is not None:  # elastic growth: until the gang's estimated end
            return max(run.end - self.now, 0.0)
        estimate = self.reserve.estimates.estimate(unit.gang)
        return math.inf if estimate is None else estimate.seconds

    def held(self) -> list[Held]:
        """The carves made so far, as capped queues see them (:mod:`~phalanx.actions.queueroom`)."""
        return [Held(c.who.gang, c.end, c.who.requests) for c in self.carved.values()]

    def reserved(self) -> list[Carve]:
        return [c for c in self.carved.values() if not c.intent and c.start > self.now]


class _Ends(Mapping[str, float]):
    def __init__(self, reserve: Reserve) -> None:
        self._running = reserve.running

    def __getitem__(self, ident: str) -> float:
        return self._running[ident].end

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)


def _carving(carved: dict[str, Carve]) -> list[tuple[object, ...]]:
    """What the gate's decisions read of the carves: who, in rank order, when and where."""
    return [
        (c.who.rank, ident, c.start, c.who.duration, c.intent, [(s.node, s.gpus) for s in c.plan])
        for ident, c in sorted(carved.items(), key=lambda item: item[1].who.rank)
    ]


def plan_of(stmt: Statement) -> Plan:
    return tuple(
        Slot(op.node, op.pod.request, op.gpus) for op in stmt.operations if op.op is Op.ALLOCATE
    )
