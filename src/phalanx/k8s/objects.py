"""Nodes, PodGroups, Jobs, ResourceQuotas and Namespaces → specs.

Design: one public ``*_from_dict`` per kind, each naming its object in every error via
:func:`~phalanx.k8s.meta.describing`. Kubernetes defaulting is applied where phalanx reads a
field (Job ``parallelism``/``completions``, node ``pods`` and hostname label, PodGroup queue).

PodGroups come in three API groups with the same ``PodGroup`` kind: scheduler-plugins'
``scheduling.x-k8s.io`` and its older ``scheduling.sigs.k8s.io`` (``minMember``,
``scheduleTimeoutSeconds``, ``minResources``), and Volcano's ``scheduling.volcano.sh``
(``minMember``, ``minTaskMember``, ``queue``, ``priorityClassName``, ``minResources``). Any of them
may carry ``phalanx.dev/min-task-member``, a JSON object role → minimum merged over (and
overriding) ``minTaskMember``, and ``phalanx.dev/max-member``, an elastic gang's explicit
maximum (at least ``minMember``: at most that many members placed or running at once).

ResourceQuota: phalanx models *requests* only. ``spec.hard`` keys ``pods``/``count/pods`` →
``pods``; ``requests.X`` and bare ``cpu``/``memory``/``ephemeral-storage`` → ``X`` (the smaller
wins when both spell the same resource); ``requests.storage`` (PVC storage), ``limits.*`` and
other object counts (``services``, ``count/jobs.batch``, ...) are validated but ignored.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import (
    DEFAULT_MAX_PODS,
    ControllerSpec,
    GangSpec,
    JobSpec,
    NamespaceSpec,
    NodeSpec,
    PodSpec,
    QuotaSpec,
    Resources,
)
from phalanx.k8s.apis import kueue
from phalanx.k8s.apis.owner import owner_queue
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    as_str,
    check_int,
    check_whole,
    child,
    fail,
    get_bool,
    get_int,
    get_mapping,
    get_resources,
    get_str,
    quantity,
)
from phalanx.k8s.meta import (
    DURATION,
    MIN_TASK_MEMBER,
    annotation_path,
    annotations_of,
    check_namespace_name,
    describing,
    duration_annotation,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.placement import taints
from phalanx.k8s.pods import convert_pod, with_duration
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.runtime import group_annotations, merged, runtime_hints
from phalanx.k8s.topology import gang_topology

HOSTNAME_LABEL = "kubernetes.io/hostname"
SCHEDULER_PLUGINS_GROUPS = ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io")
VOLCANO_GROUP = "scheduling.volcano.sh"
_QUOTA_BARE = ("cpu", "memory", "ephemeral-storage")
#: The most pods one Job may ask for (``parallelism`` and ``completions``): the simulator holds
#: every pod in memory, about a kilobyte each. Kubernetes' own limit for Indexed Jobs is 100,000.
MAX_JOB_PODS = 1_000_000


def node_from_dict(obj: Mapping[str, Any]) -> NodeSpec:
    """``v1 Node``: allocatable (else capacity), labels, taints and ``unschedulable``."""
    with describing(object_label(obj, "Node", namespaced=False)):
        node = root(obj)
        name = name_of(node)
        status = get_mapping(node, "status", "")
        key = "allocatable" if status.get("allocatable") else "capacity"
        allocatable = get_resources(status, key, "status")
        for resource, amount in get_mapping(status, key, "status").items():
            check_whole(resource, amount, child(child("status", key), resource))
        allocatable.setdefault("pods", DEFAULT_MAX_PODS)
        labels = labels_of(node)
        labels.setdefault(HOSTNAME_LABEL, name)
        spec = get_mapping(node, "spec", "")
        return NodeSpec(
            name=name,
            allocatable=allocatable,
            labels=labels,
            taints=taints(spec, "spec"),
            unschedulable=get_bool(spec, "unschedulable", "spec"),
        )


def _min_member(spec: Obj) -> int:
    path = "spec.minMember"
    if spec.get("minMember") is None:
        fail(path, "minMember is required")
    value = check_int(spec["minMember"], path)
    if value < 1:
        fail(path, f"minMember must be at least 1, not {value}")
    return value


def _role_minimums(spec: Obj, annotations: Mapping[str, str], *, volcano: bool) -> dict[str, int]:
    minimums: dict[str, int] = {}
    if volcano:
        path = "spec.minTaskMember"
        for role, value in as_mapping(spec.get("minTaskMember"), path).items():
            minimums[role] = check_int(value, child(path, role), minimum=0)
    text = annotations.get(MIN_TASK_MEMBER)
    if text is not None:
        path = annotation_path(MIN_TASK_MEMBER)
        try:
            parsed = json.loads(text)
        except RecursionError:
            fail(path, "not valid JSON: nested too deep")
        except ValueError as exc:
            fail(path, f"not valid JSON: {exc}")
        if not isinstance(parsed, dict):
            fail(path, 'must be a JSON object such as {"worker": 3}')
        for role, value in parsed.items():
            if isinstance(value, bool) or not isinstance(value, int):
                fail(path, f"minimum of role {role!r} must be an integer, not {value!r}")
            if value < 0:
                fail(path, f"minimum of role {role!r} must not be negative, not {value}")
            minimums[role] = value
    return minimums


def gang_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> GangSpec:
    """A PodGroup of any of the three supported API groups (from its ``apiVersion``)."""
    with describing(object_label(obj, "PodGroup", namespaced=True)):
        pg = root(obj)
        api_version = get_str(pg, "apiVersion", "")
        api = api_version.partition("/")[0]
        if api not in (*SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP):
            fail("apiVersion", f"unknown PodGroup apiVersion {api_version!r}")
        name = name_of(pg)
        annotations = annotations_of(pg)
        spec = get_mapping(pg, "spec", "")
        volcano = api == VOLCANO_GROUP
        priority: int | None = None
        queue = "default"
        timeout: float | None = None
        if volcano:
            queue = get_str(spec, "queue", "spec") or "default"
            class_name = get_str(spec, "priorityClassName", "spec")
            if class_name:
                priority = priorities.resolve(class_name, "spec.priorityClassName")
        else:
            seconds = get_int(spec, "scheduleTimeoutSeconds", "spec", minimum=0)
            timeout = None if seconds is None else float(seconds)
        topology = gang_topology(pg, annotations)
        min_member = _min_member(spec)
        return GangSpec(
            namespace=namespace_of(pg),
            name=name,
            min_member=min_member,
            api=api,
            role_minimums=_role_minimums(spec, annotations, volcano=volcano),
            priority=priority,
            queue=queue,
            timeout_seconds=timeout,
            min_resources=get_resources(spec, "minResources", "spec"),
            topology=topology.constraint,
            role_topology=topology.roles,
            role_parents=topology.parents,
            subgroups=topology.subgroups,
            **group_annotations(pg, min_member),
        )


def _job_count(spec: Obj, key: str) -> int | None:
    value = get_int(spec, key, "spec", minimum=0)
    if value is not None and value > MAX_JOB_PODS:
        fail(
            child("spec", key),
            f"{value} is above phalanx's limit of {MAX_JOB_PODS:,} pods per Job "
            "(split the Job, or use a trace: phalanx compare synthetic:...)",
        )
    return value


def job_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> JobSpec:
    """``batch/v1 Job``; the template becomes a pod named after the job, owned by it. With
    Kueue's ``queue-name`` label the Job is one gang in that queue (:func:`kueue.job_gang`)."""
    with describing(object_label(obj, "Job", namespaced=True)):
        job = root(obj)
        name, labels = name_of(job), labels_of(job)
        queue = owner_queue(labels)
        spec = job_spec(job, priorities, name=name, namespace=namespace_of(job), queue=queue)
        if kueue.QUEUE_NAME not in labels:  # KAI groups a plain Job's pods one by one
            suspended = get_bool(get_mapping(job, "spec", ""), "suspend", "spec") is True
            return dataclasses.replace(spec, suspended=suspended)
        if spec.at_once < 1:
            return spec  # nothing to admit
        member = kueue.job_gang(spec.template, annotations_of(job), name=name, count=spec.at_once)
        return dataclasses.replace(spec, template=member)


def adopted_by(pod: PodSpec, owner: JobSpec | ControllerSpec, present: int) -> PodSpec:
    """A snapshot's ``pod`` of ``owner`` (whose other ``present - 1`` pods are in the input,
    so the owner is not expanded again), with what the owner says of its pods: a Job's Kueue
    gang and queue (a gang of the pods present, when fewer than its minimum are), the
    duration and runtime hints of the pod's template, or of the controller's one gang. What
    the pod says itself comes first."""
    template = _template_of(pod, owner)
    if template is None:
        return pod
    gang = template.declared_gang
    if pod.gang is not None or pod.workload_ref is not None or gang is None:
        adopted = pod
    else:
        gang = dataclasses.replace(gang, min_member=min(gang.min_member, present))
        queue = pod.queue or template.queue
        adopted = dataclasses.replace(pod, gang=template.gang, declared_gang=gang, queue=queue)
    duration, hints = template.duration, template.runtime_hints
    if isinstance(owner, ControllerSpec) and len(owner.gangs) == 1:
        duration = duration or owner.gangs[0].duration
        hints = merged(hints, owner.gangs[0].runtime_hints)
    return dataclasses.replace(
        with_duration(adopted, pod.duration or duration),
        runtime_hints=merged(pod.runtime_hints, hints),
    )


def _template_of(pod: PodSpec, owner: JobSpec | ControllerSpec) -> PodSpec | None:
    """The template ``owner`` made ``pod`` from: its name is the pod's name up to an index or
    a generated suffix (the longest such), or the only template."""
    if isinstance(owner, JobSpec):
        return owner.template
    templates = [s.template for s in owner.pod_sets] + [j.template for j in owner.jobs]
    named = [t for t in templates if pod.name == t.name or pod.name.startswith(f"{t.name}-")]
    if named:
        return max(named, key=lambda t: len(t.name))
    return templates[0] if len(templates) == 1 else None


def job_spec(
    job: Obj, priorities: PriorityTable, *, name: str, namespace: str, queue: str = ""
) -> JobSpec:
    """A Job (or a JobSet's Job template) with errors located by field only."""
    spec = get_mapping(job, "spec", "")
    parallelism = _job_count(spec, "parallelism")
    completions = _job_count(spec, "completions")
    if parallelism is None and completions is None:
        completions = 1  # Kubernetes defaults both to 1 when neither is set
    if spec.get("template") is None:
        fail("spec.template", "template is required")
    template = get_mapping(spec, "template", "spec")
    try:
        pod = convert_pod(template, priorities, namespace=namespace, name=name, owner=f"Job/{name}")
    except InputError as exc:
        raise exc.located(field="spec.template") from None
    duration = duration_annotation(annotations_of(job), DURATION)
    deadline = get_int(spec, "activeDeadlineSeconds", "spec", minimum=1)
    if duration is None and pod.duration is None and deadline is not None:
        duration = float(deadline)
    if queue and not pod.queue:
        pod = dataclasses.replace(pod, queue=queue)
    hints = merged(pod.runtime_hints, runtime_hints(annotations_of(job), labels_of(job), spec))
    return JobSpec(
        namespace=namespace,
        name=name,
        parallelism=1 if parallelism is None else parallelism,
        completions=completions,
        template=dataclasses.replace(with_duration(pod, duration), runtime_hints=hints),
    )


def _quota_resource(key: str) -> str | None:
    if key in ("pods", "count/pods"):
        return "pods"
    if key.startswith("requests."):
        name = key.removeprefix("requests.")
        return None if name in ("storage", "") else name
    return key if key in _QUOTA_BARE else None


def quota_from_dict(obj: Mapping[str, Any]) -> QuotaSpec:
    """``v1 ResourceQuota``: the request-side hard limits (see the module docstring)."""
    with describing(object_label(obj, "ResourceQuota", namespaced=True)):
        quota = root(obj)
        name = name_of(quota)
        spec = get_mapping(quota, "spec", "")
        hard_path = "spec.hard"
        hard: Resources = {}
        for key, value in as_mapping(spec.get("hard"), hard_path).items():
            resource = _quota_resource(key)
            amount = quantity(resource or key, value, child(hard_path, key))
            if resource is not None:
                hard[resource] = min(amount, hard.get(resource, amount))
        return QuotaSpec(namespace=namespace_of(quota), name=name, hard=hard)


def namespace_from_dict(obj: Mapping[str, Any]) -> NamespaceSpec:
    """``v1 Namespace``: just its name (a DNS-1123 label)."""
    with describing(object_label(obj, "Namespace", namespaced=False)):
        ns = root(obj)
        name = as_str(name_of(ns), "metadata.name")
        check_namespace_name(name, "metadata.name")
        return NamespaceSpec(name=name)
