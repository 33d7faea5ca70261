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
- KAI PodGroup: ``spec.topologyConstraint {topology, requiredTopologyLevel,
  preferredTopologyLevel}`` and ``spec.subGroups[] {name, topologyConstraint}`` (per role, the
  role being the subgroup name); the annotations ``kai.scheduler/topology``,
  ``kai.scheduler/topology-required-placement`` and ``-preferred-placement``.
- Kueue pod-template annotations: ``kueue.x-k8s.io/podset-required-topology``,
  ``podset-preferred-topology`` (mutually exclusive), ``podset-unconstrained-topology``,
  ``podset-slice-required-topology`` with ``podset-slice-size`` (a positive integer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import TopologyConstraint
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
def gang_topology(
    obj: Obj, annotations: Mapping[str, str]
) -> tuple[TopologyConstraint | None, dict[str, TopologyConstraint]]:
    """A PodGroup's (or Volcano Job's) gang-level constraint and its per-role constraints."""
    spec = get_mapping(obj, "spec", "")
    found: list[TopologyConstraint] = []
    roles: dict[str, TopologyConstraint] = {}
    workload = _workload_api(spec)
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
    path = "spec.subGroups"
    for i, raw in enumerate(as_list(spec.get("subGroups"), path)):
        item_path = child(path, i)
        group = as_mapping(raw, item_path)
        name = as_str(group.get("name"), child(item_path, "name"))
        constraint = _kai(group.get("topologyConstraint"), child(item_path, "topologyConstraint"))
        if constraint is not None:
            roles[name] = constraint
    if len(found) > 1:
        fail("spec", "more than one topology constraint given (use one form)")
    return (found[0] if found else None), roles


def _workload_api(spec: Obj) -> TopologyConstraint | None:
    constraints = get_mapping(spec, "schedulingConstraints", "spec")
    path = "spec.schedulingConstraints.topology"
    items = get_list(constraints, "topology", "spec.schedulingConstraints")
    if not items:
        return None
    if len(items) > 1:
        fail(path, f"at most one topology constraint, not {len(items)}")
    item = as_mapping(items[0], child(path, 0))
    return TopologyConstraint(required=_label_key(item.get("key"), child(child(path, 0), "key")))


def _volcano(spec: Obj, annotations: Mapping[str, str]) -> TopologyConstraint | None:
    path = "spec.networkTopology"
    if spec.get("networkTopology") is not None:
        topo = get_mapping(spec, "networkTopology", "spec")
        mode = get_str(topo, "mode", path) or "hard"
        tier = get_int(topo, "highestTierAllowed", path, minimum=0)
        tier_name = get_str(topo, "highestTierName", path)
        if tier is not None and tier_name:
            fail(path, "highestTierAllowed and highestTierName are mutually exclusive")
        level = tier_name or ("" if tier is None else f"tier:{tier}")
        return _volcano_mode(mode, level, child(path, "mode"))
    mode_text = annotations.get(VOLCANO_MODE)
    tier_text = annotations.get(VOLCANO_TIER)
    if mode_text is None and tier_text is None:
        return None
    level = ""
    if tier_text is not None:
        tier_path = annotation_path(VOLCANO_TIER)
        level = f"tier:{check_int(_integer(tier_text, tier_path), tier_path, minimum=0)}"
    return _volcano_mode(mode_text or "hard", level, annotation_path(VOLCANO_MODE))


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
