"""Kueue resource flavors: the flavors a gang may be admitted in, their nodes and quota room.

Design. Kueue admits each pod set of a workload in one flavor per resource group (the first,
in the order the ClusterQueue lists them, whose quota has room), charges the flavor's quota
and adds the flavor's ``nodeLabels`` to the pods' node selector. Here:

- An **assignment** is one flavor per resource group that covers a resource the gang asks
  for (groups it asks nothing of get none). The candidates are every combination, in listed
  order (the first group's flavors outermost). One assignment holds for the **whole gang**
  (all its pods, whatever their pod set): a gang is admitted as a unit, so a gang never
  spans flavors, and a gang that grows or re-creates a pod keeps the flavor it runs in.
- Its **nodes** are those with all its flavors' ``nodeLabels`` (:func:`flavor_mask`). A
  flavor whose ``nodeTaints`` the gang's pods do not tolerate, or whose nodes their node
  selector or required affinity excludes, is skipped, as Kueue skips it.
- Its **quota room**, per flavor and covered resource (:func:`available`): without a cohort,
  ``nominalQuota − used``; in a cohort (one level), the queue's unlent quota left plus the
  cohort's pool (each member's ``lendingLimit``, else its nominal quota, less what members
  use beyond what they keep), capped by ``nominalQuota + borrowingLimit − used``. Usage is
  per queue and flavor (:class:`FlavorUsage`): the requests of the pods its gangs hold, in
  the flavor the gang was admitted in (``GangInfo.flavors``; for a gang found running, e.g.
  live after a restart, the first flavor whose nodes hold the pod). A ``Cohort`` object's
  own flavor quotas join its pool. A flavor that fits by borrowing is taken (Kueue's default
  ``whenCanBorrow: MayStopSearch``); with ``whenCanBorrow: TryNextFlavor`` the flavors that
  fit without borrowing come first (:func:`borrows`). Flavors are never preempted for
  (``whenCanPreempt`` is read as ``TryNextFlavor``: a full flavor is passed over).
- A queue **has flavors** (:func:`flavored`) when a group lists more than one flavor or a
  flavor restricts nodes; the common single flavor with no node labels or taints changes
  nothing (the queue is judged as a whole, as before flavors were modelled).
- A ClusterQueue naming a ResourceFlavor that does not exist is **inactive**
  (:func:`missing_flavor`): Kueue admits nothing through it until the flavor appears.

The queue as a whole (fair shares, preemption, reclaim, capability) keeps the sums over its
flavors (:mod:`phalanx.api.queues`); only admission and placement see flavors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from phalanx.api.quantity import format_units
from phalanx.api.queues import FlavorQuota, QueueSpec, ResourceGroup
from phalanx.api.specs import Placement, ResourceFlavorSpec, Toleration
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeFacts
from phalanx.cluster.resources import ResourceIndex, Vector
from phalanx.cluster.workloads import HOLDING, GangInfo

Usage = dict[tuple[str, str], dict[str, int]]  # (queue, flavor) → resource → amount


@dataclass(frozen=True, slots=True)
class Assignment:
    """One flavor per resource group the gang asks for, in group order."""

    flavors: tuple[FlavorQuota, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.flavors)

    @property
    def label(self) -> str:
        return "flavor " + "+".join(self.names)


def covered(group: ResourceGroup) -> tuple[str, ...]:
    """The resources a group covers (its flavors' when ``coveredResources`` is absent)."""
    if group.covered:
        return group.covered
    return tuple(dict.fromkeys(r for f in group.flavors for r in f.nominal))


def flavored(spec: QueueSpec, declared: Mapping[str, ResourceFlavorSpec]) -> bool:
    """Does admission in ``spec`` choose a flavor or restrict nodes?"""
    for group in spec.groups:
        if len(group.flavors) > 1:
            return True
        for flavor in group.flavors:
            known = declared.get(flavor.name)
            if known is not None and (known.node_labels or known.node_taints):
                return True
    return False


def missing_flavor(spec: QueueSpec, declared: Mapping[str, ResourceFlavorSpec]) -> str | None:
    """The first flavor ``spec`` names that no ResourceFlavor declares (None: all exist)."""
    for group in spec.groups:
        for flavor in group.flavors:
            if flavor.name not in declared:
                return flavor.name
    return None


def assignments(spec: QueueSpec, asked: Iterable[str]) -> list[Assignment]:
    """Every assignment for a gang asking for ``asked`` resources, in Kueue's order."""
    wanted = set(asked)
    groups = [g for g in spec.groups if wanted & set(covered(g))]
    return [Assignment(combo) for combo in itertools.product(*(g.flavors for g in groups))]


def flavor_mask(facts: NodeFacts, flavors: Iterable[ResourceFlavorSpec]) -> Mask:
    """The nodes carrying every one of ``flavors``' node labels."""
    labels = tuple(sorted({k: v for f in flavors for k, v in f.node_labels.items()}.items()))
    return facts.selector_mask(Placement(node_selector=labels))


def untolerated(flavors: Iterable[ResourceFlavorSpec], tolerations: Iterable[Toleration]) -> str:
    """The first node taint of ``flavors`` that ``tolerations`` do not tolerate ('' none)."""
    held = tuple(tolerations)
    for flavor in flavors:
        for taint in flavor.node_taints:
            if not any(t.tolerates(taint) for t in held):
                return f"{taint.key}={taint.value}:{taint.effect.value}"
    return ""


@dataclass(slots=True)
class FlavorUsage:
    """What each queue's gangs hold, per flavor and resource (see the module docstring)."""

    used: Usage = field(default_factory=dict)

    def add(self, queue: str, flavor: str, resource: str, amount: int) -> None:
        per = self.used.setdefault((queue, flavor), {})
        per[resource] = per.get(resource, 0) + amount

    def of(self, queue: str, flavor: str, resource: str) -> int:
        return self.used.get((queue, flavor), {}).get(resource, 0)

    def charge(
        self,
        queue: str,
        spec: QueueSpec,
        names: tuple[str, ...],
        request: Vector,
        index: ResourceIndex,
    ) -> None:
        """Add one pod's ``request`` to the flavors ``names`` of ``spec`` that cover it."""
        for group in spec.groups:
            for flavor in group.flavors:
                if flavor.name not in names:
                    continue
                for resource in covered(group):
                    at = index.position.get(resource)
                    if at is not None and at < request.size and request[at]:
                        self.add(queue, flavor.name, resource, int(request[at]))


def held_flavors(
    gang: GangInfo,
    spec: QueueSpec,
    masks: Mapping[str, Mask],
) -> tuple[str, ...]:
    """The flavors a running gang holds: those it was admitted in, else those whose nodes
    hold its first running pod (first in each group's order)."""
    if gang.flavors:
        return gang.flavors
    node = next((p.node for p in gang.members if p.status in HOLDING and p.node is not None), None)
    if node is None:
        return ()
    names: list[str] = []
    for group in spec.groups:
        for flavor in group.flavors:
            mask = masks.get(flavor.name)
            if mask is not None and node < mask.size and mask[node]:
                names.append(flavor.name)
                break
    return tuple(names)


def available(
    specs: Mapping[str, QueueSpec],
    queue: str,
    cohort: str | None,
    flavor: FlavorQuota,
    resource: str,
    usage: FlavorUsage,
) -> int:
    """How much of ``resource`` in ``flavor`` ``queue`` may still take (module docstring)."""
    nominal = flavor.nominal.get(resource, 0)
    used = usage.of(queue, flavor.name, resource)
    if cohort is None:
        return nominal - used
    pool = pool_used = 0
    for name, spec in specs.items():
        if spec.parent != cohort:
            continue
        for group in spec.groups:
            for member in group.flavors:
                if member.name != flavor.name or resource not in member.nominal:
                    continue
                lent = member.lending.get(resource)
                kept = member.nominal[resource] - lent if lent is not None else 0
                pool += lent if lent is not None else member.nominal[resource]
                pool_used += max(0, usage.of(name, member.name, resource) - kept)
    own = specs.get(cohort)  # a Cohort object's own quota joins the pool
    for group in own.groups if own is not None else ():
        for member in group.flavors:
            if member.name == flavor.name:
                pool += member.nominal.get(resource, 0)
    lent = flavor.lending.get(resource)
    kept = nominal - lent if lent is not None else 0
    room = max(0, kept - used) + pool - pool_used
    if resource in flavor.borrowing:
        room = min(room, nominal + flavor.borrowing[resource] - used)
    return room


def borrows(
    queue: str, assignment: Assignment, need: Mapping[str, int], usage: FlavorUsage
) -> bool:
    """Would ``need`` take ``queue`` past a nominal quota of ``assignment``?"""
    return any(
        usage.of(queue, flavor.name, resource) + amount > flavor.nominal[resource]
        for flavor in assignment.flavors
        for resource, amount in need.items()
        if amount > 0 and resource in flavor.nominal
    )


def shortfall(
    specs: Mapping[str, QueueSpec],
    queue: str,
    cohort: str | None,
    assignment: Assignment,
    need: Mapping[str, int],
    usage: FlavorUsage,
) -> str | None:
    """Why ``need`` does not fit ``assignment``'s quota room in ``queue`` (None: it fits)."""
    for flavor in assignment.flavors:
        for resource, amount in need.items():
            if amount <= 0 or resource not in flavor.nominal:
                continue
            room = available(specs, queue, cohort, flavor, resource, usage)
            if amount <= room:
                continue
            used = usage.of(queue, flavor.name, resource)
            quota = format_units(resource, flavor.nominal[resource])
            within = f" of flavor {flavor.name}" if len(assignment.flavors) > 1 else ""
            text = (
                f"{assignment.label}: ClusterQueue {queue!r} quota {quota} {resource}{within}, "
                f"{format_units(resource, used)} in use"
            )
            if cohort is not None:
                text += f", {format_units(resource, max(room, 0))} free with cohort {cohort!r}"
            return text + f", needs {format_units(resource, amount)}"
    return None
