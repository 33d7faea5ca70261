"""``phalanx serve``'s loop against the fake API server, through the real client."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff

from phalanx.cli.serve import add_parser
from phalanx.live import PODGROUPS, PODS, KubeClient
from phalanx.live.cache import ClusterCache
from phalanx.live.loop import LiveScheduler
from phalanx.policies import Scheduler, get_policy

NS = "team"


def node(name: str, *, gpus: int = 4, cpu: str = "32") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": cpu,
                "memory": "128Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
        },
    }


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member},
    }


def pod(
    name: str,
    *,
    group: str | None = None,
    gpus: int = 0,
    scheduler: str = "phalanx",
    node_name: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}}
    if gpus:
        resources = {
            "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        }
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if node_name:
        spec["nodeName"] = node_name
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": spec,
    }


def bound_to(server: FakeApiServer, name: str) -> str | None:
    stored = server.get("v1", "pods", name, NS)
    assert stored is not None
    value = (stored.get("spec") or {}).get("nodeName")
    return str(value) if value else None


def scheduled_condition(server: FakeApiServer, name: str) -> dict[str, Any] | None:
    stored = server.get("v1", "pods", name, NS)
    assert stored is not None
    for condition in (stored.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return dict(condition)
    return None


async def create_pod(scheduler: LiveScheduler, client: KubeClient, obj: dict[str, Any]) -> None:
    await client.create(PODS, obj)
    key = f"{NS}/{obj['metadata']['name']}"
    await eventually(lambda: key in scheduler.informers[PODS].store, what=f"pod {key}")


async def create_group(scheduler: LiveScheduler, client: KubeClient, obj: dict[str, Any]) -> None:
    await client.create(PODGROUPS, obj)
    key = f"{NS}/{obj['metadata']['name']}"
    await eventually(lambda: key in scheduler.informers[PODGROUPS].store, what=f"group {key}")


async def test_a_gang_binds_only_once_min_member_pods_exist() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("train", 3))
            for i in range(2):
                await create_pod(scheduler, client, pod(f"w-{i}", group="train"))
                result = await scheduler.run_once(float(i))
                assert result.binds == []
                assert server.count("POST", r"/binding$") == 0
            await create_pod(scheduler, client, pod("w-2", group="train"))
            result = await scheduler.run_once(3.0)
            assert len(result.binds) == 3
        assert {bound_to(server, f"w-{i}") for i in range(3)} == {"node-a"}


async def test_two_gangs_that_cannot_both_fit_one_binds_whole() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "nodes", node("node-b"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            for group in ("first", "second"):
                await create_group(scheduler, client, podgroup(group, 6))
                for i in range(6):
                    await create_pod(scheduler, client, pod(f"{group}-{i}", group=group, gpus=1))
            await scheduler.run_once(1.0)
            bound = {
                g: [bound_to(server, f"{g}-{i}") for i in range(6)] for g in ("first", "second")
            }
            winners = [g for g, nodes in bound.items() if all(nodes)]
            losers = [g for g, nodes in bound.items() if not any(nodes)]
            assert len(winners) == 1 and len(losers) == 1
            for i in range(6):
                condition = scheduled_condition(server, f"{losers[0]}-{i}")
                assert condition is not None
                assert condition["status"] == "False"
                assert condition["reason"] == "Unschedulable"
                assert "fit now" in condition["message"]
            # The informer catches up; another cycle binds nothing and rewrites no condition.
            key = f"{NS}/{winners[0]}-0"
            await eventually(
                lambda: scheduler.informers[PODS].store[key]["spec"].get("nodeName"),
                what="bind event",
            )
            loser_key = f"{NS}/{losers[0]}-5"
            await eventually(
                lambda: scheduler.informers[PODS].store[loser_key]["status"].get("conditions"),
                what="condition event",
            )
            patches = server.count("PATCH", r"/status$")
            result = await scheduler.run_once(2.0)
            assert result.binds == []
            assert server.count("PATCH", r"/status$") == patches
            assert server.count("POST", r"/binding$") == 6


async def test_other_schedulers_pods_use_capacity_and_are_never_bound() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "nodes", node("node-b"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_pod(
                scheduler,
                client,
                pod("theirs-bound", gpus=4, scheduler="default-scheduler", node_name="node-a"),
            )
            await create_pod(scheduler, client, pod("theirs-pending", scheduler="other"))
            await create_group(scheduler, client, podgroup("big", 6))
            for i in range(6):
                await create_pod(scheduler, client, pod(f"big-{i}", group="big", gpus=1))
            await create_group(scheduler, client, podgroup("small", 4))
            for i in range(4):
                await create_pod(scheduler, client, pod(f"small-{i}", group="small", gpus=1))
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
        assert [bound_to(server, f"small-{i}") for i in range(4)] == ["node-b"] * 4
        assert not any(bound_to(server, f"big-{i}") for i in range(6))
        assert bound_to(server, "theirs-pending") is None
        assert server.count("POST", r"/pods/theirs-[^/]+/binding$") == 0
        assert scheduled_condition(server, "theirs-pending") is None


async def test_a_malformed_podgroup_does_not_stop_another_gang(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="phalanx.live.cache")
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("broken", 0))
            await create_group(scheduler, client, podgroup("good", 2))
            for group in ("broken", "good"):
                for i in range(2):
                    await create_pod(scheduler, client, pod(f"{group}-{i}", group=group))
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert "PodGroup/team/broken" in scheduler.cache.rejected
        assert [bound_to(server, f"good-{i}") for i in range(2)] == ["node-a"] * 2
        assert [bound_to(server, f"broken-{i}") for i in range(2)] == [None, None]
        warnings = [r for r in caplog.records if "team/broken" in r.getMessage()]
        assert len(warnings) == 1
        assert "minMember" in warnings[0].getMessage()


async def test_a_failed_bind_is_retried_and_the_gang_ends_fully_bound() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("train", 3))
            for i in range(3):
                await create_pod(scheduler, client, pod(f"w-{i}", group="train"))
            server.fail("POST", r"/pods/[^/]+/binding$", 500)
            result = await scheduler.run_once(1.0)
            assert len(result.binds) == 3
        assert [bound_to(server, f"w-{i}") for i in range(3)] == ["node-a"] * 3
        assert server.count("POST", r"/binding$") == 4


async def test_assumed_pods_hold_their_node_until_the_watch_catches_up() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("one", 4))
            for i in range(4):
                await create_pod(scheduler, client, pod(f"one-{i}", group="one", gpus=1))
            await scheduler.run_once(1.0)
            # each is assumed until the watch shows it bound (which may be already)
            state = scheduler.cache.state
            assert all(state.pods[f"{NS}/one-{i}"].node == 0 for i in range(4))
            await create_group(scheduler, client, podgroup("two", 1))
            await create_pod(scheduler, client, pod("two-0", group="two", gpus=1))
            # Whether or not the bind events arrived, node-a is full.
            result = await scheduler.run_once(2.0)
            assert result.binds == []
            await eventually(
                lambda: all(
                    scheduler.informers[PODS].store[f"{NS}/one-{i}"]["spec"].get("nodeName")
                    for i in range(4)
                ),
                what="bind events",
            )
            await scheduler.run_once(3.0)
            assert scheduler.cache.assumed == {}
        assert bound_to(server, "two-0") is None


async def test_serve_binds_on_events_and_stops() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        scheduler = LiveScheduler(client, backoff=fast_backoff())
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.serve(stop, period=5.0, debounce=0.01))
        await client.create(PODGROUPS, podgroup("train", 2))
        for i in range(2):
            await client.create(PODS, pod(f"w-{i}", group="train"))
        await eventually(lambda: all(bound_to(server, f"w-{i}") for i in range(2)), what="binds")
        stop.set()
        await asyncio.wait_for(task, 5.0)


async def test_serve_binds_while_a_podgroup_status_write_is_slow() -> None:
    """Under serve, a cycle does not wait for PodGroup status writes: the next gang binds
    while the first group's status is still on its way; both statuses arrive, once each."""
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        server.add_latency(2.0, "PATCH", r"/podgroups/[^/]+/status$")
        scheduler = LiveScheduler(client, backoff=fast_backoff())
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.serve(stop, period=5.0, debounce=0.01))

        def status(name: str) -> dict[str, Any]:
            stored = server.get(PODGROUPS.api_version, "podgroups", name, NS)
            return dict((stored or {}).get("status") or {})

        for name in ("first", "second"):
            await client.create(PODGROUPS, podgroup(name, 1))
            await client.create(PODS, pod(f"{name}-0", group=name))
            await eventually(lambda name=name: bound_to(server, f"{name}-0"), what=name)
        assert status("first") == {}  # its write is still delayed by the server
        await eventually(lambda: status("first") and status("second"), what="statuses")
        stop.set()
        await asyncio.wait_for(task, 10.0)
        assert server.count("PATCH", r"/podgroups/first/status$") == 1


def test_serve_arguments() -> None:
    root = argparse.ArgumentParser(prog="phalanx")
    add_parser(root.add_subparsers(dest="command"))
    args = root.parse_args(["serve", "--scheduler-name", "gangs", "--period", "2.5"])
    assert (args.command, args.scheduler_name, args.period, args.kubeconfig) == (
        "serve",
        "gangs",
        2.5,
        None,
    )
    with pytest.raises(SystemExit):
        root.parse_args(["serve", "--period", "0"])


def test_the_assume_cache_counts_until_the_informer_shows_the_pod_bound_or_gone() -> None:
    cache = ClusterCache()
    nodes = [node("node-a", gpus=4)]
    pending = pod("p", gpus=4)
    pending["metadata"]["uid"] = "u1"
    other = pod("q", gpus=1)
    snapshot = cache.build(nodes=nodes, pods=[pending, other], now=1.0)
    state = snapshot.state
    state.assume(state.pods[f"{NS}/p"], 0, 1.0)  # what the applier does with a bind
    cache.event(PODS, "MODIFIED", pending, 1.5)  # an echo of our own status write
    assert dict(snapshot.assumed) == {f"{NS}/p": 0}
    assert state.pods[f"{NS}/p"].node == 0
    result = Scheduler(get_policy("phalanx")).cycle(state, 2.0)
    assert result.binds == []  # node-a's GPUs are taken by the assumed pod
    bound = {**pending, "spec": {**pending["spec"], "nodeName": "node-a"}}
    cache.event(PODS, "MODIFIED", bound, 2.0)
    assert cache.assumed == {} and state.pods[f"{NS}/p"].node == 0  # confirmed
    cache.event(PODS, "DELETED", bound, 3.0)
    assert f"{NS}/p" not in state.pods
    assert Scheduler(get_policy("phalanx")).cycle(state, 4.0).binds != []  # room is free


async def test_the_loop_binds_a_volcano_podgroup_whole() -> None:
    from phalanx.live import VOLCANO_PODGROUPS, VOLCANO_QUEUES

    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "vc", "namespace": NS},
        "spec": {"minMember": 2, "minTaskMember": {"worker": 2}, "queue": "default"},
    }
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            queue = {"metadata": {"name": "default"}, "spec": {"weight": 1}}
            await client.create(VOLCANO_QUEUES, queue)  # Volcano's install creates it
            await client.create(VOLCANO_PODGROUPS, group)
            key = f"{NS}/vc"
            await eventually(
                lambda: key in scheduler.informers[VOLCANO_PODGROUPS].store, what="volcano group"
            )
            for i in range(2):
                obj = pod(f"vc-{i}", gpus=1)
                obj["metadata"]["annotations"] = {
                    "scheduling.k8s.io/group-name": "vc",
                    "volcano.sh/task-spec": "worker",
                }
                await create_pod(scheduler, client, obj)
            result = await scheduler.run_once(1.0)
            assert len(result.binds) == 2
        assert [bound_to(server, f"vc-{i}") for i in range(2)] == ["node-a", "node-a"]


async def test_schedule_timeout_is_honoured_across_cycles() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            hog = pod("hog", gpus=2, scheduler="default-scheduler", node_name="node-a")
            await create_pod(scheduler, client, hog)
            group = podgroup("big", 3)
            group["spec"]["scheduleTimeoutSeconds"] = 5
            await create_group(scheduler, client, group)
            for i in range(3):
                await create_pod(scheduler, client, pod(f"big-{i}", group="big", gpus=1))
            first = await scheduler.run_once(100.0)
            assert first.waiting[f"{NS}/big"].reason == "NotEnoughResources"
            assert first.timeouts == []
            later = await scheduler.run_once(106.0)  # 6 s after the gang was first seen
            assert [g.key for g in later.timeouts] == [f"{NS}/big"]
            assert later.waiting[f"{NS}/big"].reason == "Timeout"
            again = await scheduler.run_once(120.0)  # reported once; still never bound
            assert again.timeouts == [] and again.binds == []
        assert server.count("POST", r"/binding$") == 0
