"""The simulator's :class:`~phalanx.framework.backend.Backend`.

The shared applier has already changed the state when these are called; this backend does what
a cluster would do next, on the virtual clock: a bound pod starts running (after the start-up
delay) and its gang's work starts once its minimum runs; an evicted pod is gone at once (no
grace period) and its controller re-creates it; reservations are paid for in the GPU meter;
timeouts and evictions are written to the event log; wake-ups become events on the heap (at
most :data:`~phalanx.sim.instants.MAX_CYCLES` cycles at one instant).
Conditions need no writing: the gang's condition in the state is what the run reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from phalanx.cluster.workloads import Condition, GangInfo, PodInfo
from phalanx.sim.events import Event, Kind

if TYPE_CHECKING:
    from phalanx.sim.simulator import Simulation


class SimBackend:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.reserved: set[str] = set()  # pods whose GPUs the meter counts since a reservation
        self.wakeups: set[float] = set()

    def now(self) -> float:
        return self.sim.now

    def bind(self, gang: GangInfo, binds: Sequence[tuple[PodInfo, int]]) -> None:
        sim = self.sim
        for pod, node in binds:
            if pod.key not in self.reserved:  # a reserved pod is counted already
                sim.meter.allocate(sim.gpu(pod), started=gang.started is not None)
                sim.shares.asked(sim, pod, -1)
            self.reserved.discard(pod.key)
            sim.state.confirm(pod.key)
            if sim.sink is not None:
                sim.emit("bind", pod=pod, node=sim.state.table.names[node], path=sim.path(node))
        if gang.started is not None:  # an elastic gang grows
            sim.elastic.resize(sim, gang, grew=[pod for pod, _ in binds])
            sim.jobs_running([pod for pod, _ in binds])
        elif sim.options.startup_delay > 0:
            sim.queue.push(Event(sim.now + sim.options.startup_delay, Kind.RUNNING, gang))
        else:
            sim.try_start(gang)

    def evict(self, pod: PodInfo, gang: GangInfo) -> None:
        self.sim.instants.evicting(gang.key)
        self.sim.disruptions.evicted(self.sim, pod)

    def reserve(self, pod: PodInfo, node: int) -> None:
        self.reserved.add(pod.key)
        self.sim.shares.asked(self.sim, pod, -1)
        self.sim.meter.allocate(self.sim.gpu(pod), started=False)
        self.sim.emit("reserve", pod=pod, node=self.sim.state.table.names[node])

    def release(self, pod: PodInfo, node: int) -> None:
        self.reserved.discard(pod.key)
        self.sim.shares.asked(self.sim, pod, +1)
        self.sim.meter.release(self.sim.gpu(pod), started=False)
        self.sim.emit("unreserve", pod=pod)

    def write_status(self, gang: GangInfo, condition: Condition) -> None:
        """The condition is in the state already; the run's records report it."""

    def timed_out(self, gang: GangInfo) -> None:
        message = gang.condition.message if gang.condition else ""
        self.sim.emit("timeout", gang=gang, message=message)

    def wake_at(self, at: float) -> None:
        # a cycle asks for one more cycle at its own instant (a preemptor binds in it): the
        # wake-up of that instant, if any, has run already
        if at == self.sim.now and not self.sim.instants.wake_allowed(at):
            return  # a loop of evictions at this instant: cut short (:mod:`..instants`)
        if at not in self.wakeups or at == self.sim.now:
            self.wakeups.add(at)
            self.sim.queue.push(Event(at, Kind.RETRY, "wake"))

    def recheck_at(self, at: float) -> None:
        if at not in self.wakeups:  # not progress: a run with nothing left to do ends
            self.wakeups.add(at)
            self.sim.queue.push(Event(at, Kind.RETRY, "recheck", progress=False))

    def expected(self, gang: GangInfo, at: float | None, why: str) -> None:
        """Record the gang's first expected start; log an ``expect`` event when it changes."""
        self.sim.unborn.told(gang, at, why)  # the unborn pods that arrived with it, first
        record = self.sim.records.get(gang.ident)
        if record is None or (record.expected_last, record.expected_why) == (at, why):
            return
        if record.expected_start_first is None:
            record.expected_start_first = at
        record.expected_last, record.expected_why = at, why
        self.sim.emit("expect", gang=gang, message=why, extra={"expected_start": at})

    def deadline_miss(self, gang: GangInfo, late: float, why: str) -> None:
        """A ``deadline`` event: the gang is expected to miss its deadline."""
        record = self.sim.records.get(gang.ident)
        if record is not None:
            record.foreseen_late = True
        self.sim.emit("deadline", gang=gang, message=why, extra={"late": late})

    def attempts(self, count: int) -> None:
        self.sim.attempts += count
