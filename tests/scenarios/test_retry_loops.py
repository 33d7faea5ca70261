"""A run whose only activity left is a gang's own retry loop ends (sim/loops.py)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from phalanx.cli.main import main

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"
CLUSTER = WORKLOADS / "cluster.yaml"


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fail (instead of hanging the suite) if the run does not end within 60 s (in this
    process: ``simulate``, not ``compare``, whose worker would keep the suite waiting)."""

    def expired(_signum: int, _frame: FrameType | None) -> None:
        raise TimeoutError("the run did not end")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("rayjob", ["rayjob-kueue.yaml", "rayjob-volcano.yaml"])
def test_a_gang_that_never_fits_does_not_keep_a_coscheduling_run_going(
    rayjob: str, deadline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The RayJob's head fits, its 8-GPU hosts never do (2-GPU nodes). Under coscheduling
    the head reserves a node, is rejected at Permit a minute later, and retries after its
    backoff; its own release woke it, so once the snapshot's pod had finished the run went
    on for ever (``compare`` never returned). It now ends when that loop repeats: the gang
    waits, as under the other policies, and the run ends when the last pod does."""
    workload = f"{CLUSTER},{WORKLOADS / 'ray' / rayjob}"
    runs = {}
    for policy in ("coscheduling", "volcano"):
        assert main(["simulate", workload, "--policy", policy, "-o", "json"]) == 0
        runs[policy] = json.loads(capsys.readouterr().out)
    for run in runs.values():
        assert (run["completed"], run["waiting"], run["deadlocked"]) == (1, 1, 0)
        assert [g["finish"] for g in run["gangs"]] == [1800.0, None]
    assert runs["coscheduling"]["timed_out"] == 1  # rejected at Permit, again and again
    # the run says where it ended so, and which gang was still retrying
    waiting = runs["coscheduling"]["gangs"][1]
    key = f"{waiting['namespace']}/{waiting['name']}"
    assert runs["coscheduling"]["retry_loop"] == {"t": runs["coscheduling"]["end"], "gangs": [key]}
    assert runs["volcano"]["retry_loop"] is None  # it ended by itself
    assert runs["coscheduling"]["end"] < 1800.0 + 2 * 70.0  # one round of the loop at most


def test_compare_says_which_run_ended_on_a_retry_loop(
    deadline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare`` carries ``retry_loop`` per policy and notes it under its table."""
    workload = f"{CLUSTER},{WORKLOADS / 'ray' / 'rayjob-kueue.yaml'}"
    assert main(["compare", workload, "--policies", "coscheduling,volcano", "-o", "json"]) == 0
    policies = json.loads(capsys.readouterr().out)["policies"]
    assert policies["coscheduling"]["retry_loop"]["gangs"] == ["ml/pretrain"]
    assert policies["volcano"]["retry_loop"] is None
    assert main(["compare", workload, "--policies", "coscheduling,volcano"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "retry_loop" in line]
    assert notes == [
        "coscheduling: ended at t=1922 s on a loop of retries that repeated with nothing else "
        "left to happen (ml/pretrain still waiting); see retry_loop in -o json"
    ]
