"""`phalanx simulate --from-cluster`: the snapshot taken through the live client reproduces the
cluster's running pods (on their nodes at t=0), queues its pending ones and skips finished
ones, with the gang APIs the server serves."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml
from apiserver.harness import connected
from apiserver.registry import ALL_CRDS, ResourceInfo
from test_live_serve import NS, node, pod, podgroup

from phalanx.cli.main import main


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def phase(obj: dict[str, Any], value: str) -> dict[str, Any]:
    obj["status"] = {"phase": value}
    return obj


async def test_a_snapshot_from_the_cluster_reproduces_its_running_pods(tmp_path: Path) -> None:
    async with connected() as (server, _client):
        for name in ("node-a", "node-b"):
            server.put("v1", "nodes", node(name))
        running = pod("serving", gpus=4, scheduler="default-scheduler", node_name="node-a")
        server.put("v1", "pods", phase(running, "Running"))
        server.put("v1", "pods", phase(pod("done", gpus=4, node_name="node-b"), "Succeeded"))
        server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", podgroup("train", 2))
        for i in range(2):
            server.put("v1", "pods", phase(pod(f"train-{i}", group="train", gpus=2), "Pending"))
        kubeconfig = server.kubeconfig(tmp_path / "config")
        events = tmp_path / "events.jsonl"
        argv = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig)]
        argv += ["-o", "json", "--events", str(events)]
        code, out, err = await asyncio.to_thread(run_cli, argv)
    assert code == 0, err
    result = json.loads(out)
    gangs = {g["name"]: g for g in result["gangs"]}
    assert set(gangs) == {"serving", "train"}  # the finished pod holds nothing
    assert gangs["train"]["min_member"] == 2 and gangs["train"]["start"] == 0
    binds = [json.loads(line) for line in events.read_text().splitlines()]
    binds = [(e["t"], e["pod"], e["node"]) for e in binds if e["type"] == "bind"]
    assert binds[0] == (0.0, f"{NS}/serving", "node-a")  # where it runs, before any cycle
    assert {b[2] for b in binds[1:]} == {"node-b"}  # node-a is full: the gang goes to node-b


RUNTIMES = ResourceInfo(
    "trainer.kubeflow.org",
    "v1alpha1",
    "clustertrainingruntimes",
    "ClusterTrainingRuntime",
    namespaced=False,
    custom=True,
)
TRAINJOB = f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {{name: tune, namespace: {NS}}}
spec:
  runtimeRef: {{name: torch-gang}}
  trainer: {{numNodes: 2, resourcesPerNode: {{limits: {{nvidia.com/gpu: "4"}}}}}}
"""


def runtime() -> dict[str, Any]:
    node_job = {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "torch"}]}}},
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-gang"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"coscheduling": {}},
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": node_job}]}},
        },
    }


async def test_a_trainjob_added_to_the_snapshot_finds_its_installed_runtime(
    tmp_path: Path,
) -> None:
    async with connected((*ALL_CRDS, RUNTIMES)) as (server, _client):
        for name in ("node-a", "node-b"):
            server.put("v1", "nodes", node(name))
        server.put("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", runtime())
        kubeconfig = server.kubeconfig(tmp_path / "config")
        job = tmp_path / "tune.yaml"
        job.write_text(TRAINJOB)
        argv = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), str(job)]
        code, out, err = await asyncio.to_thread(run_cli, [*argv, "-o", "json"])
    assert code == 0, err
    gang = next(g for g in json.loads(out)["gangs"] if g["name"] == "tune")
    assert (gang["min_member"], gang["gpus"], gang["start"]) == (2, 8.0, 0.0)


async def test_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    async with connected() as (server, _client):
        kubeconfig = server.kubeconfig(tmp_path / "config")
    argv = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig)]
    code, _, err = await asyncio.to_thread(run_cli, argv)
    assert code == 2
    assert err.startswith("phalanx: error: --from-cluster: cannot take the cluster's snapshot")
    assert err.count("\n") == 1


QUOTAS = ResourceInfo("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)


def prioritized(obj: dict[str, Any], value: int, **labels: str) -> dict[str, Any]:
    obj["spec"]["priority"] = value
    obj["metadata"]["labels"].update(labels)
    obj["metadata"]["annotations"] = {"phalanx.dev/duration": "2h"}
    return obj


async def snapshot_run(tmp_path: Path, *, budget: bool) -> dict[str, Any]:
    """A full node: a low-priority pod runs (2 h), a high-priority one waits for its GPUs; the
    namespace has a GPU quota of 8 and, with ``budget``, a PDB keeping the running pod."""
    async with connected((*ALL_CRDS, QUOTAS)) as (server, _client):
        server.put("v1", "nodes", node("node-a"))
        batch = pod("batch", gpus=4, scheduler="default-scheduler", node_name="node-a")
        server.put("v1", "pods", phase(prioritized(batch, 10, app="batch"), "Running"))
        server.put("v1", "pods", phase(prioritized(pod("urgent", gpus=4), 1000), "Pending"))
        quota = {"metadata": {"name": "gpus", "namespace": NS}}
        quota["spec"] = {"hard": {"requests.nvidia.com/gpu": "8"}}
        server.put("v1", "resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota", **quota})
        if budget:
            pdb = {"metadata": {"name": "keep-batch", "namespace": NS}}
            pdb["spec"] = {"minAvailable": 1, "selector": {"matchLabels": {"app": "batch"}}}
            server.put("policy/v1", "poddisruptionbudgets", {"kind": "PodDisruptionBudget", **pdb})
        kubeconfig = server.kubeconfig(tmp_path / "config")
        extra = tmp_path / "extra.yaml"
        extra.write_text(
            yaml.safe_dump(prioritized(pod("extra", gpus=2, scheduler="default-scheduler"), 0))
        )
        argv = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), str(extra)]
        code, out, err = await asyncio.to_thread(run_cli, [*argv, "-o", "json"])
    assert code == 0, err
    return dict(json.loads(out))


async def test_a_snapshot_takes_the_clusters_quotas_and_disruption_budgets(
    tmp_path: Path,
) -> None:
    kept = await snapshot_run(tmp_path, budget=True)
    starts = {g["name"]: g["start"] for g in kept["gangs"]}
    assert starts["urgent"] == 7200.0  # the PDB keeps batch: urgent waits for its end
    assert [r.split(":")[0] for r in kept["rejected_pods"]] == [f"{NS}/extra"]  # over quota
    taken = await snapshot_run(tmp_path, budget=False)
    starts = {g["name"]: g["start"] for g in taken["gangs"]}
    assert starts["urgent"] == 0.0 and taken["preemptions"] == 1  # no PDB: batch is evicted


async def test_a_snapshot_leaves_out_what_the_credentials_may_not_list(tmp_path: Path) -> None:
    """RBAC that forbids listing ResourceQuotas leaves them out (as if not served); the
    nodes and pods the snapshot cannot do without are still an error of one line."""
    async with connected((*ALL_CRDS, QUOTAS)) as (server, _client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "pods", phase(pod("train", gpus=4), "Pending"))
        server.fail("GET", r"/resourcequotas$", 403, times=10, watch=False)
        kubeconfig = server.kubeconfig(tmp_path / "config")
        argv = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), "-o", "json"]
        code, out, err = await asyncio.to_thread(run_cli, argv)
        assert code == 0, err
        assert [g["start"] for g in json.loads(out)["gangs"]] == [0.0]
        server.fail("GET", r"/api/v1/pods$", 403, times=10, watch=False)
        code, _, err = await asyncio.to_thread(run_cli, argv)
    assert code == 2
    assert err.startswith("phalanx: error: --from-cluster: cannot take the cluster's snapshot")
