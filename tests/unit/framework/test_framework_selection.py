"""Selector (phalanx.framework.selection): the kept per-shape vectors equal a whole-table
computation after any sequence of placements and undos, to the last bit; so the node chosen
(and every tie-break draw) is the same."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.framework import selection
from phalanx.framework.session import Session
from phalanx.plugins.nodeorder import Binpack, Spread
from phalanx.plugins.predicates import Predicates

GPU = "nvidia.com/gpu"
NODES = 1061  # not a multiple of 4: the matrix product's tail rows too


def cluster(rng: np.random.Generator, nodes: int = NODES) -> ClusterState:
    specs = []
    for i in range(nodes):
        gpus = int(rng.choice([0, 4000, 8000]))
        cpu = int(rng.choice([16_000, 48_000, 96_000]))
        specs.append(NodeSpec(f"n{i}", {"cpu": cpu, "memory": 256 << 30, "pods": 110, GPU: gpus}))
    return ClusterState(specs, ResourceIndex())


def whole_table(s: Session, pod) -> np.ndarray:
    """What the plugins' whole-table hooks say now: scores of feasible nodes, -inf elsewhere."""
    feasible = np.ones(len(s.table), dtype=bool)
    for plugin in s.filters:
        feasible &= plugin.filter(s.table, pod)
    total = np.zeros(len(s.table), dtype=np.float64)
    for plugin in s.scorers:
        total += plugin.weight * plugin.score(s.table, pod, feasible)
    return np.where(feasible, total, -np.inf)


def best_of(masked: np.ndarray) -> np.ndarray:
    """The nodes with the highest score (none when no node is feasible)."""
    top = masked.max()
    return np.flatnonzero(masked == top) if top > -np.inf else np.zeros(0, dtype=np.intp)


@pytest.mark.parametrize("nodes", [2, 5, 64, NODES])
@pytest.mark.parametrize("scorer", [Binpack, Spread])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kept_vectors_equal_the_whole_table_after_placements_and_undos(scorer, seed, nodes) -> None:
    rng = np.random.default_rng(seed)
    state = cluster(rng, nodes)
    shapes = [
        {"cpu": 8000, "memory": 64 << 30, "pods": 1, GPU: 1000},
        {"cpu": 2000, "memory": 8 << 30, "pods": 1},
        {"cpu": 1500, "memory": 3 << 30, "pods": 1, GPU: 500},
    ]
    pods = [
        state.add_pod(PodSpec("ns", f"p{i}", dict(shapes[i % len(shapes)])), 0.0)
        for i in range(240)
    ]
    s = Session(state, [Predicates(), scorer()], now=0.0, rng=np.random.default_rng(seed))
    assert s.selector.incremental_scores
    open_statements = []
    stmt = s.statement()
    for i, pod in enumerate(pods):
        expected = whole_table(s, pod)
        assert np.array_equal(s.selector.masked(pod, None), expected)
        assert np.array_equal(s.feasible(pod), expected > -np.inf)
        assert np.array_equal(s.selector.best(pod, None), best_of(expected))
        node = s.select_node(pod)
        if node is None:
            continue
        stmt.allocate(pod, node)
        if i % 7 == 6:  # undo some placements: their rows change back
            stmt.discard()
            stmt = s.statement()
        elif i % 5 == 4:
            open_statements.append(stmt)
            stmt = s.statement()
    stmt.discard()
    for pod in pods[:30]:
        assert np.array_equal(s.selector.masked(pod, None), whole_table(s, pod))


def test_small_tables_are_computed_whole_each_time() -> None:
    specs = [NodeSpec(f"n{i}", {"cpu": 8000, "pods": 110}) for i in range(selection.MIN_NODES - 1)]
    state = ClusterState(specs, ResourceIndex())
    s = Session(state, [Predicates(), Binpack()], now=0.0, rng=np.random.default_rng(0))
    assert not s.selector.incremental_scores
    pod = state.add_pod(PodSpec("ns", "p", {"cpu": 1000, "pods": 1}), 0.0)
    assert s.select_node(pod) is not None


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 40])
def test_row_scores_equal_whole_table_scores(rows) -> None:
    rng = np.random.default_rng(rows)
    state = cluster(rng)
    pod = state.add_pod(PodSpec("ns", "p", {"cpu": 3000, "memory": 5 << 30, GPU: 1000}), 0.0)
    for node in rng.integers(0, NODES, size=300).tolist():
        if state.table.fits(pod.request)[node]:
            state.table.add(int(node), pod.request, state.table.pick_gpus(int(node), pod.request))
    chosen = np.sort(rng.choice(NODES, size=rows, replace=False)).astype(np.intp)
    for plugin in (Binpack(), Spread(), Binpack(weights={"cpu": 3, "memory": 1, GPU: 7})):
        full = plugin.score(state.table, pod, np.ones(NODES, dtype=bool))
        assert np.array_equal(plugin.score_rows(state.table, pod, chosen), full[chosen])
    predicates = Predicates()
    whole = predicates.filter(state.table, pod)
    assert np.array_equal(predicates.filter_rows(state.table, pod, chosen), whole[chosen])


@pytest.mark.parametrize("scorer", [Binpack, Spread])
def test_gangs_placed_whole_keep_the_same_vectors_and_best_nodes(scorer) -> None:
    """Gangs of one shape fill nodes one pod at a time (the one-row refresh, the best nodes
    kept), and a pod of another shape then sees many written rows at once (the row hooks)."""
    rng = np.random.default_rng(7)
    state = cluster(rng)
    gang = {"cpu": 8000, "memory": 64 << 30, "pods": 1, GPU: 1000}
    other = {"cpu": 1000, "memory": 2 << 30, "pods": 1}
    pods = [state.add_pod(PodSpec("ns", f"g{i}", dict(gang)), 0.0) for i in range(400)]
    lone = [state.add_pod(PodSpec("ns", f"l{i}", dict(other)), 0.0) for i in range(20)]
    s = Session(state, [Predicates(), scorer()], now=0.0, rng=np.random.default_rng(7))
    for k in range(20):
        stmt = s.statement()
        for pod in pods[k * 20 : (k + 1) * 20]:
            expected = whole_table(s, pod)
            assert np.array_equal(s.selector.masked(pod, None), expected)
            assert np.array_equal(s.selector.best(pod, None), best_of(expected))
            node = s.select_node(pod)
            if node is not None:
                stmt.allocate(pod, node)
        if k % 3 == 2:
            stmt.discard()  # twenty rows written back
        pod = lone[k]
        expected = whole_table(s, pod)
        assert np.array_equal(s.selector.masked(pod, None), expected)
        assert np.array_equal(s.selector.best(pod, None), best_of(expected))


@pytest.mark.parametrize(
    "request_",
    [
        {"cpu": 3000, "memory": 5 << 30, GPU: 1000},
        {"cpu": 1500, "memory": 3 << 30, "pods": 1, GPU: 500},
        {GPU: 2000, "pods": 1},  # spread falls back to the GPU column
        {"cpu": 200_000, "memory": 1 << 50},  # fits nowhere, utilisation clipped
    ],
)
def test_one_row_hooks_equal_whole_table_hooks(request_) -> None:
    rng = np.random.default_rng(3)
    state = cluster(rng)
    pod = state.add_pod(PodSpec("ns", "p", dict(request_)), 0.0)
    filler = state.add_pod(PodSpec("ns", "f", {"cpu": 3000, GPU: 500, "pods": 1}), 0.0)
    for node in rng.integers(0, NODES, size=600).tolist():
        if state.table.fits(filler.request)[node]:
            state.table.add(node, filler.request, state.table.pick_gpus(node, filler.request))
    table = state.table
    for plugin in (Binpack(), Spread(), Binpack(weights={"cpu": 3, "memory": 1, GPU: 7})):
        full = plugin.score(table, pod, np.ones(NODES, dtype=bool))
        one = np.array([plugin.score_row(table, pod, row) for row in range(NODES)])
        assert one.tobytes() == full.tobytes()
    predicates = Predicates()
    whole = predicates.filter(table, pod)
    assert [predicates.filter_row(table, pod, row) for row in range(NODES)] == whole.tolist()
