"""Take-back: the machinery ``preempt`` and ``reclaim`` share (:mod:`phalanx.actions.preempt`,
:mod:`phalanx.actions.reclaim`); each supplies only its victims and its rule.

Both run after ``allocate``, over the gangs waiting for room (``NotEnoughResources``): those
it just failed and those parked after an earlier failure, best first, at most
``MAX_PREEMPTORS`` per cycle. For each, the
:class:`~phalanx.actions.victims.Planner` plans the gang's minimum with victims; when it fits,
the evictions are committed, the preemptor's placement is pipelined for the rest of the cycle
(so no later preemptor plans on the same room), and a hold is recorded so the freed room is
kept for it until its victims are gone (``QueueBook.holds``); a wake-up at once lets the
simulator bind it in the next cycle of the same instant. A preemptor whose pods say
``preemptionPolicy: Never`` (their own, or their PriorityClass's, as admission copies it; or
annotation ``phalanx.dev/preemption-policy: Never``) never preempts.

With the ``topology`` placement, the plan is made inside the domains of the gang's constraint
(``TopologyPlacement.preemption_domains``); with a reservation action, a plan that would delay
a reservation ranked ahead of the preemptor is no plan (:mod:`phalanx.actions.guard`).

**Cost follows change** (queueing hints, on unless ``ClusterState.hints`` is off). An attempt
is skipped — it would fail, so the decisions are those of planning every one — when its
victim class (preempt: queue and priority; reclaim: queue) has no candidates (a per-queue
lowest running priority tells preempt at once), when the room with every candidate evicted
cannot hold the minimum (:func:`~phalanx.actions.victims.could_fit`, numpy over nodes), or
when a gang of the same failure class already failed in an unchanged world
(:class:`~phalanx.cluster.hints.Failures`: the stamp moves when room is freed or released,
room held for a preemptor is given up or held anew, the candidates change — a lower gang
started, a victim's min-runtime ran out —, queue shares or objects change, or, with
disruption budgets, any pod changes; a plan the guard refused, as it would delay a
reservation, only for the rest of its cycle and only for preemptors the guard reads alike:
the same carves ranked ahead of them and the same estimated runtime, which are not part of
the failure class — a gang of the class estimated to end sooner may pass where another was
refused, :func:`~phalanx.actions.guard.guard_reads`). An attempt whose minimum fits with
no victim (no plan: nothing to take) is not remembered: binds leave the stamp as it is, as
they only take room away, but taking that room is what makes victims needed. Skipped attempts
still count towards ``MAX_PREEMPTORS`` in order, as failed ones do; when every attempt of a
cycle is known to fail, none is ordered at all, and parked gangs are not even listed when no
gang below the highest waiting priority ever ran (``QueueBook.lowest_priority``). Running
gangs are listed again only after binds, releases or evictions.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from functools import partial

import numpy as np

from phalanx.actions.guard import delays_reservation, guard_reads, shield_ends, shielded
from phalanx.actions.victims import (
    Chunk,
    Domains,
    Plan,
    Planner,
    chunks,
    could_fit,
    eligible_at,
)
from phalanx.cluster.hints import Failures
from phalanx.cluster.queues import Hold, QueueBook
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
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


@dataclass(slots=True)
class _Victims:
    """The candidates of one victim class in this cycle, and their fingerprint."""

    chunks: list[Chunk]
    fingerprint: Hashable
    stamp: Hashable = None  # the world's stamp for attempts against them (set when needed)


class Takeback:
    """The shared attempt loop; subclasses give ``candidates``, ``victim_class`` and
    ``allows`` (and, optionally, the quick tests and ``rule_stamp``)."""

    name = "preempt"
    reason = "preempt"
    gang_aware = True

    def __init__(self) -> None:
        self.predicates = Predicates()
        #: the earliest time a victim refused for its min-runtime becomes eligible
        self.recheck_at = float("inf")
        self.failures = Failures()  # attempts known to fail (queueing hints)
        #: failure class → the world of this cycle and what the guard read of the preemptors
        #: whose every plan it refused there (``guard_reads``)
        self._guarded: dict[Hashable, tuple[Hashable, set[Hashable]]] = {}
        self._cycle = 0
        self._victims: dict[Hashable, _Victims] = {}  # per victim class, this cycle
        self._running: list[GangInfo] | None = None  # this cycle's running gangs
        self._floor: dict[str, int] | None = None  # per queue, its lowest running priority
        self._floor_at: tuple[int, int] = (0, 0)
        self._seen: tuple[int, int, int] | None = None  # what the three above were made at
        #: gang → (its spec, generation, the book's generation, its victim class)
        self._classes: dict[GangInfo, tuple[object, int, int, Hashable]] = {}
        #: gang ident → its unit and the pods it would preempt for (``_eligible_unit``)
        self._units: dict[str, tuple[Hashable, Unit | None, list[PodInfo]]] = {}

    def execute(self, session: Session) -> None:
        recheck = session.now >= self.recheck_at
        if recheck:
            self.recheck_at = float("inf")
            self.failures.clear()  # a victim's min-runtime ran out
        state = session.state
        fresh = self._fresh(session)
        if not fresh and not state.blocked:
            return
        self._cycle += 1
        self._guarded.clear()
        self._forget()
        hinted = state.hints
        book = state.queues
        # parked gangs that cannot preempt still count in the order: looked at in full only
        # when some attempt could succeed (else, only whether one is eligible at all)
        glance = hinted and self.parked_hopeless(session)
        gangs = fresh + [u.gang for u in self._parked_units(session, first=glance)]
        if hinted and not self._any_open(session, gangs):
            return  # every attempt is known to fail (its only trace: the min-runtime wake-up)
        if glance:
            gangs = fresh + [u.gang for u in self._parked_units(session)]
        units = []
        for gang in gangs:
            unit, pods = self._eligible_unit(session, gang)
            if unit is not None and pods:
                unit.order = session.order_key(unit)
                units.append((unit, pods))
        if not units:
            return
        self._note_young(session)  # as the first attempt does, whatever its outcome
        units.sort(key=lambda pair: pair[0].order)
        for unit, pods in units[:MAX_PREEMPTORS]:
            self._try(Preemptor(session, book, unit.gang, pods), hinted)

    def _fresh(self, session: Session) -> list[GangInfo]:
        """The gangs allocate just failed for room (their priorities are noted: parked
        gangs all failed so once)."""
        state, book = session.state, session.state.queues
        gangs = []
        for ident, condition in session.result.waiting.items():
            gang = state.waiting.get(ident)
            if condition.reason != NO_ROOM or gang is None or gang.backoff_until > session.now:
                continue
            gangs.append(gang)
            self.note_waiting(book, gang)
        return gangs

    def _parked_units(self, session: Session, *, first: bool = False) -> list[Unit]:
        """Units of the gangs parked after failing for room (``first``: only the first one
        eligible to preempt, to tell whether there is one)."""
        out = []
        for gang in session.state.blocked.values():
            if gang.condition is None or gang.condition.reason != NO_ROOM:
                continue
            unit, pods = self._eligible_unit(session, gang)
            if unit is None or (first and not pods):
                continue
            out.append(unit)
            if first:
                break
        return out

    def _eligible_unit(self, session: Session, gang: GangInfo) -> tuple[Unit | None, list[PodInfo]]:
        """The gang's pending pods as a unit (those of this scheduler, unless it is parked),
        and the pods it would preempt for (``_eligible``). Both are kept while the gang, its
        members and their specs are unchanged (``GangInfo.changes``) and it holds no room:
        a long queue of parked gangs is not made again in every cycle. A gang not parked
        is made once per execute (whose pods are ours is noted in each cycle)."""
        state, ident = session.state, gang.ident
        parked = ident in state.blocked
        held = ident in state.queues.holds
        key = (
            gang.changes,
            gang.spec,
            gang.min_member,
            parked,
            held,
            self._cycle if not parked else 0,
        )
        known = self._units.get(ident)
        if known is not None and known[0] == key:
            return known[1], known[2]
        pending = gang.placeable()
        if not parked:
            pending = [p for p in pending if session.ours(p, gang)]
        unit = Unit.of_gang(gang, pending) if pending else None
        pods = [] if unit is None else _eligible(unit, state.queues)
        if len(self._units) > 2 * len(state.blocked) + 64:
            self._units = {i: k for i, k in self._units.items() if i in state.blocked}
        self._units[ident] = (key, unit, pods)
        return unit, pods

    def _any_open(self, session: Session, gangs: list[GangInfo]) -> bool:
        """Could an attempt for any of ``gangs`` succeed? When none can, nothing is placed or
        evicted whatever their order, so the only effect left is the min-runtime wake-up,
        noted if any of them is eligible to preempt."""
        book = session.state.queues
        eligible = False
        for gang in gangs:
            hopeless = self.no_victims(session, gang) or not self._victims_of(session, gang).chunks
            if hopeless and eligible:
                continue  # the common case: no victims for its class, cheap to tell
            unit, pods = self._eligible_unit(session, gang)
            if unit is None or not pods:
                continue
            eligible = True
            if not hopeless and self._open(Preemptor(session, book, gang, pods)):
                return True
        if eligible:
            self._note_young(session)
        return False

    def _open(self, who: Preemptor) -> bool:
        """Could an attempt for ``who`` succeed now (False: it is known to fail)?"""
        victims = self._candidates(who)
        if not victims.chunks:
            return False
        return not self._known(who, self._class(who), victims)

    def _known(self, who: Preemptor, key: Hashable, victims: _Victims) -> bool:
        """Did an attempt of class ``key`` fail in this world: for want of victims or room
        (whatever the reservations), or, in this cycle, because the guard refused the plans
        of a preemptor it reads alike (``guard_reads``)?"""
        stamp = self._stamp(who.session, victims)
        if self.failures.known(key, stamp):
            return True
        guarded = self._guarded.get(key)
        if guarded is None or guarded[0] != (stamp, self._cycle):
            return False
        return guard_reads(who.session, who.gang, who.pods) in guarded[1]

    def _try(self, who: Preemptor, hinted: bool) -> None:
        session = who.session
        victims = self._candidates(who)
        if not victims.chunks:
            return
        if hinted:
            key, stamp = self._class(who), self._stamp(session, victims)
            if self._known(who, key, victims):
                return
            if not could_fit(who.pods, victims.chunks, session.table, self.predicates):
                self.failures.failed(key, stamp)
                return
        domains = _domains(who)
        guarded: list[Plan] = []  # plans the guard refused (they would delay a reservation)

        def accept(plan: Plan) -> bool:
            if delays_reservation(session, who.gang, who.pods, plan) is None:
                return True
            guarded.append(plan)
            return False

        planner = Planner(session, self.predicates)
        plan = planner.plan(
            who.pods,
            victims.chunks,
            partial(self.allows, who),
            minimal=self.gang_aware,
            domains=domains,
            accept=accept,
        )
        if plan is not None:
            self._commit(session, who.gang, plan, pin=domains is None)
            self._forget(evicted=True)
            self._units = {}  # the preemptor's pods are pipelined, its room held
        elif hinted and guarded:
            # the reservations move with every cycle: a refusal of the guard holds for this
            # cycle only, and for preemptors it reads alike (the carves ranked ahead of them
            # and their estimated runtime: not part of the failure class)
            world = (stamp, self._cycle)
            known = self._guarded.get(key)
            if known is None or known[0] != world:
                known = self._guarded[key] = (world, set())
            known[1].add(guard_reads(session, who.gang, who.pods))
        elif hinted and not planner.unneeded:
            # a failure for want of victims or room holds as it would without reservations;
            # not when the pods fit with no victim (no plan: nothing to take): a bind that
            # takes that room, which the stamp does not follow, makes victims needed
            self.failures.failed(key, stamp)

    # -- what an attempt depends on ------------------------------------------------------------
    def _candidates(self, who: Preemptor) -> _Victims:
        return self._victims_of(who.session, who.gang)

    def _victims_of(self, session: Session, gang: GangInfo) -> _Victims:
        key = self._key(session, gang)
        known = self._victims.get(key)
        if known is None:
            found = self.candidates(Preemptor(session, session.state.queues, gang, []))
            fingerprint = tuple((c.gang.ident, tuple(p.key for p in c.pods)) for c in found)
            known = self._victims[key] = _Victims(found, fingerprint)
        return known

    def _key(self, session: Session, gang: GangInfo) -> Hashable:
        """The gang's victim class, and whether it may take protected gangs (guard)."""
        return (self._victim_class(session.state.queues, gang), shielded(session, gang) is None)

    def chunks_of(self, who: Preemptor, gangs: list[GangInfo]) -> list[Chunk]:
        """The candidate chunks of ``gangs`` for ``who``: whole gangs only if gang-aware, and
        never one protected from it by the reservation it started on (guard)."""
        session = who.session
        spare = shielded(session, who.gang)
        return chunks(gangs, session.table.gpu_col, session.now, whole=self.gang_aware, spare=spare)

    def _victim_class(self, book: QueueBook, gang: GangInfo) -> Hashable:
        """``victim_class``, memoised while the gang's members, spec and the queues stay."""
        known = self._classes.get(gang)
        if (
            known is not None
            and known[0] is gang.spec
            and known[1] == gang.generation
            and known[2] == book.generation
        ):
            return known[3]
        if len(self._classes) > 1 << 17:
            self._classes.clear()
        victim_class = self.victim_class(book, gang)
        self._classes[gang] = (gang.spec, gang.generation, book.generation, victim_class)
        return victim_class

    def _class(self, who: Preemptor) -> Hashable:
        """The failure class: what the attempt reads of the preemptor."""
        shapes = tuple(
            (p.request.tobytes(), p.spec.placement, p.invalid or "", p.spec.topology)
            for p in who.pods
        )
        spec = who.gang.spec
        topology = None if spec is None else (spec.topology, tuple(spec.role_topology.items()))
        return (self._key(who.session, who.gang), shapes, topology)

    def _stamp(self, session: Session, victims: _Victims) -> Hashable:
        """What an attempt reads of the world, besides the preemptor (see ``Failures``)."""
        if victims.stamp is None:
            victims.stamp = self._world(session, victims)
        return victims.stamp

    def _world(self, session: Session, victims: _Victims) -> Hashable:
        state, table, book = session.state, session.table, session.state.queues
        claims = self._cycle if table.pipelined.any() else 0  # pipelined room: this cycle only
        budgets = state.version if book.budgets else 0  # budgets count every pod's status
        held = tuple(book.holds)  # room held for a preemptor is no other gang's
        room = (state.freed, int(table.releasing.sum()), claims, held)
        return (room, victims.fingerprint, book.generation, budgets, self.rule_stamp(book))

    def _forget(self, *, evicted: bool = False) -> None:
        """A new cycle (or evictions): per-cycle facts are computed again; the running
        gangs only if binds, releases or evictions may have changed them."""
        self._victims.clear()
        if evicted:
            self._seen = None

    def _current(self, session: Session) -> None:
        state = session.state
        seen = (state.queues.binds, state.freed, int(session.table.releasing.sum()))
        if seen != self._seen:
            self._seen, self._running, self._floor = seen, None, None

    def running(self, session: Session) -> list[GangInfo]:
        """The running gangs this scheduler may take from: only those of the pods it places
        (as Volcano and KAI take victims only among their own jobs). A pod another scheduler
        placed is not its to evict: evicted, it went back to that scheduler, which put it
        straight back into the room the preemptor was to get."""
        self._current(session)
        if self._running is None:
            names = session.config.scheduler_names
            self._running = [
                gang
                for gang in session.state.queues.running()
                if all(pod.spec.scheduler_name in names for pod in gang.members)
            ]
        return self._running

    # -- overridden per action ----------------------------------------------------------------
    def candidates(self, who: Preemptor) -> list[Chunk]:
        raise NotImplementedError

    def allows(self, who: Preemptor, chosen: list[Chunk], chunk: Chunk) -> bool:
        return True

    def victim_class(self, book: QueueBook, gang: GangInfo) -> Hashable:
        """What the candidates depend on, of the preemptor."""
        raise NotImplementedError

    def rule_stamp(self, book: QueueBook) -> Hashable:
        """What ``allows`` reads of the queues, besides the preemptor."""
        return None

    def no_victims(self, session: Session, gang: GangInfo) -> bool:
        """A quick sufficient test that ``gang`` has no candidates (False: look at them)."""
        return False

    def note_waiting(self, book: QueueBook, gang: GangInfo) -> None:
        """``gang`` failed for room this cycle."""

    def parked_hopeless(self, session: Session) -> bool:
        """A quick sufficient test that no parked gang has candidates (False: look)."""
        return False

    def _note_young(self, session: Session) -> None:
        """Wake up when a running gang protected by its min-runtime, or by the reservation it
        started on, becomes a candidate."""
        book = session.state.queues
        ends = shield_ends(session)
        for ident, gang in list(book.min_runtime.items()):
            if not any(p.status is PodStatus.BOUND for p in gang.members):
                del book.min_runtime[ident]  # not running (it is tracked again when bound)
                continue
            at = eligible_at(gang)
            if at is not None:
                ends.append(at)
        for at in ends:
            if at > session.now and at < self.recheck_at:
                self.recheck_at = at
                session.result.wake_at.append(at)

    # -- shared --------------------------------------------------------------------------------
    def _commit(self, session: Session, gang: GangInfo, plan: Plan, *, pin: bool) -> None:
        """Evict the victims, pipeline the preemptor and hold the room for it. ``pin``: its
        pods go to the nodes planned (else, when the placement plugin places it inside its
        domain, anywhere in the held room: the plugin's own plan must not be overruled)."""
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
        planned = {pod.key: row for pod, row in plan.placement} if pin else {}
        session.result.holds.append(Hold(gang.ident, rows, session.now, victims, planned))
        session.result.wake_at.append(session.now)


def _minimum(unit: Unit) -> list[PodInfo]:
    """The pods the preemptor needs: its pending pods up to its minimum (all of them when it
    has role minimums)."""
    gang = unit.gang
    if gang.role_minimums or gang.implicit:
        return list(unit.pods)
    missing = gang.min_member - gang.placed
    return list(unit.pods[: max(missing, 0)])


def _domains(who: Preemptor) -> Domains | None:
    """The network domains the preemptor must (or would rather) use, from the policy's
    placement plugin (topology), so victims are chosen inside the domain it will use."""
    for placer in who.session.placers:
        find = getattr(placer, "preemption_domains", None)
        if find is not None:
            found: Domains | None = find(Unit.of_gang(who.gang, who.pods), who.session)
            return found
    return None


def _eligible(unit: Unit, book: QueueBook) -> list[PodInfo]:
    """The pods ``unit`` would preempt for; none if it holds room already or never
    preempts."""
    if unit.gang.ident in book.holds or _never(unit):
        return []
    return _minimum(unit)


def _never(unit: Unit) -> bool:
    return any(
        p.spec.preemption_policy == "Never" or p.spec.annotations.get(POLICY) == "Never"
        for p in unit.pods
    )
