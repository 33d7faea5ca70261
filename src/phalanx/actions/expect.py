"""Expected starts: when each waiting gang should start, and why, told when it changes.

When a cycle with the ``reserve`` action closes, the :class:`Teller` gives

- every gang holding a reservation its reserved start ("reserved: n0..n3 free at t=3m20s when
  ns/a (estimate: runtime-estimate) ends");
- every gang that arrived its first expected start: the earliest time it fits on the view of
  running gangs and reservations ("estimated (not reserved): ..."), or "unknown" with the
  reason;
- a gang whose expected start has passed while it still waits (or was unknown for
  ``RETELL`` seconds, or lost its reservation) a new one — at most ``RETELL_MAX`` per cycle,
  as Slurm's backfill tests a bounded number of jobs per pass; the others keep theirs.

**Told when read** (``lazy``, a simulation without an event stream): there a passed expected
start is read only where the run reports it, so only those re-tells are made when due: a gang
with a deadline (whether it will miss it: ``deadline_misses_foreseen``) and a gang whose
expected start is unknown (its first known one is ``expected_start_first``). Any other gang
whose start passed is marked ``stale`` and told again only when something reads it — its
waiting condition, when it is attempted in a cycle — so its condition never shows a passed
start. Live, and in a simulation writing events (an ``expect`` event per change), every due
re-tell is made on schedule. A lazy run does not spend ``RETELL_MAX`` on starts nobody reads:
where more were due in a cycle, the gangs it reports on are re-told sooner than on schedule.
The teller decides nothing (``tests/scenarios/test_teller_purity.py``), so how many starts it
re-tells changes no decision.

Only what changed goes into the cycle's ``expected`` (the applier keeps the rest on the
gangs). A gang with a deadline (``phalanx.dev/deadline``) gets its expected finish and slack,
or the amount by which it will miss it. The waiting condition of a gang attempted this cycle
carries its expected start too.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from phalanx.actions.candidates import Candidate, clock, nodes_text
from phalanx.actions.queueroom import queue_closed, queue_room_at
from phalanx.actions.timeline import Found, Memo, Plan
from phalanx.framework.session import Session

if TYPE_CHECKING:
    from phalanx.actions.reserve import Reserve

#: An unknown expected start is looked at again after this long.
RETELL = 900.0
#: At most this many expected starts are made again per cycle (besides arrivals).
RETELL_MAX = 16


class Teller:
    def __init__(self, reserve: Reserve) -> None:
        self.reserve = reserve
        self._due: list[tuple[float, int, str]] = []  # (when to tell again, seq, ident)
        self._carve_ends: dict[float, list[str]] = {}  # reserved end → who ends then
        self._found = Memo()  # by (shape, duration), on the book's view
        #: re-tell only what a reader will see (see the module's docstring)
        self.lazy = False

    def tell(self, session: Session) -> None:
        book, waiters = self.reserve.book, self.reserve.waiters
        book.ensure(stale_ok=True)  # an overdrawn plan is made again; a stale one kept
        self._carve_ends = {}
        for carve in book.carved.values():
            label = f"{carve.who.gang.key} (reserved, {_source(carve.who)})"
            self._carve_ends.setdefault(carve.end, []).append(label)
        for ident, carve in book.carved.items() if book.planned else ():
            if ident not in book.begun:
                why = self._why(session, carve.start, carve.plan, reserved=True)
                self._say(session, carve.who, carve.start, why)
        cache: dict[tuple[bytes, float, float], tuple[float, str] | None] = {}
        fresh, waiters.new = waiters.new, []
        for who in fresh:
            if who.arrival is not None:  # made later than it arrived: told then
                self._resume(who)
            elif not who.gone and who.gang.ident not in book.carved:
                self._estimate(session, who, cache)
        self._retell(session, cache)
        for ident, carve in book.carved.items():
            if carve.who.told is None and ident not in book.begun:
                self._estimate(session, carve.who, cache)
        for ident, condition in session.result.waiting.items():
            told = waiters.by_ident.get(ident)
            if told is None or condition.type != "Unschedulable":
                continue
            if told.stale and ident not in book.carved:  # read now: told again first
                self._estimate(session, told, cache)
            if told.told is not None:
                condition.message += f"; expected start: {told.told[1]}"
        result = session.result
        if book.planned:
            result.recheck_at.extend(c.start for c in book.reserved())
        aging = waiters.next_aging()
        if aging is not None:
            result.recheck_at.append(aging)

    def _retell(
        self, session: Session, cache: dict[tuple[bytes, float, float], tuple[float, str] | None]
    ) -> None:
        """Tell again the gangs whose expected start is due (at most ``RETELL_MAX``); when
        ``lazy``, one whose new start nobody reads is marked ``stale`` instead, and does not
        count."""
        waiters, carved, now = self.reserve.waiters, self.reserve.book.carved, session.now
        budget = RETELL_MAX
        while budget > 0 and self._due and self._due[0][0] <= now:
            _, _, ident = heapq.heappop(self._due)
            waiter = waiters.by_ident.get(ident)
            if waiter is not None and ident not in carved:
                if self.lazy and not _read(waiter):
                    waiter.stale = True
                    continue
                self._estimate(session, waiter, cache)
            budget -= 1

    def _estimate(
        self,
        session: Session,
        who: Candidate,
        cache: dict[tuple[bytes, float, float], tuple[float, str] | None],
    ) -> None:
        """Tell ``who`` its expected start on the view (gangs of one shape and duration in
        one cycle share the answer: ``cache``)."""
        if not self.reserve.waiters.fresh(session, who):
            return
        self.reserve.waiters.re_estimate(who)
        running = self.reserve.running.values()
        room_at = queue_room_at(session, who.gang, who.requests, running, self.reserve.book.held)
        key = (who.shape, who.duration, room_at)
        if key not in cache:
            found = self._earliest(session, who, key, room_at)
            why = None if found is None else self._why(session, *found, reserved=False)
            cache[key] = None if found is None or why is None else (found[0], why)
        told = cache[key]
        if told is None:
            self._say(session, who, None, self._unknown(session, who))
            heapq.heappush(self._due, (session.now + RETELL, who.seq, who.gang.ident))
            return
        start, why = told
        self._say(session, who, start, why)
        again = start if start > session.now else session.now + RETELL
        heapq.heappush(self._due, (again, who.seq, who.gang.ident))

    def _earliest(
        self, session: Session, who: Candidate, key: tuple[bytes, float, float], room_at: float
    ) -> Found:
        """The earliest start of ``who`` on the view, not before its capped queues have room
        (``room_at``, :mod:`phalanx.actions.queueroom`); an answer found in an earlier cycle
        on the same view is reused while it stands (:class:`Memo`)."""
        view = self.reserve.book.view
        assert view is not None

        def search() -> Found:
            if room_at > session.now:  # its queue has room only then
                return view.earliest_from(
                    room_at, who.requests, who.masks, who.duration, domains=who.domains
                )
            return view.earliest(who.requests, who.masks, who.duration, domains=who.domains)

        return self._found.earliest(key, view.version, session.now, search)

    def _resume(self, who: Candidate) -> None:
        """``who`` was told its expected start when it arrived (candidates.Arrival): it is
        told again when that is due, as if it had waited since."""
        assert who.arrival is not None
        if who.arrival.due is not None:
            heapq.heappush(self._due, (who.arrival.due, who.seq, who.gang.ident))

    def _say(self, session: Session, who: Candidate, at: float | None, why: str) -> None:
        slack, note = deadline(who, at, session.now)
        why += note
        who.stale = False
        if who.told != (at, why):
            who.told = (at, why)
            session.result.expected[who.gang.ident] = (at, why)
        late = slack is not None and slack < 0
        if late and not who.late and slack is not None:
            session.result.late[who.gang.ident] = (-slack, why)
        who.late = late

    def _why(self, session: Session, start: float, plan: Plan, *, reserved: bool) -> str:
        now = session.now
        where = nodes_text(session.table, [slot.node for slot in plan])
        if start <= now:
            return f"fits now on {where}" if reserved else f"room now on {where}"
        ends = self.reserve.enders.get(start, []) + self._carve_ends.get(start, [])
        cause = f" when {_who_ends(ends)}" if ends else ""
        kind = "reserved" if reserved else "estimated (not reserved)"
        return f"{kind}: {where} free at {clock(start, now)}{cause}"

    def _unknown(self, session: Session, who: Candidate) -> str:
        closed = queue_closed(session, who.gang)
        if closed is not None:
            return f"unknown until queue {closed!r} opens"
        blind = self.reserve.enders.get(math.inf, [])
        detail = f" (e.g. {', '.join(blind[:2])})" if blind else ""
        return f"unknown: no estimate for what holds the room it needs{detail}"


def deadline(who: Candidate, expected: float | None, now: float) -> tuple[float | None, str]:
    """The gang's slack (deadline − expected finish; None: no deadline or finish unknown) and
    what to say of it."""
    spec = who.gang.spec
    if spec is None or spec.deadline is None:
        return None, ""
    due = spec.deadline.due(who.gang.created)
    if expected is None or math.isinf(who.duration):
        return None, f"; deadline {clock(due, now)}: finish unknown"
    finish = expected + who.duration
    slack = due - finish
    if slack < 0:
        return slack, f"; will miss its deadline {clock(due, now)} by {-slack:.0f}s"
    return slack, f"; expected finish {clock(finish, now)}, slack {slack:.0f}s"


def _read(who: Candidate) -> bool:
    """Is a re-told expected start of ``who`` read in a simulation without events? Yes if it
    has a deadline (slack, misses) or its start is unknown (its first known start is reported);
    otherwise only its waiting condition reads it, when it is attempted."""
    spec = who.gang.spec
    unknown = who.told is None or who.told[0] is None
    return unknown or (spec is not None and spec.deadline is not None)


def _source(who: Candidate) -> str:
    return "no estimate" if who.estimate is None else f"estimate: {who.estimate.source}"


def _who_ends(labels: list[str]) -> str:
    """``a ends``, ``a and b end``, ``a, b and 3 more end``."""
    if len(labels) == 1:
        return f"{labels[0]} ends"
    if len(labels) == 2:
        return f"{labels[0]} and {labels[1]} end"
    return f"{labels[0]}, {labels[1]} and {len(labels) - 2} more end"
