"""Every gang declaration and workload kind, in its owner's own shape, through `phalanx simulate`.

Each manifest in tests/workloads/ was written for these tests in the shape of its project's
documentation. They run beside tests/workloads/cluster.yaml: 4 GPUs, of which a running pod
(a snapshot's, with spec.nodeName) holds 2 for 30 minutes. Every gang needs more than 2 of its
pods at once, so its owner's semantics show: under `phalanx` its minimum is bound together
(after 30 minutes) or not at all; under `kube-default` some of its pods are bound at t=0 and
hold GPUs idle — the partial allocation gang scheduling exists to prevent.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli.main import main
from phalanx.policies import COMPARED

HERE = Path(__file__).resolve().parent.parent / "workloads"
CLUSTER = HERE / "cluster.yaml"

#: (manifest, gang, its minimum, the queue recorded for it)
GANGS = [
    ("workload-v1alpha1.yaml", "trainer-workers", 3, "default"),
    ("workload-v1alpha2.yaml", "embed-train-workers-0", 3, "default"),
    ("workload-v1beta1.yaml", "llm-train-workers-0", 3, "default"),
    ("kai.yaml", "distributed-train", 3, "research"),
    ("koordinator.yaml", "bert", 3, "default"),
    ("koordinator-groups.yaml", "ps+workers", 3, "default"),
    ("yunikorn.yaml", "spark-etl-001", 3, "root.analytics"),
    ("kueue.yaml", "sim", 3, "team-a"),
    ("volcano-job.yaml", "tf-mnist", 3, "default"),
    ("pytorchjob.yaml", "resnet", 3, "default"),
    ("mpijob-v1.yaml", "allreduce", 4, "default"),
    ("mpijob-v2beta1.yaml", "allreduce-v2", 4, "default"),
    ("jobset.yaml", "pretrain-pg", 3, "default"),
    ("lws.yaml", "vllm-0", 3, "default"),
    ("deployment-kueue.yaml", "ray", 3, "team-a"),
    ("trainjob.yaml", "llama-ft", 3, "default"),
    ("raycluster.yaml", "tune", 4, "default"),
]


def simulate(
    tmp_path: Path, *files: Path | str, policy: str = "phalanx", extra: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = tmp_path / f"{policy}.jsonl"
    args = ["simulate", *map(str, files), "--policy", policy, "-o", "json", "--events"]
    code, out = run([*args, str(events), *extra])
    assert code == 0, out
    lines = events.read_text().splitlines()
    return json.loads(out), [json.loads(line) for line in lines]


def run(args: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue() + err.getvalue()


def first_binds(events: list[dict[str, Any]], gang: str) -> tuple[float, int]:
    """When the gang's first pods were bound, and how many at that instant."""
    times = [e["t"] for e in events if e["type"] == "bind" and e["gang"] == f"default/{gang}"]
    assert times, f"no pod of {gang} was bound"
    return times[0], Counter(times)[times[0]]


@pytest.mark.parametrize(("manifest", "gang", "minimum", "queue"), GANGS)
def test_the_owner_gang_is_bound_whole_under_phalanx_and_split_under_kube_default(
    tmp_path: Path, manifest: str, gang: str, minimum: int, queue: str
) -> None:
    result, events = simulate(tmp_path, CLUSTER, HERE / manifest)
    record = next(g for g in result["gangs"] if g["name"] == gang)
    assert (record["min_member"], record["queue"]) == (minimum, queue)
    assert record["state"] in ("completed", "running")
    at, count = first_binds(events, gang)
    # together: once the running pod finished, or at once when the gang outranks it (it is
    # preempted, and comes back pending)
    preempts = record["priority"] > 0
    assert at == (0 if preempts else 1800) and count >= minimum
    evicted = [e["pod"] for e in events if e["type"] == "evict"]
    assert evicted == (["default/running-inference"] if preempts else [])
    assert result["idle_gpu_hours"] == 0

    baseline, base_events = simulate(tmp_path, CLUSTER, HERE / manifest, policy="kube-default")
    at, count = first_binds(base_events, gang)
    assert at == 0 and count < minimum  # kube-default binds part of it at once
    assert baseline["idle_gpu_hours"] > 0


def test_a_jobset_without_gang_declaration_is_placed_pod_by_pod(tmp_path: Path) -> None:
    for policy in ("phalanx", "kube-default"):
        result, _ = simulate(tmp_path, CLUSTER, HERE / "jobset-plain.yaml", policy=policy)
        starts = {g["name"]: g["start"] for g in result["gangs"]}
        assert starts == {
            "running-inference": 0,
            "sweep-trial-0-0": 0,
            "sweep-trial-1-0": 0,
            "sweep-trial-2-0": 1800,
        }


def test_controllers_name_their_pods_as_kubernetes_does(tmp_path: Path) -> None:
    _, events = simulate(tmp_path, CLUSTER, HERE / "apps.yaml", HERE / "volcano-job.yaml")
    pods = {e["pod"] for e in events if e["type"] == "submit" and e["pod"]}
    assert {"default/web-0", "default/web-1"} <= pods  # StatefulSet ordinals
    assert {
        "default/tf-mnist-ps-0",
        "default/tf-mnist-worker-0",
        "default/tf-mnist-worker-1",
    } <= pods
    cache = sorted(p for p in pods if p.startswith("default/cache-"))
    assert len(cache) == 2 and all(len(p) == len("default/cache-") + 5 for p in cache)
    _, again = simulate(tmp_path, CLUSTER, HERE / "apps.yaml")
    assert cache == sorted(
        e["pod"] for e in again if e["type"] == "submit" and "cache-" in (e["pod"] or "")
    )


def test_the_readme_peer_example_under_all_policies(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "06-pytorchjob.yaml"
    assert main(["compare", str(example), "-o", "json"]) == 0
    policies = json.loads(capsys.readouterr().out)["policies"]
    assert {name: m["completed"] for name, m in policies.items()} == dict.fromkeys(COMPARED, 3)
    assert policies["kube-default"]["idle_gpu_hours"] > 7.9
    assert policies["volcano"]["idle_gpu_hours"] == policies["phalanx"]["idle_gpu_hours"] == 0
