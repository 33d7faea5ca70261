"""Topology constraints resolved against a cluster's topologies, and Volcano's subgroups.

:func:`resolve` turns a :class:`~phalanx.api.specs.TopologyConstraint` (levels named by node
label, tier or tier name) into level indexes of one :class:`~phalanx.cluster.topology.Topology`
— a constraint naming a level no topology has raises ``LookupError`` with the message the gang
waits with. :func:`subgroup_of` assigns a pod to a Volcano ``subGroupPolicy`` subgroup as
Volcano does: the first policy whose selector matches its labels, keyed by the values of the
policy's ``matchLabelKeys`` (a pod missing one is in no subgroup of that policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from phalanx.api.specs import SubgroupTopology, TopologyConstraint
from phalanx.cluster.topology import Topologies, Topology


@dataclass(frozen=True, slots=True)
class Resolved:
    """A constraint as level indexes of one topology (top = 0)."""

    topology: Topology
    required: int | None  # level indexes
    preferred: int | None
    slice_level: int | None = None
    slice_size: int = 0


def subgroup_of(
    policies: Sequence[SubgroupTopology], labels: Mapping[str, str]
) -> tuple[SubgroupTopology, tuple[str, ...]] | None:
    """The first policy selecting a pod with ``labels``, and the key of its subgroup."""
    for policy in policies:
        if any(labels.get(k) != v for k, v in policy.match_labels):
            continue
        if not all(
            _matches(req.operator, labels.get(req.key), req.values)
            for req in policy.match_expressions
        ):
            continue
        values = tuple(labels.get(k, "") for k in policy.keys)
        if all(values):
            return policy, (policy.name, *values)
    return None


def _matches(operator: str, value: str | None, values: Sequence[str]) -> bool:
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    return (value is not None) == (operator == "Exists")


def resolve_or_none(
    topologies: Topologies, constraint: TopologyConstraint | None
) -> Resolved | None:
    return None if constraint is None else resolve(topologies, constraint)


def resolve(topologies: Topologies, constraint: TopologyConstraint) -> Resolved:
    refs = [r for r in (constraint.required, constraint.preferred, constraint.slice_level) if r]
    found = topologies.resolve(refs[0], constraint.topology)
    if found is None:
        raise LookupError(_unknown(topologies, refs[0], constraint.topology))
    topology = found[0]

    def level(ref: str) -> int | None:
        if not ref:
            return None
        index = topology.find(ref)
        if index is None:
            raise LookupError(_unknown(topologies, ref, topology.name))
        return index

    required, preferred = level(constraint.required), level(constraint.preferred)
    if required is not None and (preferred is None or preferred < required):
        preferred = required
    return Resolved(
        topology, required, preferred, level(constraint.slice_level), constraint.slice_size
    )


def _unknown(topologies: Topologies, ref: str, name: str) -> str:
    where = f"topology {name!r}" if name else "any topology"
    known = sorted({lv.name for t in topologies.items for lv in t.levels})
    listed = f" (levels: {', '.join(known)})" if known else " (no Topology or HyperNode declared)"
    return f"topology level {ref!r} is not a level of {where}{listed}"
