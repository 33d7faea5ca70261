"""Topology-aware placement scenarios, through manifests and the simulator's public API."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli.main import main
from phalanx.k8s import load_files
from phalanx.plugins.topology import FragTopologyPlacement
from phalanx.policies import POLICIES
from phalanx.policies.registry import PLACEMENTS
from phalanx.sim.metrics import SimResult
from phalanx.sim.simulator import SimOptions, simulate

TOPOLOGY = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: default}
spec:
  levels:
  - {nodeLabel: ex.com/block}
  - {nodeLabel: ex.com/rack}
  - {nodeLabel: kubernetes.io/hostname}
"""


def nodes(layout: dict[str, dict[str, int]], gpus: int = 8) -> str:
    """``{block: {rack: nodes}}`` as Node manifests named BLOCK-RACK-I."""
    docs = []
    for block, racks in layout.items():
        for rack, count in racks.items():
            for i in range(count):
                docs.append(
                    f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {block}-{rack}-{i}\n"
                    f"  labels: {{ex.com/block: {block}, ex.com/rack: {rack}}}\n"
                    f"status: {{allocatable: {{cpu: '64', memory: 512Gi, "
                    f"nvidia.com/gpu: '{gpus}'}}}}\n"
                )
    return "---\n".join(docs)


def gang(
    name: str,
    pods: int,
    *,
    spec: str = "",
    submit: str = "0s",
    duration: str = "1h",
    gpus: int = 8,
    pod_annotations: str = "",
    role: str = "",
    minimum: int | None = None,
) -> str:
    pg = (
        f"apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: {name}\n"
        f"  annotations: {{phalanx.dev/submit-after: {submit}, phalanx.dev/duration: {duration}}}\n"
        f"spec:\n  minMember: {pods if minimum is None else minimum}\n{spec}"
    )
    return (
        pg
        + "---\n"
        + members(name, pods, gpus=gpus, submit=submit, role=role, annotations=pod_annotations)
    )


def members(
    name: str,
    pods: int,
    *,
    gpus: int = 8,
    submit: str = "0s",
    role: str = "",
    annotations: str = "",
) -> str:
    label = f", phalanx.dev/role: {role}" if role else ""
    prefix = f"{name}-{role}" if role else name
    docs = []
    for i in range(pods):
        docs.append(
            f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n"
            f"  labels: {{scheduling.x-k8s.io/pod-group: {name}{label}}}\n"
            f"  annotations: {{phalanx.dev/submit-after: {submit}{annotations}}}\n"
            f"spec:\n  containers: [{{name: c, image: x, resources: {{requests: "
            f"{{nvidia.com/gpu: '{gpus}'}}}}}}]\n"
        )
    return "---\n".join(docs)


def run(
    tmp_path: Path, *docs: str, policy: str = "phalanx"
) -> tuple[SimResult, list[dict[str, Any]]]:
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join(docs))
    events: list[dict[str, Any]] = []
    result = simulate(load_files([path]), SimOptions(policy=policy, until=7200), events.append)
    return result, events


def bound(events: list[dict[str, Any]], gang_key: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "bind" and e["gang"] == gang_key]


def racks(events: list[dict[str, Any]], gang_key: str) -> Counter[str]:
    """Pods per ``block/rack`` (from the bind events' topology path)."""
    return Counter(e["topology"].rsplit("/", 1)[0] for e in bound(events, gang_key))


def record(result: SimResult, name: str) -> Any:
    return next(g for g in result.gangs if g.name == name)


RACK_REQUIRED = "  schedulingConstraints: {topology: [{key: ex.com/rack}]}\n"


def test_required_waits_rather_than_spreading_and_names_the_best_rack(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    result, events = run(tmp_path, TOPOLOGY, cluster, gang("train", 4, spec=RACK_REQUIRED))
    train = record(result, "train")
    assert train.state == "waiting" and not bound(events, "default/train")
    assert "needs 32 GPUs in one rack; best rack b1/r2 has 24 free" in train.reason
    # without topology, the same gang spreads over both racks and runs
    result, events = run(
        tmp_path, TOPOLOGY, cluster, gang("train", 4, spec=RACK_REQUIRED), policy="volcano"
    )
    assert record(result, "train").state == "completed"
    assert len(racks(events, "default/train")) == 2


def test_required_gang_starts_when_a_rack_has_room(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 4, "r2": 3}})
    blocker = gang("blocker", 1, duration="10m")  # takes one node, placed first
    result, events = run(
        tmp_path, TOPOLOGY, cluster, blocker, gang("train", 4, spec=RACK_REQUIRED, submit="1s")
    )
    train = record(result, "train")
    assert train.state == "completed"
    assert len(racks(events, "default/train")) == 1
    assert train.domains == {"ex.com/block": 1, "ex.com/rack": 1, "kubernetes.io/hostname": 4}


def test_best_fit_keeps_the_big_rack_whole_for_the_big_gang(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 4, "r2": 2}})
    small = gang("small", 2, spec=RACK_REQUIRED)
    big = gang("big", 4, spec=RACK_REQUIRED, submit="1s")
    result, events = run(tmp_path, TOPOLOGY, cluster, small, big)
    assert racks(events, "default/small") == {"b1/r2": 2}  # the smallest rack that fits
    assert record(result, "big").start == 1.0  # r1 stayed whole
    # the greedy baseline takes the most free rack for the small gang: the big one waits
    result, events = run(tmp_path, TOPOLOGY, cluster, small, big, policy="tas-greedy")
    assert racks(events, "default/small") == {"b1/r1": 2}
    assert record(result, "big").start == 3600.0


def kueue(kind: str, level: str = "ex.com/rack") -> str:
    return f", kueue.x-k8s.io/podset-{kind}-topology: {level}"


def test_preferred_takes_fewest_racks_in_fewest_blocks(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 4, "r2": 4}, "b2": {"r3": 3, "r4": 3}})
    result, events = run(
        tmp_path, TOPOLOGY, cluster, gang("train", 6, pod_annotations=kueue("preferred"))
    )
    assert record(result, "train").state == "completed"
    # no rack holds 6; block b2 holds exactly 6 (best fit): two racks of one block
    assert racks(events, "default/train") == {"b2/r3": 3, "b2/r4": 3}
    assert record(result, "train").domains["ex.com/block"] == 1


def test_preferred_uses_one_rack_when_one_fits(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 3, "r2": 5}, "b2": {"r3": 6}})
    result, events = run(
        tmp_path, TOPOLOGY, cluster, gang("train", 5, pod_annotations=kueue("preferred"))
    )
    assert racks(events, "default/train") == {"b1/r2": 5}
    assert result.domain_summary()[0]["ex.com/rack"] == 100.0


def test_preferred_spreads_when_no_domain_fits(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 2}, "b2": {"r2": 2}})
    result, _ = run(
        tmp_path, TOPOLOGY, cluster, gang("train", 4, pod_annotations=kueue("preferred"))
    )
    assert record(result, "train").state == "completed"
    assert record(result, "train").domains["ex.com/block"] == 2


def test_per_role_constraint_keeps_only_that_role_together(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    workers = members("job", 3, role="worker", annotations=kueue("required"))
    servers = members("job", 2, role="ps", gpus=8)
    pg = (
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: job\n"
        "  annotations: {phalanx.dev/duration: 1h}\nspec:\n  minMember: 5\n"
    )
    result, events = run(tmp_path, TOPOLOGY, cluster, pg, workers, servers)
    assert record(result, "job").state == "completed"
    where = {e["pod"]: e["topology"].rsplit("/", 1)[0] for e in bound(events, "default/job")}
    assert {where[f"default/job-worker-{i}"] for i in range(3)} == {"b1/r2"}
    assert {where[f"default/job-ps-{i}"] for i in range(2)} == {"b1/r1"}


def test_kueue_slices_each_in_one_rack(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 3, "r2": 3}})
    slices = (
        ", kueue.x-k8s.io/podset-slice-required-topology: ex.com/rack"
        ", kueue.x-k8s.io/podset-slice-size: '2'"
    )
    result, events = run(tmp_path, TOPOLOGY, cluster, gang("train", 4, pod_annotations=slices))
    where = {e["pod"]: e["topology"].rsplit("/", 1)[0] for e in bound(events, "default/train")}
    assert where["default/train-0"] == where["default/train-1"]
    assert where["default/train-2"] == where["default/train-3"]
    assert record(result, "train").state == "completed"


HYPERNODES = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-a}
spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^b1-r1-"}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-b}
spec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: "^b1-r2-"}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine}
spec:
  tier: 2
  members:
  - {type: HyperNode, selector: {exactMatch: {name: leaf-a}}}
  - {type: HyperNode, selector: {exactMatch: {name: leaf-b}}}
"""


def volcano_gang(name: str, pods: int, network: str) -> str:
    pg = (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata:\n"
        f"  name: {name}\n  annotations: {{phalanx.dev/duration: 1h}}\n"
        f"spec:\n  minMember: {pods}\n  networkTopology: {network}\n"
    )
    docs = [
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-{i}\n"
        f"  annotations: {{scheduling.k8s.io/group-name: {name}}}\n"
        "spec:\n  containers: [{name: c, image: x, resources: {requests: "
        "{nvidia.com/gpu: '8'}}}]\n"
        for i in range(pods)
    ]
    return pg + "---\n" + "---\n".join(docs)


@pytest.mark.parametrize(("pods", "state"), [(3, "completed"), (4, "waiting")])
def test_volcano_hard_tier_one_inside_one_hypernode(tmp_path: Path, pods: int, state: str) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    result, events = run(
        tmp_path,
        HYPERNODES,
        cluster,
        volcano_gang("vc", pods, "{mode: hard, highestTierAllowed: 1}"),
    )
    assert record(result, "vc").state == state
    if state == "completed":
        assert {e["topology"] for e in bound(events, "default/vc")} == {"spine/leaf-b"}
    else:
        assert "best tier:1 leaf-b has 24 free" in record(result, "vc").reason


def test_unknown_level_waits_with_the_known_levels(tmp_path: Path) -> None:
    spec = "  schedulingConstraints: {topology: [{key: ex.com/row}]}\n"
    result, _ = run(tmp_path, TOPOLOGY, nodes({"b1": {"r1": 2}}), gang("train", 1, spec=spec))
    reason = record(result, "train").reason
    assert "topology level 'ex.com/row' is not a level of any topology" in reason
    assert "ex.com/rack" in reason


def test_compare_json_carries_domain_figures_per_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 4, "r2": 2}, "b2": {"r3": 2, "r4": 2}})
    small = gang("small", 2, pod_annotations=kueue("preferred"))
    big = gang("big", 4, pod_annotations=kueue("preferred"), submit="1s")
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join([TOPOLOGY, cluster, small, big]))
    assert main(["compare", str(path), "--policies", "phalanx,tas-greedy", "-o", "json"]) == 0
    policies = json.loads(capsys.readouterr().out)["policies"]
    assert policies["phalanx"]["gangs_in_one_domain"]["ex.com/rack"] == 100.0
    assert policies["phalanx"]["mean_domains_per_gang"]["ex.com/rack"] == 1.0
    # greedy puts the small gang in the big rack, so the big gang spans two racks
    assert policies["tas-greedy"]["gangs_in_one_domain"]["ex.com/rack"] == 50.0
    assert policies["tas-greedy"]["mean_domains_per_gang"]["ex.com/rack"] == 1.5


def test_a_growing_gang_stays_in_its_required_rack(tmp_path: Path) -> None:
    cluster = nodes({"b1": {"r1": 4, "r2": 3}})
    first = gang("train", 3, spec=RACK_REQUIRED, duration="2h")
    more = members("train", 2, submit="10s").replace("name: train-", "name: extra-")
    _, events = run(tmp_path, TOPOLOGY, cluster, first, more)
    assert racks(events, "default/train") == {"b1/r2": 3}  # best fit: the 3-node rack
    # its rack is full: the new members wait rather than leave it (rack r1 has 4 free nodes)
    assert not [e for e in bound(events, "default/train") if e["t"] == 10.0]


def test_an_elastic_gang_grows_in_its_own_rack_before_a_better_fitting_one(
    tmp_path: Path,
) -> None:
    cluster = nodes({"b1": {"r1": 4, "r2": 1}})
    pinned = "spec:\n  nodeSelector: {ex.com/rack: RACK}\n"
    r1 = gang("b-r1", 2, duration="10m").replace(
        "spec:\n  containers", pinned.replace("RACK", "r1") + "  containers"
    )
    r2 = gang("b-r2", 1, duration="10m").replace(
        "spec:\n  containers", pinned.replace("RACK", "r2") + "  containers"
    )
    train = gang("train", 3, minimum=2, submit="1s", pod_annotations=kueue("preferred"))
    result, events = run(tmp_path, TOPOLOGY, cluster, r1, r2, train)
    first = [e for e in bound(events, "default/train") if e["t"] == 1.0]
    assert {rack_of(e) for e in first} == {"b1/r1"} and len(first) == 2
    # at 10m both racks free up: the third member joins its gang's rack (2 free), not the
    # best-fitting r2 (1 free)
    (grown,) = [e for e in bound(events, "default/train") if e["t"] > 1.0]
    assert rack_of(grown) == "b1/r1"
    assert record(result, "train").domains["ex.com/rack"] == 1


def rack_of(event: dict[str, Any]) -> str:
    return str(event["topology"]).rsplit("/", 1)[0]


def test_json_carries_fragmentation_by_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 2}})
    pinned = "spec:\n  nodeSelector: {ex.com/rack: r1}\n  containers"
    # two 6-GPU pods fill rack r1's hosts to 2 free GPUs each, which no 6-GPU pod can use
    job = gang("six", 2, gpus=6).replace("spec:\n  containers", pinned)
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join([TOPOLOGY, cluster, job]))
    capsys.readouterr()
    assert main(["simulate", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["end"] == 3600.0
    by_domain = out["fragmentation_by_domain"]
    assert by_domain["ex.com/rack"] == {
        "mean_ratio": 50.0,  # r1: 4 fragmented of 4 idle GPUs, r2: none of 16
        "max_ratio": 100.0,
        "fragmented_domains": 50.0,
    }
    assert by_domain["ex.com/block"]["max_ratio"] == 20.0  # 4 of 20 idle GPUs
    assert by_domain["kubernetes.io/hostname"]["fragmented_domains"] == 50.0
    # without a topology there is nothing per domain
    path.write_text("---\n".join([cluster, job]))
    assert main(["simulate", str(path), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["fragmentation_by_domain"] == {}


def estimated(doc: str, seconds: int) -> str:
    return doc.replace(
        "phalanx.dev/duration:",
        f"phalanx.dev/runtime-estimate: '{seconds}', phalanx.dev/duration:",
        1,
    )


def test_a_reservation_holds_a_rack_for_a_required_gang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    pinned = "spec:\n  nodeSelector: {ex.com/rack: r2}\n  containers"
    blocker = estimated(
        gang("blocker", 1, duration="100s").replace("spec:\n  containers", pinned), 100
    )
    big = estimated(gang("big", 3, spec=RACK_REQUIRED, submit="1s", duration="100s"), 100)
    small = estimated(gang("small", 1, submit="2s", duration="1000s"), 1000)
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join([TOPOLOGY, cluster, blocker, big, small]))
    log = tmp_path / "events.jsonl"
    capsys.readouterr()
    args = [
        "simulate",
        str(path),
        "--policy",
        "phalanx-reserve",
        "-o",
        "json",
        "--events",
        str(log),
    ]
    assert main(args) == 0
    gangs = {g["name"]: g for g in json.loads(capsys.readouterr().out)["gangs"]}
    # 4 hosts are free at 1s but no rack has 3: the reservation is rack r2, once the blocker ends
    assert gangs["big"]["expected_start_first"] == 100.0
    assert gangs["big"]["start"] == 100.0
    binds = [json.loads(line) for line in log.read_text().splitlines()]
    binds = [e for e in binds if e["type"] == "bind"]
    assert {rack_of(e) for e in binds if e["gang"] == "default/big"} == {"b1/r2"}
    # backfill never takes the reserved rack before the reservation starts
    (backfilled,) = [e for e in binds if e["gang"] == "default/small"]
    assert backfilled["t"] >= 100.0 or rack_of(backfilled) == "b1/r1"
    assert gangs["small"]["state"] == "completed"


def test_a_reservation_keeps_a_preferred_gang_in_one_rack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = nodes({"b1": {"r1": 2, "r2": 3}})
    pinned = "spec:\n  nodeSelector: {ex.com/rack: RACK}\n  containers"
    blockers = [
        estimated(gang(f"b-{rack}", count, duration="100s"), 100).replace(
            "spec:\n  containers", pinned.replace("RACK", rack)
        )
        for rack, count in (("r1", 2), ("r2", 3))
    ]
    big = estimated(gang("big", 3, submit="1s", pod_annotations=kueue("preferred")), 100)
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join([TOPOLOGY, cluster, *blockers, big]))
    capsys.readouterr()
    args = ["simulate", str(path), "--policy", "phalanx-reserve", "-o", "json", "--until", "50s"]
    assert main(args) == 0
    (waiting,) = [g for g in json.loads(capsys.readouterr().out)["gangs"] if g["name"] == "big"]
    # every host frees at 100 s: the reservation takes the rack that holds the gang
    assert "reserved: b1-r2-0, b1-r2-1, b1-r2-2 free at t=1m40s" in waiting["reason"]


def test_topology_frag_breaks_best_fit_ties_towards_the_fragmented_rack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PLACEMENTS, "topology-frag", FragTopologyPlacement)
    fragfit = dataclasses.replace(POLICIES["phalanx"], name="fragfit", placement="topology-frag")
    monkeypatch.setitem(POLICIES, "fragfit", fragfit)
    cluster = nodes({"b1": {"r1": 2, "r2": 2}})
    pinned = "spec:\n  nodeSelector: {ex.com/rack: RACK}\n  containers"
    full = gang("full", 1).replace("spec:\n  containers", pinned.replace("RACK", "r1"))
    six = gang("six", 1, gpus=6).replace("spec:\n  containers", pinned.replace("RACK", "r2"))
    four = gang("four", 1, gpus=4, submit="1s", pod_annotations=kueue("preferred"))
    # both racks have room for two 4-GPU pods; r2 also holds 2 GPUs no 4-GPU pod can use
    _, events = run(tmp_path, TOPOLOGY, cluster, full, six, four)
    assert racks(events, "default/four") == {"b1/r1": 1}  # best fit's tie: the first rack
    _, events = run(tmp_path, TOPOLOGY, cluster, full, six, four, policy="fragfit")
    assert racks(events, "default/four") == {"b1/r2": 1}  # the fragmented one
