"""Topology-aware placement live: a Kueue Topology and a required rack constraint, against
the fake API server through the real client and the serve loop."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver import KAI_PODGROUPS
from apiserver.harness import connected, eventually, fast_backoff
from apiserver.registry import ALL_CRDS, ResourceInfo
from test_live_serve import create_pod, pod, scheduled_condition
from test_live_status import (
    VOLCANO,
    condition,
    create_volcano_group,
    status_of,
    volcano_group,
    volcano_pod,
)

from phalanx.api.errors import InputError
from phalanx.live import PODGROUPS, PODS, KubeClient
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import KAI_PODGROUPS as KAI
from phalanx.live.resources import KUEUE_TOPOLOGIES
from phalanx.live.settings import parse_settings

NS = "team"
RACK = "example.com/rack"
TOPOLOGY_CRD = ResourceInfo(
    "kueue.x-k8s.io", "v1beta1", "topologies", "Topology", namespaced=False, custom=True
)


def node(name: str, rack: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"example.com/block": "b1", RACK: rack}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"}
        },
    }


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member, "schedulingConstraints": {"topology": [{"key": RACK}]}},
    }


TOPOLOGY = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Topology",
    "metadata": {"name": "default"},
    "spec": {
        "levels": [
            {"nodeLabel": "example.com/block"},
            {"nodeLabel": RACK},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    },
}


def put_racks(server: Any) -> None:
    """Rack r1: nodes a1, a2; rack r2: b1, b2, b3 (4 GPUs each), in block b1."""
    for name, rack in (("a1", "r1"), ("a2", "r1"), ("b1", "r2"), ("b2", "r2"), ("b3", "r2")):
        server.put("v1", "nodes", node(name, rack))


async def declare_topology(scheduler: LiveScheduler, client: KubeClient) -> None:
    await client.create(KUEUE_TOPOLOGIES, TOPOLOGY)
    store = scheduler.informers[KUEUE_TOPOLOGIES].store
    await eventually(lambda: "default" in store, what="topology")


async def submit(scheduler: LiveScheduler, client: KubeClient, group: str, size: int) -> None:
    await client.create(PODGROUPS, podgroup(group, size))
    for i in range(size):
        await client.create(PODS, pod(f"{group}-{i}", group=group, gpus=4))
    keys = [f"{NS}/{group}-{i}" for i in range(size)]
    await eventually(
        lambda: (
            all(k in scheduler.informers[PODS].store for k in keys)
            and f"{NS}/{group}" in scheduler.informers[PODGROUPS].store
        ),
        what=f"gang {group}",
    )


async def test_required_rack_binds_inside_one_rack_or_waits_naming_the_best_rack() -> None:
    async with connected(crds=(*ALL_CRDS, TOPOLOGY_CRD)) as (server, client):
        put_racks(server)
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await declare_topology(scheduler, client)
            await submit(scheduler, client, "wide", 4)  # 16 GPUs: no rack has them
            await submit(scheduler, client, "fits", 3)  # 12 GPUs: only rack r2 has them
            result = await scheduler.run_once(1.0)
            names = scheduler.cache.state.table.names
            placed = {pod.key: names[node] for pod, node in result.binds}
            assert sorted(placed.values()) == ["b1", "b2", "b3"]  # rack r2, never spread
            assert all(k.startswith(f"{NS}/fits-") for k in placed)
            waiting = scheduled_condition(server, "wide-0")
            assert waiting is not None and waiting["status"] == "False"
            assert "needs 16 GPUs in one rack; best rack b1/r2 has 12 free" in waiting["message"]


async def test_volcano_hard_tier_waits_then_names_the_rack_it_was_placed_in() -> None:
    async with connected(crds=(*ALL_CRDS, TOPOLOGY_CRD)) as (server, client):
        put_racks(server)
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await declare_topology(scheduler, client)
            hog = pod("hog", gpus=4, scheduler="default-scheduler", node_name="b1")
            await create_pod(scheduler, client, hog)
            network = {"mode": "hard", "highestTierAllowed": 1}  # tier 1: the rack
            await create_volcano_group(scheduler, volcano_group("vc", 3, networkTopology=network))
            for i in range(3):
                await create_pod(scheduler, client, volcano_pod(f"vc-{i}", "vc", gpus=4))
            result = await scheduler.run_once(1.0)
            assert result.binds == []
            waiting = condition(status_of(server, VOLCANO, "vc"), "Unschedulable")
            assert waiting["status"] == "True"
            assert "needs 12 GPUs in one rack; best rack b1/r1 has 8 free" in waiting["message"]

            await client.delete(PODS, "hog", NS)
            await eventually(lambda: f"{NS}/hog" not in scheduler.informers[PODS].store)
            result = await scheduler.run_once(2.0)
            assert sorted(scheduler.cache.state.table.names[n] for _, n in result.binds) == [
                "b1",
                "b2",
                "b3",
            ]
            placed = condition(status_of(server, VOLCANO, "vc"), "Unschedulable")
            assert placed["status"] == "False"
            assert placed["message"] == "all required members placed in rack b1/r2"


async def test_the_settings_topology_serves_a_cluster_without_topology_objects() -> None:
    async with connected() as (server, client):
        put_racks(server)
        levels = ("example.com/block", RACK)
        async with LiveScheduler(client, backoff=fast_backoff(), topology=levels) as scheduler:
            await submit(scheduler, client, "fits", 3)
            result = await scheduler.run_once(1.0)
            nodes = sorted(scheduler.cache.state.table.names[n] for _, n in result.binds)
            assert nodes == ["b1", "b2", "b3"]


def test_settings_topology_is_a_list_of_level_labels() -> None:
    assert parse_settings({"topology": ["example.com/block", RACK]}).topology == (
        "example.com/block",
        RACK,
    )
    with pytest.raises(InputError, match=r"settings.yaml: topology\[1\].nodeLabel: level"):
        parse_settings({"topology": ["a", "a"]}, "settings.yaml")
    with pytest.raises(InputError, match="topology: must list 1 to 16 levels"):
        parse_settings({"topology": []}, "settings.yaml")


async def test_volcano_subgroup_policy_keeps_each_shard_in_one_rack_live() -> None:
    async with connected(crds=(*ALL_CRDS, TOPOLOGY_CRD)) as (server, client):
        put_racks(server)  # rack r1: a1, a2; rack r2: b1, b2, b3
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await declare_topology(scheduler, client)
            policy = {
                "name": "shards",
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},  # the rack
                "matchLabelKeys": ["shard"],
            }
            await create_volcano_group(scheduler, volcano_group("vc", 5, subGroupPolicy=[policy]))
            for shard, count in (("1", 3), ("0", 2)):  # spread in node order, unconstrained
                for i in range(count):
                    member = volcano_pod(f"vc-{shard}-{i}", "vc", gpus=4)
                    member["metadata"]["labels"] = {"shard": shard}
                    await create_pod(scheduler, client, member)
            result = await scheduler.run_once(1.0)
            names = scheduler.cache.state.table.names
            placed = {pod.key.rsplit("/", 1)[1]: names[n] for pod, n in result.binds}
            assert {placed[f"vc-1-{i}"] for i in range(3)} == {"b1", "b2", "b3"}  # rack r2
            assert {placed[f"vc-0-{i}"] for i in range(2)} == {"a1", "a2"}  # rack r1


def block_node(name: str, block: str, rack: str) -> dict[str, Any]:
    found = node(name, rack)
    found["metadata"]["labels"]["example.com/block"] = block
    return found


def kai_serving(parent_level: str | None) -> dict[str, Any]:
    """A KAI PodGroup: prefill (2 pods) and decode (1) each in one rack, under parent ``pd``."""
    rack = {"requiredTopologyLevel": RACK}
    parent: dict[str, Any] = {"name": "pd"}
    if parent_level is not None:
        parent["topologyConstraint"] = {"requiredTopologyLevel": parent_level}
    groups = [
        parent,
        {"name": "prefill", "parent": "pd", "minMember": 2, "topologyConstraint": rack},
        {"name": "decode", "parent": "pd", "minMember": 1, "topologyConstraint": rack},
    ]
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "serve", "namespace": NS},
        "spec": {"minMember": 3, "queue": "research", "subGroups": groups},
    }


@pytest.mark.parametrize(("parent_level", "blocks"), [("example.com/block", 1), (None, 2)])
async def test_kai_parent_subgroup_keeps_its_children_in_one_block_live(
    parent_level: str | None, blocks: int
) -> None:
    async with connected(crds=(*ALL_CRDS, TOPOLOGY_CRD, KAI_PODGROUPS)) as (server, client):
        # block a: rack x (1 host); block b: racks y (2 hosts) and z (1 host)
        for name, block, rack in (("x0", "a", "x"), ("y0", "b", "y"), ("y1", "b", "y")):
            server.put("v1", "nodes", block_node(name, block, rack))
        server.put("v1", "nodes", block_node("z0", "b", "z"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await declare_topology(scheduler, client)
            await client.create(KAI, kai_serving(parent_level))
            store = scheduler.informers[KAI].store
            await eventually(lambda: f"{NS}/serve" in store, what="KAI group")
            for role, count in (("prefill", 2), ("decode", 1)):
                for i in range(count):
                    member = pod(f"{role}-{i}", gpus=4)
                    member["metadata"]["annotations"] = {"pod-group-name": "serve"}
                    member["metadata"]["labels"] = {"kai.scheduler/subgroup-name": role}
                    await create_pod(scheduler, client, member)
            result = await scheduler.run_once(1.0)
            names = scheduler.cache.state.table.names
            placed = {pod.key.rsplit("/", 1)[1]: names[n] for pod, n in result.binds}
            assert {placed["prefill-0"], placed["prefill-1"]} == {"y0", "y1"}
            # the decode pod's best-fitting rack is x (block a) unless its parent holds it in b
            assert placed["decode-0"] == ("z0" if blocks == 1 else "x0")
