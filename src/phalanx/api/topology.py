"""Topology objects: how nodes group into network domains (rack, block, super-node).

Two shapes, as the peers declare them:

- :class:`TopologySpec`: ordered levels, top (widest) first, each a node label whose values
  name the domains (Kueue ``Topology``, KAI ``Topology``, phalanx's ``topology`` setting).
- :class:`HyperNodeSpec`: one Volcano HyperNode, a domain of a ``tier`` (lower = closer) whose
  members are nodes (by exact name, regular expression or labels) or other HyperNodes (by exact
  name or regular expression). All HyperNodes of a cluster together form one topology.

:mod:`phalanx.cluster.topology` turns them into per-node domain arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The level every node has: one domain per node.
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class TopologySpec:
    name: str
    levels: tuple[str, ...]  # node label keys, top → bottom
    kind: str = "Topology"  # the object it came from, for messages


@dataclass(frozen=True, slots=True)
class MemberSelector:
    """One HyperNode member: ``kind`` Node or HyperNode, selected by exactly one of these."""

    kind: str  # "Node" | "HyperNode"
    exact: str = ""
    regex: str = ""
    labels: tuple[tuple[str, str], ...] = ()  # labelMatch.matchLabels (Node members only)


@dataclass(frozen=True, slots=True)
class HyperNodeSpec:
    name: str
    tier: int
    members: tuple[MemberSelector, ...]
    tier_name: str = ""
