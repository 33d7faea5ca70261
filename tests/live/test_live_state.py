"""The live state is built once and then changed only by watch events (issue 8)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from apiserver.harness import connected, eventually, fast_backoff
from test_live_apis import wl_pod, workload
from test_live_serve import NS, bound_to, create_group, create_pod, node, pod, podgroup
from test_live_status import volcano_group

from phalanx.cluster.state import ClusterState
from phalanx.live import NODES, PODGROUPS, PODS, KubeClient
from phalanx.live.cache import ClusterCache
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import (
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    Resource,
)


def normalised(state: ClusterState) -> dict[str, Any]:
    """``state.fingerprint()`` without which GPU devices a pod holds: the API does not say (the
    device plugin picks them), so a state built from it picks its own. How many devices each
    pod holds and how much room each node's devices keep must still agree."""
    fingerprint = state.fingerprint()
    nodes = {name: (usage, sorted(free)) for name, (usage, free) in fingerprint["nodes"].items()}
    pods = {key: (s, node, len(gpus)) for key, (s, node, gpus) in fingerprint["pods"].items()}
    return {**fingerprint, "nodes": nodes, "pods": pods}


async def rebuilt(client: KubeClient) -> ClusterState:
    """A state built from scratch from what the API server holds now."""

    async def items(resource: Resource) -> list[dict[str, Any]]:
        return (await client.list(resource)).items

    return (
        ClusterCache()
        .build(
            nodes=await items(NODES),
            pods=await items(PODS),
            podgroups=await items(PODGROUPS),
            volcano_podgroups=await items(VOLCANO_PODGROUPS),
            workloads=await items(WORKLOADS),
            priority_classes=await items(PRIORITY_CLASSES),
            now=0.0,
        )
        .state
    )


def caught_up(scheduler: LiveScheduler) -> bool:
    return not scheduler.cache.assumed


async def test_each_watch_event_changes_the_one_state_and_it_equals_a_rebuild(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builds = []
    start = ClusterCache.start

    def counting(self: ClusterCache, **kwargs: Any) -> Any:
        builds.append(1)
        return start(self, **kwargs)

    monkeypatch.setattr(ClusterCache, "start", counting)
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            state = scheduler.cache.state

            # a node added
            await client.create(NODES, node("node-b", gpus=4))
            await eventually(lambda: state.node_index("node-b") is not None, what="node-b")
            row_b = state.node_index("node-b")
            assert row_b is not None

            # a gang binds; then its PodGroup's spec changes
            await create_group(scheduler, client, podgroup("train", 2))
            for i in range(2):
                await create_pod(scheduler, client, pod(f"w-{i}", group="train", gpus=2))
            assert len((await scheduler.run_once(1.0)).binds) == 2
            await eventually(lambda: caught_up(scheduler), what="binds confirmed")
            group = await client.get(PODGROUPS, "train", NS)
            group["spec"]["minMember"] = 3
            await client.replace(PODGROUPS, group)
            await eventually(lambda: state.gangs[f"{NS}/train"].min_member == 3, what="spec")

            # a node cordoned
            cordoned = await client.get(NODES, "node-a")
            cordoned["spec"]["unschedulable"] = True
            await client.replace(NODES, cordoned)
            row_a = state.node_index("node-a")
            assert row_a is not None
            await eventually(
                lambda: bool(state.table.facts.unschedulable[row_a]), what="node-a cordoned"
            )

            # a pod deleted while bound frees its node
            where = bound_to(server, "w-0")
            assert where is not None
            row = state.node_index(where)
            assert row is not None
            used = int(state.table.requested[row].sum())
            await client.delete(PODS, "w-0", NS)
            await eventually(lambda: f"{NS}/w-0" not in state.pods, what="w-0 gone")
            assert int(state.table.requested[row].sum()) < used

            # a node removed: its row is a tombstone, its pods wait for it
            other = "node-b" if where == "node-a" else "node-a"
            await create_pod(scheduler, client, pod("solo", gpus=1))
            await scheduler.run_once(2.0)
            await eventually(lambda: caught_up(scheduler), what="solo confirmed")
            await client.delete(NODES, other)
            await eventually(lambda: state.node_index(other) is None, what=f"{other} removed")

            for now in (3.0, 4.0):
                await scheduler.run_once(now)
            await eventually(lambda: caught_up(scheduler), what="all confirmed")
            assert scheduler.cache.state is state and builds == [1]  # never rebuilt
            assert normalised(state) == normalised(await rebuilt(client))


async def test_bad_quantities_are_one_bad_object_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        huge = node("node-huge")
        huge["status"]["allocatable"]["memory"] = "100E"
        server.put("v1", "nodes", huge)
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            greedy = pod("greedy")
            greedy["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100P"
            await create_pod(scheduler, client, greedy)
            await create_group(scheduler, client, podgroup("train", 2))
            for i in range(2):
                await create_pod(scheduler, client, pod(f"w-{i}", group="train", gpus=1))
            result = await scheduler.run_once(1.0)
            assert sorted(p.spec.name for p, _ in result.binds) == ["w-0", "w-1"]
            rejected = scheduler.cache.rejected
            assert "memory" in rejected["Node/node-huge"]
            assert "cpu" in rejected[f"Pod/{NS}/greedy"]
            assert scheduler.cache.state.node_index("node-huge") is None
        invalid = [
            e for e in server.objects("events.k8s.io/v1", "events") if e.get("reason") == "Invalid"
        ]
        assert {e["regarding"]["name"] for e in invalid} == {"node-huge", "greedy"}
        assert bound_to(server, "greedy") is None


async def test_a_relist_after_410_reconciles_the_state() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            state = scheduler.cache.state
            await create_group(scheduler, client, podgroup("train", 2))
            for i in range(2):
                await create_pod(scheduler, client, pod(f"w-{i}", group="train", gpus=2))
            await scheduler.run_once(1.0)
            await eventually(lambda: caught_up(scheduler), what="binds confirmed")
            relists = sum(i.stats.relists for i in scheduler.informers.values())
            server.force_gone(len(scheduler.informers))
            server.drop_watches()  # missed while no watch is open: the relist must find them
            server.remove("v1", "pods", "w-0", NS)
            server.put("v1", "nodes", node("node-b", gpus=8))
            await eventually(
                lambda: sum(i.stats.relists for i in scheduler.informers.values()) > relists,
                what="a relist",
            )
            await eventually(lambda: f"{NS}/w-0" not in state.pods, what="w-0 gone")
            await eventually(lambda: state.node_index("node-b") is not None, what="node-b")
            assert scheduler.cache.state is state
            assert normalised(state) == normalised(await rebuilt(client))


def test_workloads_priority_classes_and_queues_change_the_state_by_events() -> None:
    cache = ClusterCache()
    high = pod("urgent")
    high["spec"]["priorityClassName"] = "high"
    pods = [wl_pod(f"w-{i}", "train", "workers") for i in range(2)] + [high]
    state = cache.build(
        nodes=[node("node-a")],
        pods=pods,
        volcano_podgroups=[volcano_group("vc", 1, queue="gold")],
        volcano_queues=[],
        now=1.0,
    ).state
    key = f"{NS}/train-workers"
    assert key in state.orphans  # no Workload yet
    assert "high" in cache.rejected[f"Pod/{NS}/urgent"]  # no such PriorityClass yet
    assert state.gangs[f"{NS}/vc"].hold == ("QueueMissing", "Volcano queue 'gold' does not exist")

    cache.event(WORKLOADS, "ADDED", workload("train", workers=2), 2.0)
    assert key not in state.orphans and len(state.gangs[key].members) == 2
    cache.event(WORKLOADS, "DELETED", workload("train", workers=2), 3.0)
    assert key not in state.gangs and len(state.orphans[key]) == 2

    priority_class = {"metadata": {"name": "high"}, "value": 1000}
    cache.event(PRIORITY_CLASSES, "ADDED", priority_class, 4.0)
    assert state.pods[f"{NS}/urgent"].priority == 1000
    assert f"Pod/{NS}/urgent" not in cache.rejected

    queue = {"metadata": {"name": "gold"}, "status": {"state": "Closed"}}
    cache.event(VOLCANO_QUEUES, "ADDED", queue, 5.0)
    assert state.gangs[f"{NS}/vc"].hold == ("QueueClosed", "Volcano queue 'gold' is Closed")
    cache.event(VOLCANO_QUEUES, "MODIFIED", {**queue, "status": {"state": "Open"}}, 6.0)
    assert state.gangs[f"{NS}/vc"].hold is None


def test_a_pod_re_created_under_its_name_drops_the_old_ones_assumption() -> None:
    cache = ClusterCache()
    first = pod("p", gpus=4)
    first["metadata"]["uid"] = "u1"
    state = cache.build(nodes=[node("node-a", gpus=4)], pods=[first], now=1.0).state
    state.assume(state.pods[f"{NS}/p"], 0, 1.0)
    again = {**first, "metadata": {**first["metadata"], "uid": "u2"}}
    cache.event(PODS, "MODIFIED", again, 2.0)  # deleted and created again between two events
    assert cache.assumed == {}
    assert state.pods[f"{NS}/p"].node == -1  # pending again: the node's GPUs are free
    assert int(state.table.requested[0][state.table.gpu_col]) == 0
