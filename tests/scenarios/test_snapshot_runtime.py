"""How a snapshot's running pods run on, through ``phalanx simulate``: they are past their
start-up (``--startup-delay`` is for pods bound in the run), an elastic gang partly running is
sized on all its pods (its members arrive one by one in the dump), and the run ends when the
last work does, not at a finish an eviction or a resize replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli.main import main

GROUP = "elastic-5386b4e9-5db4-42a1-8128-83b2b315c8cb"

NODES = """\
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-node-1, uid: 5386b4e9-0000-4000-8000-0000000000a1}
  status:
    allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
- apiVersion: v1
  kind: Node
  metadata: {name: gpu-node-2, uid: 5386b4e9-0000-4000-8000-0000000000a2}
  status:
    allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}
"""

# another team's pod on gpu-node-2, done in 2 h
OTHER = """\
- apiVersion: v1
  kind: Pod
  metadata:
    name: other-5f6d7c8b9-k2j4h
    namespace: team-b
    uid: 5386b4e9-0000-4000-8000-0000000000c1
    annotations: {phalanx.dev/duration: 2h}
    ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: other-5f6d7c8b9, controller: true,
       uid: 5386b4e9-0000-4000-8000-0000000000c9}
  spec:
    nodeName: gpu-node-2
    priority: 0
    containers:
    - {name: main, image: x, resources: {limits: {nvidia.com/gpu: "4"}}}
  status: {phase: Running}
"""


def _member(index: int, node: str | None) -> str:
    placed = f"nodeName: {node}" if node else f"hostname: elastic-worker-{index}"
    return f"""\
- apiVersion: v1
  kind: Pod
  metadata:
    name: elastic-worker-{index}
    namespace: team-a
    uid: 5386b4e9-0000-4000-8000-00000000000{index}
    annotations: {{scheduling.k8s.io/group-name: {GROUP}, volcano.sh/task-spec: worker}}
    ownerReferences:
    - {{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: elastic, controller: true,
       uid: 5386b4e9-5db4-42a1-8128-83b2b315c8cb}}
  spec:
    {placed}
    schedulerName: volcano
    priority: 100
    containers:
    - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: "4"}}}}}}
  status: {{phase: {"Running" if node else "Pending"}}}
"""


# a Volcano job of 4 workers, at least 2: three run, the fourth waits for room on gpu-node-2
ELASTIC = (
    "apiVersion: v1\nkind: List\nitems:\n"
    + NODES
    + f"""\
- apiVersion: scheduling.volcano.sh/v1beta1
  kind: PodGroup
  metadata:
    name: {GROUP}
    namespace: team-a
    uid: 5386b4e9-0000-4000-8000-0000000000b1
    annotations: {{phalanx.dev/duration: 4h}}
  spec: {{minMember: 2, queue: default}}
  status: {{phase: Running, running: 3}}
"""
    + "".join(
        _member(i, node) for i, node in enumerate(["gpu-node-1", "gpu-node-1", "gpu-node-2", None])
    )
    + OTHER
)


def _run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *args: str
) -> dict[str, Any]:
    path = tmp_path / "snapshot.yaml"
    path.write_text(text)
    assert main(["simulate", str(path), "--policy", "volcano", "-o", "json", *args]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_an_elastic_gang_partly_running_is_sized_on_all_its_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its work is 4 h × 4 pods = 16 member-hours: 3 members for 2 h (6), then 4 for the
    remaining 10 (2 h 30 m): done at 4 h 30 m, and the run ends there. (Was: started when
    its second member appeared, with 2 pods known, it ran a flat 4 h whatever its members;
    and the run "ended" at the finish planned before it grew.)"""
    run = _run(tmp_path, capsys, ELASTIC)
    gang = next(g for g in run["gangs"] if g["name"] == GROUP)
    assert (gang["start"], gang["finish"]) == (0.0, 16200.0)
    assert run["end"] == 16200.0


def test_running_pods_of_a_snapshot_are_past_their_start_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``--startup-delay 60`` the running gang and pod start at t=0; the pending member
    bound at 2 h starts a minute later. (Was: nothing of the snapshot ever started, every
    running pod reported deadlocked.)"""
    run = _run(tmp_path, capsys, ELASTIC, "--startup-delay", "60")
    gangs = {g["name"]: (g["state"], g["start"]) for g in run["gangs"]}
    assert gangs == {GROUP: ("completed", 0.0), "other-5f6d7c8b9-k2j4h": ("completed", 0.0)}
    assert run["deadlocked"] == 0
