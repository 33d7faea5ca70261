"""What a run measured.

GPU amounts are tracked in milli-GPU (integers) and reported in GPU-hours. *Idle* GPUs are
GPUs bound to members of gangs whose work has not started: they are held, paid for, and do
nothing — the "money on fire" figure. A lone pod starts when it runs, so it is never idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from phalanx.sim.waits import deadlines, eta_error, max_wait, max_wait_by_size

#: Default price of one GPU-hour, in dollars: about $25/hour for 7 idle GPUs.
DEFAULT_GPU_HOUR_PRICE = 3.5


@dataclass(slots=True)
class GangRecord:
    namespace: str
    name: str
    kind: str  # PodGroup | Pod
    min_member: int
    submit: float
    start: float | None = None
    finish: float | None = None
    state: str = "waiting"  # completed | running | waiting | deadlocked
    reason: str = ""
    gpus: float = 0.0  # GPUs its members request, in GPUs
    timed_out: bool = False
    queue: str = ""  # its queue (a LocalQueue resolved to its ClusterQueue; "default")
    default_duration: bool = False  # ran --default-duration, having no duration of its own
    domains: dict[str, int] | None = None  # domains spanned per topology level, once started
    expected_start_first: float | None = None  # the first expected start made while it waited
    expected_last: float | None = None  # the latest one and its reason (not in the JSON)
    expected_why: str = ""
    deadline: float | None = None  # when it must be done (phalanx.dev/deadline)
    foreseen_late: bool = False  # found, while it waited, to miss its deadline
    priority: int = 0
    preempted: int = 0  # times its work was stopped by an eviction
    lost_gpu_hours: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "kind": self.kind,
            "min_member": self.min_member,
            "submit": self.submit,
            "start": self.start,
            "finish": self.finish,
            "state": self.state,
            "queue_delay": None if self.start is None else self.start - self.submit,
            "completion_time": None if self.finish is None else self.finish - self.submit,
            "reason": self.reason,
            "gpus": self.gpus,
            "timed_out": self.timed_out,
            "queue": self.queue,
            "default_duration": self.default_duration,
            "domains": self.domains,
            "expected_start_first": self.expected_start_first,
            "deadline": self.deadline,
            "deadline_miss_foreseen": self.foreseen_late,
            "priority": self.priority,
            "preempted": self.preempted,
            "lost_gpu_hours": round(self.lost_gpu_hours, 6),
        }


@dataclass(slots=True)
class StepSeries:
    """A step function of time: ``[(t, value), ...]``, one point per change."""

    points: list[tuple[float, float]] = field(default_factory=lambda: [(0.0, 0.0)])

    def set(self, t: float, value: float) -> None:
        if self.points[-1][0] == t:
            self.points[-1] = (t, value)
        elif self.points[-1][1] != value:
            self.points.append((t, value))


@dataclass(slots=True)
class GpuMeter:
    """Integrates held-but-idle GPU time; records allocated and running GPUs over time."""

    idle_milli: int = 0
    allocated_milli: int = 0
    running_milli: int = 0
    idle_milli_seconds: float = 0.0
    last: float = 0.0
    allocated: StepSeries = field(default_factory=StepSeries)
    running: StepSeries = field(default_factory=StepSeries)

    def advance(self, now: float) -> None:
        if now > self.last:
            self.idle_milli_seconds += self.idle_milli * (now - self.last)
            self.last = now

    def allocate(self, milli: int, *, started: bool) -> None:
        """A pod took ``milli`` GPU; it is idle unless its gang's work has started."""
        self.allocated_milli += milli
        self._held(milli, started)

    def release(self, milli: int, *, started: bool) -> None:
        self.allocated_milli -= milli
        self._held(-milli, started)

    def started(self, milli: int) -> None:
        """A gang's work started: its bound GPUs turn from idle to running."""
        self.idle_milli -= milli
        self.running_milli += milli
        self.running.set(self.last, self.running_milli / 1000)

    def _held(self, milli: int, started: bool) -> None:
        if started:
            self.running_milli += milli
            self.running.set(self.last, self.running_milli / 1000)
        else:
            self.idle_milli += milli
        self.allocated.set(self.last, self.allocated_milli / 1000)

    @property
    def idle_gpu_hours(self) -> float:
        return self.idle_milli_seconds / 1000 / 3600


@dataclass(slots=True)
class SimResult:
    policy: str
    seed: int
    end: float
    gangs: list[GangRecord]
    idle_gpu_hours: float
    price: float
    gpu_capacity: float
    gpu_allocation: list[tuple[float, float]]
    gpu_running: list[tuple[float, float]] = field(default_factory=list)
    queue_length: list[tuple[float, float]] = field(default_factory=list)
    fragmentation: list[tuple[float, float]] = field(default_factory=list)  # FGD ratio, %
    #: topology level → time-averaged per-domain FGD figures (see sim.fragmentation)
    fragmentation_by_domain: dict[str, dict[str, float]] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    suspended: list[str] = field(default_factory=list)  # Jobs whose pods were never made
    attempts: int = 0
    cycles: int = 0
    default_duration: float | None = None
    #: one line saying why no pod was placed at all ("" when some were)
    nothing_placed: str = ""

    def domain_summary(self) -> tuple[dict[str, float], dict[str, float]]:
        """Per topology level: the percent of started multi-pod gangs inside one domain, and
        the mean number of domains such a gang spans."""
        spans = [g.domains for g in self.gangs if g.domains is not None and g.min_member >= 2]
        in_one: dict[str, float] = {}
        mean: dict[str, float] = {}
        for level in spans[0] if spans else {}:
            counts = [span[level] for span in spans]
            in_one[level] = round(100 * sum(c == 1 for c in counts) / len(counts), 2)
            mean[level] = round(sum(counts) / len(counts), 4)
        return in_one, mean

    preemptions: int = 0
    reclaims: int = 0
    shrinks: int = 0
    lost_gpu_hours: float = 0.0
    queues: dict[str, Any] = field(default_factory=dict)
    #: instants cut short by a loop of evictions (:mod:`phalanx.sim.instants`)
    livelocks: list[dict[str, Any]] = field(default_factory=list)
    #: where the run ended on a loop of wake-ups that repeated (:mod:`phalanx.sim.loops`)
    retry_loop: dict[str, Any] | None = None

    def count(self, state: str) -> int:
        return sum(gang.state == state for gang in self.gangs)

    @property
    def default_durations(self) -> int:
        """How many gangs ran the default duration, having none of their own."""
        return sum(gang.default_duration for gang in self.gangs)

    @property
    def idle_cost(self) -> float:
        return self.idle_gpu_hours * self.price

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "seed": self.seed,
            "end": self.end,
            "gangs": [gang.to_json() for gang in self.gangs],
            "completed": self.count("completed"),
            "running": self.count("running"),
            "waiting": self.count("waiting"),
            "deadlocked": self.count("deadlocked"),
            "idle_gpu_hours": round(self.idle_gpu_hours, 6),
            "idle_cost": round(self.idle_cost, 4),
            "gpu_hour_price": self.price,
            "gpu_capacity": self.gpu_capacity,
            "gpu_allocation": [[t, gpus] for t, gpus in self.gpu_allocation],
            "gpu_running": [[t, gpus] for t, gpus in self.gpu_running],
            "queue_length": [[t, n] for t, n in self.queue_length],
            "fragmentation": [[t, ratio] for t, ratio in self.fragmentation],
            "fragmentation_by_domain": self.fragmentation_by_domain,
            "timed_out": sum(gang.timed_out for gang in self.gangs),
            "default_duration_gangs": self.default_durations,
            "default_duration": self.default_duration,
            "nothing_placed": self.nothing_placed,
            **waits_json(self.gangs, self.end),
            "rejected_pods": self.rejected,
            "suspended_jobs": self.suspended,
            "scheduling_attempts": self.attempts,
            "cycles": self.cycles,
            "gangs_in_one_domain": self.domain_summary()[0],
            "mean_domains_per_gang": self.domain_summary()[1],
            "preemptions": self.preemptions,
            "reclaims": self.reclaims,
            "shrinks": self.shrinks,
            "lost_gpu_hours": round(self.lost_gpu_hours, 6),
            "queues": self.queues,
            "livelocks": self.livelocks,
            "retry_loop": self.retry_loop,
        }


def waits_json(gangs: list[GangRecord], end: float) -> dict[str, Any]:
    met, missed = deadlines(gangs)
    return {
        "eta_error": eta_error(gangs),
        "max_wait": max_wait(gangs, end),
        "max_wait_by_size": max_wait_by_size(gangs, end),
        "deadlines_met": met,
        "deadlines_missed": missed,
        "deadline_misses_foreseen": sum(g.foreseen_late for g in gangs),
    }
