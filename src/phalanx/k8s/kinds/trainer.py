"""Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``) → the JobSet its
controller makes from the runtime it names, and the one gang of that JobSet.

``spec.runtimeRef {name, kind (default ClusterTrainingRuntime, or TrainingRuntime in the
TrainJob's namespace), apiGroup (trainer.kubeflow.org)}`` must name a runtime in the same input
(:mod:`~phalanx.k8s.kinds.trainer_runtime`); one that is not is an error on that field. As the
trainer does, the JobSet is named after the TrainJob and has one Job ``NAME-RJ-0`` per
replicated job ``RJ`` of the runtime, with ``parallelism = completions`` = its pod count:

- the trainer job: ``spec.trainer.numNodes``, else the runtime's ``mlPolicy.numNodes``, else
  its template's ``parallelism`` (default 1); an MPI runtime's trainer named ``launcher``: 1;
- an MPI runtime's ``node`` job (when not the trainer): ``numNodes`` (less the launcher, at
  least 1, with ``runLauncherAsNode``), else its template's ``parallelism``;
- any other (dataset/model initializers): its template's ``parallelism`` (default 1).

``spec.trainer.resourcesPerNode`` (``requests``, ``limits``) is merged key by key over the
runtime's container named ``node`` of the trainer job (and of the ``node`` job with
``runLauncherAsNode``). The TrainJob's pod patches (``podSpecOverrides``,
``podTemplateOverrides``, ``runtimePatches``: :mod:`~phalanx.k8s.kinds.trainer_patches`) apply
to the jobs they name. Pods are ``NAME-RJ-0-INDEX``, their role the replicated job's name.

The gang: with the runtime's ``podGroupPolicy``, the PodGroup the trainer makes, named after the
TrainJob, of every pod (coscheduling: scheduler-plugins' with ``scheduleTimeoutSeconds``;
volcano: Volcano's, its queue the annotation ``scheduling.volcano.sh/queue-name`` of the JobSet
(the runtime's template, overridden by the TrainJob's), and its network topology). Else,
with Kueue's ``kueue.x-k8s.io/queue-name`` label, the gang Kueue admits, of every pod, each
replicated job a role (as for a JobSet). Else no gang: its pods are scheduled
one by one (unless a template declares one). Kueue's and KAI's queue labels on the TrainJob
reach its pods. ``spec.suspend: true`` without Kueue's label makes no pods (listed as suspended
Jobs). Duration and runtime hints: ``phalanx.dev/duration``, ``phalanx.dev/runtime-estimate``,
``phalanx.dev/deadline`` on the TrainJob, and ``spec.activeDeadlineSeconds`` (a hint, and the
duration when none is given), as on a Kubeflow v1 job; a template's own come first.

The runtime's JobSet ``dependsOn`` (:mod:`~phalanx.k8s.kinds.depends_on`) reaches the Jobs:
a job waits for the replicated jobs it names (the trainer for its initializers, ``Complete``;
an MPI ``node`` job for its launcher, ``Ready``); those run first, outside the gang, which
counts the other pods only (the trainer's own PodGroup counts every pod, and could then never
fill). Not modelled: ``initializer`` and ``trainer`` images, commands, env and
``numProcPerNode`` (validated), ``managedBy``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import ControllerSpec, GangSpec, JobSpec
from phalanx.k8s.apis import kueue
from phalanx.k8s.apis.owner import owner_queue
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    child,
    fail,
    get_bool,
    get_int,
    get_list,
    get_mapping,
    get_str,
)
from phalanx.k8s.kinds import jobset
from phalanx.k8s.kinds.common import controller_hints, join, owner_timed
from phalanx.k8s.kinds.depends_on import job_dependencies, waited_for
from phalanx.k8s.kinds.jobset import admitted_whole
from phalanx.k8s.kinds.trainer_patches import Patches, jobset_annotations, patched, pod_patches
from phalanx.k8s.kinds.trainer_runtime import (
    API,
    CLUSTER_KIND,
    LAUNCHER,
    NAMESPACED_KIND,
    NODE,
    ReplicatedJob,
    TrainingRuntime,
)
from phalanx.k8s.meta import (
    annotations_of,
    describing,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import MAX_JOB_PODS, VOLCANO_GROUP, job_spec
from phalanx.k8s.pods import pod_duration
from phalanx.k8s.priority import PriorityTable

KIND = "TrainJob"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
#: (kind, namespace or "", name) → the runtime, or None when it failed its own checks
Runtimes = Mapping[tuple[str, str, str], TrainingRuntime | None]


@dataclass(frozen=True, slots=True)
class Overrides:
    """What the TrainJob changes in its runtime's Jobs."""

    nodes: int | None  # spec.trainer.numNodes
    resources: Obj | None  # spec.trainer.resourcesPerNode {requests, limits}
    patches: Patches  # pod patches by replicated job


def trainjob_from_dict(
    obj: Mapping[str, Any], priorities: PriorityTable, runtimes: Runtimes
) -> ControllerSpec:
    with describing(object_label(obj, KIND, namespaced=True)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top)
        labels = labels_of(top)
        spec = get_mapping(top, "spec", "")
        runtime = _runtime(spec, namespace, runtimes)
        trainer = get_mapping(spec, "trainer", "spec")
        nodes = get_int(trainer, "numNodes", "spec.trainer", minimum=1, maximum=MAX_JOB_PODS)
        _check_proc_per_node(trainer)
        overrides = Overrides(nodes, _resources(trainer), pod_patches(spec))
        suspended = get_bool(spec, "suspend", "spec") and kueue.QUEUE_NAME not in labels
        jobs = [
            (rj.name, _made(rj, runtime, overrides, top, priorities, suspended))
            for rj in runtime.jobs
        ]
        timed = _timed(top, spec, jobs)
        gang = _gang(top, spec, runtime, timed)
        if gang is not None:
            first = waited_for(timed)  # they run before the others exist: outside the gang
            timed = [(rj, job if rj in first else _joined(job, gang)) for rj, job in timed]
        elif kueue.QUEUE_NAME in labels:
            return ControllerSpec(
                KIND, namespace, name, jobs=admitted_whole(timed, name, top, KIND)
            )
        gangs = () if gang is None else (gang,)
        return ControllerSpec(KIND, namespace, name, gangs=gangs, jobs=tuple(j for _, j in timed))


def _made(
    rj: ReplicatedJob,
    runtime: TrainingRuntime,
    overrides: Overrides,
    top: Obj,
    priorities: PriorityTable,
    suspended: bool,
) -> JobSpec:
    """The Job ``NAME-RJ-0`` the trainer makes for ``rj``, its pods of role ``rj``."""
    name, labels = name_of(top), labels_of(top)
    try:
        job = job_spec(
            _job(rj, runtime, overrides),
            priorities,
            name=f"{name}-{rj.name}-0",
            namespace=namespace_of(top),
            queue=owner_queue(labels),
        )
    except InputError as exc:  # its patches are valid: only its resources can break the Job
        raise _in_resources(exc) from None
    pod = dataclasses.replace(job.template, role=rj.name)
    names = {other.name: [f"{name}-{other.name}-0"] for other in runtime.jobs}
    after = job_dependencies(rj.depends_on, names)
    return dataclasses.replace(job, template=pod, suspended=suspended, depends_on=after)


def _runtime(spec: Obj, namespace: str, runtimes: Runtimes) -> TrainingRuntime:
    path = "spec.runtimeRef"
    if spec.get("runtimeRef") is None:
        fail(path, "is required")
    ref = get_mapping(spec, "runtimeRef", "spec")
    name = get_str(ref, "name", path)
    if not name:
        fail(child(path, "name"), "is required")
    kind = get_str(ref, "kind", path) or CLUSTER_KIND
    if kind not in (CLUSTER_KIND, NAMESPACED_KIND):
        fail(child(path, "kind"), f"must be {CLUSTER_KIND} or {NAMESPACED_KIND}, not {kind!r}")
    group = get_str(ref, "apiGroup", path) or API
    if group != API:
        fail(child(path, "apiGroup"), f"must be {API}, not {group!r}")
    key = (kind, namespace if kind == NAMESPACED_KIND else "", name)
    label = f"{kind} {namespace}/{name}" if kind == NAMESPACED_KIND else f"{kind} {name}"
    if key not in runtimes:
        where = f" -n {namespace}" if kind == NAMESPACED_KIND else ""
        command = f"kubectl get {kind.lower()}s {name}{where} -o yaml"
        fail(child(path, "name"), f"{label} is not in the input (add it: {command})")
    runtime = runtimes[key]
    if runtime is None:
        fail(child(path, "name"), f"{label} is invalid (its own error is listed)")
    return runtime


def _resources(trainer: Obj) -> Obj | None:
    path = "spec.trainer.resourcesPerNode"
    if trainer.get("resourcesPerNode") is None:
        return None
    resources = get_mapping(trainer, "resourcesPerNode", "spec.trainer")
    for key in resources:
        if key not in ("requests", "limits", "claims"):
            fail(child(path, key), "unknown field (use requests or limits)")
    return {key: get_mapping(resources, key, path) for key in ("requests", "limits")}


def _in_resources(exc: InputError) -> InputError:
    """An error in a merged container's resources, located at ``resourcesPerNode``."""
    _, found, inner = exc.field.rpartition(".resources")
    return InputError(exc.message, field="spec.trainer.resourcesPerNode" + (inner if found else ""))


def _check_proc_per_node(trainer: Obj) -> None:
    value = trainer.get("numProcPerNode")
    if value is not None and not isinstance(value, str):  # "auto" in Trainer before v2.2
        get_int(trainer, "numProcPerNode", "spec.trainer", minimum=1)


def _count(rj: ReplicatedJob, runtime: TrainingRuntime, nodes: int | None) -> int:
    """How many pods the replicated job runs (see the module's docstring)."""
    spec = get_mapping(rj.template, "spec", "")
    parallelism = get_int(spec, "parallelism", "spec", minimum=0)
    own = 1 if parallelism is None else parallelism
    mpi = runtime.ml_policy == "mpi"
    if runtime.is_trainer(rj):
        if mpi and rj.name == LAUNCHER:
            return 1
        if nodes is None and runtime.ml_policy:
            nodes = runtime.num_nodes
        return own if nodes is None else nodes
    if mpi and rj.name == NODE:
        nodes = runtime.num_nodes if nodes is None else nodes
        if nodes is None:
            return own
        return max(nodes - 1, 1) if runtime.launcher_as_node else nodes
    return own


def _job(rj: ReplicatedJob, runtime: TrainingRuntime, overrides: Overrides) -> Obj:
    """The Job the trainer makes for ``rj``: its pod count, the trainer's resources and the
    TrainJob's pod patches."""
    count = _count(rj, runtime, overrides.nodes)
    spec = dict(get_mapping(rj.template, "spec", ""))
    spec["parallelism"] = spec["completions"] = count
    template = get_mapping(spec, "template", "spec")
    launcher_node = runtime.launcher_as_node and rj.name == NODE
    if overrides.resources is not None and (runtime.is_trainer(rj) or launcher_node):
        template = _with_resources(template, overrides.resources)
    spec["template"] = patched(template, overrides.patches.get(rj.name, []))
    return {**rj.template, "spec": spec}


def _with_resources(template: Obj, resources: Obj) -> Obj:
    """``template`` with ``resources`` merged over its container named ``node``."""
    pod = dict(get_mapping(template, "spec", ""))
    containers = []
    for raw in get_list(pod, "containers", "spec"):
        container = dict(as_mapping(raw, "spec.containers"))
        if container.get("name") == NODE:
            own = get_mapping(container, "resources", "")
            container["resources"] = {
                key: {**get_mapping(own, key, ""), **resources[key]} for key in resources
            }
        containers.append(container)
    pod["containers"] = containers
    return {**template, "spec": pod}


def _timed(top: Obj, spec: Obj, jobs: list[tuple[str, JobSpec]]) -> list[tuple[str, JobSpec]]:
    """The Jobs with the TrainJob's duration (else ``activeDeadlineSeconds``) and runtime
    hints where their templates say nothing."""
    duration = _duration(top, spec)
    hints, _ = controller_hints(top, spec)
    out = []
    for rj, job in jobs:
        out.append(
            (rj, dataclasses.replace(job, template=owner_timed(job.template, duration, hints)))
        )
    return out


def _duration(top: Obj, spec: Obj) -> float | None:
    return pod_duration(annotations_of(top), spec, "spec")


def _gang(
    top: Obj, spec: Obj, runtime: TrainingRuntime, jobs: list[tuple[str, JobSpec]]
) -> GangSpec | None:
    """The PodGroup the runtime's ``podGroupPolicy`` makes, of every pod, or None."""
    if not runtime.gang_api:
        return None
    hints, deadline = controller_hints(top, spec)
    queue = _volcano_queue(spec, runtime) if runtime.gang_api == VOLCANO_GROUP else ""
    first = waited_for(jobs)
    total = sum(job.at_once for rj, job in jobs if rj not in first)
    return GangSpec(
        namespace=namespace_of(top),
        name=name_of(top),
        min_member=max(1, total),
        api=runtime.gang_api,
        queue=queue or owner_queue(labels_of(top)) or "default",
        timeout_seconds=None if runtime.timeout_seconds is None else float(runtime.timeout_seconds),
        topology=runtime.topology,
        duration=_duration(top, spec),
        runtime_hints=hints,
        deadline=deadline,
        origin=(KIND, "spec.trainer.numNodes"),
    )


def _volcano_queue(spec: Obj, runtime: TrainingRuntime) -> str:
    """``scheduling.volcano.sh/queue-name``: the runtime's JobSet template's, overridden by
    what the TrainJob gives its JobSet, as the trainer propagates them."""
    annotations = {**runtime.annotations, **jobset_annotations(spec)}
    return annotations.get(VOLCANO_QUEUE, "")


def _joined(job: JobSpec, gang: GangSpec) -> JobSpec:
    member = join(job.template, gang, job.template.role, "spec.runtimeRef")
    return dataclasses.replace(job, template=member)


def snapshot_owners(spec: ControllerSpec) -> dict[str, JobSpec | ControllerSpec]:
    """``Kind/NAME`` → what the TrainJob says of the pods a snapshot holds of it, for each
    owner they may name: its JobSet's (:func:`~phalanx.k8s.kinds.jobset.snapshot_owners`) and
    the TrainJob itself."""
    owners = jobset.snapshot_owners(spec)
    return owners | {f"{KIND}/{spec.name}": owners[f"{jobset.KIND}/{spec.name}"]}


def made_by(spec: ControllerSpec) -> set[tuple[str, str, str, str]]:
    """``(API group, kind, namespace, name)`` of the TrainJob, its JobSet and its Jobs: a
    snapshot object owned by any of them means the TrainJob already runs."""
    return jobset.made_by(spec) | {(API, KIND, spec.namespace, spec.name)}
