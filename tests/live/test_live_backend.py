"""The live Backend carries out what a cycle decided: evictions through the API, Timeout
Events, wake-ups (issue 8)."""

from __future__ import annotations

import pytest
from apiserver.harness import connected, eventually, fast_backoff
from test_live_recovery import events_about, exists
from test_live_serve import NS, create_group, create_pod, node, pod, podgroup

from phalanx.cluster.workloads import PodStatus
from phalanx.framework.backend import apply
from phalanx.framework.session import CycleResult
from phalanx.live.backend import TIMEOUT, LiveBackend
from phalanx.live.loop import LiveScheduler


async def test_an_eviction_goes_through_the_api_and_a_refused_one_is_undone() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("train", 2))
            for i in range(2):
                await create_pod(scheduler, client, pod(f"w-{i}", group="train", gpus=1))
            await scheduler.run_once(1.0)
            await eventually(lambda: not scheduler.cache.assumed, what="binds confirmed")
            state = scheduler.cache.state
            first, second = (state.pods[f"{NS}/w-{i}"] for i in range(2))

            server.fail("POST", r"/pods/w-0/eviction$", 429)  # a PodDisruptionBudget says no
            backend = LiveBackend(scheduler, 2.0)
            apply(CycleResult(evictions=[first]), state, backend)
            assert first.status is PodStatus.RELEASING
            await backend.finish()
            assert state.pods[f"{NS}/w-0"].status is PodStatus.BOUND  # as the API says
            assert exists(server, "w-0")

            backend = LiveBackend(scheduler, 3.0)
            apply(CycleResult(evictions=[second]), state, backend)
            await backend.finish()
            assert server.count("POST", r"/pods/w-1/eviction$") == 1
            assert not exists(server, "w-1")  # evicted (no budget covers it)
            await eventually(lambda: f"{NS}/w-1" not in state.pods, what="w-1 gone")


async def test_a_timeout_is_an_event_and_a_backoff_a_wakeup() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=1))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            group = podgroup("big", 2)
            group["spec"]["scheduleTimeoutSeconds"] = 5
            await create_group(scheduler, client, group)
            for i in range(2):
                await create_pod(scheduler, client, pod(f"big-{i}", group="big", gpus=1))
            await scheduler.run_once(100.0)
            later = await scheduler.run_once(106.0)
            assert [g.key for g in later.timeouts] == [f"{NS}/big"]
            (event,) = events_about(server, "big", TIMEOUT)
            assert event["type"] == "Warning" and "scheduleTimeoutSeconds" in event["note"]
            assert later.retry_at
            assert scheduler.next_wakeup(106.0) == min(later.retry_at.values())


async def test_the_coscheduling_action_is_refused_live() -> None:
    async with connected() as (_server, client):
        with pytest.raises(ValueError, match="coscheduling"):
            LiveScheduler(client, policy="coscheduling")
        with pytest.raises(ValueError, match="coscheduling"):
            LiveScheduler(client, actions=["coscheduling"])
