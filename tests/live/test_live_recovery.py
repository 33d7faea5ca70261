"""Partial-bind recovery and PodGroup status of the live loop, against the fake API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_serve import NS, bound_to, create_group, create_pod, node, pod, podgroup

from phalanx.live import PODS, KubeClient
from phalanx.live.loop import PARTIAL_BIND_RECOVERED, LiveScheduler, RecoveryConfig
from phalanx.live.status import group_status, phase_for

FAST = RecoveryConfig(retry_delay=0.001, requeue_initial=2.0)


def events_about(server: FakeApiServer, name: str, reason: str) -> list[dict[str, Any]]:
    found = []
    for event in server.objects("events.k8s.io/v1", "events"):
        if event.get("reason") == reason and event["regarding"]["name"] == name:
            found.append(event)
    return found


def exists(server: FakeApiServer, name: str) -> bool:
    return server.get("v1", "pods", name, NS) is not None


async def gang(scheduler: LiveScheduler, client: KubeClient, name: str, size: int) -> None:
    await create_group(scheduler, client, podgroup(name, size))
    for i in range(size):
        await create_pod(scheduler, client, pod(f"{name}-{i}", group=name))


async def recreate(
    scheduler: LiveScheduler, client: KubeClient, server: FakeApiServer, names: list[str]
) -> None:
    """What a pod's controller does after the pod is deleted: create it again (new uid)."""
    store = scheduler.informers[PODS].store
    for name in names:
        await eventually(lambda n=name: f"{NS}/{n}" not in store, what=f"{name} deleted")  # type: ignore[misc]
        await create_pod(scheduler, client, pod(name, group=name.rsplit("-", 1)[0]))


async def test_binds_failing_past_the_retries_are_undone_and_the_gang_binds_later() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=FAST) as scheduler:
            await gang(scheduler, client, "train", 4)
            server.fail("POST", r"/pods/train-1/binding$", 500, times=10)
            server.fail("POST", r"/pods/train-2/binding$", 409)
            result = await scheduler.run_once(1.0)
            assert len(result.binds) == 4
            # 1 attempt + 3 retries for the 500s; the 409 is not retried.
            assert server.count("POST", r"/pods/train-1/binding$") == 4
            assert server.count("POST", r"/pods/train-2/binding$") == 1
            # The members that did bind were deleted (uid precondition); none is left bound.
            assert not exists(server, "train-0") and not exists(server, "train-3")
            assert [bound_to(server, f"train-{i}") for i in (1, 2)] == [None, None]
            assert server.count("DELETE", r"/pods/train-[03]$") == 2
            assert scheduler.cache.assumed == {}
            (event,) = events_about(server, "train", PARTIAL_BIND_RECOVERED)
            assert event["type"] == "Warning"
            assert event["regarding"]["kind"] == "PodGroup"
            assert "2 bound members deleted" in event["note"]
            assert scheduler.recovered == [f"{NS}/train"]
            assert scheduler.requeued[f"{NS}/train"].until == 3.0

            server.clear_faults()
            await recreate(scheduler, client, server, ["train-0", "train-3"])
            assert (await scheduler.run_once(2.0)).binds == []  # still in backoff
            result = await scheduler.run_once(4.0)
            assert len(result.binds) == 4
            assert scheduler.requeued == {}
        assert [bound_to(server, f"train-{i}") for i in range(4)] == ["node-a"] * 4


async def test_retries_that_succeed_leave_the_gang_whole() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=FAST) as scheduler:
            await gang(scheduler, client, "train", 3)
            server.fail("POST", r"/pods/train-1/binding$", 503, times=3)
            await scheduler.run_once(1.0)
            assert scheduler.recovered == [] and scheduler.requeued == {}
        assert [bound_to(server, f"train-{i}") for i in range(3)] == ["node-a"] * 3
        assert server.count("DELETE") == 0


async def test_a_gang_still_at_its_minimum_is_not_undone() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=FAST) as scheduler:
            await create_group(scheduler, client, podgroup("train", 2))
            for i in range(3):
                await create_pod(scheduler, client, pod(f"train-{i}", group="train"))
            server.fail("POST", r"/pods/train-2/binding$", 409)
            result = await scheduler.run_once(1.0)
            assert len(result.binds) == 3
            assert scheduler.recovered == []
        assert [bound_to(server, f"train-{i}") for i in range(3)] == ["node-a", "node-a", None]
        assert server.count("DELETE") == 0


async def test_evict_mode_falls_back_to_delete_without_an_eviction_subresource() -> None:
    config = RecoveryConfig(retry_delay=0.001, undo="evict")
    async with connected(eviction=False) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=config) as scheduler:
            await gang(scheduler, client, "train", 2)
            server.fail("POST", r"/pods/train-1/binding$", 500, times=10)
            await scheduler.run_once(1.0)
            assert server.count("POST", r"/pods/train-0/eviction$") == 1
            assert server.count("DELETE", r"/pods/train-0$") == 1
            assert not exists(server, "train-0")
            (event,) = events_about(server, "train", PARTIAL_BIND_RECOVERED)
            assert "evicted" in event["note"]


async def test_a_failed_undo_is_retried_next_cycle() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=FAST) as scheduler:
            await gang(scheduler, client, "train", 2)
            server.fail("POST", r"/pods/train-1/binding$", 500, times=10)
            server.fail("DELETE", r"/pods/train-0$", 500)
            await scheduler.run_once(1.0)
            assert bound_to(server, "train-0") == "node-a"
            assert f"{NS}/train" in scheduler.undo_pending
            assert events_about(server, "train", PARTIAL_BIND_RECOVERED) == []
            await scheduler.run_once(1.5)
            assert not exists(server, "train-0")
            assert scheduler.undo_pending == {}
            assert len(events_about(server, "train", PARTIAL_BIND_RECOVERED)) == 1


async def test_the_partial_bind_limit_cuts_the_retries_short() -> None:
    config = RecoveryConfig(retry_delay=1.0, partial_bind_limit=0.5)
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=config) as scheduler:
            await gang(scheduler, client, "train", 2)
            server.fail("POST", r"/pods/train-1/binding$", 500, times=10)
            await scheduler.run_once(1.0)
            assert server.count("POST", r"/pods/train-1/binding$") == 1
            assert not exists(server, "train-0")


def test_recovery_config_validates_and_backs_off() -> None:
    config = RecoveryConfig(requeue_initial=1.0, requeue_max=5.0)
    assert [config.requeue_delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    with pytest.raises(ValueError):
        RecoveryConfig(bind_retries=-1)
    with pytest.raises(ValueError):
        RecoveryConfig(undo="drop")  # type: ignore[arg-type]


async def test_a_refused_bind_counts_even_when_the_retried_ones_succeed() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=FAST) as scheduler:
            await gang(scheduler, client, "train", 3)
            server.fail("POST", r"/pods/train-1/binding$", 500, times=1)
            server.fail("POST", r"/pods/train-2/binding$", 404)
            await scheduler.run_once(1.0)
            assert scheduler.recovered == [f"{NS}/train"]
            assert not exists(server, "train-0") and not exists(server, "train-1")
            assert bound_to(server, "train-2") is None


# -- PodGroup status and scheduling events -------------------------------------------------


def test_the_phase_follows_the_scheduler_plugins_controller() -> None:
    assert phase_for(3, 0, 0, 0, 0) == "Pending"
    assert phase_for(3, 2, 0, 0, 0) == "Pending"
    assert phase_for(3, 3, 0, 0, 0) == "Scheduling"
    assert phase_for(3, 3, 2, 0, 0) == "Scheduling"
    assert phase_for(3, 3, 2, 1, 0) == "Running"
    assert phase_for(3, 3, 2, 0, 1) == "Failed"
    assert phase_for(3, 4, 3, 0, 0) == "Running"
    assert phase_for(3, 3, 0, 3, 0) == "Finished"
    assert phase_for(3, 3, 0, 0, 0, current="Finished") == "Finished"
    assert phase_for(3, 0, 0, 0, 0, current="Failed") == "Failed"


def test_group_status_counts_pods_by_phase() -> None:
    group = podgroup("g", 2)
    pods = [
        {"status": {"phase": "Running"}},
        {"status": {"phase": "Succeeded"}},
        {"status": {"phase": "Failed"}},
        {"status": {"phase": "Pending"}},
    ]
    status = group_status(group, pods, now="2026-01-01T00:00:00Z")
    assert status == {
        "phase": "Failed",
        "running": 1,
        "succeeded": 1,
        "failed": 1,
        "scheduleStartTime": "2026-01-01T00:00:00Z",
    }
    assert group_status(group, [])["phase"] == "Pending"
    assert group_status(group, [])["scheduleStartTime"] is None


def set_phase(server: FakeApiServer, name: str, phase: str) -> None:
    stored = server.get("v1", "pods", name, NS)
    assert stored is not None
    stored.setdefault("status", {})["phase"] = phase
    server.put("v1", "pods", stored)


async def settle_phases(
    server: FakeApiServer, scheduler: LiveScheduler, names: list[str], phase: str
) -> None:
    """Set the pods' phase on the server and wait for the informer to show it."""
    for name in names:
        set_phase(server, name, phase)
    store = scheduler.informers[PODS].store
    await eventually(
        lambda: all(store[f"{NS}/{n}"]["status"].get("phase") == phase for n in names),
        what=f"pods {phase}",
    )


def group_status_of(server: FakeApiServer, name: str) -> dict[str, Any]:
    stored = server.get("scheduling.x-k8s.io/v1alpha1", "podgroups", name, NS)
    assert stored is not None
    return dict(stored.get("status") or {})


async def test_a_bound_gang_gets_scheduled_events_and_its_status_follows_its_pods() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await gang(scheduler, client, "train", 3)
            await scheduler.run_once(1.0)
            for i in range(3):
                (event,) = events_about(server, f"train-{i}", "Scheduled")
                assert event["note"] == f"Successfully assigned {NS}/train-{i} to node-a"
                assert event["regarding"]["kind"] == "Pod"
            (event,) = events_about(server, "train", "Scheduled")
            assert event["regarding"]["kind"] == "PodGroup"
            status = group_status_of(server, "train")
            assert status["phase"] == "Scheduling"
            assert (status["running"], status["succeeded"], status["failed"]) == (0, 0, 0)
            assert status["scheduleStartTime"]
            writes = server.count("PATCH", r"/podgroups/train/status$")
            assert writes == 1
            await scheduler.run_once(2.0)  # nothing changed: no write, even if the informer lags
            assert server.count("PATCH", r"/podgroups/train/status$") == writes

            names = [f"train-{i}" for i in range(3)]
            await settle_phases(server, scheduler, names, "Running")
            await scheduler.run_once(3.0)
            status = group_status_of(server, "train")
            assert (status["phase"], status["running"]) == ("Running", 3)
            await settle_phases(server, scheduler, names, "Succeeded")
            await scheduler.run_once(4.0)
            status = group_status_of(server, "train")
            assert (status["phase"], status["running"], status["succeeded"]) == ("Finished", 0, 3)


async def test_a_waiting_gang_gets_failed_scheduling_only_when_the_message_changes() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("big", 3))
            for i in range(2):
                await create_pod(scheduler, client, pod(f"big-{i}", group="big", gpus=1))
            await scheduler.run_once(1.0)
            (event,) = events_about(server, "big", "FailedScheduling")
            assert event["type"] == "Warning" and event["regarding"]["kind"] == "PodGroup"
            first = event["note"]
            assert first
            for i in range(2):
                (event,) = events_about(server, f"big-{i}", "FailedScheduling")
                assert event["note"] == first
            assert group_status_of(server, "big")["phase"] == "Pending"
            await scheduler.run_once(2.0)
            assert len(events_about(server, "big", "FailedScheduling")) == 1
            # A third member that cannot fit: the explanation changes, one new event.
            await create_pod(scheduler, client, pod("big-2", group="big", gpus=8))
            await scheduler.run_once(3.0)
            notes = [e["note"] for e in events_about(server, "big", "FailedScheduling")]
            assert len(notes) == 2 and notes[1] != first
            assert group_status_of(server, "big")["phase"] == "Scheduling"
            assert len(events_about(server, "big-2", "FailedScheduling")) == 1


async def test_status_writing_can_be_turned_off() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), write_status=False) as scheduler:
            await gang(scheduler, client, "train", 2)
            await scheduler.run_once(1.0)
        assert server.count("PATCH", r"/podgroups/") == 0
        assert server.objects("events.k8s.io/v1", "events") == []


async def test_a_gang_found_waiting_partially_bound_is_undone_after_the_limit() -> None:
    config = RecoveryConfig(partial_bind_limit=0.2)
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=config) as scheduler:
            await create_group(scheduler, client, podgroup("half", 2))
            # As left by a scheduler that stopped after binding one member of two.
            await create_pod(scheduler, client, pod("half-0", group="half", node_name="node-a"))
            await create_pod(scheduler, client, pod("half-1", group="half", gpus=8))
            await scheduler.run_once(1.0)
            assert f"{NS}/half" in scheduler.partial_since
            assert bound_to(server, "half-0") == "node-a"
            await asyncio.sleep(0.25)
            await scheduler.run_once(2.0)
            assert not exists(server, "half-0")
            assert scheduler.recovered == [f"{NS}/half"]
            assert len(events_about(server, "half", PARTIAL_BIND_RECOVERED)) == 1


async def test_a_running_gang_below_its_minimum_is_left_alone() -> None:
    config = RecoveryConfig(partial_bind_limit=0.01)
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=config) as scheduler:
            await create_group(scheduler, client, podgroup("job", 2))
            running = pod("job-0", group="job", node_name="node-a")
            running["status"] = {"phase": "Running"}
            server.put("v1", "pods", running)
            await eventually(lambda: f"{NS}/job-0" in scheduler.informers[PODS].store)
            await create_pod(scheduler, client, pod("job-1", group="job", gpus=8))
            await scheduler.run_once(1.0)
            await asyncio.sleep(0.05)
            await scheduler.run_once(2.0)
            assert scheduler.partial_since == {} and scheduler.recovered == []
        assert bound_to(server, "job-0") == "node-a"


async def test_a_failed_bind_never_tears_down_started_members() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=FAST) as scheduler:
            await create_group(scheduler, client, podgroup("job", 2))
            running = pod("job-0", group="job", node_name="node-a")
            running["status"] = {"phase": "Running"}
            server.put("v1", "pods", running)
            await eventually(lambda: f"{NS}/job-0" in scheduler.informers[PODS].store)
            await create_pod(scheduler, client, pod("job-1", group="job"))
            server.fail("POST", r"/pods/job-1/binding$", 409)
            result = await scheduler.run_once(1.0)
            assert len(result.binds) == 1
            assert scheduler.recovered == [] and f"{NS}/job" in scheduler.requeued
        assert bound_to(server, "job-0") == "node-a"
        assert server.count("DELETE") == 0
