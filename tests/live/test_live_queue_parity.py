"""The same queue objects make the same decision in simulation and live: ``phalanx simulate
--from-cluster`` (the snapshot read by the simulator's loader) starts at t=0 exactly the gangs
that ``phalanx serve``'s first cycle binds, for a KAI Queue, a Kueue ClusterQueue with its
LocalQueue, a Kueue Cohort, and an ElasticQuota — each holding two 8-GPU gangs to one on two
8-GPU nodes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_queue_objects import (
    CRDS,
    KAI,
    QUOTA,
    bound_gangs,
    cluster,
    elastic_quota,
    kai_gang,
    kai_queue,
    kueue_cohort,
    kueue_gang,
    kueue_queues,
    plain_gang,
)
from test_live_snapshot import run_cli

from phalanx.live.loop import LiveScheduler


def kai(server: FakeApiServer) -> None:
    server.put(KAI, "queues", kai_queue("team", 8))
    kai_gang(server, "first", "team")
    kai_gang(server, "second", "team")


def kueue(server: FakeApiServer) -> None:
    kueue_queues(server, 8)
    kueue_gang(server, "first", "team-queue")
    kueue_gang(server, "second", "team-queue")


def pool(server: FakeApiServer) -> None:
    kueue_cohort(server, declared=True)


def quota(server: FakeApiServer) -> None:
    server.put(QUOTA, "elasticquotas", elastic_quota(8))
    plain_gang(server, "first")
    plain_gang(server, "second")


def unlimited(server: FakeApiServer) -> None:
    """The control: no queue object, both gangs start at once in both runners."""
    kai_gang(server, "first", "team")
    kai_gang(server, "second", "team")


@pytest.mark.parametrize("setup", [kai, kueue, pool, quota, unlimited])
async def test_simulation_and_serve_start_the_same_gangs(
    setup: Callable[[FakeApiServer], None], tmp_path: Path
) -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        setup(server)
        kubeconfig = server.kubeconfig(tmp_path / "config")
        argv = ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), "-o", "json"]
        code, out, err = await asyncio.to_thread(run_cli, argv)
        assert code == 0, err
        simulated = {g["name"] for g in json.loads(out)["gangs"] if g["start"] == 0}
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await eventually(lambda: len(scheduler.cache.pods) == 4, what="pods")
            await scheduler.run_once(1.0)
        live = set(bound_gangs(server))
    assert simulated == live
    assert len(live) == (2 if setup is unlimited else 1)
