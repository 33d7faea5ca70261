"""Gangs a snapshot shows running, wholly or in part, through ``phalanx simulate``: members on
a node cordoned since count as running (neither the input check nor the gang's validity asks
the schedulable nodes to hold them again); when the members that run are all there is (the
others ran on a node the dump lacks, or do not exist), the gang is reported deadlocked with
the reason, not with an empty one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from phalanx.cli.main import main

GROUP = "ddp-8c3307be-f6ea-4305-8e86-0ec0d27468d3"


def _member(index: int, node: str | None) -> str:
    return f"""\
- apiVersion: v1
  kind: Pod
  metadata:
    name: ddp-worker-{index}
    namespace: team-a
    uid: 0d1e2f3a-0000-4000-8000-00000000000{index}
    annotations:
      scheduling.k8s.io/group-name: {GROUP}
      volcano.sh/task-spec: worker
    ownerReferences:
    - {{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: ddp, controller: true,
       uid: 8c3307be-f6ea-4305-8e86-0ec0d27468d3}}
  spec:
    {f"nodeName: {node}" if node else "hostname: ddp-worker-" + str(index)}
    schedulerName: volcano
    priority: 0
    containers:
    - name: main
      image: trainer:1
      resources: {{limits: {{nvidia.com/gpu: "4"}}, requests: {{nvidia.com/gpu: "4"}}}}
  status: {{phase: {"Running" if node else "Pending"}}}
"""


def _snapshot(nodes: Sequence[str | None]) -> str:
    head = f"""\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {{name: gpu-node-1, uid: 0d1e2f3a-0000-4000-8000-0000000000a1}}
  status:
    allocatable: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {{name: gpu-node-2, uid: 0d1e2f3a-0000-4000-8000-0000000000a2}}
  spec:
    unschedulable: true
    taints: [{{key: node.kubernetes.io/unschedulable, effect: NoSchedule}}]
  status:
    allocatable: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8", pods: "110"}}
- apiVersion: scheduling.volcano.sh/v1beta1
  kind: PodGroup
  metadata:
    name: {GROUP}
    namespace: team-a
    uid: 0d1e2f3a-0000-4000-8000-0000000000b1
    annotations: {{phalanx.dev/duration: 2h}}
  spec: {{minMember: 4, queue: default}}
  status: {{phase: Running, running: 4}}
"""
    return head + "".join(_member(i, node) for i, node in enumerate(nodes))


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        (
            ["gpu-node-1", "gpu-node-1", "gpu-node-3", "gpu-node-3"],
            "2 of minMember 4 pods exist (2 refused, see pods refused); no other will come",
        ),
        (["gpu-node-1", "gpu-node-1"], "2 of minMember 4 pods exist; no other will come"),
    ],
    ids=["members-on-a-node-not-in-the-dump", "members-missing"],
)
def test_a_gang_short_of_members_in_a_snapshot_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: list[str], reason: str
) -> None:
    """Two members run on gpu-node-1; the other two ran on gpu-node-3 (not in the dump, so
    refused) or are not in the dump; gpu-node-2 is cordoned. The two hold 8 GPUs and can never
    start. (Was: deadlocked with an empty reason.)"""
    path = tmp_path / "snapshot.yaml"
    path.write_text(_snapshot(nodes))
    assert main(["simulate", str(path), "-o", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    (gang,) = run["gangs"]
    assert (gang["state"], gang["reason"]) == ("deadlocked", reason)
    assert len(run["rejected_pods"]) == len(nodes) - 2


@pytest.mark.parametrize(
    "nodes",
    [
        ["gpu-node-1", "gpu-node-1", "gpu-node-2", "gpu-node-2"],
        ["gpu-node-2", "gpu-node-2", "gpu-node-1", None],
    ],
    ids=["whole-gang-running", "one-member-pending"],
)
def test_a_gang_running_on_a_cordoned_node_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: list[str | None]
) -> None:
    """gpu-node-2 was cordoned (to drain it) while the gang ran on it. The gang runs to its
    end; with one member pending (re-created after a failure), that member goes to
    gpu-node-1, which has room for it, and the gang starts. (Was: the whole input refused, "a
    minimum of 4 pods needs nvidia.com/gpu 16 but the whole cluster has 8"; with a member
    pending, deadlocked as needing "more than the whole cluster has".)"""
    path = tmp_path / "snapshot.yaml"
    path.write_text(_snapshot(nodes))
    assert main(["simulate", str(path), "-o", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    (gang,) = run["gangs"]
    assert (gang["state"], gang["start"], gang["finish"]) == ("completed", 0.0, 7200.0)


def test_a_member_that_succeeded_counts_for_its_gang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fourth member finished (``Succeeded``) while three run: the gang runs on with the
    three, as Volcano counts a succeeded task among the ready ones. (Was: deadlocked, "3 of
    minMember 4 pods exist", its 12 GPUs held idle.)"""
    snapshot = _snapshot(["gpu-node-1", "gpu-node-1", "gpu-node-1", "gpu-node-1"])
    head, _, last = snapshot.rpartition("phase: Running")
    path = tmp_path / "snapshot.yaml"
    path.write_text(head + "phase: Succeeded" + last)
    assert main(["simulate", str(path), "-o", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    (gang,) = run["gangs"]
    assert (gang["state"], gang["start"], gang["finish"]) == ("completed", 0.0, 7200.0)
    assert gang["min_member"] == 3  # what is left of its minimum


def test_a_podgroup_whose_members_all_finished_is_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A completed Volcano job's PodGroup stays in the cluster (until its TTL) with its
    succeeded pods: it is over, not a gang waiting for ever. (Was: listed "waiting", with no
    reason, in every snapshot of a cluster that ran jobs.)"""
    snapshot = _snapshot(["gpu-node-1", "gpu-node-1"]).replace("phase: Running", "phase: Succeeded")
    path = tmp_path / "snapshot.yaml"
    path.write_text(snapshot)
    assert main(["simulate", str(path), "-o", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert (run["gangs"], run["waiting"]) == ([], 0)


def test_a_podgroup_without_pods_says_why_it_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Workload API PodGroup no pod names (its pods not yet made) waits, and says why
    (was: waiting with an empty reason)."""
    path = tmp_path / "group.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\n"
        'status: {allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8", pods: "110"}}\n'
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\n"
        "metadata: {name: infer, namespace: serve}\n"
        "spec: {podGroupTemplates: [{name: shard, schedulingPolicy: {gang: {minCount: 2}}}]}\n"
        "---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
        "metadata: {name: infer-shard, namespace: serve}\n"
        "spec:\n"
        "  podGroupTemplateRef: {workload: {workloadName: infer, podGroupTemplateName: shard}}\n"
        "  schedulingPolicy: {gang: {minCount: 2}}\n"
    )
    assert main(["simulate", str(path), "--policy", "phalanx", "-o", "json"]) == 0
    [gang] = json.loads(capsys.readouterr().out)["gangs"]
    assert (gang["state"], gang["reason"]) == (
        "waiting",
        "0 of minMember 2 pods exist; no other will come",
    )
