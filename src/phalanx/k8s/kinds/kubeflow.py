"""Kubeflow's PyTorchJob and MPIJob → one gang and its pods, as the training operator makes them.

``kubeflow.org/v1`` PyTorchJob (``spec.pytorchReplicaSpecs``: ``Master``, ``Worker``),
``kubeflow.org/v1`` MPIJob and ``kubeflow.org/v2beta1`` MPIJob (``spec.mpiReplicaSpecs``:
``Launcher``, ``Worker``). Each replica spec: ``replicas`` (default 1) and ``template``. Pods:
``JOB-master-0``, ``JOB-worker-I``; an MPIJob's launcher is ``JOB-launcher``. The role of a
pod is its replica type in lower case.

The operator's PodGroup is named after the job: ``minMember`` is the total of all replicas
unless ``spec.runPolicy.schedulingPolicy.minAvailable`` says otherwise; ``queue``,
``priorityClass`` and ``scheduleTimeoutSeconds`` come from the same scheduling policy. Its API
group is Volcano's when a template names ``schedulerName: volcano``, else scheduler-plugins'.
Duration: ``phalanx.dev/duration`` on the job, else ``runPolicy.activeDeadlineSeconds``, else
(MPIJob) the launcher's, else the longest member's. ``elasticPolicy``, ``cleanPodPolicy``,
``backoffLimit``, ``slotsPerWorker``, ``launcherCreationPolicy`` and ``restartPolicy`` are not
modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, PodSet, PodSpec
from phalanx.k8s.apis.owner import owner_queue
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    child,
    fail,
    get_int,
    get_mapping,
    get_resources,
    get_str,
)
from phalanx.k8s.kinds.common import controller_hints, join, template_pod
from phalanx.k8s.meta import (
    annotations_of,
    describing,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP
from phalanx.k8s.pods import pod_duration
from phalanx.k8s.priority import PriorityTable

#: kind → (replica specs field, replica types in order)
SHAPES = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}


def _replicas(
    kind: str, spec: Obj, job: str, namespace: str, priorities: PriorityTable
) -> list[tuple[str, int, PodSpec]]:
    field, types = SHAPES[kind]
    path = child("spec", field)
    specs = get_mapping(spec, field, "spec")
    unknown = sorted(set(specs) - set(types))
    if unknown:
        fail(child(path, unknown[0]), f"unknown replica type (use {' or '.join(types)})")
    if not specs:
        fail(path, "at least one replica spec is required")
    found = []
    for replica_type in types:
        if replica_type not in specs:
            continue
        item_path = child(path, replica_type)
        item = as_mapping(specs[replica_type], item_path)
        count = get_int(item, "replicas", item_path, minimum=0)
        count = 1 if count is None else count
        role = replica_type.lower()
        launcher = kind == "MPIJob" and replica_type == "Launcher"
        if launcher and count > 1:
            fail(child(item_path, "replicas"), "an MPIJob has one launcher")
        prefix = f"{job}-{role}"
        pod = template_pod(
            item, item_path, priorities, namespace=namespace, name=prefix, owner=f"{kind}/{job}"
        )
        found.append((role, count, pod))
    return found


def kubeflow_job_from_dict(
    kind: str, obj: Mapping[str, Any], priorities: PriorityTable
) -> ControllerSpec:
    with describing(object_label(obj, kind, namespaced=True)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top)
        spec = get_mapping(top, "spec", "")
        replicas = _replicas(kind, spec, name, namespace, priorities)
        run_policy = get_mapping(spec, "runPolicy", "spec")
        policy_path = "spec.runPolicy.schedulingPolicy"
        policy = get_mapping(run_policy, "schedulingPolicy", "spec.runPolicy")
        total = sum(count for _, count, _ in replicas)
        minimum = get_int(policy, "minAvailable", policy_path, minimum=1)
        if minimum is not None and minimum > total:
            fail(child(policy_path, "minAvailable"), f"must not exceed the job's {total} replicas")
        class_name = get_str(policy, "priorityClass", policy_path)
        path = child(policy_path, "priorityClass")
        timeout = get_int(policy, "scheduleTimeoutSeconds", policy_path, minimum=0)
        volcano = any(pod.scheduler_name == "volcano" for _, _, pod in replicas)
        # runPolicy.activeDeadlineSeconds bounds the whole job: a hint as a pod's does
        hints, deadline = controller_hints(top, run_policy, "spec.runPolicy")
        gang = GangSpec(
            namespace=namespace,
            name=name,
            min_member=max(1, total if minimum is None else minimum),
            api=VOLCANO_GROUP if volcano else SCHEDULER_PLUGINS_GROUPS[0],
            priority=priorities.resolve(class_name, path) if class_name else None,
            queue=get_str(policy, "queue", policy_path) or owner_queue(labels_of(top)) or "default",
            timeout_seconds=None if timeout is None else float(timeout),
            min_resources=get_resources(policy, "minResources", policy_path),
            duration=_duration(top, run_policy, replicas),
            runtime_hints=hints,
            deadline=deadline,
            origin=(
                kind,
                f"{policy_path}.minAvailable" if minimum is not None else f"spec.{SHAPES[kind][0]}",
            ),
        )
        field = SHAPES[kind][0]
        pod_sets = []
        for role, count, pod in replicas:
            template_path = child(child(child("spec", field), role.capitalize()), "template")
            member = join(pod, gang, role, template_path)
            naming = "fixed" if role == "launcher" else "index"
            pod_sets.append(PodSet(member, count, naming))
        return ControllerSpec(kind, namespace, name, tuple(pod_sets), (gang,))


def _duration(job: Obj, run_policy: Obj, replicas: list[tuple[str, int, PodSpec]]) -> float | None:
    duration = pod_duration(annotations_of(job), run_policy, "spec.runPolicy")
    if duration is not None:
        return duration
    launcher = [pod.duration for role, _, pod in replicas if role == "launcher"]
    return launcher[0] if launcher else None
