"""``phalanx simulate`` through its entry point: outputs, event log, demo, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from phalanx.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}}
"""
GROUP = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g}
spec: {minMember: 2}
"""


BETA_GROUP = """
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: g, namespace: default}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
"""


def beta_pod(name: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulingGroup: {{podGroupName: g}}
  containers:
  - name: c
    resources: {{requests: {{nvidia.com/gpu: "3"}}}}
"""


def pod(name: str = "p", gpus: str = "1", group: str | None = "g") -> str:
    labels = f"labels: {{scheduling.x-k8s.io/pod-group: {group}}}" if group else ""
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  {labels}
  annotations: {{phalanx.dev/duration: 10m}}
spec:
  containers:
  - name: c
    resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def write(tmp_path: Path, *docs: str) -> str:
    path = tmp_path / "workload.yaml"
    path.write_text("\n---\n".join(docs))
    return str(path)


def test_json_output_has_the_documented_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NODE, GROUP, pod("p1"), pod("p2"))
    assert main(["simulate", path, "-o", "json", "--seed", "7"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["policy"] == "phalanx" and doc["seed"] == 7
    assert doc["deadlocked"] == 0 and doc["idle_gpu_hours"] == 0 and doc["idle_cost"] == 0
    (group,) = [g for g in doc["gangs"] if g["kind"] == "PodGroup"]
    assert {k: group[k] for k in ("name", "namespace", "min_member", "submit", "start")} == {
        "name": "g",
        "namespace": "default",
        "min_member": 2,
        "submit": 0.0,
        "start": 0.0,
    }
    assert group["finish"] == 600.0 and group["state"] == "completed"


def test_event_log_is_json_lines_with_the_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NODE, GROUP, pod("p1"), pod("p2"))
    log = tmp_path / "events.jsonl"
    assert main(["simulate", path, "--events", str(log)]) == 0
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["type"] for e in events].count("bind") == 2
    for event in events:
        assert {"t", "type", "pod", "gang", "node", "requests"} <= set(event)
    bind = next(e for e in events if e["type"] == "bind")
    assert bind["node"] == "n1" and bind["gang"] == "default/g"
    assert bind["requests"] == {"nvidia.com/gpu": 1000, "pods": 1}
    assert {"submit", "bind", "start", "finish"} <= {e["type"] for e in events}
    assert "completed" in capsys.readouterr().out


def test_until_cuts_the_run_and_kube_default_deadlocks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(EXAMPLES / "01-deadlock.yaml")
    assert main(["simulate", path, "--policy", "kube-default", "--until", "1h", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["end"] == 3600.0 and doc["deadlocked"] == 2
    assert doc["idle_gpu_hours"] == pytest.approx(4 * (3600 - 2.5) / 3600, abs=0.01)


def test_demo_runs_both_policies_on_every_seed_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "-o", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 8
    assert {r["policy"] for r in runs} == {"phalanx", "kube-default"}
    by_policy = {p: [r for r in runs if r["policy"] == p] for p in ("phalanx", "kube-default")}
    assert sum(r["deadlocked"] for r in by_policy["phalanx"]) == 0
    assert sum(r["idle_gpu_hours"] for r in by_policy["phalanx"]) == 0
    assert sum(r["deadlocked"] for r in by_policy["kube-default"]) == 2
    assert main(["simulate"]) == 0
    table = capsys.readouterr().out
    assert "deadlock" in table and "kube-default" in table and "IDLE COST" in table


BAD = [
    (
        "unknown kind",
        [NODE, "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n"],
        ["Widget", "kind"],
    ),
    (
        "malformed quantity",
        [NODE, GROUP, pod("p1", gpus="1.2.3"), pod("p2")],
        ["Pod default/p1", "spec.containers[0].resources.requests[nvidia.com/gpu]", "1.2.3"],
    ),
    (
        "minMember below 1",
        [NODE, GROUP.replace("minMember: 2", "minMember: 0"), pod("p1")],
        ["PodGroup default/g", "spec.minMember"],
    ),
    (
        "missing group",
        [NODE, pod("p1", group="nope")],
        ["Pod default/p1", "scheduling.x-k8s.io/pod-group", "nope"],
    ),
    (
        "gang larger than the cluster",
        [NODE, GROUP, pod("p1", gpus="3"), pod("p2", gpus="3")],
        ["PodGroup default/g", "spec.minMember", "whole cluster"],
    ),
    (
        "Workload API PodGroup larger than the cluster",
        [NODE, BETA_GROUP, beta_pod("p1"), beta_pod("p2")],
        ["PodGroup default/g", "spec.schedulingPolicy.gang.minCount", "whole cluster"],
    ),
    (
        "duplicate name",
        [NODE, GROUP, pod("p1"), pod("p1")],
        ["Pod default/p1", "duplicate"],
    ),
]


@pytest.mark.parametrize(("case", "docs", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_file_object_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    docs: list[str],
    expected: list[str],
) -> None:
    path = write(tmp_path, *docs)
    assert main(["simulate", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("phalanx: error: ")
    assert path in err
    for fragment in expected:
        assert fragment in err, (case, err)


def test_missing_file_and_unknown_policy_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(tmp_path / "absent.yaml")]) == 2
    err = capsys.readouterr().err
    assert "absent.yaml" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", "--policy", "nope", str(EXAMPLES / "01-deadlock.yaml")])
    assert exit_info.value.code == 2


def test_installed_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, NODE, GROUP, pod("p1", gpus="abc"))
    proc = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "simulate", path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_packing_is_wired_into_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["packing", "openb:nope", "--policy", "fgd"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("phalanx: error: ") and "nope" in err and err.count("\n") == 1


def test_serve_with_a_missing_kubeconfig_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--kubeconfig", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert "absent" in err and err.count("\n") == 1 and "Traceback" not in err


def test_queues_example_json_and_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reclaim across queues and preemption within one, through the CLI: per-gang queue,
    preemptions and lost work, per-run counts and queue shares, evict events with reason/by."""
    log = tmp_path / "events.jsonl"
    path = str(EXAMPLES / "06-queues.yaml")
    assert main(["simulate", path, "-o", "json", "--events", str(log)]) == 0
    doc = json.loads(capsys.readouterr().out)
    gangs = {g["name"]: g for g in doc["gangs"]}
    assert gangs["vision-b"]["queue"] == "vision" and gangs["speech-a"]["queue"] == "speech"
    assert gangs["vision-b"]["preempted"] == 1 and gangs["vision-a"]["preempted"] == 1
    assert gangs["vision-b"]["lost_gpu_hours"] == pytest.approx(8 * 540 / 3600)
    assert gangs["vision-a"]["lost_gpu_hours"] == pytest.approx(8 * 1200 / 3600)
    assert all(g["state"] == "completed" for g in doc["gangs"])
    assert doc["preemptions"] == 2 and doc["reclaims"] == 1
    assert doc["lost_gpu_hours"] == pytest.approx(8 * 1740 / 3600)
    assert set(doc["queues"]) == {"vision", "speech"}
    speech = doc["queues"]["speech"]
    assert set(speech) >= {"deserved_gpu_share", "mean_gpu_share", "share_error", "p99_wait"}
    assert speech["p99_wait"] == 0.0
    events = [json.loads(line) for line in log.read_text().splitlines()]
    evicts = [(e["gang"], e["reason"], e["by"]) for e in events if e["type"] == "evict"]
    assert evicts == [
        ("default/vision-b", "reclaim", "default/speech-a"),
        ("default/vision-b", "reclaim", "default/speech-a"),
        ("default/vision-a", "preempt", "default/vision-urgent"),
    ]


def test_simulate_takes_a_workload_as_compare_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "synthetic:jobs=12,nodes=2,seed=4", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["completed"] == 12 and len(doc["gangs"]) == 12
    assert main(["compare", "synthetic:jobs=12,nodes=2,seed=4", "--policies", "phalanx"]) == 0
    assert "phalanx" in capsys.readouterr().out
    nodes, jobs = write(tmp_path, NODE), tmp_path / "jobs.yaml"
    jobs.write_text("---\n".join([GROUP, pod("p1"), pod("p2")]), encoding="utf-8")
    assert main(["simulate", f"{nodes},{jobs}", "-o", "json"]) == 0  # comma-separated files
    (group,) = [g for g in json.loads(capsys.readouterr().out)["gangs"] if g["name"] == "g"]
    assert group["state"] == "completed"
    assert main(["simulate", "nosuchtrace:x=1"]) == 2
    err = capsys.readouterr().err
    assert "nosuchtrace" in err and err.count("\n") == 1
    assert main(["simulate", f"{nodes},{tmp_path / 'absent.yaml'}"]) == 2
    err = capsys.readouterr().err
    assert "absent.yaml" in err and "not found" in err and err.count("\n") == 1
    assert main(["compare", "gone.yaml,absent.yml"]) == 2  # no part exists: still files
    err = capsys.readouterr().err
    assert "'gone.yaml' not found" in err and err.count("\n") == 1
