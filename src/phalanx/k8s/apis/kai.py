"""KAI-Scheduler: its PodGroup (``scheduling.run.ai/v2alpha2``) and the pod keys KAI users set.

PodGroup: ``spec.minMember`` (default 1), ``spec.queue``, ``spec.priorityClassName`` (resolved
like a pod's; a class not in the input is left to the members' priority, since KAI installs its
own classes), ``spec.subGroups`` (also spelled ``subgroups``): each leaf subgroup's
``minMember`` becomes a role minimum (a subgroup that is another's ``parent`` has none of its
own); ``topologyConstraint`` on the PodGroup and on every subgroup, parents included, and each
subgroup's ``parent`` are read by :func:`phalanx.k8s.topology.gang_topology`.
``markUnschedulable`` is not modelled. phalanx's own annotations on the PodGroup count as on
any PodGroup: the runtime hints and deadline (:mod:`phalanx.k8s.runtime`), the simulated
duration and ``phalanx.dev/max-member``.

Pods: annotation ``pod-group-name`` (KAI's podgrouper also sets it as a label) names the
PodGroup; label ``kai.scheduler/subgroup-name`` is the pod's role; label
``kai.scheduler/queue`` its queue (recorded). A pod with only the queue label is a gang of one,
as KAI's podgrouper makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import GangRef, GangSpec
from phalanx.k8s.declaration import Declaration
from phalanx.k8s.fields import (
    as_mapping,
    check_int,
    child,
    fail,
    get_int,
    get_list,
    get_mapping,
    get_str,
)
from phalanx.k8s.meta import (
    annotation_path,
    annotations_of,
    describing,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.runtime import group_annotations
from phalanx.k8s.topology import gang_topology

API = "scheduling.run.ai"
API_VERSIONS = ("scheduling.run.ai/v2alpha2",)
GROUP_KEY = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
QUEUE_LABEL = "kai.scheduler/queue"
PRIORITY_LABEL = "priorityClassName"


def _subgroups(spec: Mapping[str, Any]) -> dict[str, int]:
    key = "subGroups" if spec.get("subGroups") is not None else "subgroups"
    path = child("spec", key)
    items = get_list(spec, key, "spec")
    parents: set[str] = set()
    minimums: dict[str, int] = {}
    for i, raw in enumerate(items):
        item = as_mapping(raw, child(path, i))
        name = get_str(item, "name", child(path, i))
        if not name:
            fail(child(child(path, i), "name"), "is required")
        if name in minimums:
            fail(child(child(path, i), "name"), f"duplicate subgroup {name!r}")
        minimums[name] = get_int(item, "minMember", child(path, i), minimum=0) or 0
        parent = get_str(item, "parent", child(path, i))
        if parent:
            parents.add(parent)
    return {name: n for name, n in minimums.items() if name not in parents and n}


def pod_group_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> GangSpec:
    """A KAI ``PodGroup`` → GangSpec (see the module docstring)."""
    with describing(object_label(obj, "PodGroup", namespaced=True)):
        pg = root(obj)
        api_version = get_str(pg, "apiVersion", "")
        if api_version not in API_VERSIONS:
            fail("apiVersion", f"unknown KAI PodGroup apiVersion {api_version!r}")
        name = name_of(pg)
        spec = get_mapping(pg, "spec", "")
        minimum = spec.get("minMember")
        min_member = 1 if minimum is None else check_int(minimum, "spec.minMember", minimum=1)
        class_name = get_str(spec, "priorityClassName", "spec")
        priority = priorities.get(class_name) if class_name else None
        topology = gang_topology(pg, annotations_of(pg))
        return GangSpec(
            namespace=namespace_of(pg),
            name=name,
            min_member=min_member,
            api=API,
            role_minimums=_subgroups(spec),
            priority=priority,
            queue=get_str(spec, "queue", "spec") or "default",
            topology=topology.constraint,
            role_topology=topology.roles,
            role_parents=topology.parents,
            subgroups=topology.subgroups,
            **group_annotations(pg, min_member),
        )


def declaration(
    labels: Mapping[str, str], annotations: Mapping[str, str], namespace: str, prefix: str = ""
) -> Declaration | None:
    queue = labels.get(QUEUE_LABEL, "")
    group = annotations.get(GROUP_KEY) or labels.get(GROUP_KEY)
    if group:
        where = f"annotation {GROUP_KEY}={group}"
        role = labels.get(SUBGROUP_LABEL, "")
        path = annotation_path(GROUP_KEY, prefix)
        return Declaration(where, path, GangRef(group, API), role=role, queue=queue)
    if queue:
        return Declaration(f"label {QUEUE_LABEL}={queue}", "metadata.labels", queue=queue)
    return None


def priority_class(labels: Mapping[str, str]) -> str:
    """The priority class a KAI user set as a pod label (used when the pod sets none)."""
    return labels.get(PRIORITY_LABEL, "")
