"""Specs: the scheduler's view of Kubernetes objects, as frozen dataclasses.

Resources are ``dict[str, int]`` in integer units (see :mod:`phalanx.api.quantity`). Times are
seconds as floats on the simulation or wall clock. Specs are produced by :mod:`phalanx.k8s`
and never mutated; run-time state (which node a pod is on, a gang's conditions) lives in
:mod:`phalanx.cluster`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

Resources = dict[str, int]
#: What a gang's author says about its runtime, as ``(source, seconds)`` in the order the
#: estimator trusts them (see :mod:`phalanx.plugins.estimates`); never the true duration.
RuntimeHints = tuple[tuple[str, float], ...]

#: Default ``allocatable.pods`` of a node that does not say (kubelet's ``--max-pods``).
DEFAULT_MAX_PODS = 110


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


#: ``preemptionPolicy`` values (PriorityClass and pod): the default, and never preempting.
PREEMPT_LOWER = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect


@dataclass(frozen=True, slots=True)
class Toleration:
    """``key=None`` with ``Exists`` tolerates everything; ``effect=None`` matches all effects."""

    key: str | None
    operator: str  # "Equal" | "Exists"
    value: str
    effect: TaintEffect | None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key is None:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement: ``key operator values``."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """Expressions and fields are ANDed; terms of a node affinity are ORed."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()  # only metadata.name, as in Kubernetes


@dataclass(frozen=True, slots=True)
class Placement:
    """Everything that restricts which nodes a pod may use, hashable so masks can be cached."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[SelectorTerm, ...] = ()  # empty: no required node affinity
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class Deadline:
    """``phalanx.dev/deadline``: seconds after submission, or an absolute time (epoch s)."""

    after: float | None = None
    at: float | None = None

    def due(self, submitted: float) -> float:
        return self.at if self.at is not None else submitted + (self.after or 0.0)


@dataclass(frozen=True, slots=True)
class GangRef:
    """How a pod names its gang: the group's namespace-local name and the API it belongs to."""

    name: str
    api: str  # scheduling.x-k8s.io | scheduling.sigs.k8s.io | scheduling.volcano.sh


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """Where a gang (or one of its roles) must or should be, as topology levels.

    A level is named as its declaration names it: a node label key (Kueue, KAI, the Workload
    API), ``tier:N`` (Volcano ``highestTierAllowed``) or a HyperNode ``tierName``; ``topology``
    names the topology object when there are several (KAI). ``required``: every pod inside one
    domain of that level, or wait. ``preferred``: as few domains of that level as possible,
    then of the levels above. ``slice_level``/``slice_size``: each run of ``slice_size`` pods
    in one domain of ``slice_level`` (Kueue's podset slices).
    """

    required: str = ""
    preferred: str = ""
    topology: str = ""
    slice_level: str = ""
    slice_size: int = 0

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred or self.slice_level)


@dataclass(frozen=True, slots=True)
class SubgroupTopology:
    """One Volcano ``subGroupPolicy`` entry (a Volcano Job's ``partitionPolicy`` becomes one):
    the gang's pods whose labels match ``match_labels`` and ``match_expressions`` are split by
    the values of their ``keys`` labels (pods lacking one are not in it), and each such
    subgroup is placed under ``constraint``; a domain must hold ``size`` of its pods (at least
    one) for the subgroup to be placed there."""

    name: str
    constraint: TopologyConstraint
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()
    keys: tuple[str, ...] = ()
    size: int = 1


@dataclass(frozen=True, slots=True)
class PodSpec:
    namespace: str
    name: str
    requests: Resources
    placement: Placement = Placement()
    priority: int = 0
    #: ``spec.preemptionPolicy``, as the Priority admission plugin sets it from the class
    preemption_policy: str = PREEMPT_LOWER
    scheduler_name: str = ""
    gang: GangRef | None = None
    role: str = ""
    owner: str = ""  # "Kind/NAME" of the controller that made it ("Job/NAME", ...)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    duration: float | None = None  # seconds of work once started (simulation)
    queue: str = ""  # the queue a pod-level declaration names (Kueue, KAI, YuniKorn)
    node_name: str = ""  # spec.nodeName: already bound there (a snapshot's running pod)
    gates: tuple[str, ...] = ()  # spec.schedulingGates: not scheduled while any remains
    ungate_after: float | None = None  # simulation: gates lifted this long after creation
    #: The gang a pod-level declaration defines (Koordinator, Kueue, YuniKorn annotations):
    #: whoever sees the first such pod creates the gang; its key is ``gang_key``.
    declared_gang: GangSpec | None = None
    #: Workload API ``spec.workloadRef``: (workload, pod group, replica key); the loader turns
    #: it into the gang ``gang`` names (or none, for a ``basic`` pod group)
    workload_ref: tuple[str, str, str] | None = None
    topology: TopologyConstraint | None = None  # its pod set's constraint (Kueue annotations)
    runtime_hints: RuntimeHints = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang_key(self) -> str | None:
        return None if self.gang is None else f"{self.namespace}/{self.gang.name}"


@dataclass(frozen=True, slots=True)
class GangSpec:
    """A PodGroup: at least ``min_member`` pods, and every role minimum, or none at all."""

    namespace: str
    name: str
    min_member: int
    api: str
    role_minimums: dict[str, int] = field(default_factory=dict)
    priority: int | None = None  # None: the highest priority of its members
    queue: str = "default"
    timeout_seconds: float | None = None
    min_resources: Resources = field(default_factory=dict)
    #: Gang-scheduling groups whose minimums count against this gang too (Koordinator
    #: ``gang.scheduling.koordinator.sh/groups``); informational, the gang already merges them.
    groups: tuple[str, ...] = ()
    topology: TopologyConstraint | None = None  # the whole gang's constraint
    role_topology: dict[str, TopologyConstraint] = field(default_factory=dict)  # per role
    #: KAI subgroup tree: subgroup → its parent subgroup (whose ``role_topology`` constraint
    #: holds all the pods of its descendants)
    role_parents: dict[str, str] = field(default_factory=dict)
    subgroups: tuple[SubgroupTopology, ...] = ()  # Volcano subGroupPolicy / partitionPolicy
    duration: float | None = None  # the truth the simulator ends it by; never scheduled on
    runtime_hints: RuntimeHints = ()
    deadline: Deadline | None = None
    #: an elastic gang's explicit maximum (``phalanx.dev/max-member``): at most this many
    #: members placed or running at once; None: as many as it has pods
    max_member: int | None = None
    #: the object and field its minimum came from, for messages about it
    origin: tuple[str, str] = ("PodGroup", "spec.minMember")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class JobDependency:
    """A JobSet's ``dependsOn`` entry, for one of its Jobs: the Job is created only once every
    Job of ``jobs`` (those of the replicated job ``replicated_job``) is ``Complete`` (all its
    pods succeeded) or ``Ready`` (all the pods it runs at once are running)."""

    replicated_job: str
    jobs: tuple[str, ...]  # Job names, in the Job's namespace
    status: str  # "Ready" or "Complete"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """``batch/v1`` Job: the simulator's job controller creates ``parallelism`` pods."""

    namespace: str
    name: str
    parallelism: int
    completions: int | None
    template: PodSpec  # name is the job name; pods are named NAME-INDEX
    #: ``spec.suspend: true`` with no queue manager to admit it: its controller makes no pods
    suspended: bool = False
    #: a JobSet's ``dependsOn``: its controller creates the Job once these hold
    depends_on: tuple[JobDependency, ...] = ()

    @property
    def at_once(self) -> int:
        """Pods it runs at once at most: ``parallelism``, fewer when ``completions`` is."""
        return (
            self.parallelism
            if self.completions is None
            else min(self.parallelism, self.completions)
        )


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` pods made from ``template``; their names are ``template.name`` followed by
    ``-INDEX`` (``naming="index"``), nothing (``"fixed"``, count 1) or a generated suffix
    (``"generated"``, as a ReplicaSet names its pods)."""

    template: PodSpec
    count: int
    naming: str = "index"
    start: int = 0  # first index (LeaderWorkerSet workers start at 1)


@dataclass(frozen=True, slots=True)
class ControllerSpec:
    """A workload controller's object (Deployment, Volcano Job, PyTorchJob, JobSet, ...) as the
    pods and gangs its controller creates: the simulator's owner controller makes them when the
    object appears and removes them when it goes. ``jobs`` are child ``batch/v1`` Jobs (JobSet),
    run by the Job controller. ``service``: its pods run until stopped (no default duration)."""

    kind: str  # e.g. "Deployment", "Job.batch.volcano.sh", "PyTorchJob"
    namespace: str
    name: str
    pod_sets: tuple[PodSet, ...] = ()
    gangs: tuple[GangSpec, ...] = ()
    jobs: tuple[JobSpec, ...] = ()
    service: bool = False
    #: lifecycle policies as ``(event, action)``, recorded; see docs/manifests.md for which
    #: events the simulation produces
    policies: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def owner(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceFlavorSpec:
    """A Kueue ResourceFlavor: the nodes of a flavor (``nodeLabels``), the taints they carry
    (``nodeTaints``: a flavor is used only by pods that tolerate them) and the tolerations
    Kueue adds to the pods it admits in the flavor (recorded). Which ClusterQueue gives it
    quota is in :mod:`phalanx.api.queues` (``FlavorQuota``)."""

    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class PriorityClassSpec:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """``v1 ResourceQuota`` hard limits, keyed by resource name (``pods`` counts pods)."""

    namespace: str
    name: str
    hard: Resources


@dataclass(frozen=True, slots=True)
class NamespaceSpec:
    name: str
