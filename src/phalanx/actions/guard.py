"""Reservations that preemption honours (issue 12): never take what a reservation needs
unless the preemptor outranks the reserved gang.

When a reservation action set the session's gate (:class:`~phalanx.actions.book.Book`), a
preemption plan is tried on a copy of the book's timeline before anything is evicted: the
victims' room comes back from now until their estimated end (never, without an estimate, so
from now on), the preemptor's pods take their planned room from now until its estimated end,
and every reservation ranked ahead of the preemptor must still find room no later than its
reserved start, in rank order, as the gate checks a backfilled gang. Reservations of gangs the
preemptor outranks are not protected from it, exactly as a gang that outranks a reservation
may start on its room. The refusal names the reservation it would delay.

Reservations are honoured after they start, too: a gang that started after it had aged (on
the reservation of its queue's oldest, or on room it found: it ranked ahead of every gang not
aged either way), or as a big gang ranked first by ``big-first`` (ahead of every other gang of
its queue, higher priorities too), is *protected*
(:meth:`~phalanx.actions.book.Book.protected`) for its estimated runtime (without one, the
aging threshold), so that the gangs it waited behind or outranked do not take it back at once
(a low-priority big gang would start and be preempted again and again).
While protected, the gang is never taken whole (``shielded``) by a preemptor that has not
aged itself, whatever its priority (a big gang ranked first by ``big-first`` included: it ranks
ahead of the aged reservations, but has not waited for its turn as this gang did); an aged
preemptor may take it under the action's own rule (``preempt``: a strictly higher priority;
``reclaim``: a queue further below its share). Its elastic surplus stays a victim, as growth
ranks after every reservation. Protection is part of an attempt's victim class, and its ends
are wake-ups (``shield_ends``), so attempts known to fail are tried again when it lapses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

from phalanx.actions.book import Book, Carve
from phalanx.actions.candidates import clock
from phalanx.actions.timeline import Slot
from phalanx.actions.victims import Plan
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit


def delays_reservation(
    session: Session, gang: GangInfo, pods: Sequence[PodInfo], plan: Plan
) -> str | None:
    """Why ``plan`` would delay a reservation ranked ahead of ``gang``, or None."""
    book = session.gate
    if not isinstance(book, Book) or not book.carves:
        return None
    ahead, duration = _ahead(session, book, gang, pods)
    if not ahead:
        return None
    now = book.now
    trial = book.base.copy()
    for chunk in plan.victims:
        end = book.ends.get(chunk.gang.ident, math.inf)
        trial.give_back(now, end, tuple(Slot(p.node, p.request, p.gpus) for p in chunk.pods))
    taken = tuple(Slot(row, pod.request, plan.gpus.get(pod.key, ())) for pod, row in plan.placement)
    trial.take(now, now + duration, taken)
    for carve in ahead:
        found = trial.earliest(
            carve.who.requests, carve.who.masks, carve.who.duration, until=carve.start
        )
        if found is None:
            return (
                f"would delay the reservation of {carve.who.gang.key} "
                f"(start {clock(carve.start, now)})"
            )
        trial.take(found[0], found[0] + carve.who.duration, found[1])
    return None


def guard_reads(session: Session, gang: GangInfo, pods: Sequence[PodInfo]) -> Hashable:
    """What ``delays_reservation`` reads of the preemptor besides its plan: the reservations
    ranked ahead of it (in order, with their starts) and its estimated duration. Two
    preemptors with equal plans and equal reads are refused alike (a refusal memo keyed by
    the preemptor's failure class alone would refuse a gang of that class ranked ahead of
    fewer reservations, or estimated to end sooner)."""
    book = session.gate
    if not isinstance(book, Book) or not book.carves:
        return None
    ahead, duration = _ahead(session, book, gang, pods)
    return (tuple((c.who.gang.ident, c.start) for c in ahead), duration)


def _ahead(
    session: Session, book: Book, gang: GangInfo, pods: Sequence[PodInfo]
) -> tuple[list[Carve], float]:
    """The carves ranked ahead of ``gang``, in rank order, and its estimated duration."""
    who = book.waiters.by_ident.get(gang.ident)
    if who is not None and who.gang is gang:
        rank, duration = who.rank, who.duration
    else:
        rank, duration = (1.0, *session.order_key(Unit.of_gang(gang, list(pods)))), math.inf
    ahead = sorted(
        (c for c in book.carves if c.who.gang is not gang and c.who.rank < rank),
        key=lambda c: c.who.rank,
    )
    return ahead, duration


def shielded(session: Session, gang: GangInfo) -> Callable[[GangInfo], bool] | None:
    """Which running gangs ``gang`` may not take whole (protected, and it has not aged),
    or None: it may take any."""
    book = session.gate
    if not isinstance(book, Book) or not book.shields:
        return None
    who = book.waiters.by_ident.get(gang.ident)
    if who is not None and who.aged:
        return None
    return book.protected


def shield_ends(session: Session) -> list[float]:
    """When the first protection in force ends (a wake-up for preemptors)."""
    book = session.gate
    if not isinstance(book, Book):
        return []
    return book.shield_ends()
