"""Network topology as numpy arrays: which domain of each level every node is in.

A :class:`Topology` is a list of :class:`Level` s, top (widest) first. ``Level.codes[n]`` is
node ``n``'s domain at that level (-1: the node is in none), so "the free GPUs of every rack"
is one ``np.bincount`` and "the nodes of rack 7" one comparison, whatever the cluster size.

Label levels (Kueue/KAI ``Topology``, the ``topology`` setting) name a domain by the values of
its level *and every level above*, as Kueue does: rack ``S1`` under block ``P8`` and rack
``S1`` under block ``P10`` are two racks (Lingjun's ToR ids repeat across PSWs). A node missing
a level's label is in no domain of that level nor of the levels below.

HyperNode levels are Volcano tiers, highest tier first; a HyperNode's nodes are its Node members
(exact name, regular expression searched in the name as Go's ``MatchString`` does, or labels)
and, recursively, the nodes of its HyperNode members.

Level references (:meth:`Topology.find`): the level's node label, its tier name, or ``tier:N``
— Volcano's ``highestTierAllowed: N``, the highest tier not above N. Label topologies number
their levels as tiers too: the hostname level is tier 0 and the lowest other level tier 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from phalanx.api.topology import HOSTNAME_LABEL, HyperNodeSpec, MemberSelector, TopologySpec
from phalanx.cluster.labels import LabelIndex, Mask
from phalanx.cluster.nodes import NodeFacts

Codes = npt.NDArray[np.int32]


@dataclass(slots=True)
class Level:
    name: str  # how it is shown: its node label, or a HyperNode tier name / ``tier:N``
    tier: int
    codes: Codes  # node → domain, -1 for none
    names: list[str]  # domain → full name (``P10/S3``)
    short: list[str]  # domain → its own value (``S3``)
    aliases: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.names)

    def members(self, domain: int) -> Mask:
        return np.asarray(self.codes == domain, dtype=bool)


@dataclass(slots=True)
class Topology:
    name: str
    kind: str
    levels: list[Level] = field(default_factory=list)

    def find(self, ref: str) -> int | None:
        """The index of the level ``ref`` names (see the module docstring), or None."""
        for i, level in enumerate(self.levels):
            if ref == level.name or ref in level.aliases:
                return i
        if ref.startswith("tier:") and ref[5:].isdigit():
            wanted = int(ref[5:])
            below = [(lv.tier, i) for i, lv in enumerate(self.levels) if lv.tier <= wanted]
            return max(below)[1] if below else None
        return None

    def path(self, node: int) -> str:
        """``P10/S3/host-7``: the node's domain at every level, top first."""
        return "/".join(lv.short[lv.codes[node]] for lv in self.levels if lv.codes[node] >= 0)

    def spans(self, nodes: Sequence[int]) -> dict[str, int]:
        """How many domains of each level ``nodes`` touch."""
        index = np.asarray(nodes, dtype=np.int64)
        spans: dict[str, int] = {}
        for level in self.levels:
            codes = level.codes[index]
            spans[level.name] = int(np.unique(codes[codes >= 0]).size)
        return spans


class Topologies:
    """Every topology of the cluster; the first one is the primary (used for measures)."""

    def __init__(self, items: Sequence[Topology] = ()) -> None:
        self.items = list(items)

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def primary(self) -> Topology | None:
        return self.items[0] if self.items else None

    def resolve(self, ref: str, name: str = "") -> tuple[Topology, int] | None:
        """The topology and level index ``ref`` names (in topology ``name`` if given)."""
        for topology in self.items:
            if name and topology.name != name:
                continue
            index = topology.find(ref)
            if index is not None:
                return topology, index
        return None

    def path(self, node: int) -> str:
        primary = self.primary
        return "" if primary is None else primary.path(node)


class TopologySource:
    """The topology objects a cluster declares; their per-node arrays are built for the node
    table's current facts and rebuilt when those change (a node added, updated or removed)."""

    def __init__(
        self, topologies: Sequence[TopologySpec] = (), hypernodes: Sequence[HyperNodeSpec] = ()
    ) -> None:
        self.topologies = list(topologies)
        self.hypernodes = list(hypernodes)
        self._facts: NodeFacts | None = None
        self._built = Topologies()

    def __bool__(self) -> bool:
        return bool(self.topologies or self.hypernodes)

    def over(self, facts: NodeFacts) -> Topologies:
        if facts is not self._facts:
            self._built = build(facts.names, facts.labels, self.topologies, self.hypernodes)
            self._facts = facts
        return self._built


def build(
    names: Sequence[str],
    labels: LabelIndex,
    topologies: Sequence[TopologySpec] = (),
    hypernodes: Sequence[HyperNodeSpec] = (),
) -> Topologies:
    """The cluster's topologies over nodes ``names`` (in table order)."""
    items = [label_topology(spec, labels) for spec in topologies]
    if hypernodes:
        items.append(hypernode_topology(hypernodes, names, labels))
    return Topologies(items)


def label_topology(spec: TopologySpec, labels: LabelIndex) -> Topology:
    size = labels.size
    tiers = _tiers(spec.levels)
    stack = np.empty((0, size), dtype=np.int64)
    levels: list[Level] = []
    for depth, key in enumerate(spec.levels):
        column = labels.codes.get(key, np.full(size, -1, dtype=np.int32)).astype(np.int64)
        stack = np.vstack([stack, column])
        present = np.all(stack >= 0, axis=0)
        codes = np.full(size, -1, dtype=np.int32)
        values = {code: value for value, code in labels.vocab.get(key, {}).items()}
        names: list[str] = []
        short: list[str] = []
        if present.any():
            rows, inverse = np.unique(stack[:, present], axis=1, return_inverse=True)
            codes[present] = inverse.reshape(-1)
            parents = [{c: v for v, c in labels.vocab[k].items()} for k in spec.levels[:depth]]
            for col in range(rows.shape[1]):
                chain = [parents[i][int(rows[i, col])] for i in range(depth)]
                own = values[int(rows[depth, col])]
                names.append("/".join([*chain, own]))
                short.append(own)
        levels.append(Level(key, tiers[depth], codes, names, short, (f"tier:{tiers[depth]}",)))
    return Topology(spec.name, spec.kind, levels)


def _tiers(keys: Sequence[str]) -> list[int]:
    """Tier of each level: hostname 0, the lowest other level 1, upwards from there."""
    tiers: list[int] = []
    next_tier = 1
    for key in reversed(keys):
        if key == HOSTNAME_LABEL:
            tiers.append(0)
        else:
            tiers.append(next_tier)
            next_tier += 1
    return tiers[::-1]


def hypernode_topology(
    specs: Sequence[HyperNodeSpec], names: Sequence[str], labels: LabelIndex
) -> Topology:
    by_name = {spec.name: spec for spec in specs}
    memo: dict[str, Mask] = {}
    size = labels.size

    def nodes_of(spec: HyperNodeSpec, seen: frozenset[str]) -> Mask:
        cached = memo.get(spec.name)
        if cached is not None:
            return cached
        mask = np.zeros(size, dtype=bool)
        for member in spec.members:
            if member.kind == "Node":
                mask |= _node_members(member, names, labels)
                continue
            for child_name in _hyper_members(member, by_name):
                if child_name not in seen:
                    mask |= nodes_of(by_name[child_name], seen | {child_name})
        memo[spec.name] = mask
        return mask

    levels: list[Level] = []
    for tier in sorted({spec.tier for spec in specs}, reverse=True):
        codes = np.full(size, -1, dtype=np.int32)
        domain_names: list[str] = []
        tier_names: set[str] = set()
        for spec in sorted((s for s in specs if s.tier == tier), key=lambda s: s.name):
            free = nodes_of(spec, frozenset({spec.name})) & (codes < 0)
            codes[free] = len(domain_names)
            domain_names.append(spec.name)
            if spec.tier_name:
                tier_names.add(spec.tier_name)
        title = min(tier_names) if tier_names else f"tier:{tier}"
        aliases = (f"tier:{tier}", *sorted(tier_names))
        levels.append(Level(title, tier, codes, domain_names, list(domain_names), aliases))
    return Topology("hypernodes", "HyperNode", levels)


def _node_members(member: MemberSelector, names: Sequence[str], labels: LabelIndex) -> Mask:
    if member.exact:
        return np.asarray([name == member.exact for name in names], dtype=bool)
    if member.regex:
        pattern = re.compile(member.regex)
        return np.asarray([pattern.search(name) is not None for name in names], dtype=bool)
    mask = np.ones(labels.size, dtype=bool)
    for key, value in member.labels:
        mask &= labels.equals(key, value)
    return mask


def _hyper_members(member: MemberSelector, by_name: dict[str, HyperNodeSpec]) -> list[str]:
    if member.exact:
        return [member.exact] if member.exact in by_name else []
    pattern = re.compile(member.regex)
    return [name for name in by_name if pattern.search(name) is not None]
