"""KubeRay ``RayCluster`` and ``RayJob`` (``ray.io/v1``) → the head and worker pods KubeRay
makes, and the gang its batch-scheduler integration (or Kueue) makes of them.

A cluster spec (a RayCluster's ``spec``, a RayJob's ``spec.rayClusterSpec``):
``headGroupSpec {template, rayStartParams}`` is one head pod ``NAME-head-xxxxx``;
``workerGroupSpecs[] {groupName, replicas (0), minReplicas (0), maxReplicas, numOfHosts (1),
suspend, template, rayStartParams}`` are ``clamp(replicas, minReplicas, maxReplicas) ×
numOfHosts`` pods ``NAME-GROUP-worker-xxxxx`` each (none for a suspended group), as KubeRay
keeps them. Roles: ``head`` and the group names. A RayJob's cluster is named after the RayJob.

KubeRay's batch scheduler is chosen by an operator flag, so phalanx reads the object's labels:

- ``volcano.sh/queue-name`` (or a template naming ``schedulerName: volcano``): Volcano's
  PodGroup ``ray-NAME-pg`` in that queue, of the head and every worker (with
  ``enableInTreeAutoscaling: true``, the head and each group's ``minReplicas × numOfHosts``),
  its priority the class of label ``ray.io/priority-class-name``;
- ``ray.io/gang-scheduling-enabled`` (scheduler-plugins, YuniKorn, the Workload API):
  scheduler-plugins' PodGroup ``NAME`` of the head and every worker;
- ``kai.scheduler/queue``: KAI's PodGroup ``NAME`` of the head and each group's
  ``minReplicas × numOfHosts`` (KAI's pod grouper), in that queue, the same priority label;
- else ``kueue.x-k8s.io/queue-name``: the gang Kueue admits, of every pod, each group a role.

A minimum below the pod count makes the gang elastic: workers beyond it join when room appears.
Otherwise no gang: the pods go one by one. Kueue's and KAI's queue labels reach every pod.
``spec.suspend: true`` without Kueue's label makes no pods. A RayCluster serves until the end
of the run; a RayJob's cluster runs for ``phalanx.dev/duration``, else ``activeDeadlineSeconds``
(also a runtime hint, as ``phalanx.dev/runtime-estimate`` is), else ``--default-duration``.
A RayJob with ``clusterSelector`` uses a cluster that exists already: it makes no pods.
Not modelled: the RayJob's submitter pod (a small Job; Volcano's minimum leaves it out too),
autoscaling beyond the desired replicas, ``rayStartParams`` and ``entrypoint`` (validated).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, PodSet, PodSpec
from phalanx.k8s.apis import kai, kueue
from phalanx.k8s.apis.owner import in_owner_queue, owner_queue
from phalanx.k8s.fields import (
    INT32_MAX,
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
from phalanx.k8s.kinds.common import (
    controller_hints,
    join,
    owner_timed,
    snapshot_member,
    template_pod,
)
from phalanx.k8s.meta import (
    DURATION,
    annotations_of,
    describing,
    duration_annotation,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import MAX_JOB_PODS, SCHEDULER_PLUGINS_GROUPS, VOLCANO_GROUP
from phalanx.k8s.pods import pod_duration
from phalanx.k8s.priority import PriorityTable

VERSION = "ray.io/v1"
CLUSTER = "RayCluster"
JOB = "RayJob"
GANG_LABEL = "ray.io/gang-scheduling-enabled"
PRIORITY_LABEL = "ray.io/priority-class-name"
VOLCANO_QUEUE = "volcano.sh/queue-name"
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")


@dataclass(frozen=True, slots=True)
class Group:
    """The head or a worker group: its pod template, its pods and its gang minimum."""

    role: str
    pod: PodSpec
    count: int
    minimum: int
    path: str


def raycluster_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> ControllerSpec:
    with describing(object_label(obj, CLUSTER, namespaced=True)):
        top = root(obj)
        spec = get_mapping(top, "spec", "")
        return _controller(top, CLUSTER, spec, "spec", priorities, suspend=spec)


def rayjob_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> ControllerSpec:
    with describing(object_label(obj, JOB, namespaced=True)):
        top = root(obj)
        spec = get_mapping(top, "spec", "")
        get_str(spec, "entrypoint", "spec")
        get_bool(spec, "shutdownAfterJobFinishes", "spec")
        get_int(spec, "activeDeadlineSeconds", "spec", minimum=1)
        mode = get_str(spec, "submissionMode", "spec")
        if mode and mode not in SUBMISSION_MODES:
            fail("spec.submissionMode", f"must be one of {', '.join(SUBMISSION_MODES)}")
        if get_string_map(spec, "clusterSelector", "spec"):
            return ControllerSpec(JOB, namespace_of(top), name_of(top))  # an existing cluster's
        if spec.get("rayClusterSpec") is None:
            fail("spec.rayClusterSpec", "is required (or clusterSelector)")
        cluster = get_mapping(spec, "rayClusterSpec", "spec")
        return _controller(top, JOB, cluster, "spec.rayClusterSpec", priorities, suspend=spec)


def _controller(
    top: Obj, kind: str, cluster: Obj, path: str, priorities: PriorityTable, *, suspend: Obj
) -> ControllerSpec:
    name, namespace, labels = name_of(top), namespace_of(top), labels_of(top)
    groups = _groups(cluster, path, name, namespace, f"{kind}/{name}", priorities)
    groups = _timed(top, kind, groups)
    if get_bool(suspend, "suspend", "spec") and kueue.QUEUE_NAME not in labels:
        return ControllerSpec(kind, namespace, name, service=kind == CLUSTER)
    autoscaling = get_bool(cluster, "enableInTreeAutoscaling", path)
    gang = _gang(top, kind, groups, autoscaling, priorities)
    if gang is not None:
        groups = [dataclasses.replace(g, pod=join(g.pod, gang, g.role, g.path)) for g in groups]
    elif kueue.QUEUE_NAME in labels:
        groups = _admitted_whole(top, kind, groups)
    pod_sets = tuple(PodSet(g.pod, g.count, "generated") for g in groups if g.count)
    gangs = () if gang is None else (gang,)
    return ControllerSpec(kind, namespace, name, pod_sets, gangs, service=kind == CLUSTER)


def _groups(
    cluster: Obj, path: str, name: str, namespace: str, owner: str, priorities: PriorityTable
) -> list[Group]:
    head_path = child(path, "headGroupSpec")
    if cluster.get("headGroupSpec") is None:
        fail(head_path, "is required")
    head = get_mapping(cluster, "headGroupSpec", path)
    get_string_map(head, "rayStartParams", head_path)
    pod = template_pod(
        head, head_path, priorities, namespace=namespace, name=f"{name}-head", owner=owner
    )
    groups = [Group("head", pod, 1, 1, child(head_path, "template"))]
    for i, raw in enumerate(get_list(cluster, "workerGroupSpecs", path)):
        item_path = child(child(path, "workerGroupSpecs"), i)
        item = as_mapping(raw, item_path)
        group = get_str(item, "groupName", item_path)
        if not group:
            fail(child(item_path, "groupName"), "is required")
        if group in (g.role for g in groups):
            fail(child(item_path, "groupName"), f"duplicate group {group!r}")
        get_string_map(item, "rayStartParams", item_path)
        count, minimum = _replicas(item, item_path)
        prefix = f"{name}-{group}-worker"
        pod = template_pod(
            item, item_path, priorities, namespace=namespace, name=prefix, owner=owner
        )
        groups.append(Group(group, pod, count, minimum, child(item_path, "template")))
    return groups


def _replicas(item: Obj, path: str) -> tuple[int, int]:
    """A worker group's pods (replicas clamped to its bounds) and its minimum, × numOfHosts."""
    replicas = get_int(item, "replicas", path, minimum=0) or 0
    least = get_int(item, "minReplicas", path, minimum=0) or 0
    most = get_int(item, "maxReplicas", path, minimum=0)
    most = INT32_MAX if most is None else most
    if least > most:
        fail(child(path, "minReplicas"), f"must not exceed maxReplicas ({most})")
    hosts = get_int(item, "numOfHosts", path, minimum=1) or 1
    if get_bool(item, "suspend", path):
        return 0, 0
    pods = min(max(replicas, least), most) * hosts
    if pods > MAX_JOB_PODS:
        fail(child(path, "replicas"), f"{pods} pods is above phalanx's limit of {MAX_JOB_PODS:,}")
    return pods, least * hosts


def _timed(top: Obj, kind: str, groups: list[Group]) -> list[Group]:
    """Every pod with the object's duration (a RayJob's: else ``activeDeadlineSeconds``) and
    runtime hints where its template says nothing."""
    spec = get_mapping(top, "spec", "")
    if kind == JOB:
        duration = pod_duration(annotations_of(top), spec, "spec")
    else:
        duration = duration_annotation(annotations_of(top), DURATION)
    hints, _ = controller_hints(top, spec if kind == JOB else None)
    out = []
    for group in groups:
        pod = in_owner_queue(owner_timed(group.pod, duration, hints), labels_of(top))
        out.append(dataclasses.replace(group, pod=pod))
    return out


def _gang(
    top: Obj, kind: str, groups: list[Group], autoscaling: bool, priorities: PriorityTable
) -> GangSpec | None:
    """The PodGroup KubeRay's batch scheduler (or KAI's pod grouper) makes, or None."""
    labels, name = labels_of(top), name_of(top)
    volcano = VOLCANO_QUEUE in labels or any(g.pod.scheduler_name == "volcano" for g in groups)
    pods = sum(g.count for g in groups)
    least = sum(g.minimum for g in groups)
    if volcano:
        api, gang_name, minimum = VOLCANO_GROUP, f"ray-{name}-pg", least if autoscaling else pods
    elif GANG_LABEL in labels:
        api, gang_name, minimum = SCHEDULER_PLUGINS_GROUPS[0], name, pods
    elif kai.QUEUE_LABEL in labels:
        api, gang_name, minimum = kai.API, name, least
    else:
        return None
    class_name = labels.get(PRIORITY_LABEL, "") if api != SCHEDULER_PLUGINS_GROUPS[0] else ""
    where = child("metadata.labels", PRIORITY_LABEL)
    hints, deadline = controller_hints(top)
    return GangSpec(
        namespace=namespace_of(top),
        name=gang_name,
        min_member=max(1, minimum),
        api=api,
        priority=priorities.resolve(class_name, where) if class_name else None,
        queue=labels.get(VOLCANO_QUEUE) or owner_queue(labels) or "default",
        runtime_hints=hints,
        deadline=deadline,
        origin=(kind, "spec.workerGroupSpecs"),
    )


def _admitted_whole(top: Obj, kind: str, groups: list[Group]) -> list[Group]:
    """The groups with their pods in the one gang Kueue admits, each group a role."""
    roles = {g.role: g.count for g in groups if g.count}
    out = []
    for group in groups:
        member = kueue.job_gang(
            group.pod,
            annotations_of(top),
            name=name_of(top),
            count=sum(roles.values()),
            roles=roles,
            role=group.role,
            kind=kind,
        )
        out.append(dataclasses.replace(group, pod=member))
    return out


def snapshot_owners(
    spec: ControllerSpec, clusters: Iterable[str] = ()
) -> dict[str, ControllerSpec]:
    """``Kind/NAME`` → what a RayCluster or RayJob says of the pods a snapshot holds of it
    (their duration, runtime hints, Kueue gang without role minimums): the object itself, and
    for a RayJob each of ``clusters`` (the RayClusters of the input it owns, ``NAME-xxxxx``),
    whose pods ``CLUSTER-head-…``, ``CLUSTER-GROUP-worker-…`` it made from its templates."""
    own = dataclasses.replace(
        spec,
        pod_sets=tuple(
            dataclasses.replace(s, template=snapshot_member(s.template)) for s in spec.pod_sets
        ),
    )
    owners = {spec.owner: own}
    for cluster in clusters if spec.kind == JOB else ():
        renamed = tuple(
            dataclasses.replace(
                s,
                template=dataclasses.replace(
                    s.template, name=cluster + s.template.name[len(spec.name) :]
                ),
            )
            for s in own.pod_sets
        )
        owners[f"{CLUSTER}/{cluster}"] = dataclasses.replace(own, pod_sets=renamed)
    return owners
