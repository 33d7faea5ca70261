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
:class:`PriorityTable`, else KAI's ``priorityClassName`` label when that class is known, else
the global default class, else 0.

Gang membership: every declaration a pod carries is read (:data:`GANG_KEYS`, the Workload
API's ``workloadRef`` and ``schedulingGroup``, and the pod-level APIs of
:mod:`phalanx.k8s.apis`); two that name different gangs make the pod invalid. Duration:
``phalanx.dev/duration``, else ``spec.activeDeadlineSeconds``. ``spec.nodeName`` (a pod already
running there), ``spec.schedulingGates`` and ``phalanx.dev/ungate-after`` are carried as read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phalanx.api.quantity import MAX_UNITS
from phalanx.api.specs import GangRef, PodSpec, Resources
from phalanx.k8s.apis import kai, koordinator, kueue, yunikorn
from phalanx.k8s.declaration import Declaration
from phalanx.k8s.fields import (
    Obj,
    add_into,
    as_mapping,
    check_int,
    check_whole,
    child,
    fail,
    get_int,
    get_list,
    get_mapping,
    get_resources,
    get_str,
    is_extended,
    max_into,
)
from phalanx.k8s.meta import (
    DURATION,
    ROLE_LABEL,
    UNGATE_AFTER,
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
from phalanx.k8s.priority import PriorityTable, preemption_policy
from phalanx.k8s.runtime import runtime_hints
from phalanx.k8s.topology import pod_topology
from phalanx.k8s.workloads import WORKLOAD_GROUP, scheduling_group, workload_ref

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
#: Volcano's queue annotation on pods (its Job controller sets it; users may too).
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
#: Pod-level gang APIs, in precedence order.
POD_LEVEL_APIS = (kai, koordinator, yunikorn, kueue)

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
    fields = {
        kai.API: child("metadata.annotations", kai.GROUP_KEY),
        koordinator.API: child("metadata.annotations", koordinator.NAME),
        kueue.API: child("metadata.labels", kueue.GROUP_NAME),
        yunikorn.API: child("metadata.annotations", yunikorn.TASK_GROUP_NAME),
    }
    if api in fields:
        return fields[api]
    raise ValueError(f"unknown gang API {api!r}")


def declarations(
    labels: Mapping[str, str], annotations: Mapping[str, str], spec: Obj, namespace: str
) -> list[Declaration]:
    """Every gang declaration the pod carries, in precedence order."""
    found: list[Declaration] = []
    maps = {"labels": labels, "annotations": annotations}
    for where, key, api in GANG_KEYS:
        name = maps[where].get(key)
        if name:
            path = child(f"metadata.{where}", key)
            found.append(Declaration(f"{where[:-1]} {key}={name}", path, GangRef(name, api)))
    ref = workload_ref(spec, "spec")
    if ref is not None:
        where = f"spec.workloadRef {ref.name}/{ref.pod_group}"
        found.append(Declaration(where, "spec.workloadRef", GangRef(ref.gang_name, WORKLOAD_GROUP)))
    group = scheduling_group(spec, "spec")
    if group is not None:
        where = f"spec.schedulingGroup.podGroupName={group}"
        found.append(Declaration(where, "spec.schedulingGroup", GangRef(group, WORKLOAD_GROUP)))
    for module in POD_LEVEL_APIS:
        declared = module.declaration(labels, annotations, namespace)
        if declared is not None:
            found.append(declared)
    return found


def _one_gang(found: list[Declaration]) -> Declaration | None:
    """The declaration that names the pod's gang; two naming different gangs is an error."""
    refs = [d for d in found if d.ref is not None]
    for other in refs[1:]:
        assert other.ref is not None and refs[0].ref is not None
        if other.ref.name != refs[0].ref.name:
            fail(
                other.field,
                f"the pod declares two gangs: {refs[0].where} and {other.where}; keep one",
            )
    return refs[0] if refs else None


def controller_of(pod: Obj) -> str:
    """``Kind/name`` of the pod's controller in ``metadata.ownerReferences`` (a snapshot's pod),
    or ""."""
    path = "metadata.ownerReferences"
    refs = get_list(get_mapping(pod, "metadata", ""), "ownerReferences", "metadata")
    for i, raw in enumerate(refs):
        ref = as_mapping(raw, child(path, i))
        if ref.get("controller") is True:
            kind = get_str(ref, "kind", child(path, i))
            return f"{kind}/{get_str(ref, 'name', child(path, i))}"
    return ""


def _gates(spec: Obj, path: str) -> tuple[str, ...]:
    gates_path = child(path, "schedulingGates")
    names: list[str] = []
    for i, raw in enumerate(get_list(spec, "schedulingGates", path)):
        name = get_str(as_mapping(raw, child(gates_path, i)), "name", child(gates_path, i))
        if not name:
            fail(child(child(gates_path, i), "name"), "is required")
        names.append(name)
    return tuple(names)


def pod_duration(annotations: Mapping[str, str], spec: Obj, path: str) -> float | None:
    """``phalanx.dev/duration``, else ``activeDeadlineSeconds`` (its upper bound)."""
    duration = duration_annotation(annotations, DURATION)
    if duration is None:
        deadline = get_int(spec, "activeDeadlineSeconds", path, minimum=1)
        duration = None if deadline is None else float(deadline)
    return duration


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
    """One container's requests, defaulted from its limits and checked as the API server does
    (``ValidateResourceRequirements``): extended resources are whole numbers, a request of a
    resource that cannot be overcommitted (extended resources, hugepages) equals its limit,
    any other request is at most its limit."""
    container = as_mapping(raw, path)
    res_path = child(path, "resources")
    resources = get_mapping(container, "resources", path)
    requests = get_resources(resources, "requests", res_path)
    limits = get_resources(resources, "limits", res_path)
    for kind, amounts in (("requests", requests), ("limits", limits)):
        raw_amounts = get_mapping(resources, kind, res_path)
        for name in amounts:
            where = child(child(res_path, kind), name)
            _check_container_resource(name, where)
            check_whole(name, raw_amounts[name], where, shares=True)
    for name, limit in limits.items():
        where = child(child(res_path, "requests"), name)
        if name not in requests:
            requests[name] = limit
        elif requests[name] != limit and not overcommit_allowed(name):
            fail(where, f"must be equal to the {name} limit (it cannot be overcommitted)")
        elif requests[name] > limit:
            fail(where, f"must be less than or equal to the {name} limit")
    return requests


def overcommit_allowed(name: str) -> bool:
    """Native resources other than hugepages may be requested below their limit."""
    return not is_extended(name) and not name.startswith("hugepages-")


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
    for name, amount in total.items():
        if amount > MAX_UNITS:
            fail(containers_path, f"the pod's total {name} request is out of range (2^63-1)")
    return total


def pod_priority(
    spec: Obj, path: str, priorities: PriorityTable, labels: Mapping[str, str] | None = None
) -> int:
    if spec.get("priority") is not None:
        return check_int(spec["priority"], child(path, "priority"))
    class_name = get_str(spec, "priorityClassName", path)
    if class_name:
        return priorities.resolve(class_name, child(path, "priorityClassName"))
    kai_class = kai.priority_class(labels or {})
    if kai_class in priorities:
        return priorities[kai_class]
    return priorities.default


def pod_preemption_policy(
    spec: Obj, path: str, priorities: PriorityTable, labels: Mapping[str, str] | None = None
) -> str:
    """``spec.preemptionPolicy`` when set (an admitted pod always has it), else its class's,
    as the Priority admission plugin copies it (the globalDefault class's without a class)."""
    if spec.get("preemptionPolicy") is not None:
        return preemption_policy(spec, path)
    class_name = get_str(spec, "priorityClassName", path)
    if class_name:
        return priorities.policy(class_name)
    kai_class = kai.priority_class(labels or {})
    return priorities.policy(kai_class if kai_class in priorities else None)


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
    pod_namespace = namespace_of(pod, namespace)
    found = declarations(labels, annotations, spec, pod_namespace)
    chosen = _one_gang(found)
    ref = workload_ref(spec, "spec")
    gang = None if chosen is None else chosen.ref
    queue = annotations.get(VOLCANO_QUEUE, "") or next((d.queue for d in found if d.queue), "")
    return PodSpec(
        namespace=pod_namespace,
        name=pod_name,
        requests=pod_requests(spec, "spec"),
        placement=placement_from(spec, "spec"),
        priority=pod_priority(spec, "spec", priorities, labels),
        preemption_policy=pod_preemption_policy(spec, "spec", priorities, labels),
        scheduler_name=get_str(spec, "schedulerName", "spec"),
        gang=gang,
        role=annotations.get(TASK_SPEC)
        or (chosen.role if chosen is not None else "")
        or labels.get(ROLE_LABEL, ""),
        owner=owner or controller_of(pod),
        labels=labels,
        annotations=annotations,
        duration=pod_duration(annotations, spec, "spec"),
        queue=queue,
        node_name=get_str(spec, "nodeName", "spec"),
        gates=_gates(spec, "spec"),
        ungate_after=duration_annotation(annotations, UNGATE_AFTER),
        declared_gang=None if chosen is None else chosen.gang,
        workload_ref=(
            (ref.name, ref.pod_group, ref.replica_key)
            if ref is not None
            and gang is not None
            and gang.api == WORKLOAD_GROUP
            and gang.name == ref.gang_name
            else None
        ),
        topology=pod_topology(annotations),
        runtime_hints=runtime_hints(annotations, labels, spec),
    )


def pod_from_dict(
    obj: Mapping[str, Any], priorities: PriorityTable, *, namespace: str | None = None
) -> PodSpec:
    """``v1 Pod`` → PodSpec; ``namespace``, when given, overrides ``metadata.namespace``."""
    with describing(object_label(obj, "Pod", namespaced=True, namespace=namespace)):
        return convert_pod(obj, priorities, namespace=namespace)


def with_duration(pod: PodSpec, duration: float | None) -> PodSpec:
    return pod if duration is None else dataclasses.replace(pod, duration=duration)
