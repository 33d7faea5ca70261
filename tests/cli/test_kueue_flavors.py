"""Kueue ResourceFlavors through ``phalanx simulate``: a ClusterQueue with two GPU generations
as two flavors (each its own quota and nodes), the way mixed clusters configure Kueue.

The cluster: ``fast-*`` nodes labelled ``accelerator: gen-b`` and ``slow-*`` nodes labelled
``accelerator: gen-a``, 8 GPUs each. ClusterQueue ``research`` lists flavor ``gen-b`` first
and ``gen-a`` second; a Job is admitted in the first flavor whose quota has room for all of it
and runs on that flavor's nodes only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli.main import main

GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta1"


def node(name: str, accelerator: str, gpus: int = 8) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", GPU: str(gpus), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"accelerator": accelerator}},
        "status": {"allocatable": allocatable},
    }


def nodes(fast: int, slow: int, slow_gpus: int = 8) -> list[dict[str, Any]]:
    return [node(f"fast-{i}", "gen-b") for i in range(fast)] + [
        node(f"slow-{i}", "gen-a", slow_gpus) for i in range(slow)
    ]


def flavor(name: str, **labels: str) -> dict[str, Any]:
    spec = {"nodeLabels": labels} if labels else {}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


FLAVORS = [flavor("gen-b", accelerator="gen-b"), flavor("gen-a", accelerator="gen-a")]


def quota(name: str, gpus: int, borrowing: int | None = None) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": GPU, "nominalQuota": gpus}
    if borrowing is not None:
        resource["borrowingLimit"] = borrowing
    return {"name": name, "resources": [resource]}


def cluster_queue(name: str, *flavors: dict[str, Any], cohort: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": list(flavors)}],
    }
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"clusterQueue": target},
    }


def job(name: str, queue: str, pods: int, gpus: int = 8, **pod_spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "trainer", "resources": {"limits": {GPU: str(gpus)}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"kueue.x-k8s.io/queue-name": queue},
            "annotations": {"phalanx.dev/duration": "1h"},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container], **pod_spec}},
        },
    }


def simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs: list[dict[str, Any]], *args: str
) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]]]:
    """Each gang's JSON record, and the nodes its pods were bound to."""
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    events = tmp_path / "events.jsonl"
    code = main(["simulate", str(path), "-o", "json", "--events", str(events), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    bound: dict[str, set[str]] = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "bind":
            bound.setdefault(event["gang"].split("/")[1], set()).add(event["node"])
    return {g["name"]: g for g in json.loads(out)["gangs"]}, bound


def kinds(names: set[str]) -> set[str]:
    """``fast`` or ``slow``: the generation of each node."""
    return {name.split("-")[0] for name in names}


def two_flavors(gen_b: int, gen_a: int) -> list[dict[str, Any]]:
    research = cluster_queue("research", quota("gen-b", gen_b), quota("gen-a", gen_a))
    return [*FLAVORS, research, local_queue("team", "research")]


@pytest.mark.parametrize("policy", ["phalanx", "kueue", "volcano", "fifo-reserve"])
def test_a_job_beyond_the_first_flavors_quota_runs_on_the_second_flavors_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    """24 GPUs do not fit gen-b's quota of 16, so the Job is admitted in gen-a and runs on
    gen-a nodes, though gen-b nodes (listed first) are free (before, the quotas were summed
    and the Job took the first free nodes)."""
    docs = [*nodes(fast=4, slow=4), *two_flavors(16, 32), job("train", "team", 3)]
    gangs, bound = simulate(tmp_path, capsys, docs, "--policy", policy)
    assert gangs["train"]["start"] == 0.0
    assert kinds(bound["train"]) == {"slow"} and len(bound["train"]) == 3


def test_the_first_flavor_with_room_is_taken_in_listed_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two Jobs of 16 GPUs: the first fills gen-b's quota, the second goes to gen-a."""
    docs = [
        *nodes(fast=4, slow=4),
        *two_flavors(16, 32),
        job("first", "team", 2),
        job("second", "team", 2),
    ]
    gangs, bound = simulate(tmp_path, capsys, docs)
    assert gangs["first"]["start"] == gangs["second"]["start"] == 0.0
    assert kinds(bound["first"]) == {"fast"}
    assert kinds(bound["second"]) == {"slow"}


def test_a_job_never_spans_flavors_and_says_why_it_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """40 GPUs fit the two quotas together (48) but neither alone: the Job waits, and the
    reason names each flavor and its quota (before, it ran across both generations)."""
    docs = [*nodes(fast=2, slow=4), *two_flavors(16, 32), job("wide", "team", 5)]
    gangs, bound = simulate(tmp_path, capsys, docs, "--until", "1h")
    assert gangs["wide"]["start"] is None
    assert "wide" not in bound
    reason = gangs["wide"]["reason"]
    assert "flavor gen-b: ClusterQueue 'research' quota 16 nvidia.com/gpu, 0 in use" in reason
    assert "flavor gen-a: ClusterQueue 'research' quota 32 nvidia.com/gpu, 0 in use" in reason


def test_a_flavor_whose_nodes_cannot_hold_the_job_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gen-b's quota is too small and gen-a's nodes have 4 GPUs where each pod needs 8: the
    Job waits for room, and the reason says so per flavor."""
    docs = [*nodes(fast=4, slow=4, slow_gpus=4), *two_flavors(16, 32), job("train", "team", 3)]
    gangs, _ = simulate(tmp_path, capsys, docs, "--until", "1h")
    reason = gangs["train"]["reason"]
    assert gangs["train"]["start"] is None
    assert "flavor gen-b: ClusterQueue 'research' quota 16 nvidia.com/gpu" in reason
    assert "flavor gen-a: no room on its nodes" in reason


def test_a_pod_selector_of_one_generation_skips_the_other_flavor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Job asking for gen-b nodes is never admitted in gen-a (its selector conflicts with
    gen-a's node labels, so Kueue skips the flavor): over gen-b's quota, it waits."""
    selector = {"nodeSelector": {"accelerator": "gen-b"}}
    docs = [*nodes(fast=4, slow=4), *two_flavors(16, 32), job("pinned", "team", 3, **selector)]
    gangs, bound = simulate(tmp_path, capsys, docs, "--until", "1h")
    assert gangs["pinned"]["start"] is None and "pinned" not in bound
    assert "flavor gen-a: the pods' node selector" in gangs["pinned"]["reason"]


@pytest.mark.parametrize(
    ("borrowing", "fungibility", "where"),
    [(None, "", "fast"), (0, "", "slow"), (None, "TryNextFlavor", "slow")],
)
def test_borrowing_within_a_cohort_is_per_flavor(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    borrowing: int | None,
    fungibility: str,
    where: str,
) -> None:
    """ClusterQueues ``vision`` and ``speech`` in cohort ``lab``, each 8 gen-b and 16 gen-a
    GPUs. A 16-GPU Job of ``vision`` borrows speech's idle gen-b quota and runs on gen-b nodes;
    with gen-b's borrowingLimit 0 it cannot, and with ``whenCanBorrow: TryNextFlavor`` it
    prefers gen-a, where it needs no borrowing: then it is admitted in gen-a. A later 8-GPU
    Job of ``speech`` takes the other flavor (gen-b's pool is used up when borrowed)."""
    vision = cluster_queue("vision", quota("gen-b", 8, borrowing), quota("gen-a", 16), cohort="lab")
    if fungibility:
        vision["spec"]["flavorFungibility"] = {"whenCanBorrow": fungibility}
    speech = cluster_queue("speech", quota("gen-b", 8), quota("gen-a", 16), cohort="lab")
    docs = [
        *nodes(fast=2, slow=4),
        *FLAVORS,
        vision,
        speech,
        local_queue("vision", "vision"),
        local_queue("speech", "speech"),
        job("big", "vision", 2),
        job("small", "speech", 1),
    ]
    gangs, bound = simulate(tmp_path, capsys, docs)
    assert gangs["big"]["start"] == gangs["small"]["start"] == 0.0
    assert kinds(bound["big"]) == {where}
    assert kinds(bound["small"]) == {"slow" if where == "fast" else "fast"}


def test_each_resource_group_gets_its_own_flavor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CPU and memory in one group (flavor ``any-cpu``, no node labels), GPUs in another
    (gen-b, then gen-a): a Job over gen-b's GPU quota is admitted in any-cpu + gen-a, on gen-a
    nodes; a Job over any-cpu's CPU quota is admitted in none."""
    cpu = {
        "name": "any-cpu",
        "resources": [
            {"name": "cpu", "nominalQuota": 100},
            {"name": "memory", "nominalQuota": "1Ti"},
        ],
    }
    research = cluster_queue("research", quota("gen-b", 8), quota("gen-a", 32))
    research["spec"]["resourceGroups"].insert(
        0, {"coveredResources": ["cpu", "memory"], "flavors": [cpu]}
    )
    asks = {"limits": {GPU: "8", "cpu": "10"}}
    hungry = {"limits": {GPU: "8", "cpu": "60"}}
    train = job("train", "team", 2)
    train["spec"]["template"]["spec"]["containers"][0]["resources"] = asks
    greedy = job("greedy", "team", 2)
    greedy["spec"]["template"]["spec"]["containers"][0]["resources"] = hungry
    docs = [
        *nodes(fast=2, slow=4),
        *FLAVORS,
        flavor("any-cpu"),
        research,
        local_queue("team", "research"),
        train,
        greedy,
    ]
    gangs, bound = simulate(tmp_path, capsys, docs, "--until", "30m")
    assert gangs["train"]["start"] == 0.0 and kinds(bound["train"]) == {"slow"}
    assert gangs["greedy"]["start"] is None
    assert (
        "flavor any-cpu+gen-b: ClusterQueue 'research' quota 100 cpu" in gangs["greedy"]["reason"]
    )


def test_a_single_default_flavor_is_the_queue_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The common setup: one flavor without node labels. Nothing is restricted: a 40-GPU Job
    within the 48-GPU quota runs at once across both node kinds, as it did before flavors."""
    research = cluster_queue("research", quota("default-flavor", 48))
    docs = [
        *nodes(fast=2, slow=4),
        flavor("default-flavor"),
        research,
        local_queue("team", "research"),
        job("wide", "team", 5),
    ]
    gangs, bound = simulate(tmp_path, capsys, docs)
    assert gangs["wide"]["start"] == 0.0
    assert kinds(bound["wide"]) == {"fast", "slow"}


def test_a_cluster_queue_naming_a_missing_flavor_is_inactive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kueue leaves such a ClusterQueue inactive (nothing is admitted) until the flavor exists."""
    docs = [*nodes(fast=2, slow=2), FLAVORS[0], *two_flavors(16, 32)[2:], job("j", "team", 1)]
    gangs, _ = simulate(tmp_path, capsys, docs, "--until", "1h")
    assert gangs["j"]["start"] is None
    assert "ResourceFlavor 'gen-a' does not exist" in gangs["j"]["reason"]


def bad_queue(change: str) -> dict[str, Any]:
    research = cluster_queue("research", quota("gen-b", 16), quota("gen-a", 32))
    group = research["spec"]["resourceGroups"][0]
    if change == "twice":
        group["flavors"][1]["name"] = "gen-b"
    elif change == "covered":
        group["coveredResources"] = [GPU, "cpu"]
    else:
        research["spec"]["flavorFungibility"] = {"whenCanBorrow": "Always"}
    return research


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ("twice", "spec.resourceGroups[0].flavors[1].name", "flavor 'gen-b' is listed twice"),
        (
            "covered",
            "spec.resourceGroups[0].flavors[0].resources",
            "must list the group's coveredResources (nvidia.com/gpu, cpu)",
        ),
        ("fungibility", "spec.flavorFungibility.whenCanBorrow", "unknown value 'Always'"),
    ],
)
def test_a_malformed_cluster_queue_is_one_line_naming_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, field: str, message: str
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(yaml.safe_dump_all([*nodes(fast=1, slow=1), *FLAVORS, bad_queue(change)]))
    code = main(["simulate", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert str(path) in lines[0] and "ClusterQueue research" in lines[0]
    assert field in lines[0] and message in lines[0]


@pytest.mark.parametrize(("third_rack", "runs"), [(False, False), (True, True)])
def test_a_topology_constraint_is_met_inside_the_flavors_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], third_rack: bool, runs: bool
) -> None:
    """Racks r1 and r2 hold one node of each generation; a 16-GPU Job that must stay in one
    rack is over gen-b's quota, so it needs two gen-a nodes in one rack: it waits (a rack of
    r1 or r2 would mix generations) until a third rack of two gen-a nodes exists."""
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": "ex.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }
    placed = [("fast-0", "gen-b", "r1"), ("slow-0", "gen-a", "r1")]
    placed += [("fast-1", "gen-b", "r2"), ("slow-1", "gen-a", "r2")]
    if third_rack:
        placed += [("slow-2", "gen-a", "r3"), ("slow-3", "gen-a", "r3")]
    racked = []
    for name, accelerator, rack in placed:
        labelled = node(name, accelerator)
        labelled["metadata"]["labels"]["ex.com/rack"] = rack
        racked.append(labelled)
    train = job("train", "team", 2)
    annotations = {"kueue.x-k8s.io/podset-required-topology": "ex.com/rack"}
    train["spec"]["template"]["metadata"] = {"annotations": annotations}
    docs = [topology, *racked, *two_flavors(8, 32), train]
    gangs, bound = simulate(tmp_path, capsys, docs, "--until", "30m")
    if runs:
        assert gangs["train"]["start"] == 0.0 and bound["train"] == {"slow-2", "slow-3"}
    else:
        assert gangs["train"]["start"] is None and "train" not in bound
        assert "flavor gen-a: no room on its nodes" in gangs["train"]["reason"]


@pytest.mark.parametrize(("lending", "where"), [(None, "fast"), (0, "slow")])
def test_a_lending_limit_keeps_a_flavors_quota_from_the_cohort(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lending: int | None, where: str
) -> None:
    """``speech`` asks 16 gen-b GPUs with 8 of its own: it borrows ``vision``'s idle 8 unless
    vision lends none of its gen-b quota (``lendingLimit: 0``); then it runs in gen-a."""
    vision = cluster_queue("vision", quota("gen-b", 8), quota("gen-a", 16), cohort="lab")
    if lending is not None:
        vision["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = lending
    speech = cluster_queue("speech", quota("gen-b", 8), quota("gen-a", 16), cohort="lab")
    docs = [
        *nodes(fast=2, slow=4),
        *FLAVORS,
        vision,
        speech,
        local_queue("speech", "speech"),
        job("big", "speech", 2),
    ]
    gangs, bound = simulate(tmp_path, capsys, docs)
    assert gangs["big"]["start"] == 0.0 and kinds(bound["big"]) == {where}


def group_pod(group: str, index: int, total: int) -> dict[str, Any]:
    """A plain pod of a Kueue pod group (8 GPUs, an hour) in LocalQueue ``team``."""
    container = {"name": "c", "image": "trainer", "resources": {"limits": {GPU: "8"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{index}",
            "namespace": "ml",
            "labels": {
                "kueue.x-k8s.io/queue-name": "team",
                "kueue.x-k8s.io/pod-group-name": group,
            },
            "annotations": {
                "kueue.x-k8s.io/pod-group-total-count": str(total),
                "phalanx.dev/duration": "1h",
            },
        },
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def test_the_kueue_baseline_holds_an_admitted_groups_flavor_quota_for_its_unplaced_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pods arrive a-0, b-0, a-1. Kueue admits group ``a`` whole in gen-b (its 16 GPUs are
    gen-b's whole quota), so ``b`` goes to gen-a. Under ``kueue`` (pods placed one at a
    time) b-0 used to be let into gen-b beside a-0, as a-1 was not placed yet: gen-b then
    held 24 GPUs of 16."""
    docs = [
        *nodes(fast=2, slow=2),
        *two_flavors(16, 16),
        group_pod("a", 0, 2),
        group_pod("b", 0, 1),
        group_pod("a", 1, 2),
    ]
    gangs, bound = simulate(tmp_path, capsys, docs, "--policy", "kueue")
    assert gangs["a"]["start"] == gangs["b"]["start"] == 0.0
    assert kinds(bound["a"]) == {"fast"} and len(bound["a"]) == 2
    assert kinds(bound["b"]) == {"slow"}


@pytest.mark.parametrize("policy", ["phalanx", "fifo-reserve"])
def test_a_gang_waiting_for_its_flavors_quota_is_told_when_it_will_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    """``two`` (16 GPUs) waits for gen-b's quota of 16 while ``one`` holds 8 of it until 1h
    (its estimate). Its expected start is 1h. The reservation's nodes were cut to the
    flavors with quota room *now*: none, so no start was ever found ("unknown"), and
    ``fifo-reserve``, which blocks behind a head whose start is unknown, stalled."""
    docs = [*nodes(fast=2, slow=0), FLAVORS[0], cluster_queue("research", quota("gen-b", 16))]
    docs.append(local_queue("team", "research"))
    one, two = job("one", "team", 1), job("two", "team", 2)
    one["metadata"]["annotations"]["phalanx.dev/runtime-estimate"] = "1h"
    two["metadata"]["annotations"].update(
        {"phalanx.dev/runtime-estimate": "1h", "phalanx.dev/submit-after": "1s"}
    )
    gangs, _ = simulate(tmp_path, capsys, [*docs, one, two], "--policy", policy)
    assert gangs["two"]["expected_start_first"] == 3600.0
    assert gangs["two"]["start"] == 3600.0
