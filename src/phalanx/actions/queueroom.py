"""When a gang's capped queues have room for it, on the running gangs' estimated ends.

A reservation is room on nodes at a time; a gang in a queue with a ``capability`` (Volcano's
``capability``, Kueue's nominal quota plus borrowing limit, KAI's limit) can start only when
that queue, and each capped ancestor, has room for it too. Nodes free while its queue is full
are no start: a reservation placed there holds the nodes idle and refuses the backfill that
could use them. So a plan reserves from the later of the two: the first time at which the
running gangs of each capped queue (those of the queue and of the queues below it), ending
at their estimated ends, leave room under its capability for the gang's needs. ∞ when no
such time is known (a gang without an estimate holds the room); −∞ when nothing is capped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from phalanx.cluster.resources import Vector
from phalanx.cluster.workloads import GangInfo
from phalanx.framework.session import Session

if TYPE_CHECKING:
    from phalanx.actions.reserve import Running  # reserve imports the book, which imports this


def queue_room_at(
    session: Session, gang: GangInfo, requests: Sequence[Vector], running: Iterable[Running]
) -> float:
    """The first time ``gang``'s capped queues hold ``requests`` (see the module's
    docstring); −∞ when they do now or none is capped."""
    book = session.state.queues
    if not book.active or not book.specs:
        return -math.inf
    index = session.state.index
    width = len(index)
    need = np.zeros(width)
    for request in requests:
        need[: request.size] += request[:width]
    at = -math.inf
    runs: list[Running] | None = None
    for name in book.ancestry(book.queue_of(gang)):
        cap = book.capability(name, index)
        if not np.isfinite(cap).any():
            continue
        short = book.use(name, width).usage + need - cap
        if not (short > 0).any():
            continue
        runs = list(running) if runs is None else runs
        at = max(at, _freed_by(session, name, short, runs))
    return at


def _freed_by(session: Session, name: str, short: np.ndarray, runs: list[Running]) -> float:
    """When the running gangs under queue ``name``, ending in order, have freed ``short``."""
    book, width = session.state.queues, len(short)
    mine = sorted(
        (run for run in runs if name in book.ancestry(book.queue_of(run.gang))),
        key=lambda run: run.end,
    )
    freed = np.zeros(width)
    for run in mine:
        for pod in run.pods:
            freed[: pod.request.size] += pod.request[:width]
        if not (short > freed).any():
            return run.end
    return math.inf
