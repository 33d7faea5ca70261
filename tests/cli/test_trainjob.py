"""Kubeflow Trainer v2 TrainJobs through `phalanx simulate`, beside the runtimes they name.

The manifests in tests/workloads/trainer/ were written for these tests in the shape of Kubeflow
Trainer's documentation: three 8-GPU nodes, four runtimes (plain torch, coscheduling, Volcano
with a dataset initializer, MPI with the launcher as a node), a Kueue ClusterQueue, and a
`kubectl get -o yaml` snapshot of a running TrainJob.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from peer_cli import gang, run

from phalanx.policies import COMPARED

HERE = Path(__file__).resolve().parent.parent / "workloads" / "trainer"
NODES = HERE / "gpu-nodes.yaml"
RUNTIMES = HERE / "runtimes.yaml"


def trainjob(
    name: str,
    runtime: str,
    *,
    nodes: int | None = None,
    gpus: int | None = 8,
    namespace: str = "ml",
    labels: str = "{}",
    annotations: str = "{}",
    extra: str = "",
) -> str:
    trainer = [] if nodes is None else [f"numNodes: {nodes}"]
    if gpus is not None:
        trainer.append(f'resourcesPerNode: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}')
    return f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
  annotations: {annotations}
spec:
  runtimeRef: {{name: {runtime}, {"kind: TrainingRuntime" if runtime == "llm-volcano" else ""}}}
  trainer: {{{", ".join(trainer)}}}
{extra}
"""


def simulate(
    tmp_path: Path, *docs: str, files: tuple[Path, ...] = (), policy: str = "phalanx"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    job = tmp_path / "trainjobs.yaml"
    job.write_text("---".join(docs))
    events = tmp_path / f"{policy}.jsonl"
    args = [str(NODES), str(RUNTIMES), *map(str, files), str(job)]
    code, out = run(["simulate", *args, "--policy", policy, "-o", "json", "--events", str(events)])
    assert code == 0, out
    lines = events.read_text().splitlines()
    return json.loads(out), [json.loads(line) for line in lines]


def binds(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["gang"] for e in events if e["type"] == "bind")


def pods(events: list[dict[str, Any]]) -> set[str]:
    return {e["pod"] for e in events if e["type"] == "submit" and e["pod"]}


def test_four_8_gpu_nodes_wait_whole_where_three_fit(tmp_path: Path) -> None:
    big = trainjob("big", "torch-cosched", nodes=4)
    result, events = simulate(tmp_path, big)
    record = gang(result, "big")
    assert (record["min_member"], record["state"], record["gpus"]) == (4, "waiting", 32.0)
    assert binds(events)["ml/big"] == 0  # never 3 of 4
    _, split = simulate(tmp_path, big, policy="kube-default")
    assert binds(split)["ml/big"] == 3  # a pod-at-a-time scheduler holds 24 GPUs idle


def test_a_kueue_labelled_trainjob_is_one_gang_in_its_cluster_queue(tmp_path: Path) -> None:
    labels = "{kueue.x-k8s.io/queue-name: team-a}"
    big = trainjob("big", "torch-plain", nodes=4, labels=labels, extra="  suspend: true")
    small = trainjob(
        "small", "torch-plain", labels=labels, annotations="{phalanx.dev/duration: 2h}"
    )
    result, events = simulate(tmp_path, big, small, files=(HERE / "kueue.yaml",))
    assert (gang(result, "big")["queue"], gang(result, "big")["min_member"]) == ("gpu-cq", 4)
    assert binds(events)["ml/big"] == 0 and gang(result, "big")["state"] == "waiting"
    record = gang(result, "small")  # the runtime's mlPolicy.numNodes: 2
    assert (record["queue"], record["min_member"], record["state"]) == ("gpu-cq", 2, "completed")
    assert record["finish"] - record["start"] == 7200
    assert result["queues"]["gpu-cq"]["mean_gpu_share"] > 0


def test_without_gang_or_kueue_its_pods_go_one_by_one(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, trainjob("loose", "torch-plain", nodes=4))
    at_once = [e["pod"] for e in events if e["type"] == "bind" and e["t"] == 0]
    assert len(at_once) == 3  # the fourth pod waits for a node, the other three run alone
    assert not any(g["name"] == "loose" for g in result["gangs"])


def test_resources_per_node_merge_over_the_runtime_container(tmp_path: Path) -> None:
    _, events = simulate(tmp_path, trainjob("ft", "torch-plain", nodes=1, gpus=4))
    requests = next(e["requests"] for e in events if e["type"] == "bind")
    assert requests["nvidia.com/gpu"] == 4000 and requests["cpu"] == 8000  # cpu: the runtime's
    _, events = simulate(tmp_path, trainjob("ft", "torch-plain", nodes=1, gpus=None))
    assert next(e["requests"] for e in events if e["type"] == "bind")["nvidia.com/gpu"] == 1000


def test_a_volcano_runtime_gangs_initializer_and_trainer_in_its_queue(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, trainjob("llm", "llm-volcano"))
    record = gang(result, "llm")
    assert (record["min_member"], record["queue"], record["state"]) == (3, "research", "completed")
    assert pods(events) == {
        "ml/llm-dataset-initializer-0-0",
        "ml/llm-node-0-0",
        "ml/llm-node-0-1",
    }


def test_an_mpi_runtime_runs_the_launcher_as_one_of_its_nodes(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, trainjob("ds", "mpi-launcher", nodes=3, gpus=4))
    assert gang(result, "ds")["min_member"] == 3
    assert pods(events) == {"ml/ds-launcher-0-0", "ml/ds-node-0-0", "ml/ds-node-0-1"}
    gpus = {e["pod"]: e["requests"].get("nvidia.com/gpu", 0) for e in events if e["type"] == "bind"}
    assert set(gpus.values()) == {4000}  # resourcesPerNode reaches the node job too


def test_duration_deadline_and_suspension(tmp_path: Path) -> None:
    deadline = trainjob("bounded", "torch-cosched", nodes=1, extra="  activeDeadlineSeconds: 900")
    held = trainjob("held", "torch-plain", nodes=1, extra="  suspend: true")
    result, _ = simulate(tmp_path, deadline, held)
    record = gang(result, "bounded")
    assert record["finish"] - record["start"] == 900 and not record["default_duration"]
    assert result["suspended_jobs"] == ["ml/held-node-0"]


def test_a_snapshot_counts_the_running_trainjob_once(tmp_path: Path) -> None:
    labels = "{kueue.x-k8s.io/queue-name: team-a}"
    new = trainjob("ft", "torch-plain", labels=labels, annotations="{phalanx.dev/duration: 30m}")
    files = (HERE / "kueue.yaml", HERE / "snapshot.yaml")
    result, events = simulate(tmp_path, new, files=files)
    assert {p for p in pods(events) if "pretrain" in p} == {
        "ml/pretrain-node-0-0-x7k2p",
        "ml/pretrain-node-0-1-m4q9z",
    }
    running = gang(result, "pretrain")  # its Kueue gang, duration and queue, from the TrainJob
    assert (running["queue"], running["start"], running["finish"]) == ("gpu-cq", 0, 3600)
    assert gang(result, "ft")["start"] == 3600  # one node free until pretrain ends


def test_bad_trainjobs_get_one_line_each_and_the_others_are_still_checked(tmp_path: Path) -> None:
    broken_runtime = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: no-trainer}
spec:
  template:
    spec:
      replicatedJobs:
        - name: prepare
          template: {spec: {template: {spec: {containers: [{name: prep, image: x}]}}}}
"""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "---".join(
            [
                trainjob("orphan", "deepspeed-distributed", nodes=2),
                trainjob("typo", "torch-plain", extra="").replace(
                    "trainer: {", 'trainer: {numNodes: "four", '
                ),
                broken_runtime,
                trainjob("on-broken", "no-trainer"),
                trainjob("ok", "torch-plain", nodes=2),
            ]
        )
    )
    code, out = run(["simulate", str(NODES), str(RUNTIMES), str(bad)])
    lines = out.strip().splitlines()
    assert code == 2 and "Traceback" not in out
    assert lines == [
        f"phalanx: error: {bad}: ClusterTrainingRuntime no-trainer: "
        "spec.template.spec.replicatedJobs: no trainer job: label one "
        "trainer.kubeflow.org/trainjob-ancestor-step: trainer, or name one 'node'",
        f"phalanx: error: {bad}: TrainJob ml/orphan: spec.runtimeRef.name: ClusterTrainingRuntime "
        "deepspeed-distributed is not in the input (add it: kubectl get "
        "clustertrainingruntimes deepspeed-distributed -o yaml)",
        f"phalanx: error: {bad}: TrainJob ml/typo: spec.trainer.numNodes: must be an integer, "
        "not a string ('four')",
        f"phalanx: error: {bad}: TrainJob ml/on-broken: spec.runtimeRef.name: "
        "ClusterTrainingRuntime no-trainer is invalid (its own error is listed)",
    ]


def test_merged_resources_the_api_server_would_refuse_name_the_trainjob_field(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.yaml"
    overcommitted = (
        "resourcesPerNode: {requests: {nvidia.com/gpu: '2'}, limits: {nvidia.com/gpu: '1'}}"
    )
    bad.write_text(
        trainjob("x", "torch-plain", gpus=None).replace("trainer: {", f"trainer: {{{overcommitted}")
    )
    code, out = run(["simulate", str(NODES), str(RUNTIMES), str(bad)])
    assert code == 2
    assert out.strip() == (
        f"phalanx: error: {bad}: TrainJob ml/x: spec.trainer.resourcesPerNode.requests"
        "[nvidia.com/gpu]: must be equal to the nvidia.com/gpu limit (it cannot be overcommitted)"
    )


def test_the_trainjob_peer_example_under_all_policies() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "07-trainjob.yaml"
    code, out = run(["compare", str(example), "-o", "json"])
    assert code == 0, out
    policies = json.loads(out)["policies"]
    assert {name: m["completed"] for name, m in policies.items()} == dict.fromkeys(COMPARED, 2)
    assert policies["kube-default"]["idle_gpu_hours"] > 7.9  # finetune's 2 of 3 nodes wait
    assert policies["volcano"]["idle_gpu_hours"] == policies["phalanx"]["idle_gpu_hours"] == 0


def test_a_runtime_patch_moves_the_volcano_gang_to_another_queue(tmp_path: Path) -> None:
    patch = """  runtimePatches:
    - manager: example.com/queue-router
      trainingRuntimeSpec:
        template:
          metadata:
            annotations: {scheduling.volcano.sh/queue-name: urgent}"""
    result, _ = simulate(tmp_path, trainjob("llm", "llm-volcano", extra=patch))
    assert gang(result, "llm")["queue"] == "urgent"


def test_pod_patches_of_every_trainer_version_reach_the_pods_they_target(tmp_path: Path) -> None:
    kueue_patch = """  runtimePatches:
    - manager: kueue.x-k8s.io/manager
      trainingRuntimeSpec:
        template:
          spec:
            replicatedJobs:
              - name: node
                template:
                  spec:
                    template:
                      spec:
                        nodeSelector: {kubernetes.io/hostname: gpu-c}"""
    gated = """  podTemplateOverrides:
    - targetJobs: [{name: node}]
      metadata: {labels: {team: vision}}
      spec:
        schedulingGates: [{name: example.com/approval}]"""
    old = """  podSpecOverrides:
    - targetJobs: [{name: node}]
      nodeSelector: {kubernetes.io/hostname: gpu-b}"""
    jobs = [
        trainjob("placed", "torch-plain", nodes=1, extra=kueue_patch),
        trainjob("held", "torch-plain", nodes=1, extra=gated),
        trainjob("v20", "torch-plain", nodes=1, extra=old),
    ]
    result, events = simulate(tmp_path, *jobs)
    nodes = {e["pod"]: e["node"] for e in events if e["type"] == "bind"}
    assert nodes == {"ml/placed-node-0-0": "gpu-c", "ml/v20-node-0-0": "gpu-b"}
    assert (
        gang(result, "held-node-0-0")["reason"]
        == "pod ml/held-node-0-0 is gated (example.com/approval)"
    )


def test_a_bad_pod_patch_names_its_field(tmp_path: Path) -> None:
    bad_patch = """  podTemplateOverrides:
    - targetJobs: [{name: node}]
      spec:
        tolerations: [{key: gpu, operator: Sometimes}]"""
    bad = tmp_path / "bad.yaml"
    bad.write_text(trainjob("x", "torch-plain", extra=bad_patch))
    code, out = run(["simulate", str(NODES), str(RUNTIMES), str(bad)])
    assert code == 2 and len(out.strip().splitlines()) == 1
    assert out.startswith(
        f"phalanx: error: {bad}: TrainJob ml/x: spec.podTemplateOverrides[0].spec.tolerations[0]"
        ".operator: "
    )


def test_the_runtime_estimate_on_a_trainjob_tells_when_the_next_one_starts(tmp_path: Path) -> None:
    notes = "{phalanx.dev/duration: 2h, phalanx.dev/runtime-estimate: 2h}"
    first = trainjob("first", "torch-cosched", nodes=3, annotations=notes)
    later = "{phalanx.dev/submit-after: 1m, phalanx.dev/duration: 30m}"
    second = trainjob("second", "torch-cosched", nodes=1, annotations=later)
    result, _ = simulate(tmp_path, first, second)
    waiting = gang(result, "second")
    assert (waiting["expected_start_first"], waiting["start"]) == (7200, 7200)
    unknown, _ = simulate(tmp_path, first.replace(", phalanx.dev/runtime-estimate: 2h", ""), second)
    assert gang(unknown, "second")["expected_start_first"] is None  # the duration is not told


def test_pods_a_snapshot_shows_owned_by_the_jobset_count_the_trainjob_once(tmp_path: Path) -> None:
    snapshot = (HERE / "snapshot.yaml").read_text()
    by_jobset = snapshot.replace(
        "{apiVersion: batch/v1, kind: Job, name: pretrain-node-0,",
        "{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: pretrain,",
    )
    assert by_jobset != snapshot
    (tmp_path / "snapshot.yaml").write_text(by_jobset)
    files = (HERE / "kueue.yaml", tmp_path / "snapshot.yaml")
    result, events = simulate(tmp_path, trainjob("ft", "torch-plain", nodes=1), files=files)
    assert len([e for e in events if e["type"] == "submit" and "pretrain" in (e["pod"] or "")]) == 2
    running = gang(result, "pretrain")
    assert (running["queue"], running["start"], running["finish"]) == ("gpu-cq", 0, 3600)


def test_a_runtimes_depends_on_runs_the_initializer_before_the_trainer_gang(
    tmp_path: Path,
) -> None:
    """A runtime whose trainer job dependsOn its dataset initializer (Complete), as Trainer v2
    runtimes have it: the trainer's pods are made when the initializer succeeded, and the
    PodGroup, which they could never share with it, counts only them."""
    text = RUNTIMES.read_text()
    start = text.index("kind: TrainingRuntime")
    llm = text[start : text.index("---", start)]
    staged = llm.replace("name: llm-volcano", "name: llm-staged").replace(
        "labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}",
        "labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}\n"
        "              annotations: {phalanx.dev/duration: 15m}",
    )
    staged = staged.replace(
        "        - name: node\n",
        "        - name: node\n"
        "          dependsOn: [{name: dataset-initializer, status: Complete}]\n",
        1,
    )
    runtime = "apiVersion: trainer.kubeflow.org/v1alpha1\n" + staged
    job = trainjob("llm", "llm-volcano", annotations="{phalanx.dev/duration: 1h}")
    job = job.replace("name: llm-volcano", "name: llm-staged")
    result, events = simulate(tmp_path, runtime, job)
    created = {e["pod"]: e["t"] for e in events if e["type"] == "submit" and e["pod"]}
    assert created == {
        "ml/llm-dataset-initializer-0-0": 0,
        "ml/llm-node-0-0": 900,
        "ml/llm-node-0-1": 900,
    }
    record = gang(result, "llm")
    assert (record["min_member"], record["queue"]) == (2, "research")
    assert (record["start"], record["finish"]) == (900, 900 + 3600)
    bad = runtime.replace("status: Complete", "status: Done")
    (tmp_path / "bad.yaml").write_text(bad)
    code, out = run(["simulate", str(NODES), str(tmp_path / "bad.yaml")])
    assert code == 2 and out.strip() == (
        f"phalanx: error: {tmp_path / 'bad.yaml'}: TrainingRuntime ml/llm-staged: "
        "spec.template.spec.replicatedJobs[1].dependsOn[0].status: must be Ready or Complete, "
        "not 'Done'"
    )
