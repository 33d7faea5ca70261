"""NodeTable (phalanx.cluster.nodes): fits, capacity_for, copy, totals."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import NodeSpec
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import BASE_RESOURCES, ResourceIndex

GPU = "nvidia.com/gpu"
GiB = 2**30
FULL = {"cpu": 4000, "memory": 8 * GiB, "ephemeral-storage": 10 * GiB, "pods": 3, GPU: 2000}


def table_of(*allocatables: dict[str, int], unschedulable: tuple[int, ...] = ()) -> NodeTable:
    nodes = [
        NodeSpec(f"n{i}", alloc, unschedulable=i in unschedulable)
        for i, alloc in enumerate(allocatables)
    ]
    return NodeTable.build(nodes, ResourceIndex())


def test_columns_follow_the_base_resources() -> None:
    table = table_of(FULL)
    assert table.index.names[: len(BASE_RESOURCES)] == list(BASE_RESOURCES)
    assert table.allocatable.dtype == np.int64
    assert table.index.mapping(table.allocatable[0]) == FULL


@pytest.mark.parametrize("resource", sorted(FULL))
@pytest.mark.parametrize(("used", "extra", "fits"), [(0, 0, True), (1, 0, True), (1, 1, False)])
def test_fits_checks_every_resource(resource: str, used: int, extra: int, fits: bool) -> None:
    """A request of exactly what is free fits; one unit more on any resource does not."""
    table = table_of(FULL)
    index = table.index
    already = {resource: used * (FULL[resource] // 2)}
    table.add(0, index.vector(already))
    free = FULL[resource] - already[resource]
    request = index.vector({resource: free + extra})
    assert table.fits(request).tolist() == [fits]


@pytest.mark.parametrize(
    ("bound_pods", "fits"), [(0, True), (2, True), (3, False)], ids=["empty", "one-left", "full"]
)
def test_pods_count_limits_like_a_resource(bound_pods: int, fits: bool) -> None:
    table = table_of(FULL)
    pod = table.index.vector({"cpu": 1, "pods": 1})
    for _ in range(bound_pods):
        table.add(0, pod)
    assert table.fits(pod).tolist() == [fits]


def test_fits_ignores_resources_not_requested() -> None:
    table = table_of({"cpu": 1000, "pods": 1, GPU: 0}, {"cpu": 0, "pods": 1, GPU: 1000})
    assert table.fits(table.index.vector({"cpu": 1000})).tolist() == [True, False]
    assert table.fits(table.index.vector({GPU: 1000})).tolist() == [False, True]
    assert table.fits(table.index.vector({})).tolist() == [True, True]


def test_fits_future_counts_releasing_minus_pipelined() -> None:
    table = table_of({"cpu": 1000, "pods": 10}, {"cpu": 1000, "pods": 10})
    vec = table.index.vector
    table.add(0, vec({"cpu": 1000}))
    table.add(1, vec({"cpu": 1000}))
    table.releasing[0] += vec({"cpu": 1000})
    table.releasing[1] += vec({"cpu": 1000})
    table.pipelined[1] += vec({"cpu": 500})
    request = vec({"cpu": 600, "pods": 1})
    assert table.fits(request).tolist() == [False, False]
    assert table.fits(request, future=True).tolist() == [True, False]


@pytest.mark.parametrize(
    ("used_gpu", "shape", "mask", "expected"),
    [
        ([0, 0, 0], {GPU: 1000, "pods": 1}, [1, 1, 1], 12),  # 4 GPUs on each of 3 nodes
        ([2000, 0, 4000], {GPU: 1000, "pods": 1}, [1, 1, 1], 6),
        ([2000, 0, 4000], {GPU: 1000, "pods": 1}, [1, 0, 1], 2),  # only masked nodes count
        ([0, 0, 0], {GPU: 1000, "pods": 1}, [0, 0, 0], 0),
        ([0, 0, 0], {GPU: 3000, "pods": 1}, [1, 1, 1], 3),  # no splitting across nodes
        ([2500, 0, 0], {GPU: 500, "pods": 1}, [1, 0, 0], 3),  # fractional GPUs: 1.5 GPU left
        ([0, 0, 0], {"cpu": 3000, GPU: 1000, "pods": 1}, [1, 1, 1], 6),  # cpu is the limit
        ([0, 0, 0], {"cpu": 100, "pods": 1}, [1, 1, 1], 15),  # pods (5 per node) is the limit
        ([0, 0, 0], {}, [1, 1, 1], 0),  # a pod requesting nothing is not a shape
    ],
)
def test_capacity_for_counts_whole_pods(used_gpu, shape, mask, expected) -> None:
    alloc = {"cpu": 6000, "memory": GiB, "pods": 5, GPU: 4000}
    table = table_of(alloc, alloc, alloc)
    for node, used in enumerate(used_gpu):
        table.add(node, table.index.vector({GPU: used}))
    got = table.capacity_for(table.index.vector(shape), np.array(mask, dtype=bool))
    assert got == expected


def test_capacity_for_treats_overcommitted_nodes_as_empty_not_negative() -> None:
    table = table_of({"cpu": 1000, "pods": 5}, {"cpu": 1000, "pods": 5})
    table.add(0, table.index.vector({"cpu": 3000}))  # e.g. allocatable shrank under running pods
    request = table.index.vector({"cpu": 500, "pods": 1})
    assert table.capacity_for(request, np.array([True, True])) == 2


WRITERS = {
    "requested": lambda t, n, v: t.add(n, v),
    "releasing": lambda t, n, v: t.mark_releasing(n, v),
    "pipelined": lambda t, n, v: t.pipeline(n, v),
}


@pytest.mark.parametrize("matrix", sorted(WRITERS))
def test_copy_is_copy_on_write_and_independent(matrix: str) -> None:
    write = WRITERS[matrix]
    table = table_of(FULL, FULL)
    write(table, 0, table.index.vector({"cpu": 1000}))
    copy = table.copy()
    assert getattr(copy, matrix) is getattr(table, matrix), "nothing copied before a write"
    write(copy, 1, table.index.vector({GPU: 1000}))
    assert getattr(copy, matrix) is not getattr(table, matrix)
    write(table, 0, table.index.vector({"cpu": 1}))
    assert getattr(table, matrix)[1, table.index.position[GPU]] == 0
    assert getattr(copy, matrix)[0, table.index.position["cpu"]] == 1000
    assert getattr(table, matrix)[0, table.index.position["cpu"]] == 1001


def test_copy_shares_static_facts() -> None:
    table = table_of(FULL, FULL)
    copy = table.copy()
    assert copy.facts is table.facts
    assert copy.allocatable is table.allocatable
    assert copy.names == table.names == ["n0", "n1"]
    assert len(copy) == 2


def test_add_remove_and_free() -> None:
    table = table_of(FULL)
    pod = table.index.vector({"cpu": 1500, GPU: 1000, "pods": 1})
    table.add(0, pod)
    table.add(0, pod)
    assert table.index.mapping(table.free()[0])["cpu"] == 1000
    assert table.index.mapping(table.free()[0])["pods"] == 1
    table.remove(0, pod)
    table.remove(0, pod)
    assert not table.requested.any()
    assert np.array_equal(table.free(), table.allocatable)


@pytest.mark.parametrize(
    ("cordoned", "expected_gpu"), [((), 7000), ((1,), 5000), ((0, 1, 2), 0), ((0, 2), 2000)]
)
def test_total_allocatable_excludes_unschedulable_nodes(cordoned, expected_gpu) -> None:
    table = table_of(
        {"cpu": 1000, "pods": 10, GPU: 1000},
        {"cpu": 2000, "pods": 10, GPU: 2000},
        {"cpu": 4000, "pods": 10, GPU: 4000},
        unschedulable=cordoned,
    )
    total = table.index.mapping(table.total_allocatable())
    assert total.get(GPU, 0) == expected_gpu
    assert total.get("pods", 0) == 10 * (3 - len(cordoned))
    # Usage does not change it: it is about what the cluster could ever hold.
    table.add(0, table.index.vector({GPU: 1000}))
    assert table.index.mapping(table.total_allocatable()).get(GPU, 0) == expected_gpu


def random_table(nodes: int, seed: int) -> NodeTable:
    """``nodes`` 8-GPU nodes with random usage, written through the table's own writers."""
    rng = np.random.default_rng(seed)
    table = table_of(*[{"cpu": 16_000, "memory": 64 * GiB, "pods": 8, GPU: 8000}] * nodes)
    for node in range(nodes):
        for _ in range(int(rng.integers(0, 6))):
            gpus = int(rng.choice([0, 500, 1000, 2000]))
            request = table.index.vector({"cpu": 1000, "memory": GiB, "pods": 1, GPU: gpus})
            picked = table.pick_gpus(node, request) if gpus else ()
            if table.fits(request)[node] and (picked or not gpus):
                table.add(node, request, picked)
    return table


@pytest.mark.parametrize("nodes", [12, 300], ids=["small-table", "column-by-column"])
def test_fits_and_capacity_agree_with_a_count_per_node(nodes: int) -> None:
    """Both fit paths (one comparison for small tables, column by column above) and the
    capacity per node give what counting node by node gives."""
    table = random_table(nodes, seed=nodes)
    index = table.index
    mask = np.arange(nodes) % 3 != 0
    for gpus in (0, 500, 1000, 3000):
        request = index.vector({"cpu": 2000, "memory": 4 * GiB, "pods": 1, GPU: gpus})
        free = table.allocatable - table.requested
        expected_fit, expected_count = [], []
        for node in range(nodes):
            cols = request > 0
            by_resource = (free[node][cols] // request[cols]).min()
            if gpus:
                count, each = (gpus // 1000, 1000) if gpus >= 1000 else (1, gpus)
                devices = table.gpu_free[node]
                by_gpu = (
                    int((devices == 1000).sum()) // count
                    if each == 1000
                    else int((devices // each).sum())
                )
                by_resource = min(by_resource, by_gpu)
            expected_fit.append(bool(by_resource >= 1))
            expected_count.append(int(by_resource) if mask[node] else 0)
        assert table.fits(request).tolist() == expected_fit
        assert table.capacity_per_node(request, mask).tolist() == expected_count
        assert table.capacity_for(request, mask) == sum(expected_count)


def test_every_write_gives_a_new_generation_and_a_copy_keeps_it() -> None:
    table = table_of(FULL, FULL)
    request = table.index.vector({"cpu": 1000, GPU: 1000})
    seen = {table.generation}
    copy = table.copy()
    assert copy.generation == table.generation
    writes = [
        lambda: copy.add(0, request, (0,)),
        lambda: copy.remove(0, request, (0,)),
        lambda: copy.pipeline(1, request),
        lambda: copy.mark_releasing(1, request),
        lambda: copy.set_node(2, NodeSpec("n2", FULL)),
        lambda: copy.add_columns(1),
    ]
    for write in writes:
        write()
        assert copy.generation not in seen  # unique, even across tables
        seen.add(copy.generation)
    assert table.generation == min(seen)  # the source did not move
