"""Allocate: place units all-or-nothing, best unit first.

For each unit (a gang's pending pods, or one pod for gang-unaware policies), in the order the
plugins give: skip it with a reason if it is not valid; otherwise open a Statement and place
its pods one by one on the best feasible node — inside the nodes a placement plugin allows
(topology: one attempt per candidate domain, see ``framework.plugin.Placements``). Stop
early once the gang's minimum can no longer be reached. Commit if the plugins say the gang is
ready, else discard — the snapshot is then exactly as before — and record why it waits.

A unit that cannot fit never blocks the units behind it, and neither does one whose placement
raises (a bug, or an input no check caught): its statement is discarded, the gang waits with
reason ``InternalError`` and the error (logged once per gang and message), and the cycle goes
on with the next unit.

When a reservation action has set the session's gate, a gang whose reservation is due starts
on the nodes it reserved (where they still fit and the attempt allows), and a placement that
fits is committed only if the gate admits it (it delays no reservation that ranks ahead of the
unit); a refused unit waits with reason ``Reserved`` and is parked until the gate's stamp
moves (room taken or released, the reservations changed or due to be planned again: an
estimate overrun can admit it without any resource being freed), not retried every cycle.
Where the order moves (fair shares: no stamp), a refused unit stays in the queue and the gate
answers for it without an attempt while its refusal stands (``standing_refusal``).

Within one allocate pass resources only shrink, so when a gang fails, every later gang with the
same pending pod shapes and no more room to spare fails too; those are skipped without another
placement attempt.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Hashable, Iterator

from phalanx.cluster.hints import CapacityOf, Gated, GatedClass, Hint, wake_count
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.explain import needs, progress
from phalanx.framework.explain import shapes as shapes_of
from phalanx.framework.plugin import Placements, PodChoice
from phalanx.framework.session import Session
from phalanx.framework.statement import Statement
from phalanx.framework.unit import Unit

logger = logging.getLogger(__name__)

Signature = tuple[object, ...]


class Allocate:
    name = "allocate"

    def __init__(self) -> None:
        self._logged: set[tuple[str, str]] = set()  # (gang, error) already logged

    def execute(self, session: Session) -> None:
        failed: dict[Signature, str] = {}
        hints: dict[Signature, Hint | None] = {}  # one failure class per signature
        lone = _LoneFailures()  # pod-at-a-time units: which gangs failed with every pod
        units, at = session.units(), 0
        refill = _Refill(session)
        while at < len(units):
            unit, at = units[at], at + 1
            session.limit(unit)
            verdict = session.invalid(unit)
            if verdict is not None:
                session.wait(unit.gang, *verdict)
                self._block(session, unit, None if verdict[0] in _UNTIL_RELEASE else _INVALID)
                refill.moved_on(unit, units, at)
                continue
            signature = _signature(unit)
            session.tried(unit.gang)
            if signature not in failed and _hopeless(session, unit, signature):
                # the room cannot hold it: the attempt would fail as surely (and leave no trace)
                failed[signature] = session.placements(unit).why or needs(session, unit)
            if signature not in failed:
                # a refusal the gate says still stands needs no attempt (fair-share order)
                kept = None if session.gate is None else session.gate.standing_refusal(unit)
                session.result.attempts += kept is None
                try:
                    placements = session.placements(unit) if kept is None else _KEPT
                    outcome = kept or self._place(session, unit, placements)
                except Exception as exc:  # contained to this gang; the others go on
                    self._contain(session, unit, exc)
                    refill.moved_on(unit, units, at)
                    continue
                if outcome is True:
                    lone.placed(unit)
                    refill.moved_on(unit, units, at)
                    continue
                if outcome:
                    session.wait(unit.gang, "Reserved", progress(unit) + outcome)
                    stamp = None if session.gate is None else session.gate.stamp()
                    if stamp is not None:
                        self._block(session, unit, Gated(stamp, signature))
                    refill.after(unit, units, at, stamp)
                    continue
                failed[signature] = placements.why or needs(session, unit)
                refill.unfit(unit, units, at)
            if session.gate is not None:
                session.gate.failed(unit)
            session.wait(unit.gang, "NotEnoughResources", progress(unit) + failed[signature])
            if session.config.gang_units:
                if signature not in hints:
                    hints[signature] = _hint(session, unit, signature)
                hint = hints[signature] if not unit.gang.placed else None
                self._block(session, unit, hint)
            else:
                lone.failed(unit, signature)
        for unit, hint in lone.whole():
            self._block(session, unit, hint if session.static_order else None)

    def _contain(self, session: Session, unit: Unit, exc: Exception) -> None:
        message = f"placement failed: {type(exc).__name__}: {exc}"[:300]
        if (unit.gang.ident, message) not in self._logged:
            self._logged.add((unit.gang.ident, message))
            logger.error("gang %s: %s", unit.gang.ident, message, exc_info=exc)
        session.wait(unit.gang, "InternalError", message)

    @staticmethod
    def _block(session: Session, unit: Unit, hint: Hint | Gated | None) -> None:
        """A gang that failed need not be retried until an event could let it fit (or it
        gains a member); a gang waiting for its timeout check is kept so the timeout is
        noticed, and one in timeout backoff wakes on any release (its backoff counts
        failures); one the gate refused, until the gate's stamp moves."""
        gang = unit.gang
        timeout = gang.timeout
        if session.config.gang_units and gang.ready():
            return
        if timeout is not None and session.config.timeouts:
            if not session.timed_out(gang) or isinstance(hint, Gated):
                return
            hint = None
        session.result.hints[gang.ident] = (hint, unit.order)
        session.result.blocked.append(gang)

    def _place(self, session: Session, unit: Unit, placements: Placements) -> bool | str:
        """True if placed; else why the gate refused it, or False if it does not fit. A
        failed placement leaves no trace, not even in the tie-break draws."""
        draws = session.rng.bit_generator.state
        where = placements.where
        refusal: bool | str = False
        for i, attempt in enumerate(placements.attempts):
            outcome = self._attempt(session, unit, attempt(), where[i] if i < len(where) else "")
            if outcome is True:
                return True
            refusal = refusal or outcome
        session.rng.bit_generator.state = draws
        return refusal

    def _attempt(
        self, session: Session, unit: Unit, choices: Iterator[PodChoice], where: str
    ) -> bool | str:
        stmt = session.statement()
        try:
            return self._fill(session, unit, stmt, choices, where)
        except Exception:
            if not stmt.closed:
                stmt.discard()  # the snapshot exactly as before, for the units behind
            raise

    @staticmethod
    def _fill(
        session: Session, unit: Unit, stmt: Statement, choices: Iterator[PodChoice], where: str
    ) -> bool | str:
        gang = unit.gang
        spare = len(unit.pods) + gang.placed - gang.min_member  # pods that may fail
        misses = 0
        reserved = {} if session.gate is None else session.gate.nodes_for(unit)
        for choice in choices:
            pod, masks = choice
            node = reserved.get(pod.key)
            allowed = node is not None and any(m is None or m[node] for m in masks)
            if node is None or not allowed or not session.feasible(pod)[node]:
                node = session.select_within(choice)
            if node is None:
                misses += 1
                if misses > spare and not gang.implicit and not gang.ready():
                    break
                continue
            stmt.allocate(pod, node)
        if len(stmt) and session.ready(unit):
            gate = session.gate
            refusal = None if gate is None else gate.admits(unit, stmt)
            if refusal is not None:
                stmt.discard()
                return refusal
            stmt.commit()
            session.placed(gang, where)
            if gate is not None:
                gate.started(unit, stmt)
            return True
        stmt.discard()
        return False


class _Refill:
    """Gangs a gate refused give back their share of a wake budget (see
    ``ClusterState.wake_next``): the next gang of the class they were woken from is woken and
    taken in at its place in the order. A gated class is walked (see
    :mod:`phalanx.cluster.hints`): after a refusal, past the gangs the gate would refuse
    alike; after any other outcome, to the next gang; after a gang no longer fits, every gang
    of the class is woken, to fail alike and wait for room."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def after(self, unit: Unit, units: list[Unit], at: int, stamp: object = None) -> None:
        """The gate refused ``unit`` at its ``stamp``."""
        key = self._woken_from(unit)
        if key is _NONE:
            return
        gate = self.session.gate
        alike = None if gate is None else gate.refuses_alike(unit)
        self._next(key, units, at, alike, stamp)

    def moved_on(self, unit: Unit, units: list[Unit], at: int) -> None:
        """``unit`` was placed, or is not valid, or failed in error."""
        key = self._woken_from(unit)
        if isinstance(key, GatedClass):
            self._next(key, units, at, None, None)

    def unfit(self, unit: Unit, units: list[Unit], at: int) -> None:
        key = self._woken_from(unit)
        if isinstance(key, GatedClass):
            for gang in self.session.state.wake_class(key):
                self._take_in(gang, units, at)

    def _woken_from(self, unit: Unit) -> object:
        state = self.session.state
        return state.woken.get(unit.gang.ident, _NONE) if state.hints else _NONE

    def _next(
        self,
        key: Hashable,
        units: list[Unit],
        at: int,
        alike: Callable[[GangInfo], bool] | None,
        stamp: object,
    ) -> None:
        state = self.session.state
        while (gang := state.wake_next(key, alike, stamp)) is not None:
            if self._take_in(gang, units, at):
                return

    def _take_in(self, gang: GangInfo, units: list[Unit], at: int) -> bool:
        more = self.session.units_of(gang)
        for extra in more:
            bisect.insort(units, extra, lo=at, key=_order)
        return bool(more)


_NONE = object()
#: stands in for the placements of a unit whose refusal stands (none are made)
_KEPT = Placements([])


def _order(unit: Unit) -> tuple[float, ...]:
    return unit.order


def _signature(unit: Unit) -> Signature:
    """Units with the same signature need the same room (for the failure shortcut)."""
    gang = unit.gang
    roles = (
        tuple(
            sorted(
                (role, need - gang.placed_by_role[role])
                for role, need in gang.role_minimums.items()
            )
        )
        if gang.role_minimums
        else ()
    )
    if len(unit.pods) == 1:
        shapes: tuple[tuple[bytes, object, str, str, object], ...] = (_shape(unit.pods[0]),)
    else:
        shapes = tuple(sorted(map(_shape, unit.pods), key=lambda s: (s[0], s[2], s[3])))
    spec = gang.spec
    topology = (
        None
        if spec is None
        else (
            spec.topology,
            tuple(sorted(spec.role_topology.items())),
            tuple(sorted(spec.role_parents.items())),
            spec.subgroups,
        )
    )
    return (gang.min_member - gang.placed, gang.ready(), roles, shapes, topology)


_BYTES: dict[int, tuple[object, bytes]] = {}  # id(request) → (request, its bytes), see _shape


def _shape(pod: PodInfo) -> tuple[bytes, object, str, str, object]:
    request, spec = pod.request, pod.spec
    known = _BYTES.get(id(request))
    if known is None or known[0] is not request:
        if len(_BYTES) > 4096:
            _BYTES.clear()
        known = _BYTES[id(request)] = (request, request.tobytes())
    return (known[1], spec.placement, spec.role, pod.invalid or "", spec.topology)


def _hopeless(session: Session, unit: Unit, signature: Signature) -> bool:
    """Is ``unit``, woken only because a gate watches it, sure not to fit the free room
    (its class's bound, see :mod:`phalanx.cluster.hints`)? Other woken gangs passed that
    bound when they were woken."""
    if unit.gang.ident not in session.state.watched_woken:
        return False
    hint = _hint(session, unit, signature)
    return hint is not None and wake_count(hint, CapacityOf(session.table)) == 0


#: The failure class of gangs that are not valid: no release can change that (a change of
#: the gang, its pods or the nodes wakes them).
_INVALID = Hint(("invalid",), (), 1)
#: Refusals a release can lift: a queue over its capability has room again when a pod of it
#: (or of a queue under the same ancestor) goes. Such a gang wakes on any release.
_UNTIL_RELEASE = frozenset({"QueueCapability", "QueueMissing", "QueueInactive"})


def _hint(session: Session, unit: Unit, signature: Signature) -> Hint | None:
    """The failure class of a gang unit; None (wake on any release) when its order key may
    move while it waits (something of it is placed, or an ordering plugin is dynamic)."""
    if unit.gang.placed or not session.static_order:
        return None
    shapes = tuple((pod.request, pod.spec.placement, n) for pod, n in shapes_of(unit.pods))
    return Hint(signature, shapes, unit.gang.min_member - unit.gang.placed)


class _LoneFailures:
    """Pod-at-a-time units: a gang is parked only when every pending pod of it failed this
    cycle with one signature (one shape); each of its pods then needs one pod of room."""

    def __init__(self) -> None:
        self._failed: dict[str, tuple[Unit, Signature, int]] = {}
        self._placed: set[str] = set()

    def placed(self, unit: Unit) -> None:
        self._placed.add(unit.gang.ident)

    def failed(self, unit: Unit, signature: Signature) -> None:
        ident = unit.gang.ident
        first = self._failed.get(ident)
        if first is None:
            self._failed[ident] = (unit, signature, 1)
        elif first[1] == signature:
            self._failed[ident] = (first[0], signature, first[2] + 1)
        else:
            self._placed.add(ident)  # several shapes: retried every cycle

    def whole(self) -> list[tuple[Unit, Hint]]:
        out = []
        for ident, (unit, signature, count) in self._failed.items():
            gang = unit.gang
            if ident in self._placed or count != len(gang.pending()):
                continue
            pod = unit.pods[0]
            hint = Hint(signature, ((pod.request, pod.spec.placement, 1),), 1)
            out.append((unit, hint))
        return out
