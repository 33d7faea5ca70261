"""The seed scenarios (examples/), under both policies, through the simulator's public API."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from phalanx.k8s import load_files
from phalanx.sim.metrics import SimResult
from phalanx.sim.simulator import SimOptions, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
HORIZON = 7200.0


def run(name: str, policy: str) -> tuple[SimResult, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    result = simulate(
        load_files([EXAMPLES / name]), SimOptions(policy=policy, until=HORIZON), events.append
    )
    return result, events


def gang(result: SimResult, name: str) -> Any:
    return next(g for g in result.gangs if g.name == name)


def binds(events: list[dict[str, Any]], gang_key: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "bind" and e["gang"] == gang_key]


def test_deadlock_kube_default_holds_half_of_each_gang_forever() -> None:
    result, events = run("01-deadlock.yaml", "kube-default")
    assert result.count("deadlocked") == 2
    assert len(binds(events, "default/a")) == 2 and len(binds(events, "default/b")) == 2
    assert {e["gang"] for e in events if e["type"] == "deadlock"} == {"default/a", "default/b"}
    # 4 GPUs held from about 3 s until the 2 h horizon
    assert result.idle_gpu_hours == pytest.approx(4 * (HORIZON - 2.5) / 3600, abs=0.01)
    assert result.idle_cost == pytest.approx(result.idle_gpu_hours * 3.5)


def test_deadlock_phalanx_runs_a_then_b_whole() -> None:
    result, events = run("01-deadlock.yaml", "phalanx")
    a, b = gang(result, "a"), gang(result, "b")
    assert (a.state, b.state) == ("completed", "completed")
    assert {e["t"] for e in binds(events, "default/a")} == {6.0}  # all four together
    assert b.start == a.finish == 6.0 + 1800
    assert result.idle_gpu_hours == 0.0
    assert result.count("deadlocked") == 0


def test_seven_of_eight_phalanx_binds_nothing_until_eight_fit() -> None:
    result, events = run("02-seven-of-eight.yaml", "phalanx")
    train = binds(events, "default/train")
    assert len(train) == 8 and {e["t"] for e in train} == {3600.0}
    assert result.idle_gpu_hours == 0.0
    assert gang(result, "train").state == "completed"


def test_seven_of_eight_kube_default_burns_seven_gpus_for_59_minutes() -> None:
    result, events = run("02-seven-of-eight.yaml", "kube-default")
    times = Counter(e["t"] for e in binds(events, "default/train"))
    assert times == {60.0: 7, 3600.0: 1}
    assert result.idle_gpu_hours == pytest.approx(7 * 3540 / 3600)
    assert gang(result, "train").start == 3600.0


def test_quota_phalanx_two_pending_pods_then_all_four_at_once() -> None:
    result, events = run("03-quota.yaml", "phalanx")
    created = Counter(e["t"] for e in events if e["type"] == "submit" and e["pod"])
    assert created == {0.0: 2, 600.0: 2}  # the API server refused 2 until the quota went
    train = binds(events, "team-a/train")
    assert len(train) == 4 and {e["t"] for e in train} == {600.0}
    assert gang(result, "train").start == 600.0
    assert result.idle_gpu_hours == 0.0


def test_quota_kube_default_binds_the_two_it_can() -> None:
    result, events = run("03-quota.yaml", "kube-default")
    assert Counter(e["t"] for e in binds(events, "team-a/train")) == {0.0: 2, 600.0: 2}
    assert result.idle_gpu_hours == pytest.approx(2 * 600 / 3600)


def test_starvation_kube_default_gives_b_a_partial_allocation_it_never_uses() -> None:
    result, events = run("04-starvation.yaml", "kube-default")
    assert len(binds(events, "default/b")) == 2
    assert gang(result, "b").start is None
    assert result.idle_gpu_hours > 3.5


def test_starvation_phalanx_never_gives_b_a_partial_allocation() -> None:
    result, events = run("04-starvation.yaml", "phalanx")
    assert set(Counter(e["t"] for e in binds(events, "default/b")).values()) == {4}  # whole
    assert result.idle_gpu_hours == 0.0
    done_default = run("04-starvation.yaml", "kube-default")[0].count("completed")
    assert result.count("completed") > done_default


def test_starvation_phalanx_reserves_for_b_once_it_has_waited_an_hour() -> None:
    """B ages past the 1 h threshold at 1h00m10s and gets a reservation on the running 2-GPU
    jobs' estimated ends (learned from the ones that finished): it starts by 1h10m10s, within
    the 2 h horizon; volcano never starts it."""
    _, events = run("04-starvation.yaml", "phalanx")
    first = min(e["t"] for e in binds(events, "default/b"))
    assert 3610 <= first <= 3610 + 600
    volcano = run("04-starvation.yaml", "volcano")[0]
    assert gang(volcano, "b").start is None  # still waiting at the horizon
    reserved = [e for e in events if e["type"] == "expect" and e["gang"] == "default/b"]
    assert any(
        e["message"].startswith("reserved: gpu-node-0..gpu-node-3 (4 nodes)") for e in reserved
    )


def test_starvation_reservations_complete_all_25_gangs() -> None:
    """Reservations and backfill alone (phalanx's reserve and allocate actions): b runs once
    reserved and all 25 gangs complete (the 2-GPU jobs queued meanwhile run after it: the
    cluster has 600 GPU-minutes of work for 480 in two hours)."""
    path = EXAMPLES / "04-starvation.yaml"
    options = SimOptions(policy="phalanx", actions=("reserve", "allocate"))
    whole = simulate(load_files([path]), options)
    assert whole.count("completed") == 25
    b = gang(whole, "b")
    assert b.start is not None and 3610 <= b.start <= 3610 + 600 and b.state == "completed"


def test_starvation_phalanx_completes_all_25_gangs() -> None:
    """With preemption on too: b, started on the reservation it got for having aged, is
    protected for its run from the 2-GPU stream it waited behind (it was preempted once and
    finished at 2h50m before); all 25 complete."""
    path = EXAMPLES / "04-starvation.yaml"
    whole = simulate(load_files([path]), SimOptions(policy="phalanx"))
    assert whole.count("completed") == 25
    b = gang(whole, "b")
    assert b.finish is not None and b.finish <= 3610 + 600 + 1800


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
@pytest.mark.parametrize("policy", ["phalanx", "kube-default"])
def test_same_seed_same_decisions(name: str, policy: str) -> None:
    first = run(name, policy)[1]
    second = run(name, policy)[1]
    assert first == second
