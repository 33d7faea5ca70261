"""``v1 Pod`` (and Job pod templates) → :class:`PodSpec`.

Design: :func:`convert_pod` does the work and raises InputErrors located by field only, so a Job
can prefix them with ``spec.template``; :func:`pod_from_dict` is the public wrapper that also
names the object. The effective request follows Kubernetes' ``PodRequests``
(``k8s.io/component-helpers/resource``), resource by resource:

- a container's request defaults to its limit when only the limit is given, and may not
  exceed the limit;
- regular containers and restartable ("sidecar", ``restartPolicy: Always``) init containers
  are summed;
- every other init container needs its own request plus the sidecars started before it,
  and the pod needs the maximum of that and the running sum;
- ``spec.overhead`` is added, and ``pods: 1`` always (a pod slot is an ordinary resource).

Priority: ``spec.priority`` when set (an admitted pod always has it, so a live pod never
needs its class to still exist), else ``spec.priorityClassName`` looked up in the
:class:`PriorityTable`, else the global default class, else 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import GangRef, PodSpec, Resources
from phalanx.k8s.fields import (
    Obj,
    add_into,
    as_mapping,
    check_int,
    child,
    fail,
    get_list,
    get_mapping,
    get_resources,
    get_str,
    max_into,
)
from phalanx.k8s.meta import (
    DURATION,
    ROLE_LABEL,
    annotations_of,
    describing,
    duration_annotation,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.placement import placement_from
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.workloads import WORKLOAD_GROUP, workload_ref

#: How a pod names its gang, first match wins: (metadata map, key, API group of the PodGroup).
#: A pod with none of these joins the gang of its ``spec.workloadRef`` (see
#: :mod:`phalanx.k8s.workloads`; a ``basic`` pod group's pods are ungrouped by the caller).
GANG_KEYS: tuple[tuple[str, str, str], ...] = (
    ("labels", "scheduling.x-k8s.io/pod-group", "scheduling.x-k8s.io"),
    ("labels", "pod-group.scheduling.sigs.k8s.io", "scheduling.sigs.k8s.io"),
    ("annotations", "scheduling.k8s.io/group-name", "scheduling.volcano.sh"),
)
#: Volcano's task (role) annotation, set by its Job controller.
TASK_SPEC = "volcano.sh/task-spec"

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def gang_ref(labels: Mapping[str, str], annotations: Mapping[str, str]) -> GangRef | None:
    """The gang a pod joins, by the first key present with a non-empty value."""
    maps = {"labels": labels, "annotations": annotations}
    for where, key, api in GANG_KEYS:
        name = maps[where].get(key)
        if name:
            return GangRef(name=name, api=api)
    return None


def gang_field(api: str) -> str:
    """The field that carries a gang reference of ``api`` (for error messages)."""
    if api == WORKLOAD_GROUP:
        return "spec.workloadRef"
    for where, key, key_api in GANG_KEYS:
        if key_api == api:
            return child(f"metadata.{where}", key)
    raise ValueError(f"unknown gang API {api!r}")


def role_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    return annotations.get(TASK_SPEC) or labels.get(ROLE_LABEL) or ""


def _check_container_resource(name: str, path: str) -> None:
    if (
        name in _STANDARD_CONTAINER_RESOURCES
        or name.startswith("hugepages-")
        or ("/" in name and not name.startswith("/") and not name.endswith("/"))
    ):
        return
    fail(
        path,
        f"invalid container resource {name!r}: use cpu, memory, ephemeral-storage, "
        "hugepages-<size> or an extended resource such as nvidia.com/gpu",
    )


def container_requests(raw: object, path: str) -> Resources:
    """One container's requests, defaulted from its limits as the API server does."""
    container = as_mapping(raw, path)
    res_path = child(path, "resources")
    resources = get_mapping(container, "resources", path)
    requests = get_resources(resources, "requests", res_path)
    limits = get_resources(resources, "limits", res_path)
    for kind, amounts in (("requests", requests), ("limits", limits)):
        for name in amounts:
            _check_container_resource(name, child(child(res_path, kind), name))
    for name, limit in limits.items():
        if name not in requests:
            requests[name] = limit
        elif requests[name] > limit:
            fail(
                child(child(res_path, "requests"), name),
                f"must be less than or equal to the {name} limit",
            )
    return requests


def pod_requests(spec: Obj, path: str) -> Resources:
    """The effective resource request of the pod ``spec`` found at ``path``."""
    containers_path = child(path, "containers")
    containers = get_list(spec, "containers", path)
    if not containers:
        fail(containers_path, "at least one container is required")
    total: Resources = {}
    for i, container in enumerate(containers):
        add_into(total, container_requests(container, child(containers_path, i)))
    init_path = child(path, "initContainers")
    sidecars: Resources = {}
    init_peak: Resources = {}
    for i, container in enumerate(get_list(spec, "initContainers", path)):
        item_path = child(init_path, i)
        requests = container_requests(container, item_path)
        restart = get_str(as_mapping(container, item_path), "restartPolicy", item_path)
        if restart == "Always":
            add_into(total, requests)
            add_into(sidecars, requests)
            needed = dict(sidecars)
        elif restart:
            fail(child(item_path, "restartPolicy"), f"must be 'Always' or unset, not {restart!r}")
        else:
            needed = dict(requests)
            add_into(needed, sidecars)
        max_into(init_peak, needed)
    max_into(total, init_peak)
    add_into(total, get_resources(spec, "overhead", path))
    total["pods"] = 1
    return total


def pod_priority(spec: Obj, path: str, priorities: PriorityTable) -> int:
    if spec.get("priority") is not None:
        return check_int(spec["priority"], child(path, "priority"))
    class_name = get_str(spec, "priorityClassName", path)
    if class_name:
        return priorities.resolve(class_name, child(path, "priorityClassName"))
    return priorities.default


def convert_pod(
    obj: Obj,
    priorities: PriorityTable,
    *,
    namespace: str | None = None,
    name: str | None = None,
    owner: str = "",
) -> PodSpec:
    """A pod (or pod template, when ``name`` is given) with errors located by field only."""
    pod = root(obj)
    pod_name = name if name is not None else name_of(pod)
    labels = labels_of(pod)
    annotations = annotations_of(pod)
    spec = get_mapping(pod, "spec", "")
    gang = gang_ref(labels, annotations)
    ref = workload_ref(spec, "spec")
    if gang is None and ref is not None:
        gang = GangRef(name=ref.gang_name, api=WORKLOAD_GROUP)
    return PodSpec(
        namespace=namespace_of(pod, namespace),
        name=pod_name,
        requests=pod_requests(spec, "spec"),
        placement=placement_from(spec, "spec"),
        priority=pod_priority(spec, "spec", priorities),
        scheduler_name=get_str(spec, "schedulerName", "spec"),
        gang=gang,
        role=role_of(labels, annotations),
        owner=owner,
        labels=labels,
        annotations=annotations,
        duration=duration_annotation(annotations, DURATION),
    )


def pod_from_dict(
    obj: Mapping[str, Any], priorities: PriorityTable, *, namespace: str | None = None
) -> PodSpec:
    """``v1 Pod`` → PodSpec; ``namespace``, when given, overrides ``metadata.namespace``."""
    with describing(object_label(obj, "Pod", namespaced=True, namespace=namespace)):
        return convert_pod(obj, priorities, namespace=namespace)


def with_duration(pod: PodSpec, duration: float | None) -> PodSpec:
    return pod if duration is None else dataclasses.replace(pod, duration=duration)
