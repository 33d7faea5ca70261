"""Live preemption, made visible: Events on victims and preemptors, disruption metrics, and
Volcano Queue status counts, against the API test server (issue 11)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_recovery import events_about
from test_live_serve import NS, bound_to, create_group, create_pod, node, pod, podgroup
from test_live_status import VOLCANO, create_volcano_group, queue, volcano_group, volcano_pod

from phalanx.live import PODS, VOLCANO_QUEUES
from phalanx.live.cache import ClusterCache
from phalanx.live.health import InstrumentedScheduler, Metrics
from phalanx.live.loop import LiveScheduler
from phalanx.live.queue_status import desired, quantity

SCHEDULING = "scheduling.k8s.io/v1"


def priority_class(name: str, value: int, policy: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": SCHEDULING,
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def classed(obj: dict[str, Any], class_name: str) -> dict[str, Any]:
    obj["spec"]["priorityClassName"] = class_name
    return obj


def queue_status(server: FakeApiServer, name: str) -> dict[str, Any]:
    stored = server.get(VOLCANO, "queues", name)
    assert stored is not None
    return dict(stored.get("status") or {})


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


@contextlib.asynccontextmanager
async def preempting() -> AsyncIterator[tuple[FakeApiServer, InstrumentedScheduler, Metrics]]:
    """Queue ``default``, classes ``low``/``high``; Volcano gang ``low`` (2 × 2 GPUs) bound at
    t=1 on the only node (4 GPUs); then gang ``urgent`` (1 × 4 GPUs, ``high``) created."""
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        metrics = Metrics()
        async with InstrumentedScheduler(
            client, metrics=metrics, backoff=fast_backoff()
        ) as scheduler:
            server.put(SCHEDULING, "priorityclasses", priority_class("low", 10))
            server.put(SCHEDULING, "priorityclasses", priority_class("high", 1000))
            server.put(VOLCANO, "queues", queue("default", "Open"))  # as its controller left it
            queues = scheduler.informers[VOLCANO_QUEUES].store
            await eventually(lambda: "default" in queues, what="default queue")
            await create_volcano_group(scheduler, volcano_group("low", 2, priorityClassName="low"))
            for i in range(2):
                obj = classed(volcano_pod(f"low-{i}", "low", gpus=2), "low")
                await create_pod(scheduler, client, obj)
            await scheduler.run_once(1.0)
            assert [bound_to(server, f"low-{i}") for i in range(2)] == ["node-a", "node-a"]
            status = queue_status(server, "default")
            assert (status["running"], status["pending"], status["inqueue"]) == (1, 0, 0)
            assert status["allocated"] == {"cpu": "2", "nvidia.com/gpu": "4"}
            assert status["state"] == "Open"  # the queue controller's field is left alone
            urgent = volcano_group("urgent", 1, priorityClassName="high")
            await create_volcano_group(scheduler, urgent)
            obj = classed(volcano_pod("urgent-0", "urgent", gpus=4), "high")
            await create_pod(scheduler, client, obj)
            yield server, scheduler, metrics


async def test_a_preemption_writes_events_metrics_and_queue_counts() -> None:
    async with preempting() as (server, scheduler, metrics):
        result = await scheduler.run_once(3601.0)
        assert sorted(p.key for p in result.evictions) == [f"{NS}/low-0", f"{NS}/low-1"]
        store = scheduler.informers[PODS].store
        await eventually(lambda: f"{NS}/low-0" not in store, what="victims gone")

        (victim,) = events_about(server, "low-0", "Preempted")
        assert victim["note"] == f"preempted by {NS}/urgent to place 4 GPUs on nodes node-a"
        assert victim["action"] == "Preempt" and victim["type"] == "Normal"
        assert victim["related"]["name"] == "urgent"
        (group,) = events_about(server, "low", "Preempted")
        assert group["regarding"]["kind"] == "PodGroup"
        assert group["note"].startswith("2 pods preempted by")
        (preemptor,) = events_about(server, "urgent", "Preempting")
        assert preemptor["note"] == (
            f"evicted {NS}/low (2 pods, preempt) to place 4 GPUs on nodes node-a"
        )

        assert sample(metrics, "phalanx_evictions_total", reason="preempt") == 2
        assert sample(metrics, "phalanx_preemptions_total") == 1
        assert sample(metrics, "phalanx_reclaims_total") == 0
        # 4 GPUs bound at t=1, stopped at t=3601: one hour each
        assert sample(metrics, "phalanx_lost_gpu_hours_total") == 4.0
        assert b"phalanx_preemptions_total 1.0" in metrics.render()

        await scheduler.run_once(3602.0)
        assert bound_to(server, "urgent-0") == "node-a"
        status = queue_status(server, "default")
        assert status["running"] == 1 and status["allocated"]["nvidia.com/gpu"] == "4"
        assert status["running"] + status["pending"] + status["inqueue"] == 2
        writes = server.count("PATCH", r"/queues/default/status$")
        await scheduler.run_once(3603.0)  # nothing changed: no write
        assert server.count("PATCH", r"/queues/default/status$") == writes


async def test_a_refused_eviction_writes_no_event_and_counts_nothing() -> None:
    async with preempting() as (server, scheduler, metrics):
        server.fail("POST", r"/pods/low-\d/eviction$", 429, times=2)
        server.fail("DELETE", r"/pods/low-\d$", 429, times=2)
        result = await scheduler.run_once(2.0)
        assert len(result.evictions) == 2
        assert events_about(server, "low-0", "Preempted") == []
        assert events_about(server, "urgent", "Preempting") == []
        assert sample(metrics, "phalanx_preemptions_total") == 0
        assert sample(metrics, "phalanx_evictions_total", reason="preempt") == 0
        assert [bound_to(server, f"low-{i}") for i in range(2)] == ["node-a", "node-a"]


def test_queue_counts_and_allocated_quantities() -> None:
    assert quantity("cpu", 1500) == "1500m" and quantity("cpu", 2000) == "2"
    assert quantity("nvidia.com/gpu", 500) == "500m" and quantity("memory", 2**30) == str(2**30)
    groups = [
        {"spec": {"queue": "gold"}, "status": {"phase": "Running"}, "metadata": {"name": "a"}},
        {"spec": {}, "status": {"phase": "Inqueue"}, "metadata": {"name": "b"}},
        {"spec": {"queue": "gold"}, "status": {}, "metadata": {"name": "c"}},
        {"spec": {"queue": "gone"}, "status": {"phase": "Running"}, "metadata": {"name": "d"}},
    ]
    state = ClusterCache().build(nodes=[node("node-a")], pods=[], now=1.0).state
    wanted = desired(["gold", "default"], groups, state)
    assert wanted["gold"] == {
        "pending": 1,
        "running": 1,
        "unknown": 0,
        "inqueue": 0,
        "completed": 0,
        "allocated": {},
    }
    assert wanted["default"]["inqueue"] == 1 and "gone" not in wanted
    assert VOLCANO_QUEUES.status_subresource
    assert queue("x", "Open")["status"] == {"state": "Open"}


async def test_a_never_class_does_not_preempt_and_max_member_caps_a_gang() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        server.put(SCHEDULING, "priorityclasses", priority_class("low", 10))
        server.put(SCHEDULING, "priorityclasses", priority_class("polite", 1000, "Never"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_pod(scheduler, client, classed(pod("low-0", gpus=2), "low"))
            await scheduler.run_once(1.0)
            polite = classed(pod("polite-0", gpus=4), "polite")
            await create_pod(scheduler, client, polite)  # admission copies Never into it
            result = await scheduler.run_once(2.0)
            assert result.evictions == [] and bound_to(server, "polite-0") is None
            spec = scheduler.cache.state.pods[f"{NS}/polite-0"].spec
            assert spec.preemption_policy == "Never"

            group = podgroup("elastic", 1)
            group["metadata"]["annotations"] = {"phalanx.dev/max-member": "2"}
            await create_group(scheduler, client, group)
            for i in range(3):
                await create_pod(scheduler, client, pod(f"e-{i}", group="elastic"))
            await scheduler.run_once(3.0)
            bound = [bound_to(server, f"e-{i}") for i in range(3)]
            assert bound.count("node-a") == 2 and bound.count(None) == 1
