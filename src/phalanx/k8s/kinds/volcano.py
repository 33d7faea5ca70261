"""Volcano's ``batch.volcano.sh/v1alpha1`` Job → its PodGroup and pods, as vc-controller makes them.

Read: ``spec.tasks[]`` (``name``, ``replicas``, ``minAvailable``, ``template``, ``policies``),
``spec.minAvailable`` (default: the sum of the tasks' minimums, each defaulting to its
replicas, i.e. every pod), ``spec.queue`` (default ``default``), ``spec.priorityClassName``,
``spec.schedulerName`` (default ``volcano``; a template's own name wins), ``spec.policies``.
The controller's PodGroup is named after the job, with ``minMember = minAvailable``,
``minTaskMember`` = the minimum of every task that sets one, the queue and the priority
class. Pods are ``JOB-TASK-INDEX`` with the annotations the controller sets
(``scheduling.k8s.io/group-name``, ``volcano.sh/task-spec``, ``volcano.sh/job-name``).

Lifecycle policies (``event``/``events`` → ``action``) are validated. The simulation has no pod
failures or evictions, so ``PodFailed``/``PodEvicted``/``TaskFailed`` never fire; it models
``TaskCompleted → CompleteJob``: the job finishes when that task's duration is over (the
other tasks are stopped), instead of when its longest task is done. ``plugins``,
``maxRetry``, ``minSuccess``, ``ttlSecondsAfterFinished`` and volumes are not modelled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, PodSet, PodSpec
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
from phalanx.k8s.kinds.common import join, template_pod
from phalanx.k8s.meta import (
    DURATION,
    annotations_of,
    describing,
    duration_annotation,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import VOLCANO_GROUP
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.topology import gang_topology

KIND = "Job.batch.volcano.sh"
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


def _task(
    raw: object, path: str, job: str, namespace: str, priorities: PriorityTable
) -> tuple[str, int, int | None, PodSpec, list[tuple[str, str]]]:
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
    return name, replicas, minimum, pod, policies(task, path)


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
        default_min = sum(replicas if m is None else m for _, replicas, m, _, _ in tasks)
        min_available = get_int(spec, "minAvailable", "spec", minimum=0)
        total = sum(t[1] for t in tasks)
        if min_available is not None and min_available > total:
            fail("spec.minAvailable", f"must not exceed the job's {total} replicas")
        class_name = get_str(spec, "priorityClassName", "spec")
        priority = priorities.resolve(class_name, "spec.priorityClassName") if class_name else None
        topology, _ = gang_topology(top, annotations_of(top))  # spec.networkTopology
        gang = GangSpec(
            namespace=namespace,
            name=name,
            min_member=max(1, default_min if min_available is None else min_available),
            api=VOLCANO_GROUP,
            role_minimums={n: m for n, _, m, _, _ in tasks if m},
            priority=priority,
            queue=get_str(spec, "queue", "spec") or "default",
            duration=_duration(top, tasks, job_policies),
            topology=topology,
        )
        scheduler = get_str(spec, "schedulerName", "spec") or "volcano"
        pod_sets = []
        for i, (task_name, replicas, _, pod, _) in enumerate(tasks):
            member = join(pod, gang, task_name, child(child("spec.tasks", i), "template"))
            member = dataclasses.replace(member, scheduler_name=member.scheduler_name or scheduler)
            pod_sets.append(PodSet(member, replicas))
        all_policies = job_policies + [p for t in tasks for p in t[4]]
        return ControllerSpec(
            KIND, namespace, name, tuple(pod_sets), (gang,), policies=tuple(all_policies)
        )


def _duration(
    job: Obj,
    tasks: list[tuple[str, int, int | None, PodSpec, list[tuple[str, str]]]],
    job_policies: list[tuple[str, str]],
) -> float | None:
    """The job annotation's duration, else that of a task whose completion completes the job."""
    duration = duration_annotation(annotations_of(job), DURATION)
    if duration is not None:
        return duration
    completes = ("TaskCompleted", "CompleteJob")
    for _, _, _, pod, task_policies in tasks:
        if completes in task_policies and pod.duration is not None:
            return pod.duration
    if completes in job_policies:
        known = [pod.duration for *_, pod, _ in tasks if pod.duration is not None]
        return min(known) if known else None
    return None
