"""Live isolation: with each class of bad object in the cluster, good gangs still bind.

Every bad object is stored in the API test server directly (as an object an older or a lenient
server, or another controller, left behind) before the scheduler starts. The scheduler must
skip it with one Warning ``Invalid`` Event naming the field — once per object version — and
bind a good gang in the same cycle. Before quantities were range-checked, one pod with
``cpu: 100P`` made every cycle fail with an ``OverflowError`` and nothing bound anywhere.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, fast_backoff
from test_live_recovery import events_about
from test_live_serve import bound_to, node, pod, podgroup

from phalanx.live.loop import LiveScheduler

PODS = ("v1", "pods")
NODES = ("v1", "nodes")
GROUPS = ("scheduling.x-k8s.io/v1alpha1", "podgroups")


def bad_pod(name: str, **requests: str) -> dict[str, Any]:
    obj = pod(name)
    obj["spec"]["containers"][0]["resources"] = {"requests": dict(requests)}
    return obj


def with_limits(obj: dict[str, Any], **limits: str) -> dict[str, Any]:
    obj["spec"]["containers"][0]["resources"]["limits"] = dict(limits)
    return obj


def bad_node(name: str, **allocatable: str) -> dict[str, Any]:
    obj = node(name)
    obj["status"]["allocatable"].update(allocatable)
    return obj


def labelled(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})[key] = value
    return obj


def bound(obj: dict[str, Any], node_name: str) -> dict[str, Any]:
    obj["spec"]["nodeName"] = node_name
    return obj


def group_with(name: str, **spec: Any) -> dict[str, Any]:
    obj = podgroup(name, 1)
    obj["spec"].update(spec)
    return obj


GPU = "nvidia.com/gpu"
#: (class, where it is stored, the object, the field its Invalid event names)
BAD: list[tuple[str, tuple[str, str], dict[str, Any], str]] = [
    ("pod cpu 100P", PODS, bad_pod("bad", cpu="100P"), "requests.cpu"),
    ("pod memory 100E", PODS, bad_pod("bad", memory="100E"), "requests.memory"),
    (
        "pod memory 10^22 Gi",
        PODS,
        bad_pod("bad", memory="9999999999999999999999Gi"),
        "requests.memory",
    ),
    ("pod gpu 1.5", PODS, bad_pod("bad", **{GPU: "1.5"}), f"requests[{GPU}]"),
    (
        "pod gpu request != limit",
        PODS,
        with_limits(bad_pod("bad", **{GPU: "1"}), **{GPU: "2"}),
        f"requests[{GPU}]",
    ),
    ("pod malformed quantity", PODS, bad_pod("bad", cpu="lots"), "requests.cpu"),
    ("pod bad label", PODS, labelled(pod("bad"), "team", "a b"), "metadata.labels.team"),
    (
        "pod bound with cpu 100P",
        PODS,
        bound(bad_pod("bad", cpu="100P"), "node-b"),
        "requests.cpu",
    ),
    ("node memory 100E", NODES, bad_node("bad", memory="100E"), "allocatable.memory"),
    ("node cpu 100P", NODES, bad_node("bad", cpu="100P"), "allocatable.cpu"),
    ("node gpu 1.5", NODES, bad_node("bad", **{GPU: "1.5"}), f"allocatable[{GPU}]"),
    ("podgroup minMember 0", GROUPS, podgroup("bad", 0), "spec.minMember"),
    ("podgroup minResources 100P", GROUPS, group_with("bad", minResources={"cpu": "100P"}), "cpu"),
]


def put(server: FakeApiServer, where: tuple[str, str], obj: dict[str, Any]) -> None:
    server.put(*where, copy.deepcopy(obj))


def good_gang(server: FakeApiServer) -> None:
    put(server, GROUPS, podgroup("good", 2))
    for i in range(2):
        put(server, PODS, pod(f"good-{i}", group="good", gpus=1))


@pytest.mark.parametrize(("name", "where", "obj", "field"), BAD, ids=[b[0] for b in BAD])
async def test_a_good_gang_binds_beside_a_bad_object(
    name: str, where: tuple[str, str], obj: dict[str, Any], field: str
) -> None:
    async with connected() as (server, client):
        put(server, NODES, node("node-a"))
        put(server, NODES, node("node-b"))
        put(server, where, obj)
        good_gang(server)
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert all(bound_to(server, f"good-{i}") for i in range(2)), name
            (event,) = events_about(server, "bad", "Invalid")  # once per object version
            assert event["type"] == "Warning" and field in event["note"], event["note"]
            assert len(event["note"].splitlines()) == 1
        if where == PODS and not obj["spec"].get("nodeName"):
            assert bound_to(server, "bad") is None


async def test_every_bad_object_at_once_and_good_gangs_still_bind() -> None:
    async with connected() as (server, client):
        put(server, NODES, node("node-a"))
        put(server, NODES, node("node-b"))
        for i, (_, where, obj, _) in enumerate(BAD):
            renamed = copy.deepcopy(obj)
            renamed["metadata"]["name"] = f"bad-{i}"
            put(server, where, renamed)
        good_gang(server)
        put(server, PODS, pod("solo"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await scheduler.run_once(1.0)
            assert all(bound_to(server, f"good-{i}") for i in range(2))
            assert bound_to(server, "solo")
            assert len(scheduler.cache.rejected) == len(BAD)
