"""How `phalanx simulate` takes the files users have: snapshots, lists, directories, stdin,
generated names, scheduling gates, other schedulers' pods, missing durations, queue objects,
and the errors for what it cannot take."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli.main import main

HERE = Path(__file__).resolve().parent.parent / "workloads"
CLUSTER = HERE / "cluster.yaml"
GPU = {"limits": {"nvidia.com/gpu": "1"}}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {})
    body = {"containers": [{"name": "c", "image": "i", "resources": GPU}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}, "spec": body}


def write(tmp_path: Path, name: str, *docs: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def simulate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, "simulate", *args, "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def gangs(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in result["gangs"]}


def test_gated_pods_wait_until_ungated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gates = [{"name": "kueue.x-k8s.io/admission"}]
    later = pod(
        "later",
        schedulingGates=gates,
        metadata={"annotations": {"phalanx.dev/ungate-after": "10m"}},
    )
    path = write(tmp_path, "gated.yaml", later, pod("never", schedulingGates=gates))
    result = gangs(simulate_json(capsys, str(CLUSTER), str(path)))
    assert result["later"]["start"] == 600
    assert result["never"]["state"] == "waiting"
    assert "gated (kueue.x-k8s.io/admission)" in result["never"]["reason"]


def test_nothing_placed_says_why_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gates = [{"name": "example.com/hold"}]
    path = write(tmp_path, "gated.yaml", *(pod(f"p{i}", schedulingGates=gates) for i in range(2)))
    nodes = write(tmp_path, "nodes.yaml", yaml.safe_load(CLUSTER.read_text().split("---")[1]))
    code, out, _ = run(capsys, "simulate", str(nodes), str(path))
    assert code == 0
    line = out.splitlines()[-1]
    assert line.startswith("no pod was placed: 2 of 2 gangs (2 pods) wait, SchedulingGated")
    assert line.endswith("lift the gates with the annotation phalanx.dev/ungate-after")
    report = tmp_path / "report.html"
    args = ("--policies", "phalanx", "--report", str(report))
    code, out, _ = run(capsys, "compare", f"{nodes},{path}", *args)
    assert code == 0
    assert "phalanx: no pod was placed: 2 of 2 gangs" in out
    assert "phalanx: no pod was placed: 2 of 2 gangs" in report.read_text()


def test_every_pod_is_simulated_unless_a_scheduler_name_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = (str(CLUSTER), str(HERE / "yunikorn.yaml"), str(HERE / "koordinator.yaml"))
    # without --scheduler-name the policy places both gangs (the yunikorn one first, FIFO)
    both = gangs(simulate_json(capsys, *files))
    assert both["spark-etl-001"]["start"] == 1800 and both["bert"]["start"] == 5400
    # with it, koord-scheduler's pods go to the kube-default baseline: split at t=0
    events = tmp_path / "events.jsonl"
    args = ("--scheduler-name", "yunikorn", "--events", str(events))
    split = gangs(simulate_json(capsys, *files, *args))
    binds = [json.loads(line) for line in events.read_text().splitlines()]
    bert_at_0 = [e for e in binds if e["type"] == "bind" and e["gang"] == "default/bert"]
    assert bert_at_0[0]["t"] == 0  # partially bound by the baseline
    assert split["spark-etl-001"]["start"] > 0


def test_two_gang_declarations_make_the_pod_invalid_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = {"kueue.x-k8s.io/pod-group-name": "a"}
    annotations = {
        "kueue.x-k8s.io/pod-group-total-count": "1",
        "gang.scheduling.koordinator.sh/name": "b",
        "gang.scheduling.koordinator.sh/min-available": "1",
    }
    bad = pod("p", metadata={"labels": labels, "annotations": annotations})
    code, _, err = run(capsys, "simulate", str(CLUSTER), str(write(tmp_path, "p.yaml", bad)))
    assert code == 2
    assert "the pod declares two gangs: annotation gang.scheduling.koordinator.sh/name=b" in err
    assert "label kueue.x-k8s.io/pod-group-name=a" in err


def test_unknown_kind_names_file_document_and_kind_without_inventing_a_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crd = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "rc"}}
    path = write(tmp_path, "x.yaml", pod("ok"), crd)
    code, _, err = run(capsys, "simulate", str(CLUSTER), str(path))
    assert code == 2
    assert err.startswith(f"phalanx: error: {path}: document 2: RayService rc: kind: unknown")
    assert "supported kinds: " in err and "PyTorchJob (kubeflow.org/v1)" in err


def test_up_to_twenty_bad_objects_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [pod(f"p{i}", priorityClassName="missing") for i in range(25)]
    code, _, err = run(capsys, "simulate", str(CLUSTER), str(write(tmp_path, "bad.yaml", *bad)))
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 21 and all(line.startswith("phalanx: error: ") for line in lines)
    assert "Pod default/p19: spec.priorityClassName: unknown PriorityClass" in lines[19]
    assert lines[20] == "phalanx: error: ... and 5 more bad objects"


def test_generate_name_is_deterministic_for_a_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generated = pod("", metadata={"generateName": "job-"})
    del generated["metadata"]["name"]
    path = write(tmp_path, "g.yaml", generated, generated)

    def names(seed: str) -> list[str]:
        result = simulate_json(capsys, str(CLUSTER), str(path), "--seed", seed)
        return sorted(n for n in gangs(result) if n.startswith("job-"))

    first = names("1")
    assert len(first) == 2 and all(len(n) == len("job-") + 5 for n in first)
    assert names("1") == first and names("2") != first


def test_directories_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a-cluster.yaml").write_text(CLUSTER.read_text())
    (folder / "b-kueue.yml").write_text((HERE / "kueue.yaml").read_text())
    (folder / "notes.txt").write_text("not a manifest")
    assert "sim" in gangs(simulate_json(capsys, str(folder)))
    monkeypatch.setattr(sys, "stdin", io.StringIO((HERE / "pytorchjob.yaml").read_text()))
    assert "resnet" in gangs(simulate_json(capsys, str(CLUSTER), "-"))


def test_a_kubectl_snapshot_starts_from_the_running_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = yaml.safe_load_all(CLUSTER.read_text())
    node_items = [n for n in nodes if n["kind"] == "Node"]
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-5d9f", "controller": True}
    running = pod(
        "api-5d9f-abcde",
        nodeName="node-1",
        schedulerName="default-scheduler",
        metadata={"namespace": "prod", "ownerReferences": [owner]},
    )
    running["status"] = {"phase": "Running"}
    done = pod("migrate-x1", nodeName="node-0")
    done["status"] = {"phase": "Succeeded"}
    pending = pod("batch-1", schedulerName="default-scheduler")
    pending["status"] = {"phase": "Pending"}
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "api-5d9f", "namespace": "prod"},
        "spec": {"replicas": 1, "template": {"spec": running["spec"] | {"nodeName": None}}},
    }
    snapshot = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [*node_items, replica_set, running, done, pending],
    }
    path = write(tmp_path, "snapshot.yaml", snapshot)
    events = tmp_path / "e.jsonl"
    args = ("--events", str(events), "--default-duration", "1h")
    result = gangs(simulate_json(capsys, str(path), *args))
    assert set(result) == {"api-5d9f-abcde", "batch-1"}  # no finished pod, no second replica
    binds = [json.loads(x) for x in events.read_text().splitlines() if '"bind"' in x]
    assert {"t": 0.0, "pod": "prod/api-5d9f-abcde", "node": "node-1"}.items() <= binds[0].items()
    assert result["batch-1"]["start"] == 0
    # a ReplicaSet's replica serves until stopped; a bare pod runs the default duration
    assert result["api-5d9f-abcde"]["state"] == "running"
    assert not result["api-5d9f-abcde"]["default_duration"]
    assert result["batch-1"]["default_duration"] and result["batch-1"]["finish"] == 3600


def test_a_snapshots_running_pods_take_the_duration_their_owner_declares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Volcano Job with ``phalanx.dev/duration: 3h`` runs as its PodGroup's two pods in the
    snapshot (the Job is not expanded again: its pods are there). They run 3h, not the
    default duration."""
    nodes = [n for n in yaml.safe_load_all(CLUSTER.read_text()) if n["kind"] == "Node"]
    ref = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "mpi"}
    task = {"name": "worker", "replicas": 2, "template": {"spec": pod("x")["spec"]}}
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "mpi",
            "namespace": "ml",
            "annotations": {"phalanx.dev/duration": "3h"},
        },
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "tasks": [task]},
    }
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "mpi-uid", "namespace": "ml", "ownerReferences": [ref]},
        "spec": {"minMember": 2},
    }
    running = []
    for i in range(2):
        meta = {
            "namespace": "ml",
            "ownerReferences": [ref | {"controller": True}],
            "annotations": {"scheduling.k8s.io/group-name": "mpi-uid"},
        }
        member = pod(f"mpi-worker-{i}", nodeName="node-0", schedulerName="volcano", metadata=meta)
        member["status"] = {"phase": "Running"}
        running.append(member)
    snapshot = {"apiVersion": "v1", "kind": "List", "items": [*nodes, job, group, *running]}
    result = gangs(simulate_json(capsys, str(write(tmp_path, "snap.yaml", snapshot))))
    assert set(result) == {"mpi-uid"}
    assert result["mpi-uid"]["finish"] == 3 * 3600 and not result["mpi-uid"]["default_duration"]


def test_durations_come_from_the_annotation_the_deadline_or_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    timed = pod("timed", metadata={"annotations": {"phalanx.dev/duration": "5m"}})
    deadline = pod("deadline", activeDeadlineSeconds=120)
    plain = pod("plain")
    path = write(tmp_path, "d.yaml", timed, deadline, plain)
    result = simulate_json(capsys, str(CLUSTER), str(path), "--default-duration", "2h")
    finish = {name: g["finish"] for name, g in gangs(result).items()}
    assert (finish["timed"], finish["deadline"], finish["plain"]) == (
        300,
        120,
        120 + 7200,
    )  # plain starts when deadline ends
    assert result["default_duration_gangs"] == 1 and result["default_duration"] == 7200
    code, out, _ = run(capsys, "simulate", str(CLUSTER), str(path))
    assert code == 0
    assert "1 of 4 gangs ran the default duration 1h00m" in out


def test_queue_objects_are_accepted_and_validated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {"weight": 2, "capability": {"nvidia.com/gpu": "8"}, "reclaimable": True},
        },
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "team-a"},
            "spec": {"resources": {"gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 1}}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "a100"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "a100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}],
                            }
                        ],
                    }
                ]
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "team-a", "namespace": "default"},
            "spec": {"clusterQueue": "cq"},
        },
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "eq", "namespace": "default"},
            "spec": {"min": {"nvidia.com/gpu": "1"}, "max": {"nvidia.com/gpu": "4"}},
        },
    ]
    path = write(tmp_path, "queues.yaml", *queues)
    result = simulate_json(capsys, str(CLUSTER), str(path), str(HERE / "kueue.yaml"))
    assert gangs(result)["sim"]["queue"] == "cq"  # LocalQueue team-a → its ClusterQueue
    queues[3]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "x"
    queues[4]["spec"] = {}
    code, _, err = run(capsys, "simulate", str(CLUSTER), str(write(tmp_path, "q.yaml", *queues)))
    assert code == 2
    assert "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in err
    assert "LocalQueue default/team-a: spec.clusterQueue: is required" in err


def test_a_controller_object_takes_its_pods_and_retries_refused_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = {"spec": pod("x")["spec"] | {"schedulerName": "default-scheduler"}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"phalanx.dev/delete-after": "20m"},
        },
        "spec": {"replicas": 3, "selector": {"matchLabels": {"a": "b"}}, "template": template},
    }
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "q",
            "namespace": "shop",
            "annotations": {"phalanx.dev/delete-after": "5m"},
        },
        "spec": {"hard": {"pods": "2"}},
    }
    path = write(tmp_path, "d.yaml", quota, deployment)
    events = tmp_path / "e.jsonl"
    simulate_json(capsys, str(CLUSTER), str(path), "--events", str(events))
    log = [json.loads(line) for line in events.read_text().splitlines()]
    web = [e for e in log if (e["pod"] or "").startswith("shop/web-")]
    submits = [e["t"] for e in web if e["type"] == "submit"]
    assert submits == [0, 0, 300]  # the third replica waited for quota
    deletes = [e["t"] for e in web if e["type"] == "delete"]
    assert deletes == [1200, 1200, 1200]  # deleting the Deployment deleted its pods


def test_volcano_task_completed_completes_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def task(name: str, duration: str, policies: list[dict[str, str]]) -> dict[str, Any]:
        template = {"metadata": {"annotations": {"phalanx.dev/duration": duration}}}
        template["spec"] = pod("x")["spec"]
        return {"name": name, "replicas": 1, "policies": policies, "template": template}

    complete = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "mpi"},
        "spec": {"tasks": [task("launcher", "10m", complete), task("worker", "1h", [])]},
    }
    path = write(tmp_path, "vc.yaml", job)
    result = gangs(simulate_json(capsys, str(CLUSTER), str(path)))
    assert result["mpi"]["finish"] == 600  # the launcher's completion ends the job
    job["spec"]["tasks"][0]["policies"] = []
    path = write(tmp_path, "vc2.yaml", job)
    assert gangs(simulate_json(capsys, str(CLUSTER), str(path)))["mpi"]["finish"] == 3600
