"""The reservation book of one cycle: Slurm's backfill algorithm over gangs.

``plan`` walks the waiting gangs in rank order on the timeline (running gangs end at their
estimated ends). Each gang that may hold a reservation — in ``easy`` mode the first ``depth``
of each queue that cannot start now (and are at least ``min_gpus`` GPUs) plus every gang past
the aging threshold; in ``conservative`` mode every waiting gang — is *carved* into the
timeline at the earliest time it fits, on the nodes it would use then. A gang that fits now
and ranks before a reservation is carved too, as an *intent*, so the reservation behind it
accounts for it.

As the session's gate, the book admits a placement only if every carve ranked ahead of the
unit can still be placed no later than its reserved start with the unit running until its
estimated end (no estimate: forever) — the unit uses room no reservation needs, or ends in
time; elastic growth of a gang already running ranks after every reservation. ``strict`` mode
(``fifo-reserve``) admits nothing ranked after a reservation. A gang whose reservation is due
starts on the nodes it reserved (``nodes_for``). When a unit starts, the carves are placed
again in rank order: reservations move.

Known gap: a gang's unit places its members beyond ``minMember`` in the same statement as its
minimum; a reservation ranked behind it assumed only the minimum, so it may move later.

``finish`` gives every waiting gang its expected start (its carve's start, or the earliest
time it fits after all carves) and the reason, and asks for a cycle at every reserved start so
that an overrun moves the reservation even when nothing else happens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from phalanx.actions.candidates import Candidate, Rank, clock, nodes_text
from phalanx.actions.timeline import Plan, Slot, Timeline
from phalanx.cluster.workloads import GangInfo
from phalanx.framework.session import Session
from phalanx.framework.statement import Op, Statement
from phalanx.framework.unit import Unit


@dataclass(frozen=True, slots=True)
class Settings:
    mode: str = "easy"  # easy | conservative | strict
    depth: int = 1  # reservations per queue (easy, strict)
    aging: float | None = None  # seconds of waiting after which every gang is reserved
    min_gpus: float = 0.0  # easy: head reservations only for gangs at least this big


@dataclass(eq=False, slots=True)
class Carve:
    who: Candidate
    start: float
    plan: Plan
    intent: bool = False  # carved as fitting now, not as a reservation

    @property
    def end(self) -> float:
        return self.start + self.who.duration


class Book:
    def __init__(
        self,
        session: Session,
        base: Timeline,
        settings: Settings,
        enders: dict[float, list[str]],
        held: frozenset[str] = frozenset(),
    ) -> None:
        self.session = session
        self.held = held  # gangs that held a reservation at the end of the last cycle
        self.now = session.now
        self.base = base  # running gangs and this cycle's starts; no carves
        self.view = base.copy()  # base and every carve
        self.settings = settings
        self.enders = enders
        self.ends: dict[str, float] = {}  # running gang ident → its estimated end (preemption)
        self.carves: list[Carve] = []
        self.waiting: list[Candidate] = []
        self.begun: set[str] = set()
        #: pod shapes refused this cycle → the shortest duration refused (a longer run of the
        #: same shape, placed alike, delays the same reservation at least as much)
        self.refused: dict[tuple[bytes, int], tuple[float, str]] = {}

    # -- plan ------------------------------------------------------------------------------
    def plan(self, candidates: list[Candidate]) -> None:
        self.waiting = sorted(candidates, key=lambda c: c.rank)
        heads: dict[str, int] = {}
        conservative = self.settings.mode == "conservative"
        for who in self.waiting:
            held = heads.get(who.queue, 0)
            if not (conservative or who.aged or held < self.settings.depth):
                continue
            found = self.view.earliest(who.requests, who.masks, who.duration, domains=who.domains)
            if found is None:
                continue
            start, plan = found
            if start <= self.now and who.gang.backoff_until > self.now:
                continue  # in a timeout backoff: it will not start now, nor hold room
            if start > self.now:
                if not (conservative or who.aged or who.gpus >= self.settings.min_gpus):
                    continue
                heads[who.queue] = held + 1
            self._carve(Carve(who, start, plan, intent=start <= self.now))

    def _carve(self, carve: Carve) -> None:
        self.carves.append(carve)
        self.view.take(carve.start, carve.end, carve.plan)

    def _replan(self) -> None:
        """Place every carve again, in rank order, on the base timeline."""
        carves, self.carves = sorted(self.carves, key=lambda c: c.who.rank), []
        self.view = self.base.copy()
        keeps = self.settings.mode == "conservative"
        for carve in carves:
            who = carve.who
            found = self.view.earliest(who.requests, who.masks, who.duration, domains=who.domains)
            if found is None:
                continue
            if carve.intent and found[0] > self.now and not (keeps or carve.who.aged):
                continue  # it no longer fits now, and it never held a reservation
            self._carve(Carve(carve.who, *found, intent=carve.intent))

    def own(self, gang: GangInfo) -> Carve | None:
        return next((c for c in self.carves if c.who.gang is gang), None)

    # -- the gate --------------------------------------------------------------------------
    def nodes_for(self, unit: Unit) -> dict[str, int]:
        """Pod key → node of the unit's reservation when it is due now: a gang that held a
        reservation starts on the nodes it kept for it (others are placed by the scores)."""
        own = self.own(unit.gang)
        if own is None or own.start > self.now or unit.gang.ident not in self.held:
            return {}
        return {pod.key: slot.node for pod, slot in zip(own.who.pods, own.plan, strict=True)}

    def admits(self, unit: Unit, stmt: Statement) -> str | None:
        own = self.own(unit.gang)
        rank = own.who.rank if own is not None else self._rank(unit)
        ahead = [c for c in self.carves if c is not own and c.who.rank < rank]
        if not ahead:
            return None
        if self.settings.mode == "strict":
            first = next((c for c in ahead if c.start > self.now), None)
            if first is not None:
                return f"strict order: waits behind the reservation of {first.who.gang.key}"
        duration = self._duration(unit, own)
        end = self.now + duration
        if all(c.start > self.now and end <= c.start for c in ahead):
            return None  # ends before any reservation ahead starts
        shape = (b"".join(pod.request.tobytes() for pod in unit.pods), len(ahead))
        known = self.refused.get(shape)
        if known is not None and duration >= known[0]:
            return known[1]
        refusal = self._trial(ahead, end, stmt)
        if refusal is not None and (known is None or duration < known[0]):
            self.refused[shape] = (duration, refusal)
        return refusal

    def _trial(self, ahead: list[Carve], end: float, stmt: Statement) -> str | None:
        trial = self.base.copy()
        trial.take(self.now, end, plan_of(stmt))
        for carve in ahead:
            who = carve.who
            found = trial.earliest(
                who.requests, who.masks, who.duration, until=carve.start, domains=who.domains
            )
            if found is None:
                return (
                    f"would delay the reservation of {who.gang.key} "
                    f"(start {clock(carve.start, self.now)} on "
                    f"{nodes_text(self.session.table, [s.node for s in carve.plan])})"
                )
            trial.take(found[0], found[0] + who.duration, found[1])
        return None

    def started(self, unit: Unit, stmt: Statement) -> None:
        own = self.own(unit.gang)
        end = self.now + self._duration(unit, own)
        self.base.take(self.now, end, plan_of(stmt))
        who = next((c for c in self.waiting if c.gang is unit.gang), None)
        source = "no estimate" if who is None else _source(who)
        self.enders.setdefault(end, []).append(f"{unit.gang.key} ({source})")
        self.begun.add(unit.gang.ident)
        if own is not None:
            self.carves.remove(own)
        self.refused.clear()
        self._replan()

    def failed(self, unit: Unit) -> None:
        own = self.own(unit.gang)
        if own is not None and own.start <= self.now:
            self.carves.remove(own)  # it did not fit after all: no intent to hold
            self._replan()

    def _rank(self, unit: Unit) -> Rank:
        """A waiting gang's rank; elastic growth of a ready gang ranks after every reservation
        (it is optional: it never takes what a reservation needs)."""
        found = next((c for c in self.waiting if c.gang is unit.gang), None)
        if found is not None:
            return found.rank
        return (2.0 if unit.gang.ready() else 1.0, *self.session.order_key(unit))

    def _duration(self, unit: Unit, own: Carve | None) -> float:
        if own is not None:
            return own.who.duration
        found = next((c for c in self.waiting if c.gang is unit.gang), None)
        return found.duration if found is not None else math.inf

    def reserved(self) -> frozenset[str]:
        return frozenset(c.who.gang.ident for c in self.carves if not c.intent)

    # -- expected starts -------------------------------------------------------------------
    def finish(self) -> None:
        result = self.session.result
        cache: dict[tuple[bytes, float], tuple[float, Plan] | None] = {}
        for who in self.waiting:
            gang = who.gang
            if gang.ident in self.begun:
                continue
            carve = self.own(gang)
            if carve is not None:
                expected: float | None = carve.start
                why = self._why(carve.start, carve.plan, reserved=True)
            else:
                key = (who.shape, who.duration)
                if key not in cache:
                    cache[key] = self.view.earliest(
                        who.requests, who.masks, who.duration, domains=who.domains
                    )
                found = cache[key]
                expected = None if found is None else found[0]
                why = self._unknown() if found is None else self._why(*found, reserved=False)
            why += self._deadline(who, expected)
            gang.expected_start, gang.expected_reason = expected, why
            result.expected[gang.ident] = (expected, why)
            condition = result.waiting.get(gang.ident)
            if condition is not None and condition.type == "Unschedulable":
                condition.message += f"; expected start: {why}"
        result.recheck_at.extend(c.start for c in self.carves if c.start > self.now)
        aging = self.settings.aging
        if aging is not None:
            ages = [c.gang.created + aging for c in self.waiting if not c.aged]
            if ages:
                result.recheck_at.append(min(ages))

    def _why(self, start: float, plan: Plan, *, reserved: bool) -> str:
        where = nodes_text(self.session.table, [slot.node for slot in plan])
        if start <= self.now:
            return f"fits now on {where}" if reserved else f"room now on {where}"
        ends = self.enders.get(start, []) + [
            f"{c.who.gang.key} (reserved, {_source(c.who)})" for c in self.carves if c.end == start
        ]
        cause = f" when {', '.join(ends[:2])} ends" if ends else ""
        kind = "reserved" if reserved else "estimated (not reserved)"
        return f"{kind}: {where} free at {clock(start, self.now)}{cause}"

    def _unknown(self) -> str:
        blind = self.enders.get(math.inf, [])
        detail = f" (e.g. {', '.join(blind[:2])})" if blind else ""
        return f"unknown: no estimate for what holds the room it needs{detail}"

    def _deadline(self, who: Candidate, expected: float | None) -> str:
        spec = who.gang.spec
        if spec is None or spec.deadline is None:
            return ""
        due = spec.deadline.due(who.gang.created)
        if expected is None or math.isinf(who.duration):
            return f"; deadline {clock(due, self.now)}: finish unknown"
        finish = expected + who.duration
        slack = due - finish
        if slack < 0:
            return f"; will miss its deadline {clock(due, self.now)} by {-slack:.0f}s"
        return f"; expected finish {clock(finish, self.now)}, slack {slack:.0f}s"


def _source(who: Candidate) -> str:
    return "no estimate" if who.estimate is None else f"estimate: {who.estimate.source}"


def plan_of(stmt: Statement) -> Plan:
    return tuple(
        Slot(op.node, op.pod.request, op.gpus) for op in stmt.operations if op.op is Op.ALLOCATE
    )
