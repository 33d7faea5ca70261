"""The synthetic generator: determinism, calibration to Philly/openb, and its options."""

from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.traces import load
from phalanx.traces.synthetic import (
    DURATION_MAX,
    DURATION_MU,
    DURATION_SIGMA,
    OPENB_SHARE_MILLI,
    PHILLY_GPU_COUNTS,
    arrival_rate,
    mean_duration,
    mean_gpus,
    synthetic_workload,
)

GPU = "nvidia.com/gpu"


def job_gpus(workload: Workload) -> list[float]:
    """GPUs per job, in job order (a sharing pod counts its share)."""
    gpus: dict[str, float] = {}
    for pod in workload.of(PodSpec):
        key = pod.gang_key or pod.key
        gpus[key] = gpus.get(key, 0.0) + pod.requests[GPU] / 1000
    return list(gpus.values())


def offered_load(workload: Workload) -> float:
    capacity = sum(n.allocatable[GPU] for n in workload.of(NodeSpec)) / 1000
    arrivals = [i.timing.submit_after for i in workload.items if not isinstance(i.spec, NodeSpec)]
    work = sum(p.requests[GPU] / 1000 * (p.duration or 0.0) for p in workload.of(PodSpec))
    return work / (capacity * max(arrivals))


def test_same_seed_same_workload() -> None:
    assert synthetic_workload(jobs=300, seed=7) == synthetic_workload(jobs=300, seed=7)
    assert load("synthetic:jobs=300,seed=7") == synthetic_workload(jobs=300, seed=7)
    assert synthetic_workload(jobs=300, seed=7) != synthetic_workload(jobs=300, seed=8)


def test_defaults() -> None:
    workload = load("synthetic")
    assert sum(1 for _ in workload.of(GangSpec)) == 1000
    nodes = list(workload.of(NodeSpec))
    assert len(nodes) == 16 and all(n.allocatable[GPU] == 8000 for n in nodes)
    assert nodes[0].allocatable["cpu"] == 48_000 and nodes[0].allocatable["memory"] == 512 * 2**30
    assert all(p.gang is not None for p in workload.of(PodSpec))  # share=0: no sharing


def test_mean_gang_size_matches_philly() -> None:
    philly_mean = sum(g * n for g, n in PHILLY_GPU_COUNTS.items()) / sum(PHILLY_GPU_COUNTS.values())
    assert philly_mean == pytest.approx(1.3038, abs=1e-4)
    assert mean_gpus(128) == pytest.approx(philly_mean)
    sizes = job_gpus(synthetic_workload(jobs=20_000, seed=1))
    assert np.mean(sizes) == pytest.approx(philly_mean, abs=0.04)
    assert Counter(sizes)[1.0] / len(sizes) == pytest.approx(76_627 / 82_247, abs=0.01)


def test_durations_are_the_fitted_lognormal() -> None:
    workload = synthetic_workload(jobs=20_000, seed=2)
    durations = np.array([g.duration for g in workload.of(GangSpec)], dtype=np.float64)
    assert durations.min() >= 1 and durations.max() <= DURATION_MAX
    assert np.all(durations == np.rint(durations))
    logs = np.log(durations)
    assert logs.mean() == pytest.approx(DURATION_MU, abs=0.05)
    assert logs.std() == pytest.approx(DURATION_SIGMA, abs=0.05)
    # the exact clipped mean is a little below the unclipped exp(mu + sigma^2 / 2)
    assert 0.9 * math.exp(DURATION_MU + DURATION_SIGMA**2 / 2) < mean_duration()
    assert mean_duration() < math.exp(DURATION_MU + DURATION_SIGMA**2 / 2)


def test_offered_load_is_calibrated() -> None:
    loads = [offered_load(synthetic_workload(jobs=20_000, seed=s)) for s in range(5)]
    assert np.mean(loads) == pytest.approx(0.9, rel=0.1)
    assert all(0.6 < value < 1.2 for value in loads)
    half = [offered_load(synthetic_workload(jobs=20_000, seed=s, load=0.45)) for s in range(5)]
    assert np.mean(half) == pytest.approx(0.45, rel=0.1)


def test_arrivals_are_poisson_at_the_computed_rate() -> None:
    workload = synthetic_workload(jobs=20_000, seed=3, nodes=8, gpus_per_node=4, load=0.5)
    arrivals = np.array([i.timing.submit_after for i in workload.items_of(GangSpec)])
    assert arrivals[0] == 0 and np.all(np.diff(arrivals) >= 0)
    gaps = np.diff(arrivals)
    assert gaps.mean() == pytest.approx(1 / arrival_rate(0.5, 32), rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential


def test_small_clusters_leave_out_gangs_that_cannot_fit() -> None:
    workload = synthetic_workload(jobs=20_000, seed=4, nodes=2, gpus_per_node=4)
    sizes = job_gpus(workload)
    assert max(sizes) <= 8
    assert {1.0, 2.0, 4.0, 8.0} == set(sizes)
    for gang in workload.of(GangSpec):
        assert gang.min_member in (1, 2)


def test_sharing_uses_openb_shares() -> None:
    workload = synthetic_workload(jobs=5000, seed=5, share=0.44)
    lone = [p for p in workload.of(PodSpec) if p.gang is None]
    ones = sum(1 for g in job_gpus(workload) if g <= 1)
    assert len(lone) / ones == pytest.approx(0.44, abs=0.03)
    assert {p.requests[GPU] for p in lone} <= set(OPENB_SHARE_MILLI)
    assert all(p.requests["cpu"] == 6 * p.requests[GPU] for p in lone)
    assert offered_load(workload) == pytest.approx(0.9, rel=0.35)


def test_calibration_table_matches_philly(traces: Path) -> None:
    with (traces / "philly/philly.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert Counter(int(r["num_gpus"]) for r in rows) == PHILLY_GPU_COUNTS
    logs = np.log([float(r["duration"]) for r in rows])
    assert (logs.mean(), logs.std()) == pytest.approx((DURATION_MU, DURATION_SIGMA), abs=1e-4)
    assert max(float(r["duration"]) for r in rows) == DURATION_MAX


def test_share_table_matches_openb(traces: Path) -> None:
    with (traces / "openb/csv/openb_pod_list_default.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    shares = Counter(
        int(r["gpu_milli"]) for r in rows if r["num_gpu"] == "1" and int(r["gpu_milli"]) < 1000
    )
    assert shares == OPENB_SHARE_MILLI
