"""``phalanx compare`` through its entry point: JSON, table, report, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.cli.main import main
from phalanx.compare import WAIT_KEYS
from phalanx.compare.summary import METRICS
from phalanx.policies import COMPARED
from phalanx.sim.instants import MAX_CYCLES

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
DEADLOCK = str(EXAMPLES / "01-deadlock.yaml")
STARVATION = str(EXAMPLES / "04-starvation.yaml")


def test_json_has_exactly_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", DEADLOCK, "-o", "json", "--seed", "4"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # no progress bar unless stderr is a terminal
    doc = json.loads(captured.out)
    assert set(doc) == {"workload", "seed", "estimates", "policies"}
    assert doc["workload"] == DEADLOCK and doc["seed"] == 4 and doc["estimates"] == "given"
    assert list(doc["policies"]) == list(COMPARED)  # the default list, in its order
    for metrics in doc["policies"].values():
        domains = ["gangs_in_one_domain", "mean_domains_per_gang", "fragmentation_by_domain"]
        keys = [*METRICS, *domains, *WAIT_KEYS, "queues"]
        assert list(metrics) == keys
        assert metrics["gangs_in_one_domain"] == {}  # no topology declared
        assert set(metrics["queues"]) == {"default"}  # one queue: every gang's
        assert set(metrics["queues"]["default"]) == {
            "deserved_gpu_share",
            "mean_gpu_share",
            "share_error",
            "mean_wait",
            "p99_wait",
        }
    kube, gang = doc["policies"]["kube-default"], doc["policies"]["phalanx"]
    assert kube["deadlocked"] == 2 and kube["completed"] == 0 and kube["jct_mean"] is None
    assert kube["gpu_util"] == 0.0 and kube["gpu_alloc_ratio"] > 0
    assert gang["deadlocked"] == 0 and gang["completed"] == 2 and gang["idle_gpu_hours"] == 0
    assert gang["makespan"] > 0 and 0 < gang["gpu_util"] <= 100


def test_table_one_row_per_policy_human_units(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", STARVATION, "--policies", "phalanx,kube-default", "--until", "2h"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"workload {STARVATION} · seed 0 · until 2h00m"
    assert lines[1].split()[:3] == ["POLICY", "DONE", "JCT"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == ["phalanx", "kube-default"]
    # phalanx reserves for the starving 4-GPU job after 1 h and runs it undisturbed: the stream
    # queued behind it finishes after the horizon (18 done by 2 h); kube-default never runs it
    assert rows["phalanx"][1] == "18" and rows["kube-default"][1] == "12"
    assert "10m00s" in rows["phalanx"] and "$13.98" in rows["kube-default"]
    assert any(cell.endswith("%") for cell in rows["phalanx"])


def test_the_estimate_model_is_named_in_the_table_json_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comparison run with estimates other than the manifests' own says which it had: its
    figures (reservations, backfill) depend on them."""
    report = tmp_path / "report.html"
    args = ["compare", STARVATION, "--policies", "volcano,phalanx", "--until", "2h"]
    assert main([*args, "--estimates", "perfect", "--report", str(report)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"workload {STARVATION} · seed 0 · estimates perfect · until 2h00m"
    assert '<p class="meta">seed 0 · estimates perfect · until 2h00m · ' in report.read_text()
    assert main([*args, "--estimates", "noisy", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["estimates"] == "noisy"


def test_report_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.html"
    args = ["compare", DEADLOCK, "--policies", "kube-default,phalanx", "--report", str(report)]
    assert main([*args, "-o", "json"]) == 0
    json.loads(capsys.readouterr().out)  # stdout stays pure JSON
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'data-plot="gantt"' in page


def test_progress_flag_forces_the_bar(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", DEADLOCK, "--policies", "phalanx", "--progress", "-o", "json"]) == 0
    err = capsys.readouterr().err
    assert "1/1 policies  phalanx done in" in err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--policies", "kube-default,fifo"], "'fifo'"),
        (["--policies", " , "], "--policies"),
    ],
)
def test_bad_policies_exit_2_with_one_line(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", DEADLOCK, *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("phalanx: error: ") and named in line


@pytest.mark.parametrize("workload", ["missing.yaml", "nosuchtrace:jobs=3"])
def test_unknown_workload_exits_2_naming_it(
    workload: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", workload]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("phalanx: error: ") and workload in line


def test_bad_manifest_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: x}}\n"
    )
    assert main(["compare", str(bad), "--policies", "phalanx"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("phalanx: error: ") and "bad.yaml" in line


def test_an_error_inside_the_worker_processes_is_one_line_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
        'status: {allocatable: {cpu: "8", memory: 8Gi, nvidia.com/gpu: "1"}}\n---\n'
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n"
        "spec: {minMember: 2}\n"
        + "".join(
            f"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n"
            "  labels: {scheduling.x-k8s.io/pod-group: g}\n"
            "spec:\n  containers:\n  - name: c\n"
            '    resources: {requests: {nvidia.com/gpu: "1"}}\n'
            for i in range(2)
        )
    )
    assert main(["compare", str(big), "--policies", "kube-default,phalanx"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"phalanx: error: {big}: PodGroup default/g: spec.minMember")


def test_queues_in_compare_json_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per policy: preemptions, reclaims, lost work and per-queue shares; the report plots
    each queue's share over time against its deserved share."""
    report = tmp_path / "r.html"
    path = str(EXAMPLES / "06-queues.yaml")
    args = ["compare", path, "--policies", "phalanx,volcano,kueue", "-o", "json"]
    assert main([*args, "--report", str(report)]) == 0
    doc = json.loads(capsys.readouterr().out)["policies"]
    phalanx = doc["phalanx"]
    assert phalanx["preemptions"] == 2 and phalanx["reclaims"] == 1
    assert phalanx["lost_per_preemption"] == pytest.approx(8 * 1740 / 3600 / 2)
    assert set(phalanx["queues"]) == {"vision", "speech"}
    assert phalanx["queues"]["speech"]["p99_wait"] == 0.0
    assert doc["kueue"]["preemptions"] == 0
    page = report.read_text()
    assert "<h2>Queue shares</h2>" in page
    assert "Queue shares over time under phalanx" in page
    assert "speech deserved" in page and "vision held" in page


LOOPING = (
    "synthetic:jobs=518,nodes=16,seed=1,load=1.3,max_duration=14400,"
    "queues=a:1:40:2/b:1:30:1/c:1:30:1,high=0.1"
)


def test_a_loop_of_reclaims_at_one_instant_is_cut_short_and_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Volcano's reclaim rule on three weighted queues: a queue below its deserved share takes
    from one above it, which is then below its own and takes back. Evictions take effect at
    once in the simulator, so at t≈4h11m this run looped at one instant forever (``compare``
    never returned). The instant is now cut short after ``MAX_CYCLES`` cycles, the run ends,
    and the loop is reported (JSON and a note under the table)."""
    assert main(["compare", LOOPING, "--policies", "volcano", "-o", "json"]) == 0
    volcano = json.loads(capsys.readouterr().out)["policies"]["volcano"]
    assert volcano["completed"] == 518
    cut = volcano["livelocks"]
    assert cut and cut[0]["t"] == pytest.approx(15098.58, abs=0.01)
    assert all(c["cycles"] == MAX_CYCLES and c["evicted"] for c in cut)
    assert main(["compare", LOOPING, "--policies", "volcano"]) == 0
    note = capsys.readouterr().out.splitlines()[-1]
    assert note.startswith(f"volcano: a loop of evictions at {len(cut)} instant(s)")
