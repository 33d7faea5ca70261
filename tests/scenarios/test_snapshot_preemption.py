"""A pod a snapshot shows running (``spec.nodeName``) can be preempted, through ``phalanx
simulate``: evicted, it comes back pending, not straight onto the node it was evicted from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.cli.main import main

SNAPSHOT = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: batch, namespace: t, annotations: {phalanx.dev/duration: 2h}}
spec:
  nodeName: node-a
  priority: 10
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "4"}}}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: t, annotations: {phalanx.dev/duration: 1h}}
spec:
  priority: 1000
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "4"}}}]
"""


def test_a_running_pod_of_a_snapshot_preempted_comes_back_pending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``urgent`` preempts ``batch`` at t=0. Re-created with its ``nodeName``, ``batch`` went
    straight back to node-a, and ``urgent`` waited its 2 h anyway."""
    path = tmp_path / "snapshot.yaml"
    path.write_text(SNAPSHOT)
    assert main(["simulate", str(path), "--policy", "phalanx", "-o", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    gangs = {g["name"]: (g["start"], g["finish"], g["preempted"]) for g in run["gangs"]}
    assert gangs["urgent"] == (0.0, 3600.0, 0)
    assert gangs["batch"] == (3600.0, 3600.0 + 7200.0, 1)  # pending, then placed again
    assert run["preemptions"] == 1
