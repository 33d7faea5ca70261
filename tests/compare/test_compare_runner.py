"""Running several policies on one workload: determinism, parallel == serial, bad input."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from phalanx import traces
from phalanx.api.errors import InputError
from phalanx.compare.runner import (
    Progress,
    check_policies,
    load_workload,
    progress_for,
    run_policies,
    workers_for,
)
from phalanx.policies import POLICIES

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
STARVATION = str(EXAMPLES / "04-starvation.yaml")
DEADLOCK = str(EXAMPLES / "01-deadlock.yaml")


def test_results_come_in_policy_order_one_per_policy() -> None:
    names = list(POLICIES)
    results = run_policies(DEADLOCK, names, seed=3, workers=1)
    assert list(results) == names
    for name, result in results.items():
        assert result["policy"] == name and result["seed"] == 3
    assert results["kube-default"]["deadlocked"] == 2
    assert results["phalanx"]["completed"] == 2


def test_same_seed_same_results_and_parallel_equals_serial() -> None:
    names = list(reversed(POLICIES))
    serial = run_policies(STARVATION, names, seed=5, until=3600, workers=1)
    parallel = run_policies(STARVATION, names, seed=5, until=3600, workers=len(names))
    again = run_policies(STARVATION, names, seed=5, until=3600, workers=2)
    assert serial == parallel == again
    assert list(parallel) == names
    assert all(r["end"] == 3600 for r in serial.values())


def test_duplicates_are_dropped_and_unknown_policies_named() -> None:
    assert check_policies(["phalanx", "kube-default", "phalanx"]) == ["phalanx", "kube-default"]
    with pytest.raises(InputError, match="unknown policy 'fifo'"):
        run_policies(DEADLOCK, ["phalanx", "fifo"])
    with pytest.raises(InputError, match="no policy"):
        check_policies([])


def test_several_files_comma_separated(tmp_path: Path) -> None:
    text = Path(DEADLOCK).read_text()
    docs = text.split("\n---")
    nodes = [d for d in docs if "kind: Node" in d]
    rest = [d for d in docs if "kind: Node" not in d]
    (tmp_path / "nodes.yaml").write_text("\n---".join(nodes))
    (tmp_path / "jobs.yaml").write_text("\n---".join(rest))
    spec = f"{tmp_path / 'nodes.yaml'},{tmp_path / 'jobs.yaml'}"
    split = run_policies(spec, ["kube-default", "phalanx"], workers=1)
    whole = run_policies(DEADLOCK, ["kube-default", "phalanx"], workers=1)
    assert split == whole


@pytest.mark.parametrize("spec", ["no-such-file.yaml", "", ":x=1", "no-such-trace:jobs=3"])
def test_unknown_workloads_are_input_errors_naming_them(spec: str) -> None:
    with pytest.raises(InputError) as err:
        load_workload(spec)
    assert repr(spec) in str(err.value) or spec in str(err.value)


def test_a_trace_spec_goes_to_the_trace_loaders() -> None:
    if not hasattr(traces, "load"):
        pytest.skip("phalanx.traces.load is not built yet")
    results = run_policies("synthetic:jobs=12,seed=1", ["kube-default", "phalanx"], seed=1)
    assert results == run_policies(
        "synthetic:jobs=12,seed=1", ["kube-default", "phalanx"], seed=1, workers=1
    )
    assert all(r["gangs"] for r in results.values())


def test_workers_never_exceed_policies_or_cores() -> None:
    assert workers_for(1) == 1
    assert 1 <= workers_for(4) <= 4


def test_progress_bar_only_when_asked_or_on_a_terminal() -> None:
    assert progress_for(io.StringIO(), 2) is None
    stream = io.StringIO()
    progress = progress_for(stream, 2, force=True)
    assert progress is not None
    run_policies(DEADLOCK, ["kube-default", "phalanx"], workers=1, progress=progress)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[--------------------] 0/2 policies")
    assert lines[1].startswith("[##########----------] 1/2 policies  kube-default done in ")
    assert lines[2].startswith("[####################] 2/2 policies  phalanx done in ")


def test_live_progress_rewrites_one_line() -> None:
    stream = io.StringIO()
    bar = Progress(4, stream, live=True)
    bar.start("running")
    bar.finished("volcano", 1.25)
    bar.close()
    out = stream.getvalue()
    assert out.count("\n") == 1 and out.endswith("\n")
    assert "\r[#####---------------] 1/4 policies  volcano done in 1.2s" in out
