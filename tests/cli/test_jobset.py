"""JobSets through `phalanx simulate`: snapshots of running JobSets and ``dependsOn``.

tests/workloads/jobset/snapshot.yaml was written for these tests in the shape of a
`kubectl get jobsets,pods -o yaml` dump (the pods name the JobSet's Jobs, which are not in it,
and carry the JobSet's labels); the cluster is tests/workloads/trainer/gpu-nodes.yaml (three
8-GPU nodes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peer_cli import run

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"
HERE = WORKLOADS / "jobset"
NODES = WORKLOADS / "trainer" / "gpu-nodes.yaml"


def simulate(
    tmp_path: Path, *files: Path, docs: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    extra = tmp_path / "jobsets.yaml"
    extra.write_text("---".join(docs) or "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
    events = tmp_path / "events.jsonl"
    args = [str(NODES), *map(str, files), str(extra), "-o", "json", "--events", str(events)]
    code, out = run(["simulate", *args])
    assert code == 0, out
    return json.loads(out), [json.loads(line) for line in events.read_text().splitlines()]


def submitted(events: list[dict[str, Any]]) -> list[str]:
    return [e["pod"] for e in events if e["type"] == "submit" and e["pod"]]


def test_a_snapshots_running_jobset_is_counted_once_where_its_pods_run(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, HERE / "snapshot.yaml")
    assert sorted(submitted(events)) == [
        "ml/pretrain-workers-0-0-q8w2c",
        "ml/pretrain-workers-1-0-h7d4m",
    ]
    assert len(result["gangs"]) == 2
    binds = {e["pod"]: e["node"] for e in events if e["type"] == "bind"}
    assert binds == {
        "ml/pretrain-workers-0-0-q8w2c": "gpu-a",
        "ml/pretrain-workers-1-0-h7d4m": "gpu-b",
    }
    # 16 GPUs for the 2h its Jobs' template declares (not 32, not the 1h default)
    assert result["gpu_allocation"] == [[0, 16], [7200, 0]]
    assert result["default_duration_gangs"] == 0


def test_a_pending_pod_of_a_snapshots_jobset_is_placed_once(tmp_path: Path) -> None:
    snapshot = (HERE / "snapshot.yaml").read_text().replace("      nodeName: gpu-b\n", "")
    head, _, tail = snapshot.rpartition("{phase: Running}")
    pending = tmp_path / "snapshot.yaml"
    pending.write_text(head + "{phase: Pending}" + tail)
    result, events = simulate(tmp_path, pending)
    assert len(submitted(events)) == 2 and len(result["gangs"]) == 2
    nodes = sorted(e["node"] for e in events if e["type"] == "bind")
    assert nodes[0] == "gpu-a" and len(nodes) == 2  # the running one stays, the other is placed
    assert result["gpu_allocation"] == [[0, 16], [7200, 0]]


def replicated(name: str, *, gpus: int = 0, duration: str = "1h", extra: str = "") -> str:
    """One ``spec.replicatedJobs`` entry of one pod (``extra``: more fields, indented)."""
    requests = f'limits: {{nvidia.com/gpu: "{gpus}"}}' if gpus else 'requests: {cpu: "4"}'
    return f"""
    - name: {name}
{extra}
      template:
        metadata: {{annotations: {{phalanx.dev/duration: {duration}}}}}
        spec:
          template:
            spec:
              containers: [{{name: main, image: registry.example/llm:1, resources: {{{requests}}}}}]
"""


def jobset(name: str, *entries: str, labels: str = "{}") -> str:
    return f"""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: {name}, namespace: ml, labels: {labels}}}
spec:
  replicatedJobs:{"".join(entries)}
"""


NODE_AFTER_INITIALIZERS = """      replicas: 2
      dependsOn:
        - {name: dataset-initializer, status: Complete}
        - {name: model-initializer, status: Complete}"""


def test_the_trainer_job_is_created_once_both_initializers_completed(tmp_path: Path) -> None:
    spec = jobset(
        "llm",
        replicated("dataset-initializer", duration="10m"),
        replicated("model-initializer", duration="20m"),
        replicated("node", gpus=8, extra=NODE_AFTER_INITIALIZERS),
    )
    result, events = simulate(tmp_path, docs=(spec,))
    created = {e["pod"]: e["t"] for e in events if e["type"] == "submit" and e["pod"]}
    assert created == {
        "ml/llm-dataset-initializer-0-0": 0,
        "ml/llm-model-initializer-0-0": 0,
        "ml/llm-node-0-0": 1200,  # when the later initializer succeeded
        "ml/llm-node-1-0": 1200,
    }
    finish = {g["name"]: g["finish"] for g in result["gangs"]}
    assert finish["llm-node-0-0"] == finish["llm-node-1-0"] == 1200 + 3600


def test_a_gang_of_the_dependent_pods_is_placed_whole(tmp_path: Path) -> None:
    """The node Jobs' pods name one PodGroup of 2: they arrive together after the
    initializers, and wait whole while one 8-GPU node is free, until a second one is."""
    group = "metadata: {labels: {scheduling.x-k8s.io/pod-group: llm}}\n            spec:"
    spec = jobset(
        "llm",
        replicated("dataset-initializer", duration="10m"),
        replicated("model-initializer", duration="20m"),
        replicated("node", gpus=8, extra=NODE_AFTER_INITIALIZERS).replace(
            "            spec:\n              containers",
            f"            {group}\n              containers",
        ),
    )
    pod_group = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: llm, namespace: ml}
spec: {minMember: 2}
"""
    busy = jobset("busy", replicated("big", gpus=8, duration="1h", extra="      replicas: 2"))
    result, events = simulate(tmp_path, docs=(spec, pod_group, busy))
    llm = next(g for g in result["gangs"] if g["name"] == "llm")
    assert (llm["min_member"], llm["start"], llm["finish"]) == (2, 3600, 7200)
    binds = [e["t"] for e in events if e["type"] == "bind" and e["gang"] == "ml/llm"]
    assert binds == [3600, 3600]  # not one at 1200 on the free node


def test_workers_are_created_when_the_launcher_is_ready(tmp_path: Path) -> None:
    workers = "      replicas: 2\n      dependsOn: [{name: launcher, status: Ready}]"
    spec = jobset(
        "mpi",
        replicated("launcher", duration="1h"),
        replicated("worker", gpus=8, extra=workers),
        labels="{kueue.x-k8s.io/queue-name: team-a}",
    )
    result, events = simulate(tmp_path, WORKLOADS / "trainer" / "kueue.yaml", docs=(spec,))
    created = {e["pod"]: e["t"] for e in events if e["type"] == "submit" and e["pod"]}
    assert created == {"ml/mpi-launcher-0-0": 0, "ml/mpi-worker-0-0": 0, "ml/mpi-worker-1-0": 0}
    first = [e["type"] for e in events if e["pod"] and e["t"] == 0][:3]
    assert first == ["submit", "bind", "submit"]  # the launcher runs before a worker exists
    # Kueue admits the workers whole; the launcher, which runs before them, is not in the gang
    mpi = next(g for g in result["gangs"] if g["name"] == "mpi")
    assert (mpi["min_member"], mpi["queue"], mpi["start"]) == (2, "gpu-cq", 0)


def test_without_depends_on_every_job_starts_at_once(tmp_path: Path) -> None:
    spec = jobset("flat", replicated("prepare", duration="10m"), replicated("train", gpus=8))
    _, events = simulate(tmp_path, docs=(spec,))
    assert {e["t"] for e in events if e["type"] == "submit" and e["pod"]} == {0}


def test_bad_depends_on_gets_one_line_each(tmp_path: Path) -> None:
    def after(name: str, status: str = "Complete") -> str:
        return f"      dependsOn: [{{name: {name}, status: {status}}}]"

    bad = tmp_path / "bad.yaml"
    cases = [
        jobset("typo", replicated("init"), replicated("node", extra=after("inti"))),
        jobset("status", replicated("init"), replicated("node", extra=after("init", "Running"))),
        jobset("loop", replicated("a", extra=after("b")), replicated("b", extra=after("a"))),
        jobset("self", replicated("init"), replicated("node", extra=after("node"))),
        jobset("order", replicated("node", extra=after("init")), replicated("init")),
    ]
    bad.write_text("---".join(cases))
    code, out = run(["simulate", str(NODES), str(bad)])
    assert code == 2 and "Traceback" not in out
    field = "spec.replicatedJobs[1].dependsOn[0]"
    assert out.strip().splitlines() == [
        f"phalanx: error: {bad}: JobSet ml/typo: {field}.name: no replicated job 'inti' "
        "(there are: init, node)",
        f"phalanx: error: {bad}: JobSet ml/status: {field}.status: must be Ready or Complete, "
        "not 'Running'",
        f"phalanx: error: {bad}: JobSet ml/loop: spec.replicatedJobs[0].dependsOn[0].name: "
        "a cycle: a → b → a",
        f"phalanx: error: {bad}: JobSet ml/self: {field}.name: a cycle: node → node",
        f"phalanx: error: {bad}: JobSet ml/order: spec.replicatedJobs[0].dependsOn[0].name: "
        "'init' (spec.replicatedJobs[1]) is listed after 'node'; JobSet needs it before",
    ]
