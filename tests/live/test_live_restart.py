"""A scheduler restart mid-run (issue 4): a new :class:`LiveScheduler` — new client, new
cache, nothing carried over in memory — rebuilds its state from the API alone. Bound pods are
not bound again, pending gangs bind whole, and a gang the old instance left partially bound is
completed or undone within ``partial_bind_limit``, never left half bound."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_outage import all_bound, binding_posts, serving, submit
from test_live_recovery import events_about, exists
from test_live_serve import NS, bound_to, node, pod, scheduled_condition

from phalanx.live import KubeClient, config_for_server
from phalanx.live.loop import PARTIAL_BIND_RECOVERED, LiveScheduler, RecoveryConfig

#: The new instance undoes a gang left partially bound after this long (seconds).
LIMIT = 0.3


@contextlib.asynccontextmanager
async def fresh(
    server: FakeApiServer, recovery: RecoveryConfig | None = None
) -> AsyncIterator[LiveScheduler]:
    """A new scheduler process, as far as the API can tell: its own client and cache."""
    async with KubeClient(config_for_server(server.url), timeout=5.0, trust_env=False) as client:
        yield LiveScheduler(client, backoff=fast_backoff(), recovery=recovery)


def hog(name: str, node_name: str, gpus: int) -> dict[str, object]:
    """Another scheduler's running pod holding ``gpus`` GPUs on ``node_name``."""
    obj = pod(name, gpus=gpus, scheduler="default-scheduler", node_name=node_name)
    obj["status"] = {"phase": "Running"}
    return obj


async def test_a_graceful_restart_binds_the_pending_gangs_and_rebinds_nothing() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        server.put("v1", "nodes", node("node-b", gpus=4))
        server.put("v1", "pods", hog("hog", "node-b", gpus=4))
        async with fresh(server) as first, serving(first):
            await submit(client, "early", 3)
            await eventually(lambda: all_bound(server, "early", 3), what="early bound")
            await submit(client, "blocked", 4)  # needs node-b, which the hog holds
            await eventually(
                lambda: all(scheduled_condition(server, f"blocked-{i}") for i in range(4)),
                what="blocked explained",
            )
        # Stopped between cycles. While no scheduler runs, the hog goes and a gang arrives.
        server.remove("v1", "pods", "hog", NS)
        await submit(client, "late", 1)
        assert server.count("POST", r"/binding$") == 3

        async with fresh(server, RecoveryConfig(partial_bind_limit=LIMIT)) as second:
            async with serving(second):
                await eventually(
                    lambda: all_bound(server, "blocked", 4) and all_bound(server, "late", 1),
                    what="pending gangs bound",
                )
            assert second.recovered == [] and second.partial_since == {}
        assert [bound_to(server, f"early-{i}") for i in range(3)] == ["node-a"] * 3
        for name, size in (("early", 3), ("blocked", 4), ("late", 1)):
            assert [binding_posts(server, f"{name}-{i}") for i in range(size)] == [1] * size
        assert server.count("DELETE") == 0


async def kill_mid_bind(server: FakeApiServer, client: KubeClient, kill: str) -> None:
    """Run a scheduler until it has bound 2 of gang ``torn``'s 3 pods and the third bind is
    stuck, then cancel it, as a killed process stops: no retry, no undo, nothing written after.

    ``kill="failed"``: the third bind failed (500) and the scheduler waits to retry it.
    ``kill="in-flight"``: the third bind is still in flight; it dies with the connection.
    """
    if kill == "failed":
        server.fail("POST", r"/pods/torn-2/binding$", 500, times=1_000_000)
    else:
        server.add_latency(5.0, "POST", r"/pods/torn-2/binding$")
    retry_later = RecoveryConfig(retry_delay=30.0, partial_bind_limit=600.0)
    async with fresh(server, retry_later) as first:
        stop = asyncio.Event()
        task = asyncio.create_task(first.serve(stop, period=0.1, debounce=0.01))
        await submit(client, "torn", 3)
        await eventually(
            lambda: (
                bound_to(server, "torn-0")
                and bound_to(server, "torn-1")
                and binding_posts(server, "torn-2") == 1
            ),
            what="torn bound in part",
        )
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    server.clear_faults()
    server.clear_latency()
    assert [bound_to(server, f"torn-{i}") for i in range(3)] == ["node-a", "node-a", None]


@pytest.mark.parametrize("room", [True, False], ids=["room-to-finish", "no-room"])
@pytest.mark.parametrize("kill", ["failed", "in-flight"])
async def test_a_gang_left_partially_bound_by_a_killed_scheduler_is_finished_or_undone(
    kill: str, room: bool
) -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        await kill_mid_bind(server, client, kill)
        if not room:  # the rest of node-a goes to someone else while no scheduler runs
            server.put("v1", "pods", hog("hog", "node-a", gpus=2))
        async with fresh(server, RecoveryConfig(partial_bind_limit=LIMIT)) as second:
            async with serving(second):
                if room:
                    await eventually(lambda: all_bound(server, "torn", 3), what="torn completed")
                else:
                    await eventually(lambda: second.recovered == [f"{NS}/torn"], what="undo")
            # Either way, the gang is no longer bound in part.
            bound = [
                bound_to(server, f"torn-{i}") if exists(server, f"torn-{i}") else None
                for i in range(3)
            ]
            assert bound in (["node-a"] * 3, [None] * 3)
            assert [binding_posts(server, f"torn-{i}") for i in range(2)] == [1, 1]
            if room:
                assert binding_posts(server, "torn-2") == 2  # the killed one's, then ours
                assert server.count("DELETE") == 0 and second.recovered == []
            else:
                assert not exists(server, "torn-0") and not exists(server, "torn-1")
                assert binding_posts(server, "torn-2") == 1  # never fitted: not tried again
                (event,) = events_about(server, "torn", PARTIAL_BIND_RECOVERED)
                assert event["type"] == "Warning"


# -- what the API server says after a restart, or after a bind that timed out ----------------
async def test_a_late_bind_of_a_killed_scheduler_counts_as_bound_not_as_refused() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        await kill_mid_bind(server, client, "failed")
        server.add_latency(0.2, "POST", r"/pods/torn-2/binding$")
        async with fresh(server, RecoveryConfig(partial_bind_limit=LIMIT)) as second:
            async with serving(second):
                await eventually(lambda: binding_posts(server, "torn-2") == 2, what="rebind sent")
                # The killed instance's bind of torn-2 lands first: the new one gets a 409.
                stored = server.get("v1", "pods", "torn-2", NS)
                assert stored is not None
                stored["spec"]["nodeName"] = "node-a"
                server.put("v1", "pods", stored)
                await eventually(lambda: f"{NS}/torn" not in second.partial_since, what="settled")
                await asyncio.sleep(2 * LIMIT)  # past the limit: nothing may be undone
            assert second.recovered == []
        assert server.count("DELETE") == 0
        assert [bound_to(server, f"torn-{i}") for i in range(3)] == ["node-a"] * 3


async def test_a_bind_that_timed_out_but_committed_is_not_undone() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        await submit(client, "train", 3)
        config = RecoveryConfig(retry_delay=0.2)  # time to land the first attempt's write
        async with fresh(server, config) as scheduler:
            await scheduler.start()
            server.fail("POST", r"/pods/train-2/binding$", 504)
            task = asyncio.create_task(scheduler.run_once(1.0))
            await eventually(lambda: binding_posts(server, "train-2") == 1, what="first bind")
            stored = server.get("v1", "pods", "train-2", NS)  # the 504 came after the write
            assert stored is not None
            stored["spec"]["nodeName"] = "node-a"
            server.put("v1", "pods", stored)
            await task
            assert scheduler.recovered == [] and scheduler.requeued == {}
            await scheduler.stop()
        assert binding_posts(server, "train-2") == 2  # the retry got the 409
        assert server.count("DELETE") == 0
        assert all_bound(server, "train", 3)


async def test_a_gang_in_timeout_backoff_left_half_bound_is_still_undone() -> None:
    config = RecoveryConfig(partial_bind_limit=0.2)
    async with connected() as (server, _client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        group = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "half", "namespace": NS},
            "spec": {"minMember": 2, "scheduleTimeoutSeconds": 1},
        }
        server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", group)
        server.put("v1", "pods", pod("half-0", group="half", node_name="node-a"))
        server.put("v1", "pods", pod("half-1", group="half", gpus=8))  # never fits
        async with fresh(server, config) as scheduler:
            await scheduler.start()
            now = 100.0
            while scheduler.recovered == [] and now < 120.0:
                await scheduler.run_once(now)  # the gang times out, then waits in backoff
                await asyncio.sleep(0.05)
                now += 0.5
            await scheduler.stop()
            assert scheduler.recovered == [f"{NS}/half"]
        assert not exists(server, "half-0")


async def test_a_half_bound_gang_with_no_pending_member_is_undone() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        await kill_mid_bind(server, client, "failed")
        server.remove("v1", "pods", "torn-2", NS)  # a bare pod: nobody re-creates it
        recovery = RecoveryConfig(partial_bind_limit=LIMIT)
        async with fresh(server, recovery) as second, serving(second):
            await eventually(lambda: second.recovered == [f"{NS}/torn"], what="undone")
        assert not exists(server, "torn-0") and not exists(server, "torn-1")
        assert len(events_about(server, "torn", PARTIAL_BIND_RECOVERED)) == 1
