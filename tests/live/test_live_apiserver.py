"""The fake API server's own semantics, as the live tests rely on them."""

from __future__ import annotations

import time

import pytest
from apiserver import ALL_CRDS
from apiserver import VOLCANO_QUEUES as QUEUE_INFO
from apiserver.harness import connected
from apiserver.patches import PatchError, json_patch, merge_patch, strategic_merge_patch

from phalanx.live import (
    GANG_RESOURCES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_QUEUES,
    ApiError,
    PatchType,
)

LABELLED = {
    "a": {"env": "prod", "tier": "web"},
    "b": {"env": "dev", "tier": "web"},
    "c": {"env": "prod"},
    "d": {},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", "ac"),
        ("env==prod", "ac"),
        ("env!=prod", "bd"),
        ("env in (prod,dev)", "abc"),
        ("env notin (dev)", "acd"),
        ("tier", "ab"),
        ("!tier", "cd"),
        ("env=prod,tier", "a"),
        ("env in (prod), !tier", "c"),
        ("", "abcd"),
    ],
)
async def test_label_selectors(selector: str, expected: str) -> None:
    async with connected(crds=()) as (_server, client):
        for name, labels in LABELLED.items():
            await client.create(PODS, {"metadata": {"name": name, "labels": labels}, "spec": {}})
        listed = await client.list(PODS, label_selector=selector or None)
        assert "".join(p["metadata"]["name"] for p in listed.items) == expected


@pytest.mark.parametrize("selector", ["env in ()", "a=(b", "=x", "in in in"])
async def test_bad_label_selectors_are_400(selector: str) -> None:
    async with connected(crds=()) as (_server, client):
        with pytest.raises(ApiError) as caught:
            await client.list(PODS, label_selector=selector)
        assert caught.value.status == 400


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=", "ab"),
        ("spec.nodeName!=", "c"),
        ("spec.nodeName=n1", "c"),
        ("spec.schedulerName=phalanx", "ac"),
        ("spec.schedulerName=phalanx,spec.nodeName=", "a"),
        ("metadata.name=b", "b"),
        ("metadata.namespace=default", "abc"),
        ("status.phase=Running", "c"),
        ("status.phase!=Running", "ab"),
    ],
)
async def test_field_selectors(selector: str, expected: str) -> None:
    async with connected(crds=()) as (server, client):
        for name, scheduler in (("a", "phalanx"), ("b", None), ("c", "phalanx")):
            spec = {"schedulerName": scheduler} if scheduler else {}
            await client.create(PODS, {"metadata": {"name": name}, "spec": spec})
        server.put(
            "v1",
            "pods",
            {
                "metadata": {"name": "c"},
                "spec": {"schedulerName": "phalanx", "nodeName": "n1"},
                "status": {"phase": "Running"},
            },
        )
        listed = await client.list(PODS, field_selector=selector)
        assert "".join(p["metadata"]["name"] for p in listed.items) == expected


async def test_objects_are_stamped_and_versions_increase() -> None:
    async with connected(crds=()) as (server, client):
        a = await client.create(PODS, {"metadata": {"name": "a"}, "spec": {}})
        b = await client.create(PODS, {"metadata": {"generateName": "worker-"}, "spec": {}})
        for obj in (a, b):
            meta = obj["metadata"]
            assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
            assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
        assert b["metadata"]["name"].startswith("worker-") and len(b["metadata"]["name"]) == 12
        assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
        assert a["spec"]["schedulerName"] == "default-scheduler"
        assert a["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
        with pytest.raises(ApiError) as exists:
            await client.create(PODS, {"metadata": {"name": "a"}, "spec": {}})
        assert exists.value.status == 409 and exists.value.reason == "AlreadyExists"
        raw = await client.request("GET", "/api/v1/pods")
        assert raw["metadata"]["resourceVersion"] == str(server.store.rv)
        assert "kind" not in raw["items"][0]  # as the real server: the client fills it in
        with pytest.raises(ApiError) as invalid:
            await client.create(PODS, {"metadata": {"name": "Not_Valid"}, "spec": {}})
        assert invalid.value.status == 422
        with pytest.raises(ApiError) as mismatch:
            await client.create(PODS, {"metadata": {"name": "x", "namespace": "a"}}, "b")
        assert mismatch.value.status == 400


async def test_priority_admission() -> None:
    async with connected(crds=()) as (_server, client):
        await client.create(PRIORITY_CLASSES, {"metadata": {"name": "low"}, "value": -5})
        await client.create(
            PRIORITY_CLASSES, {"metadata": {"name": "std"}, "value": 7, "globalDefault": True}
        )
        low = await client.create(
            PODS, {"metadata": {"name": "l"}, "spec": {"priorityClassName": "low"}}
        )
        default = await client.create(PODS, {"metadata": {"name": "d"}, "spec": {}})
        assert low["spec"]["priority"] == -5
        assert default["spec"]["priority"] == 7
        assert default["spec"]["priorityClassName"] == "std"
        with pytest.raises(ApiError) as caught:
            await client.create(
                PODS, {"metadata": {"name": "x"}, "spec": {"priorityClassName": "nope"}}
            )
        assert caught.value.status == 403


async def test_patch_kinds_and_generation() -> None:
    async with connected() as (_server, client):
        await client.create(
            NODES,
            {
                "metadata": {"name": "n", "labels": {"a": "1"}},
                "spec": {"taints": [{"key": "k1", "effect": "NoSchedule"}]},
            },
        )
        merged = await client.patch(NODES, "n", {"metadata": {"labels": {"a": None, "b": "2"}}})
        assert merged["metadata"]["labels"] == {"b": "2"}
        assert merged["metadata"]["generation"] == 1  # metadata only
        strategic = await client.patch(
            NODES,
            "n",
            {"spec": {"taints": [{"key": "k2", "effect": "NoExecute"}]}},
            patch_type=PatchType.STRATEGIC,
        )
        assert [t["key"] for t in strategic["spec"]["taints"]] == ["k1", "k2"]
        assert strategic["metadata"]["generation"] == 2
        replaced = await client.patch(
            NODES, "n", {"spec": {"taints": [{"key": "k3", "effect": "NoExecute"}]}}
        )
        assert [t["key"] for t in replaced["spec"]["taints"]] == ["k3"]  # merge patch replaces
        jsonp = await client.patch(
            NODES,
            "n",
            [
                {"op": "test", "path": "/spec/taints/0/key", "value": "k3"},
                {"op": "add", "path": "/spec/unschedulable", "value": True},
                {"op": "remove", "path": "/spec/taints"},
            ],
            patch_type=PatchType.JSON,
        )
        assert jsonp["spec"] == {"unschedulable": True}
        with pytest.raises(ApiError) as failed:
            await client.patch(
                NODES,
                "n",
                [{"op": "test", "path": "/spec/unschedulable", "value": False}],
                patch_type=PatchType.JSON,
            )
        assert failed.value.status == 422
        with pytest.raises(ApiError) as stale:
            await client.patch(NODES, "n", {"metadata": {"resourceVersion": "1"}, "spec": {}})
        assert stale.value.status == 409


async def test_finalizers_delay_deletion() -> None:
    async with connected() as (_server, client):
        await client.create(
            PODGROUPS, {"metadata": {"name": "g", "finalizers": ["x/y"]}, "spec": {"minMember": 1}}
        )
        deleting = await client.delete(PODGROUPS, "g", "default")
        assert deleting["metadata"]["deletionTimestamp"]
        assert (await client.get(PODGROUPS, "g", "default"))["metadata"]["deletionTimestamp"]
        await client.patch(PODGROUPS, "g", {"metadata": {"finalizers": None}}, "default")
        with pytest.raises(ApiError) as gone:
            await client.get(PODGROUPS, "g", "default")
        assert gone.value.not_found


async def test_discovery() -> None:
    async with connected(crds=(QUEUE_INFO,)) as (_server, client):
        versions = await client.request("GET", "/api")
        assert versions["versions"] == ["v1"]
        groups = await client.request("GET", "/apis")
        names = {g["name"] for g in groups["groups"]}
        assert {"scheduling.volcano.sh", "coordination.k8s.io", "events.k8s.io"} <= names
        assert "scheduling.x-k8s.io" not in names
        core = await client.request("GET", "/api/v1")
        resources = {r["name"] for r in core["resources"]}
        assert {"pods", "pods/binding", "pods/status", "nodes", "events"} <= resources
        queues = await client.request("GET", "/apis/scheduling.volcano.sh/v1beta1")
        assert [r["name"] for r in queues["resources"]] == ["queues", "queues/status"]
        assert (await client.request("GET", "/version"))["major"] == "1"
        with pytest.raises(ApiError) as missing:
            await client.request("GET", "/apis/scheduling.x-k8s.io/v1alpha1")
        assert missing.value.status == 404


async def test_all_crds_serve_crud() -> None:
    assert len(ALL_CRDS) == 5
    async with connected() as (_server, client):
        for resource in (*GANG_RESOURCES, VOLCANO_QUEUES):
            obj = await client.create(resource, {"metadata": {"name": "x"}, "spec": {}})
            assert obj["apiVersion"] == resource.api_version and obj["kind"] == resource.kind
            assert (await client.get(resource, "x", "default"))["metadata"]["uid"]
            listed = await client.list(resource)
            assert [o["metadata"]["name"] for o in listed.items] == ["x"]
            await client.delete(resource, "x", "default")


async def test_injected_faults_and_latency() -> None:
    async with connected(crds=()) as (server, client):
        rule = server.fail("GET", "/nodes$", 500, times=2)
        for _ in range(2):
            with pytest.raises(ApiError) as caught:
                await client.list(NODES)
            assert caught.value.status == 500
        assert (await client.list(NODES)).items == []
        assert rule.hits == 2
        server.add_latency(0.1, "GET", "/nodes$")
        started = time.monotonic()
        await client.list(NODES)
        assert time.monotonic() - started >= 0.1


def test_patch_helpers() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {
        "a": {"c": 2, "d": 3}
    }
    target = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B"}]}}
    patched = strategic_merge_patch(
        target,
        {
            "status": {
                "conditions": [{"type": "A", "status": "False"}, {"type": "B", "$patch": "delete"}]
            },
            "$setElementOrder/conditions": [],
        },
    )
    assert patched == {"status": {"conditions": [{"type": "A", "status": "False"}]}}
    doc = {"a": [1, 2], "b": {"c": 1}}
    assert json_patch(doc, [{"op": "move", "from": "/b/c", "path": "/a/-"}]) == {
        "a": [1, 2, 1],
        "b": {},
    }
    assert json_patch(doc, [{"op": "replace", "path": "", "value": 5}]) == 5
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "remove", "path": "/zzz"}])
