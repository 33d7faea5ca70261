"""The comparison metrics, checked against numbers computed by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phalanx.compare.summary import COLUMNS, METRICS, percentile, summarize, time_average
from phalanx.k8s import load_files
from phalanx.sim.simulator import SimOptions, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"


def gang(
    name: str, submit: float, start: float | None = None, finish: float | None = None
) -> dict[str, Any]:
    state = "completed" if finish is not None else "running" if start is not None else "waiting"
    return {
        "name": name,
        "namespace": "default",
        "kind": "PodGroup",
        "min_member": 1,
        "submit": submit,
        "start": start,
        "finish": finish,
        "state": state,
        "queue_delay": None if start is None else start - submit,
        "completion_time": None if finish is None else finish - submit,
        "reason": "",
        "gpus": 1.0,
        "timed_out": False,
    }


def result(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "policy": "phalanx",
        "seed": 0,
        "end": 100.0,
        "gangs": [
            gang("a", 0, 10, 50),  # queue 10, JCT 50
            gang("b", 5, 20, 100),  # queue 15, JCT 95
            gang("c", 10, 30),  # running: queue 20
            gang("d", 40),  # waiting
            gang("e", 20, 60, 80),  # queue 40, JCT 60
        ],
        "completed": 3,
        "running": 1,
        "waiting": 1,
        "deadlocked": 0,
        "idle_gpu_hours": 0.25,
        "idle_cost": 0.875,
        "gpu_hour_price": 3.5,
        "gpu_capacity": 4.0,
        # 0 on [0,10), 2 on [10,20), 4 on [20,50), 2 on [50,100): area 240 → 2.4 GPUs = 60 %
        "gpu_allocation": [[0.0, 0.0], [10.0, 2.0], [20.0, 4.0], [50.0, 2.0], [100.0, 0.0]],
        # 0 on [0,10), 2 on [10,30), 3 on [30,50), 1 on [50,100): area 150 → 1.5 GPUs = 37.5 %
        "gpu_running": [[0.0, 0.0], [10.0, 2.0], [30.0, 3.0], [50.0, 1.0]],
        "queue_length": [[0.0, 1.0]],
        "timed_out": 1,
    }
    doc.update(extra)
    return doc


def test_every_metric_against_hand_computed_numbers() -> None:
    m = summarize(result())
    assert list(m) == list(METRICS)
    # JCTs 50, 95, 60 → sorted 50, 60, 95
    assert m["jct_mean"] == pytest.approx(205 / 3)
    assert m["jct_p50"] == pytest.approx(60.0)
    assert m["jct_p95"] == pytest.approx(60 + 0.9 * 35)  # rank 0.95·2 = 1.9
    assert m["jct_p99"] == pytest.approx(60 + 0.98 * 35)  # rank 1.98
    # queue delays 10, 15, 20, 40 (the running gang counts, the waiting one does not)
    assert m["queue_mean"] == pytest.approx(21.25)
    assert m["queue_p99"] == pytest.approx(20 + 0.97 * 20)  # rank 0.99·3 = 2.97
    assert m["makespan"] == pytest.approx(100.0)  # last finish 100 − first submit 0
    assert m["gpu_alloc_ratio"] == pytest.approx(60.0)
    assert m["gpu_util"] == pytest.approx(37.5)
    assert m["idle_gpu_hours"] == 0.25 and m["idle_cost"] == 0.875
    assert m["deadlocked"] == 0 and m["timed_out"] == 1 and m["completed"] == 3


def test_makespan_starts_at_the_first_submit_even_of_an_unfinished_gang() -> None:
    gangs = [gang("late", 30, 40, 90), gang("early", 12)]
    assert summarize(result(gangs=gangs))["makespan"] == pytest.approx(90 - 12)


def test_nothing_to_measure_gives_null() -> None:
    m = summarize(result(gangs=[gang("w", 0)], gpu_capacity=0.0, completed=0))
    for key in ("jct_mean", "jct_p50", "jct_p95", "jct_p99", "queue_mean", "queue_p99"):
        assert m[key] is None, key
    assert m["makespan"] is None
    assert m["gpu_alloc_ratio"] is None and m["gpu_util"] is None
    assert summarize(result(end=0.0))["gpu_util"] is None


def test_time_average_is_a_step_integral_clipped_to_the_end() -> None:
    assert time_average([[0, 0], [10, 2], [20, 4]], 40) == pytest.approx((2 * 10 + 4 * 20) / 40)
    assert time_average([[20, 4], [0, 0], [10, 2]], 40) == pytest.approx(2.5)  # any order
    assert time_average([[0, 1], [50, 9]], 40) == pytest.approx(1.0)  # beyond the end: ignored
    assert time_average([[5, 2]], 10) == pytest.approx(1.0)  # 0 before the first point
    assert time_average([[0, 3]], 0) is None


def test_percentile_is_linear_and_empty_is_none() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_columns_cover_every_metric_once() -> None:
    assert sorted(c.key for c in COLUMNS) == sorted(METRICS)


def test_a_real_run_agrees_with_its_own_counters() -> None:
    workload = load_files([EXAMPLES / "02-seven-of-eight.yaml"])
    for policy, idle in (("kube-default", True), ("phalanx", False)):
        run = simulate(workload, SimOptions(policy=policy, until=7200)).to_json()
        m = summarize(run)
        assert m["completed"] == run["completed"] == 2  # the notebook pod and the job
        idle_hours, util, alloc = m["idle_gpu_hours"], m["gpu_util"], m["gpu_alloc_ratio"]
        assert idle_hours is not None and util is not None and alloc is not None
        assert (idle_hours > 0) is idle
        assert util <= alloc + 1e-9
        assert (alloc > util + 1e-9) is idle
        times = [g["completion_time"] for g in run["gangs"]]
        assert m["jct_mean"] == pytest.approx(sum(times) / len(times))
        assert m["makespan"] == pytest.approx(max(g["finish"] for g in run["gangs"]))
