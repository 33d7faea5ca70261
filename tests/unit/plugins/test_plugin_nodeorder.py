"""Node scores (phalanx.plugins.nodeorder): binpack fills, spread empties, both in [0, 100]."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.plugins.nodeorder import Binpack, Spread
from phalanx.policies import Scheduler, get_policy

GPU = "nvidia.com/gpu"
GiB = 2**30
ALLOC = {"cpu": 8000, "memory": 32 * GiB, "pods": 110, GPU: 4000}


def scored(used: list[dict[str, int]], request: dict[str, int], plugin) -> np.ndarray:
    state = ClusterState([NodeSpec(f"n{i}", ALLOC) for i in range(len(used))], ResourceIndex())
    for node, usage in enumerate(used):
        state.table.add(node, state.index.vector(usage))
    pod = state.add_pod(PodSpec("ns", "p", {**request, "pods": 1}), 0.0)
    feasible = np.ones(len(used), dtype=bool)
    return plugin.score(state.table, pod, feasible)


HALF = {"cpu": 4000, "memory": 16 * GiB, GPU: 2000}


@pytest.mark.parametrize(
    ("used", "shape", "binpack_best", "spread_best"),
    [
        ([{}, HALF], {"cpu": 1000, GPU: 1000}, 1, 0),
        ([HALF, {}], {"cpu": 1000, "memory": GiB}, 0, 1),
        ([{}, HALF, {GPU: 3000}], {GPU: 1000}, 2, 0),
        ([{GPU: 1000}, {GPU: 3000}, {GPU: 2000}], {GPU: 1000}, 1, 0),
    ],
)
def test_binpack_prefers_fuller_spread_prefers_emptier(
    used, shape, binpack_best, spread_best
) -> None:
    assert int(np.argmax(scored(used, shape, Binpack()))) == binpack_best
    assert int(np.argmax(scored(used, shape, Spread()))) == spread_best


def test_binpack_weighs_gpu_more_than_cpu() -> None:
    """The node with fuller GPUs wins binpack even though the other one has fuller CPUs."""
    scores = scored([{GPU: 2000}, {"cpu": 6000}], {"cpu": 1000, GPU: 1000}, Binpack())
    assert scores[0] > scores[1]


def test_spread_default_weights_are_cpu_and_memory_only() -> None:
    scores = scored([{GPU: 2000}, {"cpu": 6000}], {"cpu": 1000, GPU: 1000}, Spread())
    assert scores.tolist() == pytest.approx([100 * (1 - 1 / 8), 100 * (1 - 7 / 8)])


def test_binpack_formula_weights_gpu_ten_to_one() -> None:
    scores = scored([{GPU: 2000}, {"cpu": 6000}], {"cpu": 1000, GPU: 1000}, Binpack())
    # node 0: gpu (2+1)/4, cpu 1/8; node 1: gpu 1/4, cpu 7/8; weights gpu 10, cpu 1.
    assert scores[0] == pytest.approx(100 * (10 * 0.75 + 0.125) / 11)
    assert scores[1] == pytest.approx(100 * (10 * 0.25 + 0.875) / 11)
    # With equal weights the CPU-heavy node would win instead.
    equal = scored(
        [{GPU: 2000}, {"cpu": 6000}], {"cpu": 1000, GPU: 1000}, Binpack(weights={"cpu": 1, GPU: 1})
    )
    assert int(np.argmax(equal)) == 1


def test_spread_formula() -> None:
    scores = scored(
        [{}, {"cpu": 4000, "memory": 8 * GiB}], {"cpu": 2000, "memory": 8 * GiB}, Spread()
    )
    assert scores[0] == pytest.approx(100 * ((1 - 2 / 8) + (1 - 8 / 32)) / 2)
    assert scores[1] == pytest.approx(100 * ((1 - 6 / 8) + (1 - 16 / 32)) / 2)


@pytest.mark.parametrize("plugin", [Binpack(), Spread()], ids=["binpack", "spread"])
@pytest.mark.parametrize("seed", range(8))
def test_scores_are_within_0_and_100(plugin, seed: int) -> None:
    rng = np.random.default_rng(seed)
    used = [
        {
            "cpu": int(rng.integers(0, 12000)),
            "memory": int(rng.integers(0, 40)) * GiB,
            GPU: int(rng.integers(0, 6)) * 1000,
        }
        for _ in range(6)
    ]  # some nodes are over-committed on purpose
    request = {"cpu": int(rng.integers(0, 9000)), GPU: int(rng.integers(0, 5)) * 1000}
    scores = scored(used, request, plugin)
    assert scores.shape == (6,)
    assert np.isfinite(scores).all()
    assert (scores >= 0).all() and (scores <= 100).all()


@pytest.mark.parametrize("plugin", [Binpack(), Spread()], ids=["binpack", "spread"])
def test_scores_with_nothing_allocatable_stay_in_range(plugin) -> None:
    state = ClusterState(
        [NodeSpec("empty", {"pods": 110}), NodeSpec("gpu", ALLOC)], ResourceIndex()
    )
    pod = state.add_pod(PodSpec("ns", "p", {"cpu": 500, GPU: 1000, "pods": 1}), 0.0)
    scores = plugin.score(state.table, pod, np.ones(2, dtype=bool))
    assert np.isfinite(scores).all() and (scores >= 0).all() and (scores <= 100).all()


@pytest.mark.parametrize("plugin", [Binpack(), Spread()], ids=["binpack", "spread"])
def test_a_pod_requesting_only_a_pod_slot_scores_zero_everywhere(plugin) -> None:
    assert not scored([{}, HALF], {}, plugin).any()


@pytest.mark.parametrize(("policy", "node"), [("phalanx", 0), ("kube-default", 1)])
def test_policies_fill_or_spread_a_partly_used_gpu_node(policy: str, node: int) -> None:
    nodes = [NodeSpec(f"n{i}", {**ALLOC, GPU: 8000}) for i in range(2)]
    state = ClusterState(nodes, ResourceIndex())
    busy = state.add_pod(PodSpec("ns", "busy", {GPU: 4000, "pods": 1}), 0.0)
    state.bind(busy, 0, 0.0)
    state.add_gang(GangSpec("ns", "g", 2, "scheduling.x-k8s.io"), 0.0)
    for i in range(2):
        spec = PodSpec(
            "ns", f"g{i}", {GPU: 1000, "pods": 1}, gang=GangRef("g", "scheduling.x-k8s.io")
        )
        state.add_pod(spec, 0.0)
    result = Scheduler(get_policy(policy), seed=0).cycle(state, 0.0)
    assert [n for _, n in result.binds] == [node, node]
