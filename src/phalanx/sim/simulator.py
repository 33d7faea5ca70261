"""The simulation loop: the engine on a virtual clock.

Objects appear at ``phalanx.dev/submit-after`` and go at ``phalanx.dev/delete-after``. After
all events of an instant are handled, one scheduling cycle runs (only if something changed)
and its binds are applied at once. A bound pod runs after ``startup_delay`` (default 0). A
gang's work starts when its minimum (and every role minimum) is running and lasts its
``phalanx.dev/duration``; until then its bound members only hold resources. A lone pod runs its
own duration; no duration means it runs until the end of the run.

The run ends at ``until``, or when no event that could change anything is left. At that point
a gang that holds resources but cannot start is *deadlocked*: nothing will ever free them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, JobSpec, NodeSpec, PodSpec, QuotaSpec
from phalanx.api.workload import Item, Workload
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
from phalanx.framework.backend import apply
from phalanx.policies import Scheduler, get_policy
from phalanx.sim.backend import SimBackend
from phalanx.sim.controller import JobController
from phalanx.sim.events import Event, EventQueue, Kind
from phalanx.sim.fragmentation import FragMeter, run_target
from phalanx.sim.metrics import (
    DEFAULT_GPU_HOUR_PRICE,
    GangRecord,
    GpuMeter,
    SimResult,
    StepSeries,
)
from phalanx.sim.prepare import check, resource_index
from phalanx.sim.quota import QuotaTracker

EventSink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class SimOptions:
    policy: str = "phalanx"
    seed: int = 0
    until: float | None = None
    price: float = DEFAULT_GPU_HOUR_PRICE
    startup_delay: float = 0.0
    scoring: str | None = None
    actions: tuple[str, ...] | None = None  # None: the policy's own list


class Simulation:
    def __init__(
        self, workload: Workload, options: SimOptions = SimOptions(), sink: EventSink | None = None
    ) -> None:
        if options.until is not None and options.until < 0:
            raise InputError("must not be negative", field="--until")
        self.options = options
        self.sink = sink
        index = resource_index(workload)
        check(workload, index)
        self.state = ClusterState(list(workload.of(NodeSpec)), index)
        target = run_target(workload)  # FGD's target workload: the run's own pod shapes
        self.scheduler = Scheduler(
            get_policy(options.policy),
            seed=options.seed,
            scoring=options.scoring,
            actions=options.actions,
            target=target,
        )
        self.gpu_columns = index.gpu_columns()
        self.quota = QuotaTracker()
        self.jobs = JobController(self._create_pod)
        self.queue = EventQueue()
        self.meter = GpuMeter()
        self.frag = FragMeter(target)
        self.now = 0.0
        self.records: dict[str, GangRecord] = {}
        self.waiting_count = 0
        self.queue_length = StepSeries()
        self.rejected: list[str] = []
        self.cycles = 0
        self.attempts = 0
        self.backend = SimBackend(self)
        for item in workload.items:
            if isinstance(item.spec, NodeSpec):
                continue
            self.queue.push(Event(item.timing.submit_after, Kind.ARRIVE, item))
            if item.timing.delete_after is not None:
                at = item.timing.submit_after + item.timing.delete_after
                self.queue.push(Event(at, Kind.DELETE, item))

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> SimResult:
        until = self.options.until
        while self.queue.has_progress():
            now = self.queue.peek_time()
            if until is not None and now > until:
                break
            self._advance(now)
            changed = False
            while len(self.queue) and self.queue.peek_time() == now:
                changed |= self._handle(self.queue.pop())
            if changed:
                self._cycle()
            self.frag.sample(now, self.state.table)
        if not self.queue.has_progress():
            self._detect_deadlocks()
        self._advance(self.now if until is None else until)
        return self._result()

    def _advance(self, now: float) -> None:
        self.meter.advance(now)
        self.now = now

    def _handle(self, event: Event) -> bool:
        if event.kind is Kind.ARRIVE:
            assert isinstance(event.payload, Item)
            self._arrive(event.payload)
        elif event.kind is Kind.DELETE:
            assert isinstance(event.payload, Item)
            self._delete(event.payload)
        elif event.kind is Kind.FINISH:
            assert isinstance(event.payload, GangInfo)
            self._finish(event.payload)
        elif event.kind is Kind.RUNNING:
            assert isinstance(event.payload, GangInfo)
            self.try_start(event.payload)
        return True

    def _cycle(self) -> None:
        self.cycles += 1
        apply(self.scheduler.cycle(self.state, self.now), self.state, self.backend)

    # -- objects come and go ---------------------------------------------------------------
    def _arrive(self, item: Item) -> None:
        spec = item.spec
        if isinstance(spec, GangSpec):
            gang = self.state.add_gang(spec, self.now)
            self._record(gang)
            self.emit("submit", gang=gang)
            if spec.timeout_seconds is not None:
                self.queue.push(Event(self.now + spec.timeout_seconds, Kind.CHECK, gang))
        elif isinstance(spec, PodSpec):
            refusal = self._create_pod(spec)
            if refusal is not None:
                self.rejected.append(f"{spec.key}: {refusal}")
        elif isinstance(spec, JobSpec):
            self.jobs.add(spec)
        elif isinstance(spec, QuotaSpec):
            self.quota.add(spec)

    def _create_pod(self, spec: PodSpec) -> str | None:
        refusal = self.quota.refusal(spec)
        if refusal is not None:
            return refusal
        self.quota.charge(spec)
        pod = self.state.add_pod(spec, self.now)
        if spec.gang_key is None:
            self._record(pod.gang)
        self.emit("submit", pod=pod)
        return None

    def _delete(self, item: Item) -> None:
        spec = item.spec
        if isinstance(spec, QuotaSpec):
            self.quota.remove(spec)
            self.jobs.resync(spec.namespace)
        elif isinstance(spec, PodSpec):
            pod = self.state.pod_of(spec.key)
            if pod is not None:
                self.remove_pod(pod, PodStatus.DELETED)
        elif isinstance(spec, JobSpec):
            self.jobs.delete(spec)
            for pod in list(self.state.pods.values()):
                if pod.spec.owner == f"Job/{spec.name}" and pod.spec.namespace == spec.namespace:
                    self.remove_pod(pod, PodStatus.DELETED)
        elif isinstance(spec, GangSpec):
            gang = self.state.gangs.get(spec.key)
            if gang is not None:
                gang.invalid = "its PodGroup was deleted"

    def remove_pod(self, pod: PodInfo, status: PodStatus) -> None:
        if pod.status in (PodStatus.SUCCEEDED, PodStatus.DELETED):
            return
        if pod.status in (PodStatus.BOUND, PodStatus.RESERVED):
            started = pod.gang.started is not None and pod.status is PodStatus.BOUND
            self.meter.release(self.gpu(pod), started=started)
        self.state.release(pod, status)
        self.quota.refund(pod.spec)
        self.jobs.pod_gone(pod.spec, succeeded=status is PodStatus.SUCCEEDED)
        self.emit("finish" if status is PodStatus.SUCCEEDED else "delete", pod=pod)
        self.jobs.resync(pod.spec.namespace)

    # -- gangs start and finish ------------------------------------------------------------
    def try_start(self, gang: GangInfo) -> None:
        if gang.started is not None or gang.finished is not None:
            return
        ready_at = self.now - self.options.startup_delay
        running = [
            p
            for p in gang.members
            if p.status is PodStatus.BOUND and p.bound_at is not None and p.bound_at <= ready_at
        ]
        roles = {role: sum(p.spec.role == role for p in running) for role in gang.role_minimums}
        if len(running) < gang.min_member or any(
            roles[role] < need for role, need in gang.role_minimums.items()
        ):
            return
        gang.started = self.now
        self._queued(-1)
        self.meter.started(sum(self.gpu(p) for p in gang.members if p.status is PodStatus.BOUND))
        self.records[gang.ident].start = self.now
        self.emit("start", gang=gang)
        duration = self._duration(gang)
        if duration is not None:
            self.queue.push(Event(self.now + duration, Kind.FINISH, gang))

    def _duration(self, gang: GangInfo) -> float | None:
        if gang.spec is not None and gang.spec.duration is not None:
            return gang.spec.duration
        durations = [p.spec.duration for p in gang.members if p.spec.duration is not None]
        return max(durations) if durations else None

    def _finish(self, gang: GangInfo) -> None:
        if gang.started is None:
            self._queued(-1)
        gang.finished = self.now
        self.records[gang.ident].finish = self.now
        for pod in list(gang.members):
            if pod.status is PodStatus.BOUND:
                self.remove_pod(pod, PodStatus.SUCCEEDED)
            elif pod.status is PodStatus.PENDING:
                self.remove_pod(pod, PodStatus.DELETED)
        self.emit("finish", gang=gang)

    def _detect_deadlocks(self) -> None:
        for gang in self.state.gangs.values():
            if gang.started is None and gang.holding():
                self.records[gang.ident].state = "deadlocked"
                self.emit("deadlock", gang=gang)

    # -- output --------------------------------------------------------------------------------
    def _record(self, gang: GangInfo) -> None:
        kind = "Pod" if gang.implicit else "PodGroup"
        self.records[gang.ident] = GangRecord(
            gang.namespace, gang.name, kind, gang.min_member, submit=self.now
        )
        self._queued(+1)

    def _queued(self, delta: int) -> None:
        """Gangs submitted whose work has not started, over time."""
        self.waiting_count += delta
        self.queue_length.set(self.now, self.waiting_count)

    def gpu(self, pod: PodInfo) -> int:
        return int(pod.request[self.gpu_columns].sum()) if self.gpu_columns else 0

    def emit(
        self,
        kind: str,
        *,
        pod: PodInfo | None = None,
        gang: GangInfo | None = None,
        node: str | None = None,
        message: str | None = None,
    ) -> None:
        if self.sink is None:
            return
        gang = gang or (pod.gang if pod is not None else None)
        event: dict[str, Any] = {
            "t": self.now,
            "type": kind,
            "pod": pod.key if pod is not None else None,
            "gang": None if gang is None or gang.implicit else gang.key,
            "node": node,
            "requests": self.state.index.mapping(pod.request) if pod is not None else None,
        }
        if message:
            event["message"] = message
        self.sink(event)

    def _result(self) -> SimResult:
        for ident, record in self.records.items():
            gang = self.state.gangs[ident]
            record.gpus = sum(self.gpu(pod) for pod in gang.members) / 1000
            record.timed_out = gang.timed_out
            if record.state == "deadlocked":
                record.reason = gang.condition.message if gang.condition else ""
            elif gang.finished is not None:
                record.state = "completed"
            elif gang.started is not None:
                record.state = "running"
            else:
                record.reason = gang.condition.message if gang.condition else ""
        gpu_capacity = (
            sum(float(self.state.table.total_allocatable()[c]) for c in self.gpu_columns) / 1000
        )
        return SimResult(
            policy=self.options.policy,
            seed=self.options.seed,
            end=self.now,
            gangs=list(self.records.values()),
            idle_gpu_hours=self.meter.idle_gpu_hours,
            price=self.options.price,
            gpu_capacity=gpu_capacity,
            gpu_allocation=self.meter.allocated.points,
            gpu_running=self.meter.running.points,
            queue_length=self.queue_length.points,
            fragmentation=self.frag.ratio.points,
            rejected=self.rejected,
            attempts=self.attempts,
            cycles=self.cycles,
        )


def simulate(
    workload: Workload, options: SimOptions = SimOptions(), sink: EventSink | None = None
) -> SimResult:
    """Run ``workload`` under ``options`` and return what was measured."""
    return Simulation(workload, options, sink).run()
