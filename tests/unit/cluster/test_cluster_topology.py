"""Domain arrays of label topologies and HyperNode trees."""

from __future__ import annotations

from phalanx.api.topology import HyperNodeSpec, MemberSelector, TopologySpec
from phalanx.cluster.labels import LabelIndex
from phalanx.cluster.topology import build

NAMES = ["n0", "n1", "n2", "n3", "n4"]
LABELS = [
    {"block": "P8", "rack": "S1", "kubernetes.io/hostname": "n0"},
    {"block": "P8", "rack": "S1", "kubernetes.io/hostname": "n1"},
    {"block": "P10", "rack": "S1", "kubernetes.io/hostname": "n2"},  # same rack id, other block
    {"block": "P10", "rack": "S2", "kubernetes.io/hostname": "n3"},
    {"rack": "S9", "kubernetes.io/hostname": "n4"},  # no block: in no domain from there down
]
SPEC = TopologySpec("t", ("block", "rack", "kubernetes.io/hostname"))


def test_a_domain_is_named_by_its_value_and_every_value_above() -> None:
    (topology,) = build(NAMES, LabelIndex(NAMES, LABELS), [SPEC]).items
    block, rack, host = topology.levels
    assert sorted(rack.names) == ["P10/S1", "P10/S2", "P8/S1"]
    assert rack.codes[0] == rack.codes[1] != rack.codes[2]
    assert block.codes[4] == rack.codes[4] == host.codes[4] == -1
    assert topology.path(2) == "P10/S1/n2"
    assert topology.spans([0, 1, 2]) == {"block": 2, "rack": 2, "kubernetes.io/hostname": 3}


def test_levels_are_found_by_label_and_by_tier() -> None:
    topologies = build(NAMES, LabelIndex(NAMES, LABELS), [SPEC])
    topology = topologies.items[0]
    assert topology.find("rack") == 1
    assert topology.find("tier:1") == 1 and topology.find("tier:2") == 0
    assert topology.find("tier:0") == 2 and topology.find("tier:7") == 0
    assert topology.find("row") is None
    assert topologies.resolve("rack", "other") is None


def test_hypernode_tree_by_regex_exact_and_nested() -> None:
    labels = LabelIndex(NAMES, LABELS)
    specs = [
        HyperNodeSpec("leaf-a", 1, (MemberSelector("Node", regex="n[01]"),), "leaf"),
        HyperNodeSpec("leaf-b", 1, (MemberSelector("Node", labels=(("block", "P10"),)),), "leaf"),
        HyperNodeSpec("spine", 2, (MemberSelector("HyperNode", regex="^leaf-"),), "spine"),
    ]
    (topology,) = build(NAMES, labels, hypernodes=specs).items
    spine, leaf = topology.levels
    assert (spine.name, leaf.name) == ("spine", "leaf")
    assert [leaf.names[c] if c >= 0 else None for c in leaf.codes] == [
        "leaf-a",
        "leaf-a",
        "leaf-b",
        "leaf-b",
        None,
    ]
    assert list(spine.codes[:4]) == [0, 0, 0, 0] and spine.codes[4] == -1
    assert topology.find("leaf") == 1 and topology.find("tier:1") == 1
    assert topology.path(3) == "spine/leaf-b"
