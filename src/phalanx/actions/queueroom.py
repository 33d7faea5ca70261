"""When a gang's capped queues have room for it, on the running gangs' estimated ends.

A reservation is room on nodes at a time; a gang in a queue with a ``capability`` (Volcano's
``capability``, Kueue's nominal quota plus borrowing limit, KAI's limit) can start only when
that queue, and each capped ancestor, has room for it too. Nodes free while its queue is full
are no start: a reservation placed there holds the nodes idle and refuses the backfill that
could use them. So a plan reserves from the later of the two: the first time at which the
running gangs of each capped queue (those of the queue and of the queues below it), ending
at their estimated ends, leave room under its capability for the gang's needs. ∞ when no
such time is known (a gang without an estimate holds the room, or the gang's queue is closed:
it gets no reservation, which would hold nodes it cannot use); −∞ when nothing is capped.

The reservations already planned (``held``) count as running from now until their estimated
end: two gangs reserved in one capped queue are not promised the same room. Without them, a
second 32-GPU gang reserved in a queue capped at 40 GPUs was given the same start as the
first, on the nodes the first left, and held them — idle or refusing backfill — for a start
its queue could not give it (the Kueue cohort workload, benchmarks/README.md). Counting a
reservation from now rather than from its start only moves the later one later; a gang that
would end before a reservation starts is backfill, judged by the book's gate, not planned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from phalanx.cluster.resources import Vector
from phalanx.cluster.workloads import GangInfo
from phalanx.framework.session import Session

if TYPE_CHECKING:
    from phalanx.actions.reserve import Running  # reserve imports the book, which imports this


class Held(NamedTuple):
    """A planned reservation as its queue sees it: held from now until ``end``."""

    gang: GangInfo
    end: float
    requests: Sequence[Vector]


def queue_closed(session: Session, gang: GangInfo) -> str | None:
    """The name of ``gang``'s queue if it is closed (Volcano's ``state: Closed``), else None."""
    book = session.state.queues
    queue = book.queue_of(gang)
    return queue if book.closed(queue) else None


def queue_room_at(
    session: Session,
    gang: GangInfo,
    requests: Sequence[Vector],
    running: Iterable[Running],
    held: Callable[[], Sequence[Held]] | None = None,
) -> float:
    """The first time ``gang``'s capped queues hold ``requests`` beside the reservations
    ``held`` gives (asked only for a capped queue short of room; see the module's
    docstring); −∞ when they do now or none is capped."""
    book = session.state.queues
    if not book.active or not book.specs:
        return -math.inf
    if queue_closed(session, gang) is not None:
        return math.inf  # no gang of a closed queue starts until it opens: no time is known
    index = session.state.index
    width = len(index)
    need = np.zeros(width)
    for request in requests:
        need[: request.size] += request[:width]
    at = -math.inf
    frees: list[_Frees] | None = None
    for name in book.ancestry(book.queue_of(gang)):
        cap = book.capability(name, index)
        if not np.isfinite(cap).any():
            continue
        if frees is None:
            frees = _frees(session, running, () if held is None else held(), width)
        mine = [free for free in frees if name in free.queues]
        short = book.use(name, width).usage + need - cap
        short += sum((free.amount for free in mine if free.held), np.zeros(width))
        if not (short > 0).any():
            continue
        at = max(at, _freed_by(short, mine))
    return at


class _Frees(NamedTuple):
    """Room a running gang or a reservation gives back at ``end``, to ``queues``."""

    end: float
    amount: np.ndarray
    queues: tuple[str, ...]
    held: bool  # a reservation: not in the queue's usage yet


def _frees(
    session: Session, running: Iterable[Running], held: Sequence[Held], width: int
) -> list[_Frees]:
    book = session.state.queues

    def total(requests: Iterable[Vector]) -> np.ndarray:
        out = np.zeros(width)
        for request in requests:
            out[: request.size] += request[:width]
        return out

    def queues(gang: GangInfo) -> tuple[str, ...]:
        return tuple(book.ancestry(book.queue_of(gang)))

    out = [
        _Frees(run.end, total(pod.request for pod in run.pods), queues(run.gang), False)
        for run in running
    ]
    out += [_Frees(h.end, total(h.requests), queues(h.gang), True) for h in held]
    return sorted(out, key=lambda free: free.end)


def _freed_by(short: np.ndarray, mine: list[_Frees]) -> float:
    """When the gangs and reservations of a queue, ending in order, have freed ``short``."""
    freed = np.zeros(len(short))
    for free in mine:
        freed += free.amount
        if not (short > freed).any():
            return free.end
    return math.inf
