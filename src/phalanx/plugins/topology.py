"""Topology-aware placement: keep a gang inside the smallest network domain that fits it.

A placement plugin (:class:`~phalanx.framework.plugin.UnitPlacement`): for a gang with a
topology constraint it returns the attempts Allocate tries in order, each giving every pod the
nodes it may use; the scoring plugins still pick the node inside them.

Sizes are counted in pods of the group's largest request (exact for the usual identical
workers; a smaller remainder pod counts as a whole one), from each node's free room now
(``NodeTable.capacity_per_node`` over the nodes the filters accept), summed per domain with
one ``np.bincount``.

``topology`` (best fit, phalanx's):

- required level R (and preferred P below it, if any): the domains of P, then of each level up
  to R, that fit the gang, smallest first (best fit: large domains stay whole for large gangs),
  at most :attr:`PER_LEVEL` per level. None fits: the gang waits with the best domain named
  (``needs 32 GPUs in one rack; best rack P10/S3 has 24 free``). Members already placed pin
  the domain (the gang's own domain, e.g. when it grows or pods are re-created).
- preferred level P only: the same candidates from P up to the top level, then anywhere.
- inside a candidate wider than P, pods are spread over as few domains as possible, level by
  level (fewest blocks, then fewest racks in them): if one sub-domain fits, the smallest that
  does; else the largest first, and the smallest that fits the rest last.
- per role (KAI subgroups, Kueue pod sets) and per Volcano subgroup (``subGroupPolicy``, a
  Job's ``partitionPolicy``: the pods one policy selects, split by their ``matchLabelKeys``
  values): after the gang's domain is chosen, each group with its own constraint is planned
  inside it on the room the groups before it left (the attempt yields pods lazily, so the plan
  sees the earlier groups' allocations). A KAI subgroup with a ``parent`` is planned inside
  its parent's domain, chosen (best fit, for all the parent's descendants) when the first of
  them is placed. Kueue slices: every ``slice_size`` pods in one domain of the slice level.

``topology-frag`` (an experiment, no policy's default): best fit whose ties between domains
of equal room go to the domain with the most FGD-fragmented GPU for the gang's pod shape
(:mod:`phalanx.cluster.fragmentation`), so fragments are filled and clean domains stay clean.

Reservations (:meth:`TopologyPlacement.reservation_domains`): the domains a gang's reservation
may lie in, best first, by their room when empty; the reservation action's timeline takes the
first that holds the gang at the earliest time.

``topology-greedy`` (the baseline, Kueue TAS's original "most free capacity" greedy): domains
of the constraint's levels only (preferred, then required), most free first, first that
fits; a preferred gang that fits no domain fills the most free domains of that level in turn;
no best fit, no level in between.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from phalanx.api.specs import TopologyConstraint
from phalanx.cluster.constraints import Resolved, resolve, resolve_or_none, subgroup_of
from phalanx.cluster.fragmentation import Fragmentation, target_workload, task_type_of
from phalanx.cluster.labels import Mask
from phalanx.cluster.topology import Level, Topology
from phalanx.cluster.workloads import HOLDING, PodInfo
from phalanx.framework.plugin import Placements, PodChoice
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit

Counts = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
UNLIMITED = 1 << 30  # pods of an empty request that fit a node
Slices = list[tuple[Mask, int]]


@dataclass(slots=True)
class Group:
    role: str
    pods: list[PodInfo]
    rule: Resolved | None
    need: int
    parent: str = ""  # KAI parent subgroup
    size: int = 0  # Volcano subGroupSize (0: not a Volcano subgroup)


@dataclass(slots=True)
class RawGroup:
    role: str
    pods: list[PodInfo]
    constraint: TopologyConstraint | None
    parent: str = ""
    size: int = 0


class TopologyPlacement:
    name = "topology"
    best_fit = True
    frag_tiebreak = False
    PER_LEVEL = 3

    def placements(self, unit: Unit, session: Session) -> Placements | None:
        spec = unit.gang.spec
        if spec is None or not (
            spec.topology
            or spec.role_topology
            or spec.subgroups
            or any(p.spec.topology for p in unit.pods)
        ):
            return None
        topologies = session.state.topology.over(session.table.facts)
        raw = _raw_groups(unit)
        outer = spec.topology
        if outer is None and len(raw) == 1 and raw[0].constraint is not None and not raw[0].size:
            outer, raw[0].constraint = raw[0].constraint, None
        if outer is None and all(g.constraint is None for g in raw):
            return None
        try:
            rule = None if outer is None else resolve(topologies, outer)
            groups = [
                Group(g.role, g.pods, resolve_or_none(topologies, g.constraint), len(g.pods))
                for g in raw
            ]
            parents = {
                name: resolve_or_none(topologies, spec.role_topology.get(name))
                for name in set(spec.role_parents.values())
            }
        except LookupError as exc:
            return Placements([], str(exc.args[0]))
        for group, given in zip(groups, raw, strict=True):
            group.parent, group.size = given.parent, given.size
        _set_needs(unit, groups)
        planner = _Planner(session, self.best_fit, self.PER_LEVEL)
        planner.parents, planner.parent_of = parents, spec.role_parents
        planner.frag_tiebreak = self.frag_tiebreak
        return planner.plan(unit, rule, groups)

    def reservation_domains(self, unit: Unit, session: Session) -> list[Mask | None] | None:
        """Where a reservation of ``unit`` may lie (a hook :mod:`phalanx.actions.reserve`
        calls): the domains of the gang's preferred level, then of each level up to its
        required one (or the top, then anywhere), that could hold it once free — its own
        domains first, then by best fit; per-role constraints are left to the placement."""
        spec = unit.gang.spec
        if spec is None or not (
            spec.topology or spec.role_topology or any(p.spec.topology for p in unit.pods)
        ):
            return None
        constraint = _gang_constraint(unit)
        if constraint is None:
            return None
        try:
            rule = resolve(session.state.topology.over(session.table.facts), constraint)
        except LookupError:
            return [np.zeros(len(session.table), dtype=bool)]  # it waits for that reason
        if rule.preferred is None:
            return None
        return _Planner(session, self.best_fit, self.PER_LEVEL).reservable(unit, rule)

    def preemption_domains(self, unit: Unit, session: Session) -> tuple[list[Mask], bool] | None:
        """Where a preemptor may plan its minimum with victims: every domain of its gang's
        constraint level as a node mask (the required level; else the preferred one), and
        whether the gang must stay inside one. None: no gang-wide constraint (per-role
        constraints are left to the placement that follows) or a level that does not exist."""
        outer = _gang_constraint(unit)
        if outer is None:
            return None
        try:
            rule = resolve(session.state.topology.over(session.table.facts), outer)
        except LookupError:
            return None
        depth = rule.required if rule.required is not None else rule.preferred
        if depth is None:
            return None
        level = rule.topology.levels[depth]
        return [level.members(domain) for domain in range(len(level))], rule.required is not None


class GreedyTopologyPlacement(TopologyPlacement):
    name = "topology-greedy"
    best_fit = False
    PER_LEVEL = 1


class FragTopologyPlacement(TopologyPlacement):
    """Best fit with FGD's fragmentation as the tie-break: among domains of equal room, the
    one holding the most GPU the gang's pods cannot use first (an experiment, measured in
    ``benchmarks/README.md``; not any policy's default)."""

    name = "topology-frag"
    frag_tiebreak = True


# -- constraints ---------------------------------------------------------------------------
def _gang_constraint(unit: Unit) -> TopologyConstraint | None:
    """The constraint on the whole gang: its own, else that of its only group when the group
    spans the gang (no subgroup size); None: no gang-wide constraint."""
    spec = unit.gang.spec
    if spec is None:
        return None
    if spec.topology is not None:
        return spec.topology
    raw = _raw_groups(unit)
    if len(raw) == 1 and not raw[0].size:
        return raw[0].constraint
    return None


def _raw_groups(unit: Unit) -> list[RawGroup]:
    """The unit's pods in groups, each with its own constraint: Volcano subgroups (the first
    ``subGroupPolicy`` that selects a pod), then roles (the gang's per-role constraint, else
    the one its pods carry)."""
    spec = unit.gang.spec
    assert spec is not None
    subgroups: dict[tuple[str, ...], RawGroup] = {}
    by_role: dict[str, list[PodInfo]] = {}
    for pod in unit.pods:
        found = subgroup_of(spec.subgroups, pod.spec.labels)
        if found is None:
            by_role.setdefault(pod.spec.role, []).append(pod)
            continue
        policy, key = found
        group = subgroups.get(key)
        if group is None:
            constraint = policy.constraint or None
            group = subgroups[key] = RawGroup(pod.spec.role, [], constraint, size=policy.size)
        group.pods.append(pod)
    groups = list(subgroups.values())
    for role, pods in by_role.items():
        constraint = spec.role_topology.get(role)
        constraint = constraint or next((p.spec.topology for p in pods if p.spec.topology), None)
        groups.append(RawGroup(role, pods, constraint, spec.role_parents.get(role, "")))
    groups.sort(key=lambda g: (g.constraint is None and not g.parent, -len(g.pods)))
    return groups


def _set_needs(unit: Unit, groups: Sequence[Group]) -> None:
    """Pods each group must place: all of them, unless the gang may leave some pending."""
    gang = unit.gang
    slack = len(unit.pods) + gang.placed - gang.min_member
    if slack <= 0:
        return
    for group in groups:
        minimum = gang.role_minimums.get(group.role)
        if group.size:  # a Volcano subgroup: its subGroupSize must fit in its domain
            group.need = min(group.size, len(group.pods))
        elif minimum is not None:
            group.need = max(minimum - gang.placed_by_role[group.role], 0)
        elif len(groups) == 1:
            group.need = max(gang.min_member - gang.placed, 0)


# -- planning ---------------------------------------------------------------------------------
class _Planner:
    def __init__(self, session: Session, best_fit: bool, per_level: int) -> None:
        self.session = session
        self.table = session.table
        self.best_fit = best_fit
        self.per_level = per_level
        self.placements = Placements()
        self.parents: dict[str, Resolved | None] = {}  # KAI parent subgroup → its rule
        self.parent_of: dict[str, str] = {}
        self.frag_tiebreak = False
        self._fragmented: Floats | None = None  # per node, for the first group's pod shape

    def plan(self, unit: Unit, rule: Resolved | None, groups: list[Group]) -> Placements:
        attempts = self.placements.attempts
        where = self.placements.where
        if rule is None or rule.preferred is None:
            attempts.append(partial(self._choices, rule, None, -1, groups))
            return self.placements
        levels = rule.topology.levels
        within = self._pinned(unit, rule)
        caps = [self._capacity(group.pods, None) for group in groups]
        placed = _placed_nodes(unit)
        for depth in self._reachable(rule):
            level = levels[depth]
            home = level.codes[placed]  # the gang's own domains go first (it grows there)
            for domain in self._fitting(level, caps, groups, within, home)[: self.per_level]:
                mask = level.members(domain)
                mask = mask if within is None else mask & within
                attempts.append(partial(self._choices, rule, mask, depth, groups))
                where.append(f"{level_word(level.name)} {level.names[domain]}")
        if rule.required is None:
            attempts.append(partial(self._choices, rule, None, -1, groups))
            where.append("")
        elif not attempts:
            self.placements.why = self._why(levels[rule.required], caps[0], groups, within)
        return self.placements

    def _reachable(self, rule: Resolved) -> Sequence[int]:
        """The levels a gang may be kept in, lowest first: best fit, every level from the
        preferred one up to the required one (or the top); greedy, the constraint's own."""
        assert rule.preferred is not None
        top = 0 if rule.required is None else rule.required
        if self.best_fit:
            return range(rule.preferred, top - 1, -1)
        return sorted({rule.preferred, top if rule.required is not None else rule.preferred})[::-1]

    def reservable(self, unit: Unit, rule: Resolved) -> list[Mask | None]:
        """See :meth:`TopologyPlacement.reservation_domains`: by room when the cluster is
        empty (allocatable on the nodes the pods' selectors and tolerations allow)."""
        within = self._pinned(unit, rule)
        cap = self._empty_capacity(self._largest(unit.pods), within)
        placed = _placed_nodes(unit)
        found: list[Mask | None] = []
        for depth in self._reachable(rule):
            level = rule.topology.levels[depth]
            per_domain = _per_domain(level, cap, within)
            ids = np.flatnonzero(per_domain >= len(unit.pods))
            size = per_domain[ids] if self.best_fit else -per_domain[ids]
            away = ~np.isin(ids, level.codes[placed])
            for domain in ids[np.lexsort((ids, size, away))].tolist():
                mask = level.members(domain)
                found.append(mask if within is None else mask & within)
        if rule.required is None:
            found.append(None)
        return found or [np.zeros(len(self.table), dtype=bool)]

    def _largest(self, pods: Sequence[PodInfo]) -> PodInfo:
        """The pod sizes are counted in: the most GPUs, then the largest request."""
        gpu = self.table.gpu_col
        return max(pods, key=lambda p: (int(p.request[gpu]), int(p.request.sum())))

    def _empty_capacity(self, pod: PodInfo, within: Mask | None) -> Counts:
        facts = self.table.facts
        placement = pod.spec.placement
        usable = facts.selector_mask(placement) & facts.toleration_mask(placement)
        usable &= ~facts.unschedulable
        if within is not None:
            usable &= within
        cols = np.flatnonzero(pod.request)
        if not cols.size:  # a pod that requests nothing: no limit but the node count
            return usable.astype(np.int64) * UNLIMITED
        room = self.table.allocatable[:, cols] // pod.request[cols]
        return np.where(usable, room.min(axis=1), 0).astype(np.int64)

    @staticmethod
    def _pinned(unit: Unit, rule: Resolved) -> Mask | None:
        """The required domain the gang's members already placed are in (nothing if they
        are in several), or None when no member is placed."""
        nodes = _placed_nodes(unit)
        if not nodes.size or rule.required is None:
            return None
        level = rule.topology.levels[rule.required]
        used = np.unique(level.codes[nodes])
        if used.size != 1 or used[0] < 0:
            return np.zeros(level.codes.size, dtype=bool)
        return level.members(int(used[0]))

    def _capacity(self, pods: Sequence[PodInfo], within: Mask | None) -> Counts:
        pod = self._largest(pods)
        feasible = self.session.feasible(pod)
        if within is not None:
            feasible &= within
        return self.table.capacity_per_node(pod.request, feasible)

    def _fitting(
        self,
        level: Level,
        caps: Sequence[Counts],
        groups: Sequence[Group],
        within: Mask | None,
        home: npt.NDArray[np.int32] | None = None,
    ) -> list[int]:
        """Domains of ``level`` where every group fits, in the order to try them: ``home``
        domains first, then by best fit (smallest first) or, greedy, most free first."""
        ok = np.ones(len(level), dtype=bool)
        first: Counts | None = None
        for cap, group in zip(caps, groups, strict=True):
            per_domain = _per_domain(level, cap, within)
            ok &= per_domain >= max(group.need, 1)
            first = per_domain if first is None else first
        if first is None:
            return []
        if len(caps) > 1 and all(np.array_equal(caps[0], c) for c in caps[1:]):
            ok &= first >= sum(max(g.need, 1) for g in groups)  # one shape: room for all
        ids = np.flatnonzero(ok)
        sizes = first[ids] if self.best_fit else -first[ids]
        away = ~np.isin(ids, home) if home is not None else np.zeros(ids.size, dtype=bool)
        if not self.frag_tiebreak:
            return [int(i) for i in ids[np.lexsort((ids, sizes, away))]]
        fragments = self._domain_fragments(level, groups[0].pods)[ids]
        return [int(i) for i in ids[np.lexsort((ids, -fragments, sizes, away))]]

    def _domain_fragments(self, level: Level, pods: Sequence[PodInfo]) -> Floats:
        """FGD's fragmented milli-GPU of each domain, for a target of the pods' one shape."""
        if self._fragmented is None:
            target = target_workload([task_type_of(self._largest(pods).spec)])
            self._fragmented = Fragmentation(target).node_fragmentation(self.table)
        inside = level.codes >= 0
        found = np.bincount(
            level.codes[inside], weights=self._fragmented[inside], minlength=len(level)
        )
        return np.asarray(found, dtype=np.float64)

    def _why(self, level: Level, cap: Counts, groups: Sequence[Group], within: Mask | None) -> str:
        word = level_word(level.name)
        pods = [p for g in groups for p in g.pods[: max(g.need, 1)]]
        gpu_col = self.table.gpu_col
        gpus = sum(int(p.request[gpu_col]) for p in pods) / 1000
        per_domain = _per_domain(level, cap, within)
        what = f"{gpus:g} GPUs" if gpus else f"{len(pods)} pods"
        if not len(level) or not per_domain.any():
            return f"needs {what} in one {word}; no {word} has room"
        best = int(np.argmax(per_domain))
        if gpus:
            free = self.table.allocatable[:, gpu_col] - self.table.requested[:, gpu_col]
            usable = level.members(best) & ~self.table.facts.unschedulable
            usable = usable if within is None else usable & within
            room = f"{int(free[usable].sum()) / 1000:g} free"
        else:
            room = f"room for {int(per_domain[best])}"
        return f"needs {what} in one {word}; best {word} {level.names[best]} has {room}"

    # -- an attempt: the pods in order, with the masks they may use ----------------------------
    def _choices(
        self, rule: Resolved | None, outer: Mask | None, depth: int, groups: list[Group]
    ) -> Iterator[PodChoice]:
        chosen: dict[str, Mask | None] = {}  # parent subgroup → its domain in this attempt
        for group in groups:
            inside = self._parent_domain(group.parent, groups, outer, chosen)
            yield from self._group(group, rule, inside, depth)

    def _parent_domain(
        self, name: str, groups: Sequence[Group], outer: Mask | None, chosen: dict[str, Mask | None]
    ) -> Mask | None:
        """The domain of parent subgroup ``name`` (inside its own parent's): the smallest
        domain of its level that holds all its descendants, chosen on first use."""
        if not name:
            return outer
        if name in chosen:
            return chosen[name]
        base = self._parent_domain(self.parent_of.get(name, ""), groups, outer, chosen)
        rule = self.parents.get(name)
        ref = (
            None
            if rule is None
            else (rule.required if rule.required is not None else rule.preferred)
        )
        mask = base
        if rule is not None and ref is not None:
            members = [g for g in groups if name in self._ancestors(g.parent)]
            level = rule.topology.levels[ref]
            caps = [self._capacity(g.pods, base) for g in members]
            fitting = self._fitting(level, caps, members, base)
            if fitting:
                mask = (
                    level.members(fitting[0]) if base is None else level.members(fitting[0]) & base
                )
            elif rule.required is not None:
                why = self._why(level, caps[0], members, base)
                self.placements.why = f"subgroup {name!r} {why}"
                mask = np.zeros(len(self.table), dtype=bool)
        chosen[name] = mask
        return mask

    def _ancestors(self, name: str) -> list[str]:
        found: list[str] = []
        while name and name not in found:
            found.append(name)
            name = self.parent_of.get(name, "")
        return found

    def _group(
        self, group: Group, gang_rule: Resolved | None, outer: Mask | None, depth: int
    ) -> Iterator[PodChoice]:
        if outer is not None and not outer.any():  # its parent's domain failed (why is set)
            yield from ((pod, (outer,)) for pod in group.pods)
            return
        rule = group.rule
        if rule is None:
            if gang_rule is None or gang_rule.preferred is None:
                yield from self._sliced(group, gang_rule, outer)
                return
            rule, start = gang_rule, depth + 1
        else:
            chosen = self._role_domain(group, rule, outer)
            if chosen is None:
                yield from ((pod, (np.zeros(len(self.table), dtype=bool),)) for pod in group.pods)
                return
            outer, start = chosen
        if rule.slice_level is not None:
            yield from self._sliced(group, rule, outer)
            return
        assert rule.preferred is not None
        cap = self._capacity(group.pods, outer)
        slices = self._spread(rule.topology, cap, outer, len(group.pods), start, rule.preferred)
        yield from _assign(group.pods, slices, outer)

    def _role_domain(
        self, group: Group, rule: Resolved, outer: Mask | None
    ) -> tuple[Mask | None, int] | None:
        """The domain a role with its own required level goes to (within the gang's)."""
        if rule.required is None:
            return outer, 0
        level = rule.topology.levels[rule.required]
        cap = self._capacity(group.pods, outer)
        fitting = self._fitting(level, [cap], [group], outer)
        if not fitting:
            why = self._why(level, cap, [group], outer)
            self.placements.why = f"role {group.role!r} {why}" if group.role else why
            return None
        mask = level.members(fitting[0])
        return (mask if outer is None else mask & outer), rule.required + 1

    def _sliced(
        self, group: Group, rule: Resolved | None, outer: Mask | None
    ) -> Iterator[PodChoice]:
        if rule is None or rule.slice_level is None or rule.slice_size < 1:
            yield from ((pod, (outer,)) for pod in group.pods)
            return
        level = rule.topology.levels[rule.slice_level]
        size = rule.slice_size
        for start in range(0, len(group.pods), size):
            chunk = group.pods[start : start + size]
            cap = self._capacity(chunk, outer)
            part = Group(group.role, chunk, None, len(chunk))
            fitting = self._fitting(level, [cap], [part], outer)
            if not fitting:
                self.placements.why = "a slice " + self._why(level, cap, [part], outer)
                empty = np.zeros(len(self.table), dtype=bool)
                yield from ((pod, (empty,)) for pod in chunk)
                continue
            mask = level.members(fitting[0])
            mask = mask if outer is None else mask & outer
            yield from ((pod, (mask,)) for pod in chunk)

    def _spread(
        self,
        topology: Topology,
        cap: Counts,
        within: Mask | None,
        count: int,
        depth: int,
        target: int,
    ) -> Slices:
        """Where ``count`` pods go inside ``within``: as few domains of each level from
        ``depth`` down to ``target`` as possible."""
        whole = np.ones(len(self.table), dtype=bool) if within is None else within
        if depth > target or count <= 0:
            return [(whole, count)]
        if not self.best_fit:
            depth = target
        level = topology.levels[depth]
        per_domain = _per_domain(level, cap, within)
        slices: Slices = []
        for domain, share in self._shares(per_domain, count):
            inside = level.members(domain) & whole
            slices += self._spread(topology, cap, inside, share, depth + 1, target)
        placed = sum(share for _, share in slices)
        if placed < count:
            slices.append((whole, count - placed))
        return slices

    def _shares(self, per_domain: Counts, count: int) -> list[tuple[int, int]]:
        ids = np.flatnonzero(per_domain > 0)
        if not ids.size:
            return []
        if self.best_fit:
            fits = ids[per_domain[ids] >= count]
            if fits.size:
                return [(int(fits[np.argmin(per_domain[fits])]), count)]
        order = ids[np.lexsort((ids, -per_domain[ids]))]
        shares: list[tuple[int, int]] = []
        left = count
        for position, domain in enumerate(order.tolist()):
            if left <= 0:
                break
            if self.best_fit:  # the rest in the smallest domain that holds it all
                rest = order[position:]
                holds = rest[per_domain[rest] >= left]
                if holds.size:
                    shares.append((int(holds[np.argmin(per_domain[holds])]), left))
                    break
            take = min(int(per_domain[domain]), left)
            shares.append((domain, take))
            left -= take
        return shares


def _per_domain(level: Level, cap: Counts, within: Mask | None) -> Counts:
    valid = level.codes >= 0
    if within is not None:
        valid &= within
    counts = np.bincount(level.codes[valid], weights=cap[valid], minlength=len(level))
    return np.asarray(counts, dtype=np.int64)


def _placed_nodes(unit: Unit) -> npt.NDArray[np.int64]:
    """Nodes of the gang's members that hold resources already."""
    nodes = [p.node for p in unit.gang.members if p.status in HOLDING and p.node >= 0]
    return np.asarray(nodes, dtype=np.int64)


def _assign(pods: Sequence[PodInfo], slices: Slices, outer: Mask | None) -> Iterator[PodChoice]:
    index = 0
    for mask, count in slices:
        for pod in pods[index : index + count]:
            yield pod, (mask, outer)
        index += count
    for pod in pods[index:]:
        yield pod, (outer,)


def level_word(name: str) -> str:
    """``rack`` for ``topology.phalanx.dev/rack`` (the label's name part), for messages."""
    return name.rsplit("/", 1)[-1]
