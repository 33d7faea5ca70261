"""The event heap, keyed by (time, priority, sequence) so equal times resolve the same way
every run. At one instant, work finishing and objects going are handled before objects
appearing, so freed resources are visible to arrivals of the same instant, and the scheduling
cycle runs once after all of them.

Events are *progress* events (something can change: an arrival, a finish, a deletion, a gang
timeout check, a retry after a change) or not. The run ends when no progress event is left.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from enum import IntEnum


class Kind(IntEnum):
    FINISH = 0  # a gang's (or lone pod's) work ends
    DELETE = 1  # phalanx.dev/delete-after
    ARRIVE = 2  # phalanx.dev/submit-after
    RUNNING = 3  # start-up delay over: check whether gangs can start
    RETRY = 4  # a gang's backoff is over and the cluster changed meanwhile
    CHECK = 5  # a gang reaches its scheduleTimeoutSeconds
    UNGATE = 6  # phalanx.dev/ungate-after: a pod's scheduling gates are lifted


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    kind: Kind
    payload: object
    progress: bool = True


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0
        self._progress = 0
        self._wakeups = 0  # progress events that are wake-ups (Kind.RETRY)

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, event: Event) -> None:
        self._seq += 1
        self._progress += event.progress
        self._wakeups += event.progress and event.kind is Kind.RETRY
        heapq.heappush(self._heap, (event.time, int(event.kind), self._seq, event))

    def peek_time(self) -> float:
        return self._heap[0][0]

    def peek(self) -> Event:
        return self._heap[0][3]

    def pop(self) -> Event:
        event = heapq.heappop(self._heap)[3]
        self._progress -= event.progress
        self._wakeups -= event.progress and event.kind is Kind.RETRY
        return event

    def has_progress(self) -> bool:
        return self._progress > 0

    def only_wakeups(self) -> bool:
        """Is every progress event left a wake-up (see :mod:`phalanx.sim.loops`)?"""
        return 0 < self._progress == self._wakeups

    def offsets(self, now: float) -> tuple[tuple[float, int, bool], ...]:
        """The pending events as (time after ``now``, kind, progress), in order."""
        return tuple(
            (time - now, kind, event.progress) for time, kind, _, event in sorted(self._heap)
        )
