"""A snapshot's ResourceQuota, through ``phalanx simulate``: the API server checks a quota when
a pod is created, so pods a dump shows running stay even when their namespace is now over its
quota (lowered since, or listed before them); a running pod evicted and refused on
re-creation by that quota is reported, not silently dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli.main import main

# ``kubectl get resourcequotas,pods -A -o yaml``: the quota (lowered to 4 GPUs after the two
# 4-GPU replicas started) comes before the pods it does not remove
SNAPSHOT = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-1, uid: 3b1e9c2a-0000-4000-8000-000000000001, resourceVersion: "812"}
  status:
    allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "8", pods: "110"}
- apiVersion: v1
  kind: ResourceQuota
  metadata: {name: gpu-quota, namespace: team-a, uid: 3b1e9c2a-0000-4000-8000-000000000002}
  spec:
    hard: {requests.nvidia.com/gpu: "4"}
  status:
    hard: {requests.nvidia.com/gpu: "4"}
    used: {requests.nvidia.com/gpu: "8"}
- apiVersion: v1
  kind: Pod
  metadata:
    name: trainer-7c9d5f6b8-abcde
    namespace: team-a
    uid: 3b1e9c2a-0000-4000-8000-000000000003
    ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: trainer-7c9d5f6b8, controller: true,
       uid: 3b1e9c2a-0000-4000-8000-000000000009}
  spec:
    nodeName: gpu-1
    priority: 0
    schedulerName: default-scheduler
    containers:
    - name: main
      image: trainer:1
      resources: {limits: {nvidia.com/gpu: "4"}, requests: {nvidia.com/gpu: "4"}}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata:
    name: trainer-7c9d5f6b8-fghij
    namespace: team-a
    uid: 3b1e9c2a-0000-4000-8000-000000000004
    ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: trainer-7c9d5f6b8, controller: true,
       uid: 3b1e9c2a-0000-4000-8000-000000000009}
  spec:
    nodeName: gpu-1
    priority: 0
    schedulerName: default-scheduler
    containers:
    - name: main
      image: trainer:1
      resources: {limits: {nvidia.com/gpu: "4"}, requests: {nvidia.com/gpu: "4"}}
  status: {phase: Running}
"""

URGENT = """\
apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: team-b, annotations: {phalanx.dev/duration: 30m}}
spec:
  priority: 1000
  containers: [{name: main, image: x, resources: {limits: {nvidia.com/gpu: "8"}}}]
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *texts: str) -> dict[str, Any]:
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"input-{i}.yaml"
        path.write_text(text)
        paths.append(str(path))
    assert main(["simulate", *paths, "--policy", "phalanx", "-o", "json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_running_pods_over_a_lowered_quota_stay_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both replicas run on: the quota was checked when they were created. (Was: the second
    was "refused by the API server", as if the quota removed a running pod.)"""
    run = _run(tmp_path, capsys, SNAPSHOT)
    assert run["rejected_pods"] == []
    states = {g["name"]: (g["start"], g["state"]) for g in run["gangs"]}
    assert states == {
        "trainer-7c9d5f6b8-abcde": (0.0, "running"),
        "trainer-7c9d5f6b8-fghij": (0.0, "running"),
    }


def test_an_evicted_pod_the_quota_refuses_again_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``urgent`` preempts both replicas; the namespace is over its quota, so the first cannot
    be re-created (4 + 4 > 4) and the second can. The first is listed as refused and says why;
    it had no start left over from before its eviction. (Was: silently gone, shown "waiting"
    with its old start.)"""
    run = _run(tmp_path, capsys, SNAPSHOT, URGENT)
    gangs = {g["name"]: g for g in run["gangs"]}
    assert run["preemptions"] == 2
    assert gangs["urgent"]["start"] == 0.0
    refused = gangs["trainer-7c9d5f6b8-abcde"]
    assert (refused["start"], refused["state"], refused["preempted"]) == (None, "waiting", 1)
    assert refused["reason"].startswith("evicted, then refused on re-creation: exceeded quota")
    assert run["rejected_pods"] == [
        "team-a/trainer-7c9d5f6b8-abcde: exceeded quota: gpu-quota, requested: "
        "nvidia.com/gpu=4, used: nvidia.com/gpu=4, limited: nvidia.com/gpu=4 "
        "(when re-created after its eviction)"
    ]
    assert gangs["trainer-7c9d5f6b8-fghij"]["start"] == 1800.0  # back once urgent is done
