"""A snapshot with pods of two schedulers, through ``phalanx simulate --scheduler-name``: the
policy under test takes victims only among the pods it places, as Volcano and KAI do; a pod
of the default scheduler it evicted went back to the ``kube-default`` baseline, which put it
straight back where it was, and the preemptor waited anyway."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phalanx.cli.main import main

GROUP = "vj-542863ad-673f-492e-83f5-a19ee8689c5a"

SNAPSHOT = f"""\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {{name: gpu-node-1, uid: 542863ad-0000-4000-8000-0000000000a1}}
  status:
    allocatable: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: notebook-5d6f7-aaaaa
    namespace: users
    uid: 542863ad-0000-4000-8000-0000000000c1
    annotations: {{phalanx.dev/duration: 3h}}
    ownerReferences:
    - {{apiVersion: apps/v1, kind: ReplicaSet, name: notebook-5d6f7, controller: true,
       uid: 542863ad-0000-4000-8000-0000000000c9}}
  spec:
    nodeName: gpu-node-1
    schedulerName: default-scheduler
    priority: 0
    containers:
    - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: "4"}}}}}}
  status: {{phase: Running}}
- apiVersion: scheduling.volcano.sh/v1beta1
  kind: PodGroup
  metadata:
    name: {GROUP}
    namespace: team-a
    uid: 542863ad-0000-4000-8000-0000000000b1
    annotations: {{phalanx.dev/duration: 3h}}
  spec: {{minMember: 1, queue: default}}
  status: {{phase: Running, running: 1}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: vj-worker-0
    namespace: team-a
    uid: 542863ad-0000-4000-8000-000000000001
    annotations: {{scheduling.k8s.io/group-name: {GROUP}, volcano.sh/task-spec: worker}}
    ownerReferences:
    - {{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: vj, controller: true,
       uid: 542863ad-673f-492e-83f5-a19ee8689c5a}}
  spec:
    nodeName: gpu-node-1
    schedulerName: volcano
    priority: 100
    containers:
    - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: "4"}}}}}}
  status: {{phase: Running}}
"""

URGENT = """\
apiVersion: v1
kind: Pod
metadata: {name: hi, namespace: team-c, annotations: {phalanx.dev/duration: 1h}}
spec:
  schedulerName: volcano
  priority: 10000
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "4"}}}]
"""


@pytest.mark.parametrize("policy", ["volcano", "phalanx"])
def test_victims_are_only_pods_of_the_scheduler_under_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    """``hi`` preempts the Volcano job and starts at once; the default scheduler's notebook
    runs on. (Was: the notebook, lowest in priority, was evicted, re-placed at once by the
    baseline on the room it left, and ``hi`` waited 3 h.)"""
    snapshot, urgent = tmp_path / "snapshot.yaml", tmp_path / "urgent.yaml"
    snapshot.write_text(SNAPSHOT)
    urgent.write_text(URGENT)
    args = ["simulate", str(snapshot), str(urgent), "--policy", policy]
    assert main([*args, "--scheduler-name", "volcano", "-o", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    gangs = {g["name"]: (g["start"], g["preempted"]) for g in run["gangs"]}
    assert gangs == {
        "notebook-5d6f7-aaaaa": (0.0, 0),
        GROUP: (3600.0, 1),
        "hi": (0.0, 0),
    }
