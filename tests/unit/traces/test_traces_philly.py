"""Philly: job counts, gang decomposition, VC clusters and timing on the real file."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.traces import load
from phalanx.traces._gangs import GANG_API, split_gpus
from phalanx.traces.philly import VC_LABEL, philly_jobs, philly_vc_nodes

GPU = "nvidia.com/gpu"
VC_NODES = {
    "6214e9": 64,
    "b436b2": 64,
    "ee9e8c": 64,
    "7f04ca": 32,
    "6c71a0": 32,
    "0e4a51": 32,
    "11cb48": 16,
    "e13805": 16,
    "2869ce": 16,
    "ed69ec": 8,
    "103959": 8,
}


def gang_gpus(workload: Workload) -> dict[str, int]:
    gpus: Counter[str] = Counter()
    for pod in workload.of(PodSpec):
        assert pod.gang_key is not None
        gpus[pod.gang_key] += pod.requests[GPU] // 1000
    return dict(gpus)


@pytest.mark.parametrize(
    ("gpus", "pods"),
    [(1, [1]), (8, [8]), (12, [8, 4]), (20, [8, 8, 4]), (24, [8, 8, 8]), (128, [8] * 16)],
)
def test_split_gpus(gpus: int, pods: list[int]) -> None:
    assert split_gpus(gpus, 8) == pods


def test_all_jobs_load(traces: Path) -> None:
    """Load speed is measured by benchmarks/replay.py, not asserted here."""
    workload = load("philly", root=traces)
    assert sum(1 for _ in workload.of(GangSpec)) == 82_247


def test_gpu_count_distribution(philly_all: Workload) -> None:
    sizes = Counter(gang_gpus(philly_all).values())
    assert sizes == {
        1: 76_627,
        2: 1818,
        4: 1870,
        8: 1643,
        12: 7,
        16: 199,
        24: 7,
        32: 67,
        64: 6,
        128: 3,
    }


def test_gangs_are_all_required_pods_on_8_gpu_nodes(philly_all: Workload) -> None:
    pods = list(philly_all.of(PodSpec))
    members: dict[str, list[int]] = {}
    for pod in pods:
        assert pod.gang_key is not None
        members.setdefault(pod.gang_key, []).append(pod.requests[GPU] // 1000)
    for gang in philly_all.of(GangSpec):
        assert gang.api == GANG_API
        assert gang.min_member == len(members[gang.key])
        assert gang.duration is not None and gang.duration >= 1
    # ceil(G / 8) pods per job: 1..8 GPUs → 1, 12/16 → 2, 24 → 3, 32 → 4, 64 → 8, 128 → 16
    assert len(pods) == 81_958 + 2 * 7 + 2 * 199 + 3 * 7 + 4 * 67 + 8 * 6 + 16 * 3
    shapes = {tuple(sorted(gpus, reverse=True)) for gpus in members.values() if sum(gpus) > 8}
    assert shapes == {(8, 4), (8, 8), (8, 8, 8), (8,) * 4, (8,) * 8, (8,) * 16}
    assert all(pod.requests["pods"] == 1 for pod in pods)
    assert all(pod.requests["cpu"] == 6 * pod.requests[GPU] for pod in pods)
    assert all(pod.requests["memory"] == pod.requests[GPU] // 1000 * 64 * 2**30 for pod in pods)


def test_whole_file_runs_on_all_vc_nodes(philly_all: Workload) -> None:
    nodes = list(philly_all.of(NodeSpec))
    assert len(nodes) == 352
    assert all(n.allocatable[GPU] == 8000 for n in nodes)
    assert Counter(n.labels[VC_LABEL] for n in nodes) == VC_NODES
    assert len({n.name for n in nodes}) == 352
    assert philly_all.items[:352] == list(philly_all.items_of(NodeSpec))


def test_vc_node_table(traces: Path) -> None:
    assert philly_vc_nodes(traces / "philly/philly_vc_nodes_heliosartifact.csv") == VC_NODES


def test_timing_is_sorted_from_zero_and_gangs_arrive_with_pods(philly_all: Workload) -> None:
    arrivals = [i.timing.submit_after for i in philly_all.items_of(GangSpec)]
    assert arrivals[0] == 0
    assert arrivals == sorted(arrivals)
    span = arrivals[-1]
    first, last = datetime(2017, 9, 4, 10, 30, 41), datetime(2017, 12, 22, 8, 2, 11)
    assert span == (last - first).total_seconds()
    gang_timing = {
        i.spec.key: i.timing for i in philly_all.items_of(GangSpec) if isinstance(i.spec, GangSpec)
    }
    for item in philly_all.items_of(PodSpec):
        pod = item.spec
        assert isinstance(pod, PodSpec) and pod.gang_key is not None
        assert item.timing == gang_timing[pod.gang_key]


def test_namespaces_are_vcs(philly_all: Workload) -> None:
    jobs = Counter(g.namespace for g in philly_all.of(GangSpec))
    assert jobs["6214e9"] == 41_226 and jobs["11cb48"] == 16_091 and len(jobs) == 15


def test_vc_option_uses_that_vcs_nodes(traces: Path) -> None:
    workload = load("philly:vc=2869ce", root=traces)
    assert len(list(workload.of(NodeSpec))) == 16
    gangs = list(workload.of(GangSpec))
    assert len(gangs) == 422 and {g.namespace for g in gangs} == {"2869ce"}


def test_nodes_jobs_and_scale_options(traces: Path) -> None:
    base = load("philly:vc=6214e9,jobs=50", root=traces)
    scaled = load("philly:vc=6214e9,jobs=50,nodes=4,scale=0.25", root=traces)
    assert len(list(scaled.of(NodeSpec))) == 4
    base_times = [i.timing.submit_after for i in base.items_of(GangSpec)]
    scaled_times = [i.timing.submit_after for i in scaled.items_of(GangSpec)]
    assert len(base_times) == 50
    assert scaled_times == pytest.approx([t * 0.25 for t in base_times])


def test_jobs_wider_than_the_cluster_are_dropped(traces: Path) -> None:
    workload = load("philly:vc=ee9e8c,nodes=8", root=traces)
    assert max(gang_gpus(workload).values()) <= 64
    assert sum(1 for _ in workload.of(GangSpec)) == 1511 - 3  # the three 128-GPU jobs


def test_jobs_are_sorted_by_submit_time(traces: Path) -> None:
    jobs = philly_jobs(traces / "philly/philly.csv")
    assert len(jobs) == 82_247
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    assert sum(j.duration * j.gpus for j in jobs) / 3600 == pytest.approx(978_078, abs=1)
