"""Topology objects and topology constraints, read from raw Kubernetes objects.

Design: one place for every peer's spelling, so the rest of phalanx sees only
:class:`~phalanx.api.topology.TopologySpec`, :class:`~phalanx.api.topology.HyperNodeSpec` and
:class:`~phalanx.api.specs.TopologyConstraint`.

Objects:

- Kueue ``Topology`` (``kueue.x-k8s.io`` v1alpha1/v1beta1/v1beta2) and KAI ``Topology``
  (``kai.scheduler/v1alpha1``): ``spec.levels[].nodeLabel``, 1 to 16 distinct labels, top first.
- Volcano ``HyperNode`` (``topology.volcano.sh/v1alpha1``): ``spec.tier`` (≥ 0), ``tierName``,
  ``members[] {type: Node|HyperNode, selector: {exactMatch{name} | regexMatch{pattern} |
  labelMatch{matchLabels}}}`` with exactly one selector; labelMatch only for Node members.

Constraints (:func:`gang_topology` on a PodGroup, :func:`pod_topology` on pod annotations):

- Workload API PodGroup / template: ``spec.schedulingConstraints.topology[0].key`` → required
  (at most one item, as Kubernetes validates).
- Volcano PodGroup or Job: ``spec.networkTopology {mode: hard|soft (default hard),
  highestTierAllowed, highestTierName}`` or the annotations
  ``volcano.sh/network-topology-mode`` / ``volcano.sh/network-topology-highest-tier``. hard →
  required at ``tier:N`` (or the tier name); soft → preferred there (``tier:1`` when no tier).
- Volcano PodGroup ``spec.subGroupPolicy[] {name, networkTopology, subGroupSize,
  minSubGroups, labelSelector, matchLabelKeys}`` → :class:`~phalanx.api.specs.SubgroupTopology`
  (a Volcano Job's ``partitionPolicy`` is turned into one by :mod:`phalanx.k8s.kinds.volcano`).
- KAI PodGroup: ``spec.topologyConstraint {topology, requiredTopologyLevel,
  preferredTopologyLevel}`` and ``spec.subGroups[] {name, parent, topologyConstraint}`` (per
  role, the role being the subgroup name; a parent's constraint holds all the pods of its
  descendants; an unknown parent or a cycle is an error); the annotations
  ``kai.scheduler/topology``, ``kai.scheduler/topology-required-placement`` and
  ``-preferred-placement``.
- Kueue pod-template annotations: ``kueue.x-k8s.io/podset-required-topology``,
  ``podset-preferred-topology`` (mutually exclusive), ``podset-unconstrained-topology``,
  ``podset-slice-required-topology`` with ``podset-slice-size`` (a positive integer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phalanx.api.specs import Requirement, SubgroupTopology, TopologyConstraint
from phalanx.api.topology import HyperNodeSpec, MemberSelector, TopologySpec
from phalanx.k8s.fields import (
    Obj,
    as_list,
    as_mapping,
    as_str,
    check_int,
    child,
    fail,
    get_int,
    get_list,
    get_mapping,
    get_str,
    get_string_map,
)
from phalanx.k8s.meta import annotation_path, describing, name_of, object_label, root
from phalanx.k8s.placement import _requirement

KUEUE_TOPOLOGY_VERSIONS = tuple(f"kueue.x-k8s.io/{v}" for v in ("v1alpha1", "v1beta1", "v1beta2"))
KAI_TOPOLOGY_VERSIONS = ("kai.scheduler/v1alpha1",)
HYPERNODE_VERSIONS = ("topology.volcano.sh/v1alpha1",)
MAX_LEVELS = 16

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
VOLCANO_MODE = "volcano.sh/network-topology-mode"
VOLCANO_TIER = "volcano.sh/network-topology-highest-tier"

_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


# -- topology objects ---------------------------------------------------------------------------
def topology_from_dict(obj: Mapping[str, Any]) -> TopologySpec:
    """A Kueue or KAI ``Topology``: its levels' node labels, top first."""
    with describing(object_label(obj, "Topology", namespaced=False)):
        versions = (*KUEUE_TOPOLOGY_VERSIONS, *KAI_TOPOLOGY_VERSIONS)
        version, name, spec = _opened(obj, "Topology", versions)
        path = "spec.levels"
        items = get_list(spec, "levels", "spec")
        if not 1 <= len(items) <= MAX_LEVELS:
            fail(path, f"must list 1 to {MAX_LEVELS} levels, not {len(items)}")
        levels: list[str] = []
        for i, raw in enumerate(items):
            label_path = child(child(path, i), "nodeLabel")
            label = _label_key(as_mapping(raw, child(path, i)).get("nodeLabel"), label_path)
            if label in levels:
                fail(label_path, f"level {label!r} is listed twice")
            levels.append(label)
        kind = "KAI Topology" if version in KAI_TOPOLOGY_VERSIONS else "Kueue Topology"
        return TopologySpec(name=name, levels=tuple(levels), kind=kind)


def hypernode_from_dict(obj: Mapping[str, Any]) -> HyperNodeSpec:
    """A Volcano ``HyperNode``: its tier and members (see the module docstring)."""
    with describing(object_label(obj, "HyperNode", namespaced=False)):
        _, name, spec = _opened(obj, "HyperNode", HYPERNODE_VERSIONS)
        if spec.get("tier") is None:
            fail("spec.tier", "tier is required")
        tier = check_int(spec["tier"], "spec.tier", minimum=0)
        items = get_list(spec, "members", "spec")
        if not items:
            fail("spec.members", "at least one member is required")
        members = tuple(_member(raw, child("spec.members", i)) for i, raw in enumerate(items))
        return HyperNodeSpec(
            name=name, tier=tier, members=members, tier_name=get_str(spec, "tierName", "spec")
        )


def _opened(obj: Mapping[str, Any], kind: str, versions: tuple[str, ...]) -> tuple[str, str, Obj]:
    """The object's apiVersion (one of ``versions``), name and spec."""
    top = root(obj)
    version = get_str(top, "apiVersion", "")
    if version not in versions:
        fail("apiVersion", f"unknown {kind} apiVersion {version!r}")
    return version, name_of(top), get_mapping(top, "spec", "")


def _member(raw: object, path: str) -> MemberSelector:
    member = as_mapping(raw, path)
    kind = get_str(member, "type", path)
    if kind not in ("Node", "HyperNode"):
        fail(child(path, "type"), f"must be Node or HyperNode, not {kind!r}")
    selector_path = child(path, "selector")
    selector = get_mapping(member, "selector", path)
    chosen = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if len(chosen) != 1:
        fail(selector_path, "exactly one of exactMatch, regexMatch or labelMatch is required")
    which = chosen[0]
    body = get_mapping(selector, which, selector_path)
    body_path = child(selector_path, which)
    if which == "exactMatch":
        text = get_str(body, "name", body_path)
        if not text:
            fail(child(body_path, "name"), "is required")
        return MemberSelector(kind, exact=text)
    if which == "regexMatch":
        pattern = get_str(body, "pattern", body_path)
        try:
            re.compile(pattern)
        except re.error as exc:
            fail(child(body_path, "pattern"), f"not a valid regular expression: {exc}")
        if not pattern:
            fail(child(body_path, "pattern"), "is required")
        return MemberSelector(kind, regex=pattern)
    if kind != "Node":
        fail(body_path, "labelMatch selects Node members only")
    labels = get_string_map(body, "matchLabels", body_path)
    if not labels:
        fail(child(body_path, "matchLabels"), "at least one label is required")
    return MemberSelector(kind, labels=tuple(sorted(labels.items())))


# -- constraints --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GangTopology:
    """Every topology constraint a gang declaration carries."""

    constraint: TopologyConstraint | None = None  # the whole gang's
    roles: dict[str, TopologyConstraint] = field(default_factory=dict)  # per (KAI) subgroup
    parents: dict[str, str] = field(default_factory=dict)  # KAI subgroup → parent subgroup
    subgroups: tuple[SubgroupTopology, ...] = ()  # Volcano subGroupPolicy


def gang_topology(obj: Obj, annotations: Mapping[str, str]) -> GangTopology:
    """A PodGroup's (or Volcano Job's) gang-level constraint and its subgroups' constraints."""
    spec = get_mapping(obj, "spec", "")
    found: list[TopologyConstraint] = []
    workload = workload_api(spec)
    if workload is not None:
        found.append(workload)
    volcano = _volcano(spec, annotations)
    if volcano is not None:
        found.append(volcano)
    kai = _kai(spec.get("topologyConstraint"), "spec.topologyConstraint")
    if kai is not None:
        found.append(kai)
    annotated = kai_annotations(annotations)
    if annotated is not None:
        found.append(annotated)
    if len(found) > 1:
        fail("spec", "more than one topology constraint given (use one form)")
    roles, parents = _kai_subgroups(spec)
    return GangTopology(
        found[0] if found else None, roles, parents, volcano_subgroups(spec, "spec")
    )


def _kai_subgroups(spec: Obj) -> tuple[dict[str, TopologyConstraint], dict[str, str]]:
    """KAI ``spec.subGroups`` (or ``subgroups``): each one's constraint and parent."""
    key = "subGroups" if spec.get("subGroups") is not None else "subgroups"
    path = child("spec", key)
    roles: dict[str, TopologyConstraint] = {}
    parents: dict[str, str] = {}
    names: list[str] = []
    for i, raw in enumerate(as_list(spec.get(key), path)):
        item_path = child(path, i)
        group = as_mapping(raw, item_path)
        name = as_str(group.get("name"), child(item_path, "name"))
        names.append(name)
        constraint = _kai(group.get("topologyConstraint"), child(item_path, "topologyConstraint"))
        if constraint is not None:
            roles[name] = constraint
        parent = get_str(group, "parent", item_path)
        if parent:
            parents[name] = parent
    for i, name in enumerate(names):
        above = parents.get(name)
        if above is not None and above not in names:
            fail(child(child(path, i), "parent"), f"parent subgroup {above!r} does not exist")
        seen = {name}
        while above is not None:
            if above in seen:
                fail(child(child(path, i), "parent"), f"subgroup {name!r} is in a parent cycle")
            seen.add(above)
            above = parents.get(above)
    return roles, parents


def volcano_subgroups(spec: Obj, path: str) -> tuple[SubgroupTopology, ...]:
    """Volcano ``subGroupPolicy[] {name, networkTopology, subGroupSize (default 1),
    labelSelector, matchLabelKeys}``; ``minSubGroups`` is validated, not modelled."""
    out: list[SubgroupTopology] = []
    items_path = child(path, "subGroupPolicy")
    for i, raw in enumerate(get_list(spec, "subGroupPolicy", path)):
        item_path = child(items_path, i)
        item = as_mapping(raw, item_path)
        name = get_str(item, "name", item_path)
        if name in [s.name for s in out]:
            fail(child(item_path, "name"), f"duplicate subGroupPolicy {name!r}")
        size = get_int(item, "subGroupSize", item_path, minimum=1)
        get_int(item, "minSubGroups", item_path, minimum=0)
        labels, expressions = label_selector(item, "labelSelector", item_path)
        keys_path = child(item_path, "matchLabelKeys")
        keys = tuple(
            _label_key(k, child(keys_path, j))
            for j, k in enumerate(get_list(item, "matchLabelKeys", item_path))
        )
        constraint = network_topology(item, item_path) or TopologyConstraint()
        out.append(SubgroupTopology(name, constraint, labels, expressions, keys, size or 1))
    return tuple(out)


def label_selector(
    obj: Obj, key: str, parent: str
) -> tuple[tuple[tuple[str, str], ...], tuple[Requirement, ...]]:
    """The ``metav1.LabelSelector`` ``obj[key]``: its matchLabels and matchExpressions."""
    path = child(parent, key)
    selector = get_mapping(obj, key, parent)
    labels = get_string_map(selector, "matchLabels", path)
    expressions: list[Requirement] = []
    exprs_path = child(path, "matchExpressions")
    for i, raw in enumerate(get_list(selector, "matchExpressions", path)):
        req = _requirement(raw, child(exprs_path, i))
        if req.operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            fail(child(child(exprs_path, i), "operator"), f"invalid operator {req.operator!r}")
        expressions.append(req)
    return tuple(sorted(labels.items())), tuple(expressions)


def workload_api(spec: Obj, where: str = "spec") -> TopologyConstraint | None:
    """``schedulingConstraints.topology[0].key`` of a Workload-API PodGroup or template."""
    constraints = get_mapping(spec, "schedulingConstraints", where)
    path = child(child(where, "schedulingConstraints"), "topology")
    items = get_list(constraints, "topology", child(where, "schedulingConstraints"))
    if not items:
        return None
    if len(items) > 1:
        fail(path, f"at most one topology constraint, not {len(items)}")
    item = as_mapping(items[0], child(path, 0))
    return TopologyConstraint(required=_label_key(item.get("key"), child(child(path, 0), "key")))


def _volcano(spec: Obj, annotations: Mapping[str, str]) -> TopologyConstraint | None:
    found = network_topology(spec, "spec")
    if found is not None:
        return found
    mode_text = annotations.get(VOLCANO_MODE)
    tier_text = annotations.get(VOLCANO_TIER)
    if mode_text is None and tier_text is None:
        return None
    level = ""
    if tier_text is not None:
        tier_path = annotation_path(VOLCANO_TIER)
        level = f"tier:{check_int(_integer(tier_text, tier_path), tier_path, minimum=0)}"
    return _volcano_mode(mode_text or "hard", level, annotation_path(VOLCANO_MODE))


def network_topology(obj: Obj, path: str) -> TopologyConstraint | None:
    """Volcano ``networkTopology {mode, highestTierAllowed | highestTierName}`` in ``obj``."""
    if obj.get("networkTopology") is None:
        return None
    topo_path = child(path, "networkTopology")
    topo = get_mapping(obj, "networkTopology", path)
    mode = get_str(topo, "mode", topo_path) or "hard"
    tier = get_int(topo, "highestTierAllowed", topo_path, minimum=0)
    tier_name = get_str(topo, "highestTierName", topo_path)
    if tier is not None and tier_name:
        fail(topo_path, "highestTierAllowed and highestTierName are mutually exclusive")
    level = tier_name or ("" if tier is None else f"tier:{tier}")
    return _volcano_mode(mode, level, child(topo_path, "mode"))


def _volcano_mode(mode: str, level: str, path: str) -> TopologyConstraint:
    if mode == "hard":
        if not level:
            fail(path, "hard mode needs highestTierAllowed or highestTierName")
        return TopologyConstraint(required=level)
    if mode == "soft":
        return TopologyConstraint(preferred=level or "tier:1")
    fail(path, f"must be hard or soft, not {mode!r}")


def _kai(raw: object, path: str) -> TopologyConstraint | None:
    if raw is None:
        return None
    body = as_mapping(raw, path)
    required = get_str(body, "requiredTopologyLevel", path)
    preferred = get_str(body, "preferredTopologyLevel", path)
    if not required and not preferred:
        return None
    return TopologyConstraint(
        required=required, preferred=preferred, topology=get_str(body, "topology", path)
    )


def kai_annotations(annotations: Mapping[str, str]) -> TopologyConstraint | None:
    required = annotations.get(KAI_REQUIRED, "")
    preferred = annotations.get(KAI_PREFERRED, "")
    if not required and not preferred:
        return None
    return TopologyConstraint(
        required=required, preferred=preferred, topology=annotations.get(KAI_TOPOLOGY, "")
    )


def pod_topology(annotations: Mapping[str, str]) -> TopologyConstraint | None:
    """The constraint a pod (template) carries in Kueue's or KAI's annotations, if any."""
    required = annotations.get(KUEUE_REQUIRED, "")
    preferred = annotations.get(KUEUE_PREFERRED, "")
    unconstrained = annotations.get(KUEUE_UNCONSTRAINED, "").lower() == "true"
    slice_level = annotations.get(KUEUE_SLICE, "")
    size_text = annotations.get(KUEUE_SLICE_SIZE)
    given = [k for k, v in ((KUEUE_REQUIRED, required), (KUEUE_PREFERRED, preferred)) if v]
    if unconstrained:
        given.append(KUEUE_UNCONSTRAINED)
    if len(given) > 1:
        fail(annotation_path(given[1]), f"{given[0]} and {given[1]} are mutually exclusive")
    for key, value in ((KUEUE_REQUIRED, required), (KUEUE_PREFERRED, preferred)):
        if value:
            _label_key(value, annotation_path(key))
    size = 0
    if slice_level:
        _label_key(slice_level, annotation_path(KUEUE_SLICE))
        if size_text is None:
            fail(annotation_path(KUEUE_SLICE_SIZE), f"is required with {KUEUE_SLICE}")
        path = annotation_path(KUEUE_SLICE_SIZE)
        size = check_int(_integer(size_text, path), path, minimum=1)
    elif size_text is not None:
        fail(annotation_path(KUEUE_SLICE_SIZE), f"needs {KUEUE_SLICE}")
    if required or preferred or slice_level:
        return TopologyConstraint(
            required=required, preferred=preferred, slice_level=slice_level, slice_size=size
        )
    return kai_annotations(annotations)


def _integer(text: str, path: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        fail(path, f"must be an integer, not {text!r}")


def _label_key(value: object, path: str) -> str:
    if value is None or value == "":
        fail(path, "is required")
    text = as_str(value, path)
    if len(text) > 317 or not _LABEL_KEY.fullmatch(text):
        fail(path, f"invalid node label key {text!r}")
    return text
