"""``orderings`` in the serve settings file: ``least-slack`` binds the gang closest to its
``phalanx.dev/deadline`` first among gangs of equal priority (the policy's own order: the
gang created first)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apiserver import FakeApiServer
from apiserver.harness import connected, eventually
from test_live_ops import FAST, runner, running
from test_live_serve import NS, bound_to, node, pod, podgroup

from phalanx.live.settings import ServeSettings, load_settings

LEAST_SLACK = ("queues", "priority", "least-slack", "gang")


def due_in(hours: float) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def deadline_gang(server: FakeApiServer, name: str, hours: float) -> None:
    """A PodGroup of two one-GPU pods due in ``hours``."""
    group: dict[str, Any] = podgroup(name, 2)
    group["metadata"]["annotations"] = {"phalanx.dev/deadline": due_in(hours)}
    server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", group)
    for i in range(2):
        server.put("v1", "pods", pod(f"{name}-{i}", group=name, gpus=1))


async def first_and_second(settings: ServeSettings) -> list[str]:
    """Two gangs that do not fit together on the one 2-GPU node, the older one due later:
    the gang bound first, then (its pods deleted) the other."""
    async with connected() as (server, _client):
        server.put("v1", "nodes", node("node-a", gpus=2))
        deadline_gang(server, "relaxed", hours=10)  # older, but 10 h of slack
        deadline_gang(server, "urgent", hours=1)
        gangs = ("relaxed", "urgent")
        order: list[str] = []

        def one_bound() -> bool:
            done = [g for g in gangs if g not in order and bound_to(server, f"{g}-1")]
            order.extend(done)
            return bool(done)

        async with running(runner(server, "replica-a", settings)):
            await eventually(one_bound, what="the first gang bound")
            (waiting,) = [g for g in gangs if g not in order]  # only one gang fits
            assert not bound_to(server, f"{waiting}-0") and not bound_to(server, f"{waiting}-1")
            for i in range(2):
                server.remove("v1", "pods", f"{order[0]}-{i}", NS)
            await eventually(one_bound, what="the second gang bound")
        return order


async def test_least_slack_from_the_settings_file_binds_the_urgent_gang_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "phalanx.yaml"
    path.write_text("orderings: [queues, priority, least-slack, gang]\n")
    loaded = load_settings(path)
    assert loaded.orderings == LEAST_SLACK
    settings = dataclasses.replace(FAST, orderings=loaded.orderings)
    assert await first_and_second(settings) == ["urgent", "relaxed"]
    assert await first_and_second(FAST) == ["relaxed", "urgent"]  # the policy's own: older first
