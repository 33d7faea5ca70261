"""Predicates plugin (phalanx.plugins.predicates): filter masks and rejection reasons."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import NodeSpec, Placement, PodSpec, Taint, TaintEffect, Toleration
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.plugins.predicates import Predicates

GPU = "nvidia.com/gpu"
UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"
TAINT = "node(s) had untolerated taint"
GPU_TAINT = Taint("gpu", "true", TaintEffect.NO_SCHEDULE)

#: One node per reason, plus one that fits: n0 cordoned, n1 other zone, n2 tainted,
#: n3 out of GPUs, n4 out of pod slots, n5 fits.
NODES = [
    NodeSpec("n0", {"cpu": 8000, "pods": 10, GPU: 2000}, {"zone": "a"}, unschedulable=True),
    NodeSpec("n1", {"cpu": 8000, "pods": 10, GPU: 2000}, {"zone": "b"}),
    NodeSpec("n2", {"cpu": 8000, "pods": 10, GPU: 2000}, {"zone": "a"}, (GPU_TAINT,)),
    NodeSpec("n3", {"cpu": 8000, "pods": 10, GPU: 500}, {"zone": "a"}),
    NodeSpec("n4", {"cpu": 8000, "pods": 0, GPU: 2000}, {"zone": "a"}),
    NodeSpec("n5", {"cpu": 8000, "pods": 10, GPU: 2000}, {"zone": "a"}),
]


def pod_of(
    state: ClusterState,
    requests: dict[str, int],
    *,
    zone: str | None = "a",
    tolerate: bool = False,
    name: str = "p",
):
    placement = Placement(
        node_selector=(("zone", zone),) if zone else (),
        tolerations=(Toleration("gpu", "Exists", "", None),) if tolerate else (),
    )
    return state.add_pod(PodSpec("ns", name, requests, placement=placement), 0.0)


@pytest.fixture
def state() -> ClusterState:
    return ClusterState(NODES, ResourceIndex())


@pytest.mark.parametrize(
    ("requests", "zone", "tolerate", "expected"),
    [
        ({GPU: 1000, "pods": 1}, "a", False, "000001"),
        ({GPU: 1000, "pods": 1}, "a", True, "001001"),
        ({GPU: 1000, "pods": 1}, None, False, "010001"),
        ({GPU: 500, "pods": 1}, "a", False, "000101"),
        ({GPU: 2000, "pods": 1}, "b", False, "010000"),
        ({GPU: 2001, "pods": 1}, None, True, "000000"),
        ({"cpu": 100}, "a", False, "000111"),  # asks no pod slot: n4 has room
        ({"cpu": 8001, "pods": 1}, None, True, "000000"),
    ],
)
def test_filter(state, requests, zone, tolerate, expected) -> None:
    pod = pod_of(state, requests, zone=zone, tolerate=tolerate)
    assert Predicates().filter(state.table, pod).tolist() == [b == "1" for b in expected]


@pytest.mark.parametrize(
    ("requests", "tolerate", "expected"),
    [
        (
            {GPU: 1000, "pods": 1},
            False,
            {
                UNSCHEDULABLE: [0],
                SELECTOR: [1],
                TAINT: [2],
                "Insufficient nvidia.com/gpu": [3],
                "Too many pods": [4],
            },
        ),
        (
            {GPU: 1000, "pods": 1},
            True,
            {
                UNSCHEDULABLE: [0],
                SELECTOR: [1],
                "Insufficient nvidia.com/gpu": [3],
                "Too many pods": [4],
            },
        ),
        (
            {"cpu": 9000, GPU: 2000, "pods": 1},
            True,
            {
                UNSCHEDULABLE: [0],
                SELECTOR: [1],
                "Insufficient cpu": [2, 3, 4, 5],  # a node is charged to every resource short
                "Insufficient nvidia.com/gpu": [3],
                "Too many pods": [4],
            },
        ),
    ],
)
def test_rejections(state, requests, tolerate, expected) -> None:
    pod = pod_of(state, requests, tolerate=tolerate)
    plugin = Predicates()
    got = {
        reason: np.flatnonzero(mask).tolist()
        for reason, mask in plugin.rejections(state.table, pod)
    }
    assert got == expected
    # Every node the filter refuses has a reason, and no node that passes has one.
    rejected = np.zeros(len(NODES), dtype=bool)
    for _, mask in plugin.rejections(state.table, pod):
        rejected |= mask
    assert np.array_equal(rejected, ~plugin.filter(state.table, pod))


def test_used_resources_count(state) -> None:
    filler = pod_of(state, {GPU: 1500, "pods": 1}, name="filler")
    state.bind(filler, 5, 0.0)
    pod = pod_of(state, {GPU: 1000, "pods": 1})
    plugin = Predicates()
    assert not plugin.filter(state.table, pod).any()
    reasons = dict(plugin.rejections(state.table, pod))
    assert np.flatnonzero(reasons["Insufficient nvidia.com/gpu"]).tolist() == [3, 5]


def test_invalid_pod_fits_nowhere(state) -> None:
    pod = state.add_pod(PodSpec("ns", "bad", {"example.com/fpga": 1, "pods": 1}), 0.0)
    plugin = Predicates()
    assert not plugin.filter(state.table, pod).any()
    [(reason, mask)] = plugin.rejections(state.table, pod)
    assert "example.com/fpga" in reason and mask.all()


def test_static_mask_is_cached_per_placement_and_reset_per_cluster(state) -> None:
    plugin = Predicates()
    first = plugin.static(state.table.facts, Placement(node_selector=(("zone", "a"),)))
    assert first.tolist() == [False, False, False, True, True, True]
    again = plugin.static(state.table.facts, Placement(node_selector=(("zone", "a"),)))
    assert again is first
    other = ClusterState([NodeSpec("m0", {"pods": 1}, {"zone": "a"})], ResourceIndex())
    assert plugin.static(other.table.facts, Placement(node_selector=(("zone", "a"),))).tolist() == [
        True
    ]
