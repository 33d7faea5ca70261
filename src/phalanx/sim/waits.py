"""Waits, expected-start accuracy and deadlines of a run, from its gang records.

- ``max_wait``: the longest queue delay (start − submit); a gang that never started counts
  with the wait it had at the end of the run (a lower bound), so starvation is never hidden.
- ``max_wait_by_size``: the same per GPU size of the gang: ``1`` (one GPU or less), ``2-8``,
  ``9-32`` and ``33+`` GPUs (buckets with no gang are left out).
- ``eta_error``: over gangs that waited (start > submit) and had an expected start, the mean
  and p90 of |first expected start − actual start| in seconds; ``unknown`` counts the gangs
  that waited without ever getting one.
- deadlines: a gang with ``phalanx.dev/deadline`` met it if it finished by then.
- ``wait_floor``: the least wait the gangs already running when a gang arrived left it: the
  time until they had ended enough of their GPUs for it (GPUs counted over the whole cluster,
  not node by node). Once it has arrived no rule that does not preempt can start it earlier:
  a wait at its floor was set by what started before the gang arrived, not by the order after.
- ``cluster_floor``: the same for a gang of the whole cluster arriving at each of the given
  times: how long until every gang then running has ended. Its mean over a run is the wait any
  rule that does not preempt leaves a whole-cluster gang arriving at a random time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

BUCKETS = (("1", 0.0, 1.0), ("2-8", 1.0, 8.0), ("9-32", 8.0, 32.0), ("33+", 32.0, np.inf))


class Waited(Protocol):
    submit: float
    start: float | None
    finish: float | None
    gpus: float
    expected_start_first: float | None
    deadline: float | None


def wait_of(gang: Waited, end: float) -> float:
    return (gang.start if gang.start is not None else end) - gang.submit


def bucket(gpus: float) -> str:
    return next(name for name, _, high in BUCKETS if gpus <= high)


def max_wait(gangs: Sequence[Waited], end: float) -> float:
    return max((wait_of(g, end) for g in gangs), default=0.0)


def max_wait_by_size(gangs: Sequence[Waited], end: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for gang in gangs:
        name = bucket(gang.gpus)
        out[name] = max(out.get(name, 0.0), wait_of(gang, end))
    return {name: out[name] for name, _, _ in BUCKETS if name in out}


def wait_floor(gang: Waited, gangs: Sequence[Waited], capacity: float) -> float | None:
    """The least wait of ``gang`` (seconds) the gangs running when it arrived left it: they
    end when they did and nothing else starts. None: it never gets enough GPUs so (it needs
    more than ``capacity``, or a gang still running at the end of the run holds them)."""
    arrived = gang.submit
    ends = sorted(
        (math.inf if g.finish is None else g.finish, g.gpus)
        for g in gangs
        if g is not gang and g.start is not None and g.start < arrived
        if g.finish is None or g.finish > arrived
    )
    free = capacity - sum(gpus for _, gpus in ends)
    floor = 0.0
    for end, gpus in ends:
        if free >= gang.gpus:
            break
        free, floor = free + gpus, end - arrived
    return floor if free >= gang.gpus and math.isfinite(floor) else None


def cluster_floor(gangs: Sequence[Waited], times: np.ndarray) -> np.ndarray:
    """For each of ``times`` (sorted), how long until every gang running then (started before
    it) has ended (seconds; ∞: one runs past the end of the run; 0: none runs)."""
    floor = np.zeros(len(times))
    for gang in gangs:
        if gang.start is None or gang.finish == gang.start:
            continue
        end = math.inf if gang.finish is None else gang.finish
        first = int(np.searchsorted(times, gang.start, side="right"))
        span = slice(first, int(np.searchsorted(times, end, side="left")))
        np.maximum(floor[span], end - times[span], out=floor[span])
    return floor


def eta_error(gangs: Sequence[Waited]) -> dict[str, Any]:
    waited = [g for g in gangs if g.start is not None and g.start > g.submit]
    errors = [
        abs(g.expected_start_first - g.start)
        for g in waited
        if g.expected_start_first is not None and g.start is not None
    ]
    if not errors:
        return {"mean": None, "p90": None, "gangs": 0, "unknown": len(waited)}
    values = np.array(errors)
    return {
        "mean": round(float(values.mean()), 3),
        "p90": round(float(np.percentile(values, 90)), 3),
        "gangs": len(errors),
        "unknown": len(waited) - len(errors),
    }


def deadlines(gangs: Sequence[Waited]) -> tuple[int, int]:
    """(met, missed) over gangs with a deadline; one unfinished at the end missed it only if
    the deadline has passed — callers pass records of a finished run."""
    met = missed = 0
    for gang in gangs:
        if gang.deadline is None:
            continue
        if gang.finish is not None and gang.finish <= gang.deadline:
            met += 1
        else:
            missed += 1
    return met, missed
