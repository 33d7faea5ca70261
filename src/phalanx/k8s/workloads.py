"""The Kubernetes Workload API (``scheduling.k8s.io``), every served version → gangs.

``v1alpha1`` (1.35): a Workload lists up to 8
``spec.podGroups[{name, policy{gang{minCount}} | basic{}}]``; a pod joins one through
``spec.workloadRef{name, podGroup, podGroupReplicaKey}``. Each (podGroup, replica key) pair that
pods actually reference is an independent gang of ``minCount`` pods (same podGroup + different
replica key = different gangs). A ``basic`` pod group is plain grouping: its pods are scheduled
one by one, so it yields no gang.

The gang's name is derived deterministically: ``WORKLOAD-PODGROUP`` or
``WORKLOAD-PODGROUP-REPLICAKEY`` (:func:`workload_gang_name`); its API is ``scheduling.k8s.io``.

``v1alpha2`` and ``v1beta1`` (1.36/1.37): a Workload lists ``spec.podGroupTemplates[{name,
schedulingPolicy{gang{minCount} | basic{}}, schedulingConstraints{topology[{key}]}}]`` (read
like v1alpha1's pod groups, so ``workloadRef`` still resolves against them, and the gangs made
from a template carry its topology constraint); the runtime unit is a standalone ``PodGroup``
(``spec.schedulingPolicy``, ``spec.schedulingConstraints``, optional
``spec.podGroupTemplateRef`` — ``{workloadName, podGroupTemplateName}`` in v1alpha2,
``{workload: {workloadName, podGroupTemplateName}}`` in v1beta1), which a pod joins with
``spec.schedulingGroup.podGroupName``. A PodGroup without constraints of its own takes its
template's, as the controller that creates it from the template copies them (the loader
resolves the reference: :func:`template_ref`). A ``basic`` PodGroup groups without a gang.
``compositePodGroupTemplates``, ``disruptionMode`` and ``priority`` are not read.

phalanx's own annotations count on a Workload (for each of its gangs) and on a standalone
PodGroup as on any PodGroup: the runtime hints and deadline (:mod:`phalanx.k8s.runtime`) and
the simulated duration; ``phalanx.dev/max-member`` on a standalone PodGroup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phalanx.api.specs import GangSpec, TopologyConstraint
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    as_str,
    check_int,
    child,
    fail,
    get_list,
    get_mapping,
    get_str,
)
from phalanx.k8s.meta import describing, name_of, namespace_of, object_label, root
from phalanx.k8s.runtime import GroupAnnotations, group_annotations
from phalanx.k8s.topology import gang_topology, workload_api

WORKLOAD_GROUP = "scheduling.k8s.io"
WORKLOAD_API_VERSIONS = (
    "scheduling.k8s.io/v1alpha1",
    "scheduling.k8s.io/v1alpha2",
    "scheduling.k8s.io/v1beta1",
)
POD_GROUP_API_VERSIONS = ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1")
MAX_POD_GROUPS = 8
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_REPLICA_KEY = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """A pod's ``spec.workloadRef``."""

    name: str
    pod_group: str
    replica_key: str = ""

    @property
    def gang_name(self) -> str:
        return workload_gang_name(self.name, self.pod_group, self.replica_key)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A Workload: pod group name → ``minCount`` (None for a ``basic`` group), and each
    template's topology constraint."""

    namespace: str
    name: str
    pod_groups: dict[str, int | None]
    constraints: dict[str, TopologyConstraint] = field(default_factory=dict)
    #: phalanx's annotations on the Workload, for each of its gangs
    annotations: GroupAnnotations = field(default_factory=lambda: GroupAnnotations())

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def gang(self, pod_group: str, replica_key: str = "") -> GangSpec | None:
        """The gang of (``pod_group``, ``replica_key``); None for a basic or unknown group."""
        min_count = self.pod_groups.get(pod_group)
        if min_count is None:
            return None
        return GangSpec(
            namespace=self.namespace,
            name=workload_gang_name(self.name, pod_group, replica_key),
            min_member=min_count,
            api=WORKLOAD_GROUP,
            topology=self.constraints.get(pod_group),
            origin=(f"Workload {self.key}", "spec.podGroups[].policy.gang.minCount"),
            **self.annotations,
        )


def workload_gang_name(workload: str, pod_group: str, replica_key: str = "") -> str:
    name = f"{workload}-{pod_group}"
    return f"{name}-{replica_key}" if replica_key else name


def _policy(raw: object, path: str) -> int | None:
    policy = as_mapping(raw, path)
    kinds = [k for k in ("basic", "gang") if policy.get(k) is not None]
    unknown = sorted(set(policy) - {"basic", "gang"})
    if unknown:
        fail(child(path, unknown[0]), "unknown policy: use basic or gang")
    if len(kinds) != 1:
        fail(path, "exactly one of basic or gang is required")
    if kinds[0] == "basic":
        return None
    gang_path = child(path, "gang")
    gang = get_mapping(policy, "gang", path)
    if gang.get("minCount") is None:
        fail(child(gang_path, "minCount"), "minCount is required")
    return check_int(gang["minCount"], child(gang_path, "minCount"), minimum=1)


def workload_from_dict(obj: Mapping[str, Any]) -> WorkloadSpec:
    """A ``scheduling.k8s.io`` Workload of any served version → its pod groups and policies."""
    with describing(object_label(obj, "Workload", namespaced=True)):
        wl = root(obj)
        api_version = get_str(wl, "apiVersion", "")
        if api_version not in WORKLOAD_API_VERSIONS:
            fail("apiVersion", f"unknown Workload apiVersion {api_version!r}")
        name = name_of(wl)
        spec = get_mapping(wl, "spec", "")
        v1alpha1 = api_version.endswith("/v1alpha1")
        key, policy_key = (
            ("podGroups", "policy") if v1alpha1 else ("podGroupTemplates", "schedulingPolicy")
        )
        path = child("spec", key)
        items = get_list(spec, key, "spec")
        if not items:
            fail(path, "at least one pod group is required")
        if len(items) > MAX_POD_GROUPS:
            fail(path, f"at most {MAX_POD_GROUPS} pod groups, not {len(items)}")
        groups: dict[str, int | None] = {}
        constraints: dict[str, TopologyConstraint] = {}
        for i, raw in enumerate(items):
            item_path = child(path, i)
            item = as_mapping(raw, item_path)
            group = _label(item.get("name"), child(item_path, "name"))
            if group in groups:
                fail(child(item_path, "name"), f"duplicate pod group {group!r}")
            groups[group] = _policy(item.get(policy_key), child(item_path, policy_key))
            constraint = None if v1alpha1 else workload_api(item, item_path)
            if constraint is not None:
                constraints[group] = constraint
        return WorkloadSpec(namespace_of(wl), name, groups, constraints, group_annotations(wl))


@dataclass(frozen=True, slots=True)
class BasicGroup:
    """A ``basic`` PodGroup: its pods are grouped but scheduled one by one."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_group_from_dict(obj: Mapping[str, Any]) -> GangSpec | BasicGroup:
    """A standalone ``scheduling.k8s.io`` PodGroup (v1alpha2, v1beta1)."""
    with describing(object_label(obj, "PodGroup", namespaced=True)):
        pg = root(obj)
        api_version = get_str(pg, "apiVersion", "")
        if api_version not in POD_GROUP_API_VERSIONS:
            fail("apiVersion", f"unknown PodGroup apiVersion {api_version!r}")
        name = name_of(pg)
        namespace = namespace_of(pg)
        spec = get_mapping(pg, "spec", "")
        template_ref(pg)
        min_count = _policy(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
        if min_count is None:
            return BasicGroup(namespace, name)
        topology = gang_topology(pg, {})  # spec.schedulingConstraints.topology
        return GangSpec(
            namespace=namespace,
            name=name,
            min_member=min_count,
            api=WORKLOAD_GROUP,
            topology=topology.constraint,
            origin=("PodGroup", "spec.schedulingPolicy.gang.minCount"),
            **group_annotations(pg, min_count),
        )


def template_ref(pg: Obj) -> tuple[str, str] | None:
    """A standalone PodGroup's ``spec.podGroupTemplateRef`` as (workload, template), in either
    wire form (see the module docstring); None when it names none."""
    spec = get_mapping(pg, "spec", "")
    if spec.get("podGroupTemplateRef") is None:
        return None
    path = "spec.podGroupTemplateRef"
    ref = get_mapping(spec, "podGroupTemplateRef", "spec")
    if ref.get("workload") is not None:
        path = child(path, "workload")
        ref = get_mapping(ref, "workload", "spec.podGroupTemplateRef")
    workload = get_str(ref, "workloadName", path)
    template = get_str(ref, "podGroupTemplateName", path)
    if not workload or not template:
        return None
    return _subdomain(workload, child(path, "workloadName")), _label(
        template, child(path, "podGroupTemplateName")
    )


def scheduling_group(spec: Obj, path: str = "spec") -> str | None:
    """The PodGroup a pod names in ``spec.schedulingGroup.podGroupName``, or None."""
    if spec.get("schedulingGroup") is None:
        return None
    group = get_mapping(spec, "schedulingGroup", path)
    return _subdomain(
        group.get("podGroupName"), child(child(path, "schedulingGroup"), "podGroupName")
    )


def _subdomain(value: object, path: str) -> str:
    if value is None or value == "":
        fail(path, "is required")
    name = as_str(value, path)
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        fail(path, f"invalid name {name!r}: must be a DNS-1123 subdomain")
    return name


def _label(value: object, path: str) -> str:
    if value is None or value == "":
        fail(path, "is required")
    text = as_str(value, path)
    if len(text) > 63 or not _LABEL.fullmatch(text):
        fail(path, f"invalid name {text!r}: must be a lowercase DNS-1123 label")
    return text


def _replica_key(value: object, path: str) -> str:
    if value is None or value == "":
        return ""
    text = as_str(value, path)
    if len(text) > 63 or not _REPLICA_KEY.fullmatch(text):
        fail(path, f"invalid replica key {text!r}: must be a label value (63 characters at most)")
    return text


def workload_ref(spec: Obj, path: str = "spec") -> WorkloadRef | None:
    """A pod spec's ``workloadRef``, or None when it has none."""
    if spec.get("workloadRef") is None:
        return None
    ref_path = child(path, "workloadRef")
    ref = get_mapping(spec, "workloadRef", path)
    name = _subdomain(ref.get("name"), child(ref_path, "name"))
    return WorkloadRef(
        name=name,
        pod_group=_label(ref.get("podGroup"), child(ref_path, "podGroup")),
        replica_key=_replica_key(
            ref.get("podGroupReplicaKey"), child(ref_path, "podGroupReplicaKey")
        ),
    )
