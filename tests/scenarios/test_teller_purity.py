"""The expected-start teller only tells: what the scheduler decides does not depend on how
many expected starts it re-tells per cycle (the gate judges every gang by its estimate now,
not by the one the teller last brought up to date), nor on whether it re-tells only what is
read (a run without events)."""

from __future__ import annotations

import pytest

from phalanx.actions import expect
from phalanx.cluster import state
from phalanx.compare import load_workload
from phalanx.sim.simulator import SimOptions, simulate

# contended gangs of many shapes, learned estimates (none given): estimates move as gangs end
WORKLOAD = "synthetic:jobs=400,nodes=4,mix=multi,load=2.0,max_duration=14400,seed={seed}"


def _starts(seed: int, *, events: bool = True) -> list[tuple[str, float | None]]:
    """Each gang's start; with ``events`` (a sink) every due expected start is re-told."""
    sink = (lambda event: None) if events else None
    workload = load_workload(WORKLOAD.format(seed=seed))
    doc = simulate(workload, SimOptions(policy="phalanx"), sink)
    return sorted((g["name"], g["start"]) for g in doc.to_json()["gangs"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_decisions_do_not_depend_on_how_often_expected_starts_are_retold(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(expect, "RETELL_MAX", 0)
    never = _starts(seed)
    monkeypatch.setattr(expect, "RETELL_MAX", 10_000)
    always = _starts(seed)
    assert any(start is None or start > 0 for _, start in never)  # gangs did wait
    assert never == always
    monkeypatch.undo()
    assert _starts(seed, events=False) == always  # told only when read


def test_the_running_gangs_are_kept_alike_whether_the_release_log_reaches_back_or_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reserve action looks only at the gangs the state's release log names since its last
    look, or at every running gang when the log was too short to reach back: the same run."""
    logged = simulate(load_workload(WORKLOAD.format(seed=1)), SimOptions(policy="phalanx"))
    monkeypatch.setattr(state, "RELEASED_KEPT", 1)  # most cycles follow several releases
    walked = simulate(load_workload(WORKLOAD.format(seed=1)), SimOptions(policy="phalanx"))
    assert walked.to_json() == logged.to_json()
