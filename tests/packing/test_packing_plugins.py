"""The FGD paper's placement rules as Score plugins, on small hand-made clusters.

Every expected number is worked out by hand in the comments from the rules in each plugin's
docstring (and the artifact's integer truncations).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from phalanx.api.specs import NodeSpec, PodSpec
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodInfo
from phalanx.plugins.bestfit import BestFit
from phalanx.plugins.dotproduct import DotProduct
from phalanx.plugins.fgd import (
    FGD,
    GPU_MODEL_LABEL,
    Fragmentation,
    TargetWorkload,
    TaskType,
    target_workload,
    task_type,
    task_type_of,
)
from phalanx.plugins.gpuclustering import GpuClustering
from phalanx.plugins.gpupacking import GpuPacking
from phalanx.plugins.predicates import Predicates
from phalanx.plugins.randomscore import RandomScore

GPU = "nvidia.com/gpu"
GIB = 1 << 30


def cluster(gpus: list[int], *, cpu: int = 64000, models: list[str] | None = None) -> ClusterState:
    nodes = [
        NodeSpec(
            f"n{i}",
            {"cpu": cpu, "memory": 256 * GIB, "pods": 110, GPU: g * 1000},
            {GPU_MODEL_LABEL: models[i]} if models else {},
        )
        for i, g in enumerate(gpus)
    ]
    return ClusterState(nodes, ResourceIndex())


def use(
    state: ClusterState, node: int, *, cpu: int = 0, devices: dict[int, int] | None = None
) -> None:
    """Take ``cpu`` milli-CPU and ``devices`` {device: milli} on ``node`` (through the table's
    writers, as placements do)."""
    table = state.table
    if cpu:
        table.add(node, table.index.vector({"cpu": cpu}))
    for device, milli in (devices or {}).items():
        table.add(node, table.index.vector({GPU: milli}), (device,))


def pod(state: ClusterState, name: str, cpu: int, gpu: int = 0) -> PodInfo:
    requests = {"cpu": cpu, "memory": GIB, "pods": 1}
    if gpu:
        requests[GPU] = gpu
    return state.add_pod(PodSpec("t", name, requests), 0.0)


def everywhere(table: NodeTable) -> np.ndarray:
    return np.ones(len(table), dtype=bool)


# --- BestFit and DotProduct ------------------------------------------------------------


def test_bestfit_scores_the_waste_left_after_placement() -> None:
    state = cluster([2, 8])
    use(state, 1, cpu=32000, devices={0: 1000, 1: 1000, 2: 1000, 3: 1000, 4: 1000})
    p = pod(state, "p", 8000, 1000)
    scores = BestFit().score(state.table, p, everywhere(state.table))
    # n0: ½·56000/128000 + ½·1000/8000 = 0.21875 + 0.0625 = 0.28125 → ⌊71.875⌋ = 71
    # n1: ½·24000/128000 + ½·2000/8000 = 0.09375 + 0.125 = 0.21875 → ⌊78.125⌋ = 78
    assert scores.tolist() == [71.0, 78.0]


def test_dotproduct_prefers_the_least_aligned_free_vector() -> None:
    state = cluster([2, 8])
    p = pod(state, "p", 8000, 1000)
    scores = DotProduct().score(state.table, p, everywhere(state.table))
    # n0: (64000/128000)(8000/128000) + (2000/8000)(1000/8000) = 0.03125 + 0.03125 = 0.0625
    #     → ⌊100 · (1 − 0.03125)⌋ = 96
    # n1: 0.03125 + (8000/8000)(0.125) = 0.15625 → ⌊100 · (1 − 0.078125)⌋ = ⌊92.1875⌋ = 92
    assert scores.tolist() == [96.0, 92.0]


# --- GpuPacking ------------------------------------------------------------------------


def packing_cluster() -> ClusterState:
    state = cluster([4, 4, 4, 4])
    use(state, 1, devices={3: 1000})  # [1000, 1000, 1000, 0]
    use(state, 2, devices={0: 400})  # [600, 1000, 1000, 1000]
    use(state, 3, devices={0: 700})  # [300, 1000, 1000, 1000]
    return state


def test_gpupacking_tiers_for_a_share() -> None:
    state = packing_cluster()
    share = pod(state, "share", 1000, 500)
    scores = GpuPacking().score(state.table, share, everywhere(state.table))
    # n0 all idle: max(33 − 4, 4) = 29; n1 needs an idle GPU: max(50 − 1, 33) = 49;
    # n2 fits on the 600 device: 100 − ⌊⌊600·100/1000⌋ / 10⌋ = 100 − 6 = 94;
    # n3: the 300 device is too small, an idle one is needed: 49
    assert scores.tolist() == [29.0, 49.0, 94.0, 49.0]


def test_gpupacking_tiers_for_whole_gpus_and_cpu_tasks() -> None:
    state = packing_cluster()
    two = pod(state, "two", 1000, 2000)
    assert GpuPacking().score(state.table, two, everywhere(state.table)).tolist() == [
        29.0,  # all idle
        48.0,  # max(50 − 2, 33)
        48.0,
        48.0,
    ]
    cpu_only = pod(state, "cpu", 1000)
    assert GpuPacking().score(state.table, cpu_only, everywhere(state.table)).tolist() == [0.0] * 4


# --- GpuClustering ---------------------------------------------------------------------


def test_gpuclustering_tiers_by_the_classes_on_each_node() -> None:
    state = cluster([8, 8, 8, 8])
    plugin = GpuClustering()
    table = state.table
    placed = [
        (1, pod(state, "a", 1000, 500), {0: 500}),
        (2, pod(state, "b", 1000, 500), {0: 500}),
        (2, pod(state, "c", 1000, 1000), {1: 1000}),
        (3, pod(state, "d", 1000, 2000), {0: 1000, 1: 1000}),
    ]
    for node, p, taken in placed:
        use(state, node, devices=taken)
        plugin.observe(table, p, node)
    share = pod(state, "share", 1000, 300)
    # fill = ⌊25 · used / 8000⌋: n0 0, n1 ⌊12500/8000⌋ = 1, n2 ⌊37500/8000⌋ = 4, n3 6
    # n0 empty: 25 + 0; n1 only shares: 75 + 1; n2 share among others: 50 + 4; n3 other: 0 + 6
    assert plugin.score(table, share, everywhere(table)).tolist() == [25.0, 76.0, 54.0, 6.0]
    one = pod(state, "one", 1000, 1000)
    assert plugin.score(table, one, everywhere(table)).tolist() == [25.0, 1.0, 54.0, 6.0]
    assert plugin.score(table, pod(state, "cpu", 1000), everywhere(table)).tolist() == [0.0] * 4


# --- Random ----------------------------------------------------------------------------


def test_random_gives_one_feasible_node_100_and_is_reproducible() -> None:
    state = cluster([2, 2, 2, 2, 2])
    p = pod(state, "p", 1000, 500)
    feasible = np.array([True, False, True, True, False])
    draws = []
    for seed in (1, 1, 2):
        scores = RandomScore(seed).score(state.table, p, feasible)
        assert sorted(scores.tolist()) == [0.0] * 4 + [100.0]
        assert feasible[int(np.argmax(scores))]
        draws.append(int(np.argmax(scores)))
    assert draws[0] == draws[1]
    chosen = {RandomScore(seed).choose_gpus(state.table, p, 0) for seed in range(40)}
    assert chosen == {(0,), (1,)}  # a share may go to any device with room
    use(state, 0, devices={1: 800})  # device 1 has 200 left: too small for 500
    assert {RandomScore(s).choose_gpus(state.table, p, 0) for s in range(20)} == {(0,)}
    whole = pod(state, "w", 1000, 1000)
    assert RandomScore(3).choose_gpus(state.table, whole, 2) == (0,)  # first idle device


# --- FGD -------------------------------------------------------------------------------

# Target workload M: a CPU task (weight 2), a half-GPU share (1) and one whole T4 GPU (1).
CPU_TASK = TaskType(4000, 0, 0)
HALF = TaskType(4000, 500, 1)
ONE_T4 = TaskType(8000, 1000, 1, ("T4",))
WORKLOAD = TargetWorkload((CPU_TASK, HALF, ONE_T4), (2, 1, 1))


def fgd_cluster() -> ClusterState:
    """A: T4 [1000, 300] with 56 CPUs free; B: T4 [1000, 1000] with 2 CPUs free;
    C: P100 [1000, 1000] with 64 CPUs free."""
    state = cluster([2, 2, 2], models=["T4", "T4", "P100"])
    use(state, 0, cpu=8000, devices={1: 700})
    use(state, 1, cpu=62000)
    return state


def test_fragmentation_per_node_by_hand() -> None:
    state = fgd_cluster()
    frag = Fragmentation(WORKLOAD)
    # A: CPU task 1300 (all idle GPU); half: a device ≥ 500 exists → only the 300 device: 300;
    #    one T4: a free device exists → 300. F = (2·1300 + 300 + 300) / 4 = 800
    # B: CPU task 2000; half lacks CPU (2000 < 4000) → 2000; one T4 lacks CPU → 2000. F = 2000
    # C: CPU task 2000; half fits everywhere → 0; one T4: wrong model → 2000.
    #    F = (4000 + 0 + 2000) / 4 = 1500
    assert frag.node_fragmentation(state.table).tolist() == [800.0, 2000.0, 1500.0]
    assert frag.measure(state.table) == (4300.0, 5300.0)
    # the measure follows the table: fill C's devices 0 with 500 → C: CPU task 1500;
    # half: both devices ≥ 500 → 0; one T4: wrong model → 1500. F = (3000 + 1500) / 4 = 1125
    use(state, 2, devices={0: 500})
    assert frag.node_fragmentation(state.table).tolist() == [800.0, 2000.0, 1125.0]


def test_incremental_fragmentation_equals_a_fresh_measure() -> None:
    """Kept up to date through writes (rows recomputed, node states seen before reused, no
    work while the table's generation holds), the measure equals one computed from scratch."""
    state = cluster([2, 2, 2, 4], models=["T4", "T4", "P100", "T4"])
    table, kept = state.table, Fragmentation(WORKLOAD)
    rng = np.random.default_rng(3)
    taken: list[tuple[int, np.ndarray, tuple[int, ...]]] = []
    for step in range(200):
        if taken and rng.random() < 0.45:
            node, request, gpus = taken.pop(int(rng.integers(len(taken))))
            table.remove(node, request, gpus)
        else:
            node = int(rng.integers(len(table)))
            milli = int(rng.choice([0, 300, 500, 1000]))
            request = table.index.vector({"cpu": int(rng.choice([1000, 8000])), GPU: milli})
            gpus = table.pick_gpus(node, request) if milli else ()
            if table.fits(request)[node] and (gpus or not milli):
                table.add(node, request, gpus)
                taken.append((node, request, gpus))
        if step % 5 == 4:  # some writes are measured only after the next ones
            continue
        fresh = Fragmentation(WORKLOAD)
        assert kept.measure(table) == fresh.measure(table)
        assert kept.node_fragmentation(table).tolist() == fresh.node_fragmentation(table).tolist()


def test_fgd_scores_the_drop_in_fragmentation() -> None:
    state = fgd_cluster()
    plugin = FGD(WORKLOAD)
    share = pod(state, "share", 4000, 500)
    feasible = Predicates().filter(state.table, share)
    assert feasible.tolist() == [True, False, True]  # B lacks CPU
    scores = plugin.score(state.table, share, feasible)
    # A: on device 0 → [500, 300]: CPU task 800, half 300, one T4 800 → F' = 2700/4 = 675;
    #    Δ = 800 − 675 = 125 → ⌊100·sigmoid(0.125)⌋ = ⌊53.12⌋ = 53
    # C: either device → [500, 1000]: F' = 1125 (above); Δ = 375 → ⌊59.27⌋ = 59
    assert scores[[0, 2]].tolist() == [53.0, 59.0]
    assert math.floor(100 / (1 + math.exp(-0.375))) == 59
    assert plugin.choose_gpus(state.table, share, 2) == (0,)  # equal devices: the lowest index


def test_fgd_chooses_the_device_that_fragments_least() -> None:
    workload = TargetWorkload((HALF, TaskType(8000, 1000, 1)), (1, 1))
    state = cluster([4], models=["T4"])
    use(state, 0, devices={1: 400, 3: 500})  # [1000, 600, 1000, 500]
    share = pod(state, "share", 4000, 500)
    plugin = FGD(workload)
    # before: half fits (frag 0), one GPU fits → the 600 and 500 devices: 1100. F = 550
    # device 0 or 2 → [500, 600, 1000, 500]: F' = (0 + 1600)/2 = 800, Δ −250 → 43
    # device 1 → [1000, 100, 1000, 500]: F' = (100 + 600)/2 = 350, Δ 200 → 54
    # device 3 → [1000, 600, 1000, 0]: F' = (0 + 600)/2 = 300, Δ 250 → 56
    assert plugin.score(state.table, share, everywhere(state.table)).tolist() == [56.0]
    assert plugin.choose_gpus(state.table, share, 0) == (3,)


def test_fgd_whole_gpu_and_cpu_tasks() -> None:
    state = fgd_cluster()
    plugin = FGD(WORKLOAD)
    one = pod(state, "one", 8000, 1000)
    # A (T4, [1000, 300]) → [0, 300], 48 CPUs: every type frag 300 → F' = 300, Δ 500 → 62
    # C (P100) → [0, 1000]: CPU task 1000; half 0; one T4 wrong model 1000 → F' = 750,
    #    Δ 750 → ⌊100·sigmoid(0.75)⌋ = ⌊67.92⌋ = 67
    scores = plugin.score(state.table, one, np.array([True, False, True]))
    assert scores[[0, 2]].tolist() == [62.0, 67.0]
    assert plugin.choose_gpus(state.table, one, 0) == (0,)
    cpu_task = pod(state, "cpu", 60000)
    # on C it leaves 4 CPUs: the half share (4 CPUs) still fits, one T4 never did, the CPU
    # task counts every idle GPU either way → F' = 1500 = F, Δ 0 → ⌊100·sigmoid(0)⌋ = 50
    assert plugin.score(state.table, cpu_task, np.array([False, False, True]))[2] == 50.0
    assert plugin.choose_gpus(state.table, cpu_task, 2) == ()


def test_target_workload_keeps_the_popular_types() -> None:
    a, b, c, d = (TaskType(1000 * i, 0, 0) for i in (1, 2, 3, 4))
    tasks = [a] * 50 + [b] * 30 + [c] * 15 + [d] * 5
    assert target_workload(tasks).types == (a, b, c)  # 95 % of 100 reached with c
    assert target_workload(tasks, threshold=96).types == (a, b, c, d)
    # equal counts: the larger type ranks first
    assert target_workload([a, b, b, a]).types[0] == b
    assert target_workload([a] * 3, threshold=95).counts == (3,)


def test_task_types_of_requests_and_pods() -> None:
    assert task_type(6000, 460) == TaskType(6000, 460, 1)
    assert task_type(6000, 4000, ("G2",)) == TaskType(6000, 1000, 4, ("G2",))
    assert task_type(0, 0, ("G2",)) == TaskType(100, 0, 0)  # kube-scheduler's default CPU
    from phalanx.packing.data import OpenbPod

    spec = OpenbPod("p", 8000, 1024, 1, 1000, "V100M32|V100M16").spec()
    assert task_type_of(spec) == TaskType(8000, 1000, 1, ("V100M16", "V100M32"))


@pytest.mark.parametrize("gpu", [0, 300, 1000, 2000])
def test_fgd_score_is_in_range_on_an_empty_cluster(gpu: int) -> None:
    state = cluster([1, 2, 4, 8], models=["T4", "T4", "G2", "G2"])
    scores = FGD(WORKLOAD).score(state.table, pod(state, "p", 1000, gpu), everywhere(state.table))
    assert ((scores >= 0) & (scores <= 100)).all()
