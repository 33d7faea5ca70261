"""The simulation loop: the engine on a virtual clock.

Objects appear at ``phalanx.dev/submit-after`` and go at ``phalanx.dev/delete-after``. After
all events of an instant are handled, one scheduling cycle runs (only if something changed)
and its binds are applied at once. A bound pod runs after ``startup_delay`` (default 0). A
gang's work starts when its minimum (and every role minimum) is running and lasts its
``phalanx.dev/duration``; until then its bound members only hold resources. A lone pod runs its
own duration; no duration means it runs until the end of the run.

The run ends at ``until``, or when no event that could change anything is left. At that point
a gang that holds resources but cannot start is *deadlocked*: nothing will ever free them.

Real manifests carry no duration: a gang without one runs ``default_duration`` (counted in the
result), except the pods of serving controllers (Deployment, StatefulSet, ...). The policy
under test places every pod unless ``scheduler_name`` is set; then it places only the pods
naming that scheduler and the ``kube-default`` baseline places the others
(:mod:`phalanx.sim.schedulers`). A pod with ``spec.nodeName`` (a snapshot's running pod) is
bound there when it appears; a gated pod waits until ``phalanx.dev/ungate-after``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import ControllerSpec, GangSpec, JobSpec, NodeSpec, PodSpec, QuotaSpec
from phalanx.api.topology import HyperNodeSpec, TopologySpec
from phalanx.api.workload import Item, Workload
from phalanx.cluster import topology
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import HOLDING, GangInfo, PodInfo, PodStatus
from phalanx.framework.backend import apply
from phalanx.sim.backend import SimBackend
from phalanx.sim.controller import JobController
from phalanx.sim.controllers.owner import OwnerController
from phalanx.sim.estimates import EstimateModel
from phalanx.sim.events import Event, EventQueue, Kind
from phalanx.sim.fragmentation import FragMeter, run_target
from phalanx.sim.instants import Instants
from phalanx.sim.loops import Repeats
from phalanx.sim.metrics import (
    DEFAULT_GPU_HOUR_PRICE,
    GangRecord,
    GpuMeter,
    SimResult,
    StepSeries,
)
from phalanx.sim.prepare import check, resource_index
from phalanx.sim.quota import QuotaTracker
from phalanx.sim.schedulers import GATED, nothing_placed, schedulers_for, tell_lazily
from phalanx.sim.tenancy import Disruptions, Elastic, ShareMeter, add_object, remove_object
from phalanx.sim.unborn import Unborn
from phalanx.traces._gangs import paused_gc

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
    orderings: tuple[str, ...] | None = None  # None: the policy's own ordering plugins
    scheduler_name: str | None = None  # place only these pods; kube-default places the rest
    default_duration: float | None = None  # for gangs with none; None: until the end
    estimates: str = "given"  # the error model of runtime estimates (sim/estimates.py)
    usage_half_life: float | None = None  # queues: decayed past usage counts (seconds)


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
        self.schedulers = schedulers_for(workload, options, target)
        self.scheduler = self.schedulers[-1]  # the policy under test
        if sink is None:
            tell_lazily(self.schedulers)
        self.state.queues.half_life = options.usage_half_life
        self.state.topology = topology.TopologySource(
            list(workload.of(TopologySpec)), list(workload.of(HyperNodeSpec))
        )
        self.gpu_columns = index.gpu_columns()
        self.quota = QuotaTracker()
        self.unborn = Unborn(self, workload)  # a big Job's pods that cannot matter yet
        self.jobs = JobController(self._create_pod, deferral=self.unborn)
        self.owners = OwnerController(self._create_pod, self._add_gang, self.jobs, options.seed)
        self.ungated: set[str] = set()
        self.queue = EventQueue()
        self.meter = GpuMeter()
        self.frag = FragMeter(target)
        self.now = 0.0
        self.records: dict[str, GangRecord] = {}
        self.waiting_count = 0
        self.queue_length = StepSeries()
        self.rejected: list[str] = []
        self.refused: Counter[str] = Counter()  # per gang key, its pods refused on arrival
        self.suspended: list[str] = []
        self.cycles = 0
        self.estimates = EstimateModel(options.estimates, options.seed)
        self.attempts = 0
        self.backend = SimBackend(self)
        self.disruptions = Disruptions()
        self.elastic = Elastic()
        self.shares = ShareMeter()
        self.finish_at: dict[str, float] = {}
        self.instants = Instants()
        self.repeats = Repeats()  # a stretch of wake-ups only that repeats ends the run
        for item in workload.items:
            if isinstance(item.spec, (NodeSpec, TopologySpec, HyperNodeSpec)):
                continue
            self.queue.push(Event(item.timing.submit_after, Kind.ARRIVE, item))
            if item.timing.delete_after is not None:
                at = item.timing.submit_after + item.timing.delete_after
                self.queue.push(Event(at, Kind.DELETE, item))

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> SimResult:
        until = self.options.until
        while self.queue.has_progress():
            if self._replaced(self.queue.peek()):
                self.queue.pop()  # no instant of its own: the run does not end there
                continue
            now = self.queue.peek_time()
            if until is not None and now > until:
                break
            self._advance(now)
            changed = False
            while len(self.queue) and self.queue.peek_time() == now:
                event = self.queue.pop()
                self.repeats.handled(event)
                changed |= self._handle(event)
            if changed:
                self._cycle()
            self.frag.sample(now, self.state.table, self.topologies().primary)
            if self.repeats.looping(self.queue, self.state, now):
                self.repeats.end_here(now, self._retrying())  # for ever (:mod:`.loops`)
                break
        if not self.queue.has_progress() or self.repeats.ended:
            self._detect_deadlocks()
        self._advance(self.now if until is None else until)
        return self._result()

    def _advance(self, now: float) -> None:
        self.meter.advance(now)
        self.shares.advance(now)
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
            if self._replaced(event):
                return False
            self._finish(event.payload)
        elif event.kind is Kind.RUNNING:
            assert isinstance(event.payload, GangInfo)
            self.try_start(event.payload)
        elif event.kind is Kind.UNGATE:
            assert isinstance(event.payload, PodInfo)
            self._ungate(event.payload)
        return True

    def _replaced(self, event: Event) -> bool:
        """A FINISH planned before an eviction stopped the gang's work, or before its members
        changed (an elastic gang's end moves)."""
        if event.kind is not Kind.FINISH:
            return False
        assert isinstance(event.payload, GangInfo)
        return self.finish_at.get(event.payload.ident) != event.time

    def _cycle(self) -> None:
        self.cycles += 1
        self.instants.cycle(self.now)
        with paused_gc():  # a cycle over a million waiting gangs makes millions of objects
            self.unborn.top_up()
            for scheduler in self.schedulers:
                result = scheduler.cycle(self.state, self.now)
                apply(result, self.state, self.backend)
                self.unborn.after_cycle(result)
        self.shares.sample(self)

    # -- objects come and go ---------------------------------------------------------------
    def _arrive(self, item: Item) -> None:
        spec = item.spec
        if isinstance(spec, GangSpec):
            self._add_gang(spec)
        elif isinstance(spec, ControllerSpec):
            self.suspended.extend(f"{j.namespace}/{j.name}" for j in spec.jobs if j.suspended)
            self.owners.add(spec)
        elif isinstance(spec, PodSpec):
            refusal = self._create_pod(spec)
            if refusal is not None:
                self.rejected.append(f"{spec.key}: {refusal}")
                if spec.gang_key is not None:
                    self.refused[spec.gang_key] += 1
        elif isinstance(spec, JobSpec):
            if spec.suspended:
                self.suspended.append(f"{spec.namespace}/{spec.name}")
            self.jobs.add(spec)
        elif isinstance(spec, QuotaSpec):
            self.unborn.make_all(spec.namespace)  # pods that exist count against it
            self.quota.add(spec)
        else:
            add_object(self, spec)

    def _add_gang(self, spec: GangSpec) -> None:
        gang = self.state.add_gang(self.estimates.gang(spec), self.now)
        self._record(gang)
        self.emit("submit", gang=gang)
        if spec.timeout_seconds is not None:
            self.queue.push(Event(self.now + spec.timeout_seconds, Kind.CHECK, gang))

    def _create_pod(self, spec: PodSpec) -> str | None:
        node = self.state.node_index(spec.node_name) if spec.node_name else None
        if spec.node_name and node is None:
            return f"spec.nodeName {spec.node_name!r} is not a node of the cluster"
        # a pod already running was admitted when it was created: a quota set or lowered since
        # does not remove it (the API server checks quotas at creation only); it still counts
        refusal = None if node is not None else self.quota.refusal(spec)
        if refusal is not None:
            return refusal
        self.quota.charge(spec)
        declared = spec.declared_gang
        if declared is not None and declared.key not in self.state.gangs:
            self._add_gang(declared)  # recorded as it appears; later pods raise its minimums
        pod = self.state.add_pod(self.estimates.pod(spec), self.now)
        self.shares.asked(self, pod, +1)
        if spec.gang_key is None:
            self._record(pod.gang)
        self.emit("submit", pod=pod)
        if spec.gates:
            pod.gang.hold = (GATED, f"pod {pod.key} is gated ({', '.join(spec.gates)})")
            if spec.ungate_after is not None:
                self.queue.push(Event(self.now + spec.ungate_after, Kind.UNGATE, pod))
        if node is not None:
            self._bind_running(pod, node)
        return None

    def _bind_running(self, pod: PodInfo, node: int) -> None:
        """A pod the input shows already running on ``node`` (a snapshot): bound at once, and
        running (its start-up is over). Whether its gang's work runs is asked once every
        object of the instant has arrived: an elastic gang's work is sized on all its pods."""
        self.meter.allocate(self.gpu(pod), started=pod.gang.started is not None)
        self.state.bind(pod, node, self.now)
        self.emit("bind", pod=pod, node=self.state.table.names[node])
        self.queue.push(Event(self.now, Kind.RUNNING, pod.gang))

    def _ungate(self, pod: PodInfo) -> None:
        self.ungated.add(pod.key)
        gang = pod.gang
        gated = [p for p in gang.members if p.spec.gates and p.key not in self.ungated]
        gang.hold = None
        if gated:
            names = ", ".join(gated[0].spec.gates)
            gang.hold = (GATED, f"pod {gated[0].key} is gated ({names})")
        self.state.version += 1
        self.state.unblock(gang)
        self.emit("ungate", pod=pod)

    def _delete(self, item: Item) -> None:
        spec = item.spec
        if isinstance(spec, QuotaSpec):
            self.quota.remove(spec)
            self.jobs.resync(spec.namespace)
            self.owners.resync(spec.namespace)
        elif isinstance(spec, PodSpec):
            pod = self.state.pod_of(spec.key)
            if pod is not None:
                self.remove_pod(pod, PodStatus.DELETED)
        elif isinstance(spec, JobSpec):
            self.unborn.make_all(spec.namespace, spec.name)
            self.jobs.delete(spec)
            self._remove_owned(spec.namespace, {f"Job/{spec.name}"})
        elif isinstance(spec, ControllerSpec):
            for job in spec.jobs:
                self.unborn.make_all(spec.namespace, job.name)
            self.owners.delete(spec)
            self._remove_owned(spec.namespace, {spec.owner, *(f"Job/{j.name}" for j in spec.jobs)})
            for gang_spec in spec.gangs:
                gang = self.state.gangs.get(gang_spec.key)
                if gang is not None:
                    gang.invalid = f"its {spec.kind} was deleted"
        elif isinstance(spec, GangSpec):
            gang = self.state.gangs.get(spec.key)
            if gang is not None:
                gang.invalid = "its PodGroup was deleted"
        else:
            remove_object(self, spec)

    def _remove_owned(self, namespace: str, owners: set[str]) -> None:
        """Delete the pods of ``owners``, in the order they were created (a Job's pods made
        late, see sim/unborn.py, by their arrival numbers)."""
        doomed = [
            pod
            for pod in self.state.pods.values()
            if pod.spec.owner in owners and pod.spec.namespace == namespace
        ]
        if self.unborn.deferred(namespace, owners):
            doomed.sort(key=lambda pod: pod.seq)
        for pod in doomed:
            self.remove_pod(pod, PodStatus.DELETED)

    def remove_pod(self, pod: PodInfo, status: PodStatus) -> None:
        if pod.status in (PodStatus.SUCCEEDED, PodStatus.DELETED):
            return
        if pod.status is PodStatus.PENDING:
            self.shares.asked(self, pod, -1)
        if pod.status in (PodStatus.BOUND, PodStatus.RESERVED):
            started = pod.gang.started is not None and pod.status is PodStatus.BOUND
            self.meter.release(self.gpu(pod), started=started)
        self.state.release(pod, status)
        self.quota.refund(pod.spec)
        self.jobs.pod_gone(pod.spec, succeeded=status is PodStatus.SUCCEEDED)
        self.emit("finish" if status is PodStatus.SUCCEEDED else "delete", pod=pod)
        self.jobs.resync(pod.spec.namespace)
        self.owners.resync(pod.spec.namespace)

    # -- gangs start and finish ------------------------------------------------------------
    def try_start(self, gang: GangInfo) -> None:
        if gang.started is not None or gang.finished is not None:
            return
        ready_at = self.now - self.options.startup_delay
        running = [  # a snapshot's running pod (it has its nodeName) is past its start-up
            p
            for p in gang.members
            if p.status is PodStatus.BOUND
            and p.bound_at is not None
            and (p.bound_at <= ready_at or p.spec.node_name)
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
        primary = self.topologies().primary
        if primary is not None and not gang.implicit:
            self.records[gang.ident].domains = primary.spans([p.node for p in running])
        self.emit("start", gang=gang)
        duration = self._duration(gang)
        if duration is not None:
            self.elastic.start(self, gang, self.disruptions.remaining(gang, duration))
        self.jobs_running(running)

    def jobs_running(self, pods: list[PodInfo]) -> None:
        """Tell the Job controller these pods run (a JobSet's Job may wait for them); pods it
        makes then (perhaps while a cycle's result is applied) get a cycle of their own."""
        if self.jobs.waiting:
            made = [self.jobs.pod_running(pod.spec) for pod in pods]
            if any(made):
                self.backend.wake_at(self.now)

    def plan_finish(self, gang: GangInfo, at: float) -> None:
        """``gang``'s work ends at ``at`` (a FINISH planned before no longer counts)."""
        self.finish_at[gang.ident] = at
        self.queue.push(Event(at, Kind.FINISH, gang))

    def _duration(self, gang: GangInfo) -> float | None:
        if gang.spec is not None and gang.spec.duration is not None:
            return gang.spec.duration
        durations = [p.spec.duration for p in gang.members if p.spec.duration is not None]
        if durations:
            return max(durations)
        if any(self.owners.serves(p.spec) for p in gang.members):
            return None  # a serving replica runs until stopped
        default = self.options.default_duration
        if default is not None:
            self.records[gang.ident].default_duration = True
        return default

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
                record = self.records[gang.ident]
                record.state = "deadlocked"
                if gang.condition is None:  # never tried: it has no pending member to place
                    record.reason = self._short_of_members(gang)
                self.emit("deadlock", gang=gang, message=record.reason)

    def _short_of_members(self, gang: GangInfo) -> str:
        """Why a gang that was never tried cannot start (its members all run, as a snapshot's,
        or it has none): too few exist."""
        alive = gang.alive()
        refused = self.refused.get(gang.key, 0)
        why = f" ({refused} refused, see pods refused)" if refused else ""
        if alive < gang.min_member:
            return f"{alive} of minMember {gang.min_member} pods exist{why}; no other will come"
        roles = Counter(p.spec.role for p in gang.members if p.status in HOLDING)
        for role, need in sorted(gang.role_minimums.items()):
            if roles[role] < need:
                return f"role {role!r} has {roles[role]} of its minimum {need} pods{why}"
        return ""

    # -- output --------------------------------------------------------------------------------
    def _record(self, gang: GangInfo) -> None:
        kind = "Pod" if gang.implicit else "PodGroup"
        if gang.spec is not None:
            queue = gang.spec.queue
        else:
            queue = gang.members[0].spec.queue if gang.members else ""
        self.records[gang.ident] = GangRecord(
            gang.namespace, gang.name, kind, gang.min_member, submit=self.now, queue=queue
        )
        self._queued(+1)
        self.unborn.arrived(gang)

    def queued(self, delta: int) -> None:
        self._queued(delta)

    def recreate(self, pod: PodInfo) -> None:
        """An evicted pod comes back pending (a Job's pod is re-created by the Job controller);
        a lone pod keeps its record (and its place in the queue count). A pod a snapshot showed
        running on a node comes back pending too, without that node (re-created with it, it
        went straight back where it was evicted from, and the preemption bought nothing)."""
        run = self.jobs.owner_of(pod.spec)
        if run is not None:  # the Job controller replaces a deleted pod
            self.jobs.sync(run)
            return
        old = self.records.get(pod.gang.ident) if pod.gang.implicit else None
        spec = replace(pod.spec, node_name="") if pod.spec.node_name else pod.spec
        refusal = self._create_pod(spec)
        if refusal is not None:  # its namespace's quota was lowered since it was created
            self.rejected.append(f"{spec.key}: {refusal} (when re-created after its eviction)")
            if old is not None:
                old.start = None
                old.reason = f"evicted, then refused on re-creation: {refusal}"
            return
        if old is not None:
            self.records[pod.gang.ident] = old
            old.start = None
            self._queued(-1)

    def _queued(self, delta: int) -> None:
        """Gangs submitted whose work has not started, over time."""
        self.waiting_count += delta
        self.queue_length.set(self.now, self.waiting_count)

    def path(self, node: int) -> str | None:
        """The node's topology path for events (None without a topology)."""
        return self.topologies().path(node) or None

    def topologies(self) -> topology.Topologies:
        return self.state.topology.over(self.state.table.facts)

    def gpu(self, pod: PodInfo) -> int:
        columns = self.gpu_columns
        if len(columns) == 1:  # the usual case: one GPU resource
            return int(pod.request[columns[0]])
        return sum(int(pod.request[column]) for column in columns)

    def emit(
        self,
        kind: str,
        *,
        pod: PodInfo | None = None,
        gang: GangInfo | None = None,
        node: str | None = None,
        message: str | None = None,
        path: str | None = None,
        extra: dict[str, Any] | None = None,
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
        if path:
            event["topology"] = path
        event.update(extra or {})
        self.sink(event)

    def _result(self) -> SimResult:
        if self.unborn.tails and self._nothing_placed():
            self.unborn.make_all()  # its message counts every pod
        for ident, record in self.records.items():
            gang = self.state.gangs.get(ident)
            if gang is None:
                continue  # a Job's pod not made yet (filled below)
            # its size: members deleted and made again (evicted, then re-created by their Job)
            # count once, as their replacements (a gang deleted whole: as it was)
            kept = [pod for pod in gang.members if pod.status is not PodStatus.DELETED]
            record.gpus = sum(self.gpu(pod) for pod in kept or gang.members) / 1000
            record.min_member = gang.min_member  # a gang group learns it from its pods
            record.queue = self.state.queues.queue_of(gang)
            record.priority = gang.priority
            record.timed_out = gang.timed_out
            if gang.spec is not None and gang.spec.deadline is not None:
                record.deadline = gang.spec.deadline.due(gang.created)
            if record.state == "deadlocked":
                record.reason = gang.condition.message if gang.condition else record.reason
            elif gang.finished is not None:
                record.state = "completed"
            elif gang.started is not None:
                record.state = "running"
            else:
                told = gang.condition.message if gang.condition else self._short_of_members(gang)
                record.reason = record.reason or told
        self.unborn.finish_records()
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
            fragmentation_by_domain=self.frag.by_domain(self.now),
            rejected=self.rejected,
            suspended=self.suspended,
            attempts=self.attempts,
            cycles=self.cycles,
            default_duration=self.options.default_duration,
            nothing_placed=self._nothing_placed(),
            preemptions=self.disruptions.preemptions,
            reclaims=self.disruptions.reclaims,
            shrinks=self.disruptions.shrinks,
            lost_gpu_hours=self.disruptions.lost_gpu_seconds / 3600,
            queues=self.shares.to_json(gpu_capacity * 1000, self.now, self._waits()),
            livelocks=self.instants.cut,
            retry_loop=self.repeats.end,
        )

    def _retrying(self) -> list[str]:
        """The gangs still short of their minimum (whose wake-ups kept the run going)."""
        gangs = self.state.gangs.values()
        return [gang.key for gang in gangs if gang.waiting_members and not gang.ready()]

    def _nothing_placed(self) -> str:
        """Why no pod was ever bound, or "" when some were."""
        placed = (PodStatus.BOUND, PodStatus.RESERVED, PodStatus.SUCCEEDED, PodStatus.RELEASING)
        if any(p.status in placed or p.bound_at is not None for p in self.state.pods.values()):
            return ""
        return nothing_placed(self.state.gangs.values(), self.options.scheduler_name)

    def _waits(self) -> dict[str, list[float]]:
        waits: dict[str, list[float]] = {}
        for record in self.records.values():
            if record.start is not None:
                waits.setdefault(record.queue, []).append(record.start - record.submit)
        return waits


def simulate(
    workload: Workload, options: SimOptions = SimOptions(), sink: EventSink | None = None
) -> SimResult:
    """Run ``workload`` under ``options`` and return what was measured."""
    return Simulation(workload, options, sink).run()
