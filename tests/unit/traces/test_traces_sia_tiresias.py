"""Sia workloads and the Tiresias 60-job sample on the real files."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.traces import load
from phalanx.traces.sia import (
    APPLICATION_LABEL,
    GPU_TIME_MODELS,
    SIA_SETS,
    SiaJob,
    sia_durations,
    sia_jobs,
    sia_path,
)

GPU = "nvidia.com/gpu"
#: README: num_replicas over all files of the set.
REPLICAS = {
    "philly": {4: 59, 6: 309, 8: 296, 10: 15, 12: 336, 14: 7, 16: 258},
    "saturn": {4: 217, 6: 335, 8: 304, 10: 193, 12: 342, 14: 23, 16: 186},
}


@pytest.mark.parametrize(("name", "files"), [("philly", 8), ("saturn", 10)])
def test_replica_counts_match_readme(traces: Path, name: str, files: int) -> None:
    replicas: Counter[int] = Counter()
    for k in range(1, files + 1):
        replicas.update(
            job.replicas for job in sia_jobs(sia_path(traces / "sia-workloads", name, k))
        )
    assert replicas == REPLICAS[name]


@pytest.mark.parametrize("name", list(SIA_SETS))
def test_every_set_loads(traces: Path, name: str) -> None:
    workload = load(f"sia:{name},workload=2", root=traces)
    jobs = {"newtrace": 960, "philly": 160, "saturn": 160}.get(name)
    rate = int(name.split("_")[1]) * 8 if name.startswith("rate_") else None
    assert sum(1 for _ in workload.of(GangSpec)) == (jobs or rate)


def test_workload_shape(traces: Path) -> None:
    workload = load("sia:saturn", root=traces)
    nodes = list(workload.of(NodeSpec))
    assert len(nodes) == 11 and sum(n.allocatable[GPU] for n in nodes) == 64_000
    gangs = {g.key: g for g in workload.of(GangSpec)}
    members = Counter(p.gang_key for p in workload.of(PodSpec))
    for key, gang in gangs.items():
        assert gang.min_member == members[key]
    pods = list(workload.of(PodSpec))
    assert all(p.requests == {"pods": 1, GPU: 1000} for p in pods)
    assert {p.labels[APPLICATION_LABEL] for p in pods} <= set(GPU_TIME_MODELS)
    first = next(workload.items_of(GangSpec))
    assert first.spec.name == "cifar10-0" and first.timing.submit_after == 401.0


def test_durations_follow_the_bucket_model_and_the_seed(traces: Path) -> None:
    jobs = sia_jobs(sia_path(traces / "sia-workloads", "newtrace", 1))
    durations = sia_durations(jobs, seed=0)
    assert durations == sia_durations(jobs, seed=0)
    assert durations != sia_durations(jobs, seed=1)
    for job, duration in zip(jobs, durations, strict=True):
        model = GPU_TIME_MODELS[job.application]
        assert model.low - job.replicas <= duration * job.replicas <= model.high + job.replicas
    # the median GPU-time of cifar10 jobs over five seeds is near exp(mu)
    cifar = sorted(
        d * j.replicas
        for seed in range(5)
        for j, d in zip(jobs, sia_durations(jobs, seed), strict=True)
        if j.application == "cifar10"
    )
    assert cifar[len(cifar) // 2] == pytest.approx(math.exp(GPU_TIME_MODELS["cifar10"].mu), rel=0.1)


def test_duration_model_by_hand() -> None:
    job = SiaJob("imagenet-0", 0.0, "imagenet", 8)
    (duration,) = sia_durations([job], seed=3)
    assert 360_000 / 8 <= duration <= 3_600_000 / 8


def test_tiresias_60_jobs(traces: Path) -> None:
    workload = load("tiresias", root=traces)
    gangs = list(workload.items_of(GangSpec))
    assert len(gangs) == 60
    nodes = list(workload.of(NodeSpec))
    assert len(nodes) == 4 and all(n.allocatable[GPU] == 4000 for n in nodes)
    gpus: Counter[str] = Counter()
    for pod in workload.of(PodSpec):
        gpus[pod.gang_key or ""] += pod.requests[GPU] // 1000
    assert Counter(gpus.values()) == {1: 30, 2: 10, 4: 10, 8: 10}
    specs = [g.spec for g in gangs if isinstance(g.spec, GangSpec)]
    assert all(g.min_member == 2 for g in specs if gpus[g.key] == 8)
    assert sum((g.duration or 0.0) * gpus[g.key] for g in specs) == 26_624
    assert gangs[1].timing.submit_after == 30 and gangs[-1].timing.submit_after == 1779


def test_tiresias_cluster_options(traces: Path) -> None:
    workload = load("tiresias:nodes=16,gpus_per_node=8", root=traces)
    assert len(list(workload.of(NodeSpec))) == 16
    assert all(g.min_member == 1 for g in workload.of(GangSpec))
