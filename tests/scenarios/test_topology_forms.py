"""The subgroup and template constraint forms, through ``phalanx simulate`` (JSON and events):
Volcano ``subGroupPolicy`` and Job ``partitionPolicy``, the Workload API's
``podGroupTemplates[].schedulingConstraints``, KAI parent subgroups."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_topology import HYPERNODES, TOPOLOGY, nodes

from phalanx.cli.main import main


def simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *docs: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``phalanx simulate -o json --events``: each gang's record by name, and the binds."""
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join(docs))
    log = tmp_path / "events.jsonl"
    capsys.readouterr()
    args = ["simulate", str(path), "-o", "json", "--events", str(log), "--until", "2h"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    gangs = {g["name"]: g for g in out["gangs"]}
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return gangs, [e for e in events if e["type"] == "bind"]


def rack_of(bind: dict[str, Any]) -> str:
    return str(bind["topology"]).rsplit("/", 1)[0]


def pod(name: str, labels: str, gpus: int = 8) -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n"
        f"spec:\n  containers: [{{name: c, image: x, resources: {{requests: "
        f"{{nvidia.com/gpu: '{gpus}'}}}}}}]\n"
    )


# -- Volcano subGroupPolicy ------------------------------------------------------------------
def volcano_subgroups(name: str, shards: dict[str, int], mode: str, minimum: int) -> str:
    """A Volcano PodGroup whose pods (label shard=S) each shard keep in one tier-1 HyperNode."""
    pg = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata:\n"
        f"  name: {name}\n  annotations: {{phalanx.dev/duration: 1h}}\n"
        f"spec:\n  minMember: {minimum}\n  subGroupPolicy:\n"
        f"  - name: shards\n    networkTopology: {{mode: {mode}, highestTierAllowed: 1}}\n"
        "    labelSelector: {matchLabels: {app: train}}\n    matchLabelKeys: [shard]\n"
    )
    docs = [pg]
    for shard, count in shards.items():
        for i in range(count):
            labels = f"app: train, shard: '{shard}'"
            doc = pod(f"{name}-{shard}-{i}", labels)
            docs.append(
                doc.replace(
                    "metadata:\n",
                    f"metadata:\n  annotations: {{scheduling.k8s.io/group-name: {name}}}\n",
                    1,
                )
            )
    return "---\n".join(docs)


def test_volcano_subgroup_policy_keeps_each_shard_in_one_hypernode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})  # leaf-a: 2 nodes, leaf-b: 3 nodes
    job = volcano_subgroups("vc", {"0": 2, "1": 3}, "hard", 5)
    gangs, binds = simulate(tmp_path, capsys, HYPERNODES, cluster, job)
    assert gangs["vc"]["state"] == "completed"
    where = {b["pod"]: b["topology"].split("/")[1] for b in binds}
    # shard 1 (3 pods) only fits leaf-b; shard 0 fills leaf-a: each shard in one HyperNode
    assert {where[f"default/vc-1-{i}"] for i in range(3)} == {"leaf-b"}
    assert {where[f"default/vc-0-{i}"] for i in range(2)} == {"leaf-a"}


def test_volcano_hard_subgroup_waits_rather_than_spreading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 2}})
    job = volcano_subgroups("vc", {"0": 3}, "hard", 3)  # 3 pods, no HyperNode holds 3
    gangs, binds = simulate(tmp_path, capsys, HYPERNODES, cluster, job)
    assert gangs["vc"]["state"] == "waiting" and not binds
    assert "best tier:1 leaf-a has 16 free" in gangs["vc"]["reason"]


def test_volcano_soft_subgroup_spreads_over_fewest_hypernodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 2}})
    job = volcano_subgroups("vc", {"0": 3}, "soft", 3)
    gangs, binds = simulate(tmp_path, capsys, HYPERNODES, cluster, job)
    assert gangs["vc"]["state"] == "completed"
    assert sorted(Counter(b["topology"].split("/")[1] for b in binds).values()) == [1, 2]


# -- Volcano Job partitionPolicy -------------------------------------------------------------
def volcano_job(partitions: int, size: int, mode: str = "hard", extra: str = "") -> str:
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: llm, annotations: {{phalanx.dev/duration: 1h}}}}
spec:
  tasks:
  - name: worker
    replicas: {partitions * size}
    partitionPolicy:
      totalPartitions: {partitions}
      partitionSize: {size}{extra}
      networkTopology: {{mode: {mode}, highestTierAllowed: 1}}
    template:
      spec:
        containers: [{{name: c, image: x, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]
"""


def test_volcano_partitions_each_in_one_hypernode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    gangs, binds = simulate(tmp_path, capsys, HYPERNODES, cluster, volcano_job(2, 2))
    assert gangs["llm"]["state"] == "completed"
    leaf = {b["pod"]: b["topology"].split("/")[1] for b in binds}
    assert leaf["default/llm-worker-0"] == leaf["default/llm-worker-1"]
    assert leaf["default/llm-worker-2"] == leaf["default/llm-worker-3"]


def test_volcano_partition_too_big_for_any_hypernode_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 2}})
    gangs, binds = simulate(tmp_path, capsys, HYPERNODES, cluster, volcano_job(1, 3))
    assert gangs["llm"]["state"] == "waiting" and not binds
    # volcano ignores network topology: the same job spreads over both HyperNodes
    path = tmp_path / "v.yaml"
    path.write_text("---\n".join([HYPERNODES, cluster, volcano_job(1, 3)]))
    assert main(["simulate", str(path), "--policy", "volcano", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gangs"][0]["state"] == "completed"


def test_volcano_min_partitions_start_the_job_with_the_partitions_that_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    job = volcano_job(3, 2, extra="\n      minPartitions: 2")  # 6 pods; two partitions needed
    gangs, binds = simulate(tmp_path, capsys, HYPERNODES, cluster, job)
    assert gangs["llm"]["state"] == "completed"
    by_partition: dict[int, set[str]] = {}
    for b in binds:
        index = int(b["pod"].rsplit("-", 1)[1])
        by_partition.setdefault(index // 2, set()).add(b["topology"].split("/")[1])
    assert all(len(leaves) == 1 for leaves in by_partition.values())
    assert len(binds) >= 4


# -- Workload API templates ------------------------------------------------------------------
def workload(version: str, key: str) -> str:
    return f"""
apiVersion: scheduling.k8s.io/{version}
kind: Workload
metadata: {{name: wl}}
spec:
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {{gang: {{minCount: 4}}}}
    schedulingConstraints: {{topology: [{{key: {key}}}]}}
"""


def standalone(version: str) -> str:
    ref = (
        "{workloadName: wl, podGroupTemplateName: workers}"
        if version == "v1alpha2"
        else "{workload: {workloadName: wl, podGroupTemplateName: workers}}"
    )
    return f"""
apiVersion: scheduling.k8s.io/{version}
kind: PodGroup
metadata: {{name: wl-workers-0, annotations: {{phalanx.dev/duration: 1h}}}}
spec:
  podGroupTemplateRef: {ref}
  schedulingPolicy: {{gang: {{minCount: 4}}}}
"""


def grouped_pods(count: int) -> str:
    docs = []
    for i in range(count):
        doc = pod(f"w-{i}", "app: w")
        docs.append(doc + "  schedulingGroup: {podGroupName: wl-workers-0}\n")
    return "---\n".join(docs)


@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"])
def test_workload_template_constraint_reaches_its_podgroups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 5}})
    docs = [TOPOLOGY, cluster, workload(version, "ex.com/rack"), standalone(version)]
    gangs, binds = simulate(tmp_path, capsys, *docs, grouped_pods(4))
    assert gangs["wl-workers-0"]["state"] == "completed"
    assert {rack_of(b) for b in binds} == {"b1/r2"}
    # the rack level is required: in racks of 3 nodes the gang waits instead of spreading
    small = nodes({"b1": {"r1": 3, "r2": 3}})
    docs = [TOPOLOGY, small, workload(version, "ex.com/rack"), standalone(version)]
    gangs, binds = simulate(tmp_path, capsys, *docs, grouped_pods(4))
    assert gangs["wl-workers-0"]["state"] == "waiting" and not binds
    assert "needs 32 GPUs in one rack" in gangs["wl-workers-0"]["reason"]


def test_workload_ref_gangs_take_the_template_constraint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [TOPOLOGY, nodes({"b1": {"r1": 3, "r2": 3}}), workload("v1alpha2", "ex.com/rack")]
    refs = [
        pod(f"w-{i}", "app: w") + "  workloadRef: {name: wl, podGroup: workers}\n" for i in range(4)
    ]
    gangs, binds = simulate(tmp_path, capsys, *docs, "---\n".join(refs))
    assert gangs["wl-workers"]["state"] == "waiting" and not binds


# -- KAI parent subgroups --------------------------------------------------------------------
def kai_group(parent_level: str, leaf_level: str = "ex.com/rack") -> str:
    return f"""
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {{name: serve, annotations: {{phalanx.dev/duration: 1h}}}}
spec:
  minMember: 4
  subGroups:
  - name: pd
    topologyConstraint: {{requiredTopologyLevel: {parent_level}}}
  - {{name: prefill, parent: pd, minMember: 2,
     topologyConstraint: {{requiredTopologyLevel: {leaf_level}}}}}
  - {{name: decode, parent: pd, minMember: 2,
     topologyConstraint: {{requiredTopologyLevel: {leaf_level}}}}}
"""


def kai_pods() -> str:
    docs = []
    for role in ("prefill", "decode"):
        for i in range(2):
            doc = pod(f"{role}-{i}", f"kai.scheduler/subgroup-name: {role}")
            docs.append(
                doc.replace("metadata:\n", "metadata:\n  annotations: {pod-group-name: serve}\n", 1)
            )
    return "---\n".join(docs)


def test_kai_parent_subgroup_holds_its_children_in_one_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # block b1 has two racks of 2 (room for both subgroups), b2 racks of 2 and 1
    cluster = nodes({"b1": {"r1": 2, "r2": 2}, "b2": {"r3": 2, "r4": 1}, "b3": {"r5": 2}})
    gangs, binds = simulate(
        tmp_path, capsys, TOPOLOGY, cluster, kai_group("ex.com/block"), kai_pods()
    )
    assert gangs["serve"]["state"] == "completed"
    racks = {b["pod"]: rack_of(b) for b in binds}
    assert {racks[f"default/prefill-{i}"] for i in range(2)} != {
        racks[f"default/decode-{i}"] for i in range(2)
    }
    assert len({r.split("/")[0] for r in racks.values()}) == 1  # one block
    assert all(
        len({racks[f"default/{role}-{i}"] for i in range(2)}) == 1 for role in ("prefill", "decode")
    )


def test_kai_parent_subgroup_required_waits_when_no_block_holds_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2}, "b2": {"r2": 2}})
    gangs, binds = simulate(
        tmp_path, capsys, TOPOLOGY, cluster, kai_group("ex.com/block"), kai_pods()
    )
    assert gangs["serve"]["state"] == "waiting" and not binds
    assert "subgroup 'pd' needs 32 GPUs in one block" in gangs["serve"]["reason"]
    # without the parent's constraint, each subgroup takes a rack of its own block
    loose = kai_group("ex.com/block").replace(
        "  - name: pd\n    topologyConstraint: {requiredTopologyLevel: ex.com/block}\n",
        "  - name: pd\n",
    )
    gangs, _ = simulate(tmp_path, capsys, TOPOLOGY, cluster, loose, kai_pods())
    assert gangs["serve"]["state"] == "completed"


def test_kai_parent_subgroup_preferred_uses_fewest_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2}, "b2": {"r2": 2, "r3": 2}, "b3": {"r4": 2}})
    group = kai_group("ex.com/block").replace(
        "requiredTopologyLevel: ex.com/block", "preferredTopologyLevel: ex.com/block"
    )
    gangs, binds = simulate(tmp_path, capsys, TOPOLOGY, cluster, group, kai_pods())
    assert gangs["serve"]["state"] == "completed"
    assert {rack_of(b).split("/")[0] for b in binds} == {"b2"}
