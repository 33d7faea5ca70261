"""Volcano's ``batch.volcano.sh/v1alpha1`` Job → its PodGroup and pods, as vc-controller makes them.

Read: ``spec.tasks[]`` (``name``, ``replicas``, ``minAvailable``, ``template``, ``policies``,
``partitionPolicy``),
``spec.minAvailable`` (default: the sum of the tasks' minimums, each defaulting to its
replicas, i.e. every pod), ``spec.queue`` (default ``default``), ``spec.priorityClassName``,
``spec.schedulerName`` (default ``volcano``; a template's own name wins), ``spec.policies``.
The controller's PodGroup is named after the job, with ``minMember = minAvailable``,
``minTaskMember`` = the minimum of every task that sets one, the queue and the priority
class. Pods are ``JOB-TASK-INDEX`` with the annotations the controller sets
(``scheduling.k8s.io/group-name``, ``volcano.sh/task-spec``, ``volcano.sh/job-name``).

``partitionPolicy {totalPartitions, partitionSize, minPartitions, networkTopology}``
(``replicas`` must be ``totalPartitions × partitionSize``): as vc-controller does, pod ``i`` is
labelled ``volcano.sh/partition-id: i / partitionSize`` and the PodGroup gets a
``subGroupPolicy`` entry named after the task (pods labelled ``volcano.sh/task-spec: TASK``,
split by ``volcano.sh/partition-id``, ``subGroupSize = partitionSize``) with the partition's
network topology: each partition inside one HyperNode of that tier. A task without
``minAvailable`` and with ``minPartitions > 0`` needs ``minPartitions × partitionSize`` pods.

Lifecycle policies (``event``/``events`` → ``action``) are validated. The simulation has no pod
failures, so ``PodFailed``/``TaskFailed`` never fire, nor does ``PodEvicted`` for a preemption's
eviction (the pod is re-created pending); it models
``TaskCompleted → CompleteJob``: the job finishes when that task's duration is over (the
other tasks are stopped), instead of when its longest task is done. ``plugins``,
``maxRetry``, ``minSuccess``, ``ttlSecondsAfterFinished`` and volumes are not modelled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import (
    ControllerSpec,
    GangSpec,
    PodSet,
    PodSpec,
    SubgroupTopology,
    TopologyConstraint,
)
from phalanx.k8s.fields import (
    Obj,
    as_list,
    as_mapping,
    child,
    fail,
    get_int,
    get_list,
    get_mapping,
    get_str,
)
from phalanx.k8s.kinds.common import controller_hints, join, template_pod
from phalanx.k8s.meta import (
    DURATION,
    annotations_of,
    describing,
    duration_annotation,
    max_member_annotation,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import VOLCANO_GROUP
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.topology import gang_topology, network_topology

KIND = "Job.batch.volcano.sh"
TASK_LABEL = "volcano.sh/task-spec"
PARTITION_LABEL = "volcano.sh/partition-id"
EVENTS = frozenset(
    {
        "*",
        "PodFailed",
        "PodEvicted",
        "PodPending",
        "PodRunning",
        "JobUnknown",
        "TaskCompleted",
        "TaskFailed",
        "OutOfSync",
        "CommandIssued",
        "JobUpdated",
    }
)
ACTIONS = frozenset(
    {
        "AbortJob",
        "RestartJob",
        "RestartTask",
        "RestartPod",
        "TerminateJob",
        "CompleteJob",
        "ResumeJob",
        "SyncJob",
        "EnqueueJob",
        "SyncQueue",
        "OpenQueue",
        "CloseQueue",
    }
)


def policies(spec: Obj, path: str) -> list[tuple[str, str]]:
    """``(event, action)`` pairs of a ``policies`` list, validated."""
    found: list[tuple[str, str]] = []
    for i, raw in enumerate(get_list(spec, "policies", path)):
        item_path = child(child(path, "policies"), i)
        item = as_mapping(raw, item_path)
        action = get_str(item, "action", item_path)
        if action not in ACTIONS:
            fail(child(item_path, "action"), f"unknown action {action!r}")
        events = [get_str(item, "event", item_path)] if item.get("event") is not None else []
        events += as_list(item.get("events"), child(item_path, "events"))
        if not events and item.get("exitCode") is None:
            fail(item_path, "needs event, events or exitCode")
        for event in events:
            if event not in EVENTS:
                fail(child(item_path, "events"), f"unknown event {event!r}")
            found.append((event, action))
    return found


def _task(raw: object, path: str, job: str, namespace: str, priorities: PriorityTable) -> Task:
    task = as_mapping(raw, path)
    name = get_str(task, "name", path)
    if not name:
        fail(child(path, "name"), "is required")
    replicas = get_int(task, "replicas", path, minimum=0)
    replicas = 1 if replicas is None else replicas
    minimum = get_int(task, "minAvailable", path, minimum=0)
    if minimum is not None and minimum > replicas:
        fail(child(path, "minAvailable"), f"must not exceed replicas ({replicas})")
    pod = template_pod(
        task, path, priorities, namespace=namespace, name=f"{job}-{name}", owner=f"{KIND}/{job}"
    )
    partition = _partition(task, path, replicas, minimum)
    if partition is not None and minimum is None and partition[1]:
        minimum = partition[1] * partition[0]
    return name, replicas, minimum, pod, policies(task, path), partition


def _partition(
    task: Obj, path: str, replicas: int, minimum: int | None
) -> tuple[int, int, TopologyConstraint] | None:
    """A task's ``partitionPolicy`` as (partitionSize, minPartitions, network topology),
    validated as Volcano's admission webhook does."""
    if task.get("partitionPolicy") is None:
        return None
    policy_path = child(path, "partitionPolicy")
    policy = get_mapping(task, "partitionPolicy", path)
    total = get_int(policy, "totalPartitions", policy_path, minimum=1)
    size = get_int(policy, "partitionSize", policy_path, minimum=1)
    if total is None or size is None:
        fail(policy_path, "totalPartitions and partitionSize are required")
    if total * size != replicas:
        fail(policy_path, f"totalPartitions × partitionSize must equal replicas ({replicas})")
    least = get_int(policy, "minPartitions", policy_path, minimum=0) or 0
    if least > total:
        fail(child(policy_path, "minPartitions"), f"must not exceed totalPartitions ({total})")
    if minimum is not None and least and least * size != minimum:
        fail(policy_path, "minAvailable must equal minPartitions × partitionSize")
    constraint = network_topology(policy, policy_path) or TopologyConstraint()
    return size, least, constraint


Task = tuple[
    str, int, int | None, PodSpec, list[tuple[str, str]], tuple[int, int, TopologyConstraint] | None
]


def volcano_job_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> ControllerSpec:
    with describing(object_label(obj, "Job", namespaced=True)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top)
        spec = get_mapping(top, "spec", "")
        raw_tasks = get_list(spec, "tasks", "spec")
        if not raw_tasks:
            fail("spec.tasks", "at least one task is required")
        tasks = [
            _task(raw, child("spec.tasks", i), name, namespace, priorities)
            for i, raw in enumerate(raw_tasks)
        ]
        names = [t[0] for t in tasks]
        for i, task_name in enumerate(names):
            if task_name in names[:i]:
                fail(child(child("spec.tasks", i), "name"), f"duplicate task {task_name!r}")
        job_policies = policies(spec, "spec")
        default_min = sum(replicas if m is None else m for _, replicas, m, *_ in tasks)
        min_available = get_int(spec, "minAvailable", "spec", minimum=0)
        total = sum(t[1] for t in tasks)
        if min_available is not None and min_available > total:
            fail("spec.minAvailable", f"must not exceed the job's {total} replicas")
        class_name = get_str(spec, "priorityClassName", "spec")
        priority = priorities.resolve(class_name, "spec.priorityClassName") if class_name else None
        topology = gang_topology(top, annotations_of(top))  # spec.networkTopology
        minimum = max(1, default_min if min_available is None else min_available)
        hints, deadline = controller_hints(top)
        gang = GangSpec(
            namespace=namespace,
            name=name,
            min_member=minimum,
            api=VOLCANO_GROUP,
            role_minimums={n: m for n, _, m, *_ in tasks if m},
            priority=priority,
            queue=get_str(spec, "queue", "spec") or "default",
            duration=_duration(top, tasks, job_policies),
            topology=topology.constraint,
            subgroups=tuple(_subgroup(t[0], t[5]) for t in tasks if t[5] is not None),
            max_member=max_member_annotation(annotations_of(top), minimum),
            runtime_hints=hints,
            deadline=deadline,
            origin=("Job", "spec.minAvailable" if min_available is not None else "spec.tasks"),
        )
        scheduler = get_str(spec, "schedulerName", "spec") or "volcano"
        pod_sets: list[PodSet] = []
        for i, (task_name, replicas, _, pod, _, partition) in enumerate(tasks):
            member = join(pod, gang, task_name, child(child("spec.tasks", i), "template"))
            member = dataclasses.replace(member, scheduler_name=member.scheduler_name or scheduler)
            pod_sets += _pod_sets(member, task_name, replicas, partition)
        all_policies = job_policies + [p for t in tasks for p in t[4]]
        return ControllerSpec(
            KIND, namespace, name, tuple(pod_sets), (gang,), policies=tuple(all_policies)
        )


def _subgroup(task: str, partition: tuple[int, int, TopologyConstraint]) -> SubgroupTopology:
    """The PodGroup ``subGroupPolicy`` entry vc-controller makes for a partitioned task."""
    size, _, constraint = partition
    return SubgroupTopology(
        task, constraint, ((TASK_LABEL, task),), keys=(PARTITION_LABEL,), size=size
    )


def _pod_sets(
    pod: PodSpec, task: str, replicas: int, partition: tuple[int, int, TopologyConstraint] | None
) -> list[PodSet]:
    """The task's pods; a partitioned task's as one pod set per partition, labelled."""
    if partition is None:
        return [PodSet(pod, replicas)]
    size = partition[0]
    out = []
    for index in range(replicas // size):
        labels = {**pod.labels, TASK_LABEL: task, PARTITION_LABEL: str(index)}
        out.append(PodSet(dataclasses.replace(pod, labels=labels), size, start=index * size))
    return out


def _duration(job: Obj, tasks: list[Task], job_policies: list[tuple[str, str]]) -> float | None:
    """The job annotation's duration, else that of a task whose completion completes the job."""
    duration = duration_annotation(annotations_of(job), DURATION)
    if duration is not None:
        return duration
    completes = ("TaskCompleted", "CompleteJob")
    for _, _, _, pod, task_policies, _ in tasks:
        if completes in task_policies and pod.duration is not None:
            return pod.duration
    if completes in job_policies:
        known = [t[3].duration for t in tasks if t[3].duration is not None]
        return min(known) if known else None
    return None
