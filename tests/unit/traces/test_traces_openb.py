"""openb on the real files: node and pod counts against the README's statistics."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest

from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec, PodSpec, Requirement
from phalanx.api.workload import Workload
from phalanx.traces import load
from phalanx.traces.openb import (
    GPU_MODEL_LABEL,
    OPENB_VARIANTS,
    openb_nodes,
    openb_pods,
    pod_list_path,
    read_openb_pods,
)

GPU = "nvidia.com/gpu"


def gpus_of(pod: PodSpec) -> int:
    return pod.requests.get(GPU, 0)


def test_yaml_nodes_match_readme(traces: Path) -> None:
    nodes = openb_nodes(traces / "openb/node_yaml/openb_node_list_gpu_node.yaml")
    assert len(nodes) == 1213
    assert sum(n.allocatable[GPU] for n in nodes) == 6212 * 1000
    assert sum(n.allocatable["cpu"] for n in nodes) == 107_018 * 1000
    assert sum(n.allocatable["memory"] for n in nodes) == 492_020 * 2**30
    assert Counter(n.allocatable[GPU] // 1000 for n in nodes) == {8: 617, 2: 518, 4: 54, 1: 24}
    models = Counter(n.labels[GPU_MODEL_LABEL] for n in nodes)
    assert models == {
        "G2": 549,
        "T4": 404,
        "P100": 134,
        "V100M16": 55,
        "G3": 39,
        "V100M32": 30,
        "A10": 2,
    }
    assert all(not any(k.startswith("alibabacloud.com/gpu-") for k in n.allocatable) for n in nodes)
    assert nodes[0].allocatable["pods"] == 1001


def test_csv_gpu_nodes_equal_the_yaml(traces: Path) -> None:
    yaml_nodes = openb_nodes(traces / "openb/node_yaml/openb_node_list_gpu_node.yaml")
    csv_nodes = openb_nodes(traces / "openb/csv/openb_node_list_gpu_node.csv")
    assert [(n.name, n.allocatable) for n in csv_nodes] == [
        (n.name, n.allocatable) for n in yaml_nodes
    ]
    assert [n.labels[GPU_MODEL_LABEL] for n in csv_nodes] == [
        n.labels[GPU_MODEL_LABEL] for n in yaml_nodes
    ]


def test_all_nodes_include_cpu_only_nodes(traces: Path) -> None:
    nodes = openb_nodes(traces / "openb/csv/openb_node_list_all_node.csv")
    assert len(nodes) == 1523
    cpu_only = [n for n in nodes if GPU not in n.allocatable]
    assert len(cpu_only) == 310
    assert all(GPU_MODEL_LABEL not in n.labels for n in cpu_only)
    assert sum(n.allocatable["cpu"] for n in nodes) == 125_514 * 1000


def test_default_pods_match_readme(traces: Path) -> None:
    pods = openb_pods(traces / "openb/csv/openb_pod_list_default.csv")
    assert len(pods) == 8152
    assert all(p.gang is None and p.requests["pods"] == 1 for p in pods)
    sharing = [p for p in pods if 0 < gpus_of(p) < 1000]
    assert len(sharing) == 3078
    assert Counter(gpus_of(p) for p in sharing).most_common(4) == [
        (810, 1078),
        (470, 750),
        (320, 328),
        (650, 253),
    ]
    whole = Counter(gpus_of(p) // 1000 for p in pods if gpus_of(p) >= 1000)
    assert whole == {1: 6989 - 3078, 2: 16, 4: 15, 8: 44}
    assert sum(1 for p in pods if GPU not in p.requests) == 1088
    assert sum(gpus_of(p) for p in pods) == 6_086_800  # "6087 GPUs"
    assert sum(p.requests["cpu"] for p in pods) // 1000 == 85_436
    durations = [p.duration for p in pods]
    assert all(d is not None for d in durations)
    assert statistics.median(d for d in durations if d is not None) == 540


@pytest.mark.parametrize(
    ("variant", "constrained"),
    [("gpuspec05", 369), ("gpuspec10", 732), ("gpuspec20", 1444), ("gpuspec25", 1759)],
)
def test_gpuspec_variants_carry_node_affinity(traces: Path, variant: str, constrained: int) -> None:
    pods = openb_pods(pod_list_path(traces / "openb", variant))
    with_affinity = [p for p in pods if p.placement.affinity_terms]
    assert len(with_affinity) == constrained
    for pod in with_affinity:
        (term,) = pod.placement.affinity_terms
        (requirement,) = term.expressions
        assert requirement.key == GPU_MODEL_LABEL and requirement.operator == "In"


def test_gpu_spec_becomes_a_shared_deduplicated_placement(traces: Path) -> None:
    pods = openb_pods(pod_list_path(traces / "openb", "gpuspec33"))
    with_affinity = [p for p in pods if p.placement.affinity_terms]
    assert len(with_affinity) == 2388
    requirements = {p.placement.affinity_terms[0].expressions[0] for p in with_affinity}
    assert Requirement(GPU_MODEL_LABEL, "In", ("V100M16", "V100M32")) in requirements
    assert all(len(set(r.values)) == len(r.values) for r in requirements)
    placements = {id(p.placement) for p in with_affinity}
    assert len(placements) == len(requirements) + 1  # "V100M16|V100M32|V100M32" dedupes


@pytest.mark.parametrize(
    ("variant", "sharing", "gpu_milli"),
    [
        ("gpushare20", 2324, 6_531_500),
        ("gpushare40", 4001, 5_641_250),
        ("gpushare100", 7064, 3_952_670),
    ],
)
def test_gpushare_variants(traces: Path, variant: str, sharing: int, gpu_milli: int) -> None:
    pods = openb_pods(pod_list_path(traces / "openb", variant))
    assert len(pods) == 8152
    assert sum(1 for p in pods if 0 < gpus_of(p) < 1000) == sharing
    assert sum(gpus_of(p) for p in pods) == gpu_milli


@pytest.mark.parametrize(
    ("variant", "count", "multi"),
    [("multigpu20", 8324, (54, 52, 141)), ("multigpu50", 9061, (222, 206, 556))],
)
def test_multigpu_variants_have_five_columns(
    traces: Path, variant: str, count: int, multi: tuple[int, int, int]
) -> None:
    pods = read_openb_pods(pod_list_path(traces / "openb", variant))
    assert len(pods) == count
    sizes = Counter(gpus_of(p.spec) // 1000 for p in pods if gpus_of(p.spec) >= 2000)
    assert (sizes[2], sizes[4], sizes[8]) == multi
    assert all(p.created is None and p.spec.duration is None for p in pods)


@pytest.mark.parametrize("variant", [v for v in OPENB_VARIANTS if v.startswith("cpu")])
def test_cpu_variants_keep_the_gpu_pods(traces: Path, variant: str) -> None:
    pods = openb_pods(pod_list_path(traces / "openb", variant))
    assert sum(1 for p in pods if GPU in p.requests) == 7064
    assert sum(gpus_of(p) for p in pods) == 6_086_800


def test_default_workload_is_arrival_only(openb_default: Workload) -> None:
    nodes = list(openb_default.items_of(NodeSpec))
    pods = list(openb_default.items_of(PodSpec))
    assert (len(nodes), len(pods)) == (1213, 8152)
    assert openb_default.items[: len(nodes)] == nodes
    assert all(item.timing.submit_after == 0 for item in pods)
    assert all(isinstance(i.spec, PodSpec) and i.spec.duration is None for i in pods)
    assert pods[0].source.endswith("openb_pod_list_default.csv")


def test_timed_workload_replays_creation_and_lifetime(traces: Path) -> None:
    workload = load("openb:gpuspec10,timed=1,nodes=gpu,pods=100", root=traces)
    pods = list(workload.items_of(PodSpec))
    assert len(pods) == 100
    first, second = pods[0], pods[1]
    assert isinstance(first.spec, PodSpec) and isinstance(second.spec, PodSpec)
    assert first.timing.submit_after == 0 and first.spec.duration == 12_537_496
    assert second.timing.submit_after == 427_061
    assert second.spec.duration == 12_902_960 - 427_061
    assert len(list(workload.of(NodeSpec))) == 1213


def test_timed_multigpu_is_an_error(traces: Path) -> None:
    with pytest.raises(InputError) as info:
        load("openb:multigpu30,timed=1", root=traces)
    message = str(info.value)
    assert "openb_pod_list_multigpu30.csv" in message and "creation_time" in message


def test_all_nodes_option(traces: Path) -> None:
    workload = load("openb:cpu050,nodes=all,pods=10", root=traces)
    assert len(list(workload.of(NodeSpec))) == 1523
