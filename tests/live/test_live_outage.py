"""Watch outages and 410 Gone under the running ``serve`` loop: the cache relists and
scheduling carries on, gangs still bind whole, and no pod is bound twice (issue 4)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_serve import NS, bound_to, node, pod, podgroup, scheduled_condition

from phalanx.live import PODGROUPS, PODS, KubeClient
from phalanx.live.loop import LiveScheduler

#: A cycle at least this often (seconds) even without events; a short debounce.
PERIOD = 0.1
DEBOUNCE = 0.01


@contextlib.asynccontextmanager
async def serving(scheduler: LiveScheduler) -> AsyncIterator[asyncio.Task[None]]:
    """``scheduler.serve`` as a task, informers synced; stopped (gracefully) on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.serve(stop, period=PERIOD, debounce=DEBOUNCE))
    try:
        await eventually(
            lambda: all(i.synced.is_set() for i in scheduler.informers.values()) or task.done(),
            what="informers synced",
        )
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 5.0)


async def submit(client: KubeClient, name: str, size: int, *, gpus: int = 1) -> None:
    """A PodGroup of minMember ``size`` and its ``size`` pods, straight to the API."""
    await client.create(PODGROUPS, podgroup(name, size))
    for i in range(size):
        await client.create(PODS, pod(f"{name}-{i}", group=name, gpus=gpus))


def all_bound(server: FakeApiServer, name: str, size: int) -> bool:
    return all(bound_to(server, f"{name}-{i}") for i in range(size))


def binding_posts(server: FakeApiServer, name: str) -> int:
    return server.count("POST", rf"/pods/{name}/binding$")


@pytest.mark.parametrize(
    ("abort", "gone"),
    [(False, "compacted"), (True, "compacted"), (False, "forced"), (True, "forced")],
    ids=["closed-compacted", "aborted-compacted", "closed-forced", "aborted-forced"],
)
async def test_watches_dropped_and_gone_the_cache_relists_and_scheduling_continues(
    abort: bool, gone: str
) -> None:
    async with connected() as (server, client):
        # 8 GPUs: before (2) + inflight (2) + after (2) fit; huge (3 × 3 GPUs) never does.
        server.put("v1", "nodes", node("node-a", gpus=4))
        server.put("v1", "nodes", node("node-b", gpus=4))
        scheduler = LiveScheduler(client, backoff=fast_backoff())
        async with serving(scheduler):
            await submit(client, "before", 2)
            await eventually(lambda: all_bound(server, "before", 2), what="before bound")

            # Binds in flight when the watches go down: their MODIFIED events are lost.
            slow = server.add_latency(0.2, "POST", r"/binding$")
            await submit(client, "inflight", 2)
            await eventually(
                lambda: server.count("POST", r"/pods/inflight-\d/binding$") == 2,
                what="inflight binds sent",
            )
            server.latency.remove(slow)  # the two requests already sleeping keep their delay

            # The outage: every watch ends, and new ones fail until it is over.
            server.fail("GET", ".*", 503, watch=True, times=1_000_000)
            watching = [i for i in scheduler.informers.values() if not i.missing]  # CRDs served
            assert server.drop_watches(abort=abort) == len(watching)
            await submit(client, "after", 2)
            await submit(client, "huge", 3, gpus=3)
            await eventually(lambda: all_bound(server, "inflight", 2), what="inflight bound")
            # The loop keeps cycling on its stale cache; the assumed binds hold their GPUs.
            cycles = scheduler.cycles
            await eventually(lambda: scheduler.cycles >= cycles + 2, what="cycles in the outage")
            pods = scheduler.informers[PODS]
            assert f"{NS}/after-0" not in pods.store
            assert set(scheduler.cache.assumed) == {f"{NS}/inflight-0", f"{NS}/inflight-1"}
            assert not pods.store[f"{NS}/inflight-0"]["spec"].get("nodeName")

            # The end of the outage: every watch resumes from a revision the server forgot.
            gone_before = sum(i.stats.gone for i in watching)
            if gone == "compacted":
                server.compact()
                server.clear_faults()
            else:
                server.clear_faults()  # (clears forced 410s too: set them after)
                server.force_gone(times=len(watching))

            await eventually(lambda: all_bound(server, "after", 2), what="after bound")
            await eventually(
                lambda: all(scheduled_condition(server, f"huge-{i}") for i in range(3)),
                what="huge explained",
            )
            await eventually(lambda: scheduler.cache.assumed == {}, what="assumptions dropped")
            await eventually(
                lambda: sum(i.stats.gone for i in watching) == gone_before + len(watching),
                what="every informer got its 410",
            )
            if gone == "compacted":  # the pods' history is gone: their informer must relist
                assert pods.stats.gone >= 1 and pods.stats.relists >= 1
            assert all(pods.store[f"{NS}/after-{i}"]["spec"].get("nodeName") for i in range(2))

            # One more cycle on the relisted cache changes nothing.
            posts = server.count("POST", r"/binding$")
            cycles = scheduler.cycles
            await eventually(lambda: scheduler.cycles >= cycles + 2, what="cycles after")
            assert server.count("POST", r"/binding$") == posts

        for name, size in (("before", 2), ("inflight", 2), ("after", 2)):
            assert all_bound(server, name, size)
            assert [binding_posts(server, f"{name}-{i}") for i in range(size)] == [1] * size
        assert [bound_to(server, f"huge-{i}") for i in range(3)] == [None] * 3
        assert server.count("POST", r"/pods/huge-\d/binding$") == 0
        for i in range(3):
            condition = scheduled_condition(server, f"huge-{i}")
            assert condition is not None and condition["reason"] == "Unschedulable"
