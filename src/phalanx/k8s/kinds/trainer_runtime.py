"""Kubeflow Trainer's ``ClusterTrainingRuntime`` and ``TrainingRuntime`` (``trainer.kubeflow.org
/v1alpha1``): the blueprint a TrainJob names in ``spec.runtimeRef``.

Read: ``spec.mlPolicy`` (``numNodes``, at most one of ``torch``, ``mpi``, ``jax``, ``xgboost``,
``flux``; ``mpi.runLauncherAsNode``), ``spec.podGroupPolicy`` (``coscheduling
{scheduleTimeoutSeconds}`` → a scheduler-plugins PodGroup, ``volcano {networkTopology}`` → a
Volcano PodGroup; at most one), and ``spec.template``, the JobSet template: its metadata
(labels, annotations) and ``spec.replicatedJobs[]`` (``name``, ``template``: a Job template).
The replicated job labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` (else the
one named ``node``) is the trainer. Each Job template is validated here, as a Job would be, so
that its errors name the runtime; a runtime is a blueprint and makes no pods by itself.
A replicated job's ``replicas`` is read as 1, as the trainer sets it for its trainer and
initializer jobs (Kubeflow Trainer issue 2318). Its ``dependsOn`` is read and checked as a
JobSet's (:mod:`~phalanx.k8s.kinds.depends_on`): the trainer copies it to the JobSet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import TopologyConstraint
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
    get_string_map,
)
from phalanx.k8s.kinds.depends_on import read_depends_on
from phalanx.k8s.meta import describing, name_of, namespace_of, object_label, root
from phalanx.k8s.objects import MAX_JOB_PODS, SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP, job_spec
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.topology import network_topology

API = "trainer.kubeflow.org"
VERSION = f"{API}/v1alpha1"
CLUSTER_KIND = "ClusterTrainingRuntime"
NAMESPACED_KIND = "TrainingRuntime"
ANCESTOR = f"{API}/trainjob-ancestor-step"
TRAINER = "trainer"
NODE = "node"
LAUNCHER = "launcher"
ML_SOURCES = ("torch", "mpi", "jax", "xgboost", "flux")
#: scheduler-plugins' coscheduling default, as the runtime's CRD defaults it
DEFAULT_TIMEOUT = 60
_JOBS = "spec.template.spec.replicatedJobs"


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    name: str
    ancestor: str  # the trainjob-ancestor-step label ("" when unlabelled)
    template: Obj  # the Job template, validated
    path: str  # where it is in the runtime, for messages
    depends_on: tuple[tuple[str, str], ...] = ()  # JobSet dependsOn: (replicated job, status)


@dataclass(frozen=True, slots=True)
class TrainingRuntime:
    """A validated runtime; ``namespace`` is ``""`` for a ClusterTrainingRuntime."""

    kind: str
    namespace: str
    name: str
    jobs: tuple[ReplicatedJob, ...]
    num_nodes: int | None = None  # mlPolicy.numNodes (None: not set)
    ml_policy: str = ""  # the mlPolicy source set ("" when none, "plain" for numNodes only)
    launcher_as_node: bool = False  # mpi.runLauncherAsNode
    gang_api: str = ""  # the PodGroup API its podGroupPolicy makes ("" when none)
    timeout_seconds: int | None = None
    topology: TopologyConstraint | None = None
    annotations: dict[str, str] = field(default_factory=dict)  # the JobSet template's

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def label(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    def is_trainer(self, job: ReplicatedJob) -> bool:
        if job.ancestor:
            return job.ancestor == TRAINER
        trainers = [j for j in self.jobs if j.ancestor == TRAINER]
        return not trainers and job.name == NODE


def runtime_from_dict(
    kind: str, obj: Mapping[str, Any], priorities: PriorityTable
) -> TrainingRuntime:
    namespaced = kind == NAMESPACED_KIND
    with describing(object_label(obj, kind, namespaced=namespaced)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top) if namespaced else ""
        spec = get_mapping(top, "spec", "")
        ml = get_mapping(spec, "mlPolicy", "spec")
        sources = [s for s in ML_SOURCES if ml.get(s) is not None]
        if len(sources) > 1:
            fail("spec.mlPolicy", f"only one of {', '.join(ML_SOURCES)} may be set")
        mpi = get_mapping(ml, "mpi", "spec.mlPolicy")
        gang_api, timeout, topology = _pod_group_policy(spec)
        template = get_mapping(spec, "template", "spec")
        meta = get_mapping(template, "metadata", "spec.template")
        runtime = TrainingRuntime(
            kind=kind,
            namespace=namespace,
            name=name,
            jobs=_replicated_jobs(template, priorities),
            num_nodes=get_int(ml, "numNodes", "spec.mlPolicy", minimum=1, maximum=MAX_JOB_PODS),
            ml_policy=(sources[0] if sources else "plain") if spec.get("mlPolicy") else "",
            launcher_as_node=get_bool(mpi, "runLauncherAsNode", "spec.mlPolicy.mpi"),
            gang_api=gang_api,
            timeout_seconds=timeout,
            topology=topology,
            annotations=get_string_map(meta, "annotations", "spec.template.metadata"),
        )
        if not any(runtime.is_trainer(job) for job in runtime.jobs):
            fail(_JOBS, f"no trainer job: label one {ANCESTOR}: {TRAINER}, or name one {NODE!r}")
        return runtime


def _pod_group_policy(spec: Obj) -> tuple[str, int | None, TopologyConstraint | None]:
    path = "spec.podGroupPolicy"
    policy = get_mapping(spec, "podGroupPolicy", "spec")
    plugins = [p for p in ("coscheduling", "volcano") if policy.get(p) is not None]
    if len(plugins) > 1:
        fail(path, "only one of coscheduling and volcano may be set")
    if not plugins:
        return "", None, None
    source = get_mapping(policy, plugins[0], path)
    if plugins[0] == "volcano":
        return VOLCANO_GROUP, None, network_topology(source, child(path, "volcano"))
    where = child(path, "coscheduling")
    timeout = get_int(source, "scheduleTimeoutSeconds", where, minimum=0)
    return SCHEDULER_PLUGINS_GROUPS[0], timeout or DEFAULT_TIMEOUT, None


def _replicated_jobs(template: Obj, priorities: PriorityTable) -> tuple[ReplicatedJob, ...]:
    spec = get_mapping(template, "spec", "spec.template")
    items = get_list(spec, "replicatedJobs", "spec.template.spec")
    if not items:
        fail(_JOBS, "at least one replicated job is required")
    jobs: list[ReplicatedJob] = []
    for i, raw in enumerate(items):
        path = child(_JOBS, i)
        item = as_mapping(raw, path)
        name = get_str(item, "name", path)
        if not name:
            fail(child(path, "name"), "is required")
        if name in (j.name for j in jobs):
            fail(child(path, "name"), f"duplicate replicated job {name!r}")
        get_int(item, "replicas", path, minimum=0)  # validated; read as 1 (see the docstring)
        job = get_mapping(item, "template", path)
        meta = get_mapping(job, "metadata", child(path, "template"))
        labels = get_string_map(meta, "labels", child(child(path, "template"), "metadata"))
        try:  # validated as the Job it becomes; the TrainJob names the real pods
            job_spec(job, priorities, name=name, namespace="default")
        except InputError as exc:
            raise exc.located(field=child(path, "template")) from None
        jobs.append(ReplicatedJob(name, labels.get(ANCESTOR, ""), job, path))
    deps = read_depends_on(
        [
            (job.name, as_mapping(raw, job.path), job.path)
            for job, raw in zip(jobs, items, strict=True)
        ]
    )
    return tuple(dataclasses.replace(job, depends_on=deps[job.name]) for job in jobs)
