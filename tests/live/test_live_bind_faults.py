"""Bind and undo faults found by the chaos test, each reduced to one scenario.

Several share a setup: the pods watch falls behind (it fails and is dropped), so the scheduler
learns nothing from the informer and must rely on what it knows — its assume cache — to keep
a pod's room while that pod is, or may be, bound on the server. Node ``node-a`` is small, and
pod ``h-0`` of a group created later wants exactly the room in question: if the scheduler gives
that room away, both end up on ``node-a``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from apiserver import ApiFailure, FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_outage import DEBOUNCE, PERIOD
from test_live_serve import NS, node, pod, podgroup

from phalanx.live import PODGROUPS, PODS, KubeClient, config_for_server
from phalanx.live.loop import LiveScheduler, RecoveryConfig

GROUPS = "scheduling.x-k8s.io/v1alpha1"
#: Requeued gangs stay held for the whole scenario.
HOLD = RecoveryConfig(retry_delay=0.001, requeue_initial=60.0)


def node_of(server: FakeApiServer, name: str) -> str | None:
    """Where pod ``name`` is bound on the server; ``(deleted)`` when it is gone."""
    stored = server.get("v1", "pods", name, NS)
    if stored is None:
        return "(deleted)"
    return (stored.get("spec") or {}).get("nodeName")


def fall_behind(server: FakeApiServer) -> None:
    """The pods watch fails from now on (and the open ones end): the informer stands still."""
    server.fail("GET", r"^/api/v1/pods$", 503, watch=True, times=10**6)
    server.drop_watches()


async def place_h(scheduler: LiveScheduler, client: KubeClient, now: float) -> None:
    """Create the PodGroup of the waiting pod ``h-0`` and run a cycle that may place it."""
    await client.create(PODGROUPS, podgroup("h", 1))
    groups = scheduler.informers[PODGROUPS].store
    await eventually(lambda: f"{NS}/h" in groups, what="group h")
    await scheduler.run_once(now)


async def test_a_failed_undo_keeps_its_pods_room() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=2))
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=HOLD) as scheduler:
            server.put(GROUPS, "podgroups", podgroup("g", 2))
            server.put("v1", "pods", pod("g-0", group="g", gpus=1))
            server.put("v1", "pods", pod("g-1", group="g", gpus=1))
            server.put("v1", "pods", pod("h-0", group="h", gpus=2))  # its group comes later
            store = scheduler.informers[PODS].store
            await eventually(lambda: len(store) == 3, what="pods seen")
            fall_behind(server)
            server.fail("POST", r"/pods/g-1/binding$", 409)  # refused: g is bound 1 of 2
            server.fail("DELETE", r"/pods/g-0$", 500, times=10**6)  # and cannot be undone yet
            await scheduler.run_once(1.0)
            assert f"{NS}/g" in scheduler.undo_pending
            await place_h(scheduler, client, 2.0)
        # g-0 is still bound (1 GPU): h-0 (2 GPUs) must not be put beside it.
        assert node_of(server, "g-0") == "node-a"
        assert node_of(server, "h-0") is None


async def test_a_last_bind_that_failed_but_committed_counts_as_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=2))
        commit = server.store.bind

        def bind(namespace: str, name: str | None, binding: Any) -> Any:
            result = commit(namespace, name, binding)
            if name == "a-0":  # the write happened; the answer timed out
                raise ApiFailure(504, "Timeout", "the bind was written, the answer timed out")
            return result

        monkeypatch.setattr(server.store, "bind", bind)
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=HOLD) as scheduler:
            server.put(GROUPS, "podgroups", podgroup("a", 1))
            server.put("v1", "pods", pod("a-0", group="a", gpus=2))
            server.put("v1", "pods", pod("h-0", group="h", gpus=2))
            store = scheduler.informers[PODS].store
            await eventually(lambda: len(store) == 2, what="pods seen")
            fall_behind(server)
            server.fail("POST", r"/pods/a-0/binding$", 500, times=3)  # then commit + 504
            await scheduler.run_once(1.0)
            assert server.count("POST", r"/pods/a-0/binding$") == 4
            assert scheduler.requeued == {}  # bound after all: nothing to requeue or undo
            await place_h(scheduler, client, 2.0)
        assert (node_of(server, "a-0"), node_of(server, "h-0")) == ("node-a", None)


async def test_a_gang_whole_again_is_not_torn_down_by_a_stale_undo() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        recovery = RecoveryConfig(retry_delay=0.001, requeue_initial=0.5)
        async with LiveScheduler(client, backoff=fast_backoff(), recovery=recovery) as scheduler:
            server.put(GROUPS, "podgroups", podgroup("g", 2))
            for i in range(2):
                server.put("v1", "pods", pod(f"g-{i}", group="g", gpus=1))
            store = scheduler.informers[PODS].store
            await eventually(lambda: len(store) == 2, what="pods seen")
            server.fail("POST", r"/pods/g-1/binding$", 409)  # refused once
            server.fail("DELETE", r"/pods/g-0$", 500, times=2)  # the undo fails twice
            states = []
            for now in (1.0, 2.0, 3.0, 4.0):
                await scheduler.run_once(now)
                await asyncio.sleep(0.05)  # the informer catches up
                states.append((node_of(server, "g-0"), node_of(server, "g-1")))
        whole = ("node-a", "node-a")
        for before, after in itertools.pairwise(states):
            assert not (before == whole and after != whole), states  # whole stays whole
        # Held while its undo was pending, g was not placed again beside the doomed g-0; once
        # the undo went through, g-1 waits for a new g-0 (a bare pod: nobody re-creates it).
        assert states[-1] == ("(deleted)", None), states


async def test_a_hung_bind_does_not_hold_a_gang_partly_bound_past_the_limit() -> None:
    limit, slow = 0.3, 2.0
    async with connected() as (server, _client):
        server.put("v1", "nodes", node("node-a", gpus=8))
        latency = server.add_latency(slow, "POST", r"/pods/torn-2/binding$")
        config = config_for_server(server.url)
        async with KubeClient(config, timeout=5.0, trust_env=False) as client:
            scheduler = LiveScheduler(client, recovery=RecoveryConfig(partial_bind_limit=limit))
            stop = asyncio.Event()
            task = asyncio.create_task(scheduler.serve(stop, period=PERIOD, debounce=DEBOUNCE))
            await eventually(lambda: all(i.synced.is_set() for i in scheduler.informers.values()))
            server.put(GROUPS, "podgroups", podgroup("torn", 3))
            for i in range(3):
                server.put("v1", "pods", pod(f"torn-{i}", group="torn", gpus=1))
            await eventually(
                lambda: node_of(server, "torn-0") and node_of(server, "torn-1"), what="2 of 3"
            )
            partial_from = time.monotonic()
            await eventually(lambda: server.count("POST", r"/pods/torn-2/binding$") == 1)
            server.latency.remove(latency)  # only that first request hangs

            def settled() -> bool:  # whole, or undone: no member left bound alone
                bound = [node_of(server, f"torn-{i}") not in (None, "(deleted)") for i in range(3)]
                return all(bound) or not any(bound)

            await eventually(settled, timeout=10.0, what="torn whole or undone")
            partial = time.monotonic() - partial_from
            stop.set()
            await asyncio.wait_for(task, 5.0)
        # Without a deadline per attempt this lasted the whole hung request (2 s); the margin
        # covers one loop period and scheduling noise on a loaded machine.
        assert partial < limit + 0.5 + PERIOD, f"partially bound for {partial:.2f} s"


async def test_gangs_queued_behind_other_binds_do_not_run_out_of_time() -> None:
    """The partial-bind deadline counts from a gang's first bind sent: eight gangs queued for
    one bind slot (each bind 50 ms) take longer than half the limit, and all bind at the first
    attempt — none times out waiting for its turn, is forgotten and placed again."""
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=16))
        server.add_latency(0.05, "POST", r"/binding$")
        recovery = RecoveryConfig(partial_bind_limit=1.0)
        scheduler = LiveScheduler(client, recovery=recovery, bind_concurrency=1)
        async with scheduler:
            for g in range(8):
                server.put(GROUPS, "podgroups", podgroup(f"q{g}", 2))
                for m in range(2):
                    server.put("v1", "pods", pod(f"q{g}-{m}", group=f"q{g}", gpus=1))
            store = scheduler.informers[PODS].store
            await eventually(lambda: len(store) == 16, what="pods seen")
            result = await scheduler.run_once(1.0)
        assert len(result.binds) == 16
        assert all(node_of(server, f"q{g}-{m}") == "node-a" for g in range(8) for m in range(2))
        assert server.count("POST", r"/binding$") == 16  # no retry, no second placement
        assert scheduler.recovered == [] and server.count("DELETE", r"/pods/") == 0
