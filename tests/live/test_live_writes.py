"""Binding, status writes, events and leases through the client, against the fake server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from apiserver.harness import Recorder, connected, fast_backoff

from phalanx.live import (
    EVENTS,
    EVENTS_V1,
    LEASES,
    PODGROUPS,
    PODS,
    VOLCANO_PODGROUPS,
    WORKLOADS,
    ApiError,
    Informer,
    PatchType,
    Resource,
    bind,
    events,
    leases,
    patch_pod_status,
    patch_status,
    pod_condition,
)

POD = {
    "metadata": {"name": "worker-0", "namespace": "team"},
    "spec": {"schedulerName": "phalanx", "containers": [{"name": "main", "image": "busybox"}]},
}


async def test_bind_sets_node_name_and_returns_the_status() -> None:
    async with connected() as (server, client):
        created = await client.create(PODS, POD)
        recorder = Recorder()
        async with Informer(client, PODS, recorder, backoff=fast_backoff()) as informer:
            await informer.wait_synced(5)
            status = await bind(
                client, "team", "worker-0", "node-a", uid=created["metadata"]["uid"]
            )
            assert status == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            }
            await recorder.wait("MODIFIED", "team/worker-0")
            assert informer.store["team/worker-0"]["spec"]["nodeName"] == "node-a"
        stored = server.get("v1", "pods", "worker-0", "team")
        assert stored is not None
        assert stored["spec"]["nodeName"] == "node-a"
        scheduled = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert scheduled[0]["status"] == "True"
        body = next(r for r in server.requests if r.path.endswith("/binding"))
        assert body.path == "/api/v1/namespaces/team/pods/worker-0/binding"


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        ("already-bound", 409),
        ("missing-pod", 404),
        ("stale-uid", 409),
        ("injected-500", 500),
        ("injected-409", 409),
        ("injected-429", 429),
    ],
)
async def test_bind_failures_surface_with_the_status_code(setup: str, status: int) -> None:
    async with connected() as (server, client):
        name = "nobody" if setup == "missing-pod" else "worker-0"
        await client.create(PODS, POD)
        uid = None
        if setup == "already-bound":
            await bind(client, "team", "worker-0", "node-a")
        elif setup == "stale-uid":
            uid = "00000000-0000-0000-0000-000000000000"
        elif setup.startswith("injected-"):
            server.fail("POST", r"/pods/[^/]+/binding$", status)
        with pytest.raises(ApiError) as caught:
            await bind(client, "team", name, "node-b", uid=uid)
        assert caught.value.status == status
        assert caught.value.request.startswith("POST /api/v1/namespaces/team/pods/")
        if setup.startswith("injected-"):  # the fault fires once; the retry binds
            assert (await bind(client, "team", "worker-0", "node-b"))["status"] == "Success"


async def test_pod_status_conditions_merge_by_type() -> None:
    async with connected() as (server, client):
        await client.create(PODS, POD)
        server.put(
            "v1",
            "pods",
            {
                **POD,
                "status": {
                    "phase": "Pending",
                    "conditions": [{"type": "Ready", "status": "False"}],
                },
            },
        )
        when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        unschedulable = pod_condition(
            "PodScheduled",
            "False",
            reason="Unschedulable",
            message="gang team/train needs 8 GPUs; 6 free",
            now=when,
        )
        updated = await patch_pod_status(
            client, "team", "worker-0", conditions=[unschedulable], nominated_node="node-a"
        )
        conditions = {c["type"]: c for c in updated["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "False"  # kept: strategic merge by type
        assert conditions["PodScheduled"]["reason"] == "Unschedulable"
        assert conditions["PodScheduled"]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
        assert updated["status"]["nominatedNodeName"] == "node-a"
        cleared = await patch_pod_status(client, "team", "worker-0", nominated_node="")
        assert "nominatedNodeName" not in cleared["status"]
        assert len(cleared["status"]["conditions"]) == 2
        request = next(r for r in server.requests if r.path.endswith("/status"))
        assert request.method == "PATCH"


@pytest.mark.parametrize("resource", [PODGROUPS, VOLCANO_PODGROUPS, WORKLOADS], ids=str)
async def test_crd_status_subresource(resource: Resource) -> None:
    spec = (
        {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}
        if resource is WORKLOADS
        else {"minMember": 2}
    )
    async with connected() as (_server, client):
        created = await client.create(
            resource,
            {"metadata": {"name": "train", "namespace": "team"}, "spec": spec, "status": {"x": 1}},
        )
        assert "status" not in created or resource is WORKLOADS
        status = {
            "phase": "Scheduling",
            "conditions": [{"type": "Scheduled", "status": "False", "reason": "NotEnough"}],
        }
        updated = await patch_status(client, resource, "train", status, "team")
        assert updated["status"]["phase"] == "Scheduling"
        assert updated["spec"] == spec
        assert updated["metadata"]["generation"] == created["metadata"]["generation"]
        assert int(updated["metadata"]["resourceVersion"]) > int(
            created["metadata"]["resourceVersion"]
        )
        # Writing the main resource does not touch the status; a spec change bumps generation.
        changed = await client.patch(
            resource, "train", {"spec": {**spec, "extra": True}, "status": {"phase": "X"}}, "team"
        )
        assert changed["status"]["phase"] == "Scheduling"
        assert changed["metadata"]["generation"] == created["metadata"]["generation"] + 1


async def test_strategic_merge_patch_is_refused_by_custom_resources() -> None:
    async with connected() as (_server, client):
        await client.create(PODGROUPS, {"metadata": {"name": "g"}, "spec": {"minMember": 1}})
        with pytest.raises(ApiError) as caught:
            await client.patch(
                PODGROUPS,
                "g",
                {"spec": {"minMember": 2}},
                "default",
                patch_type=PatchType.STRATEGIC,
            )
        assert caught.value.status == 415


async def test_events_both_apis() -> None:
    async with connected() as (server, client):
        pod = await client.create(PODS, POD)
        when = datetime(2026, 1, 2, 3, 4, 5, 678900, tzinfo=UTC)
        body = events.event(
            pod,
            reason=events.SCHEDULED,
            note="Successfully assigned team/worker-0 to node-a",
            action="Binding",
            instance="phalanx-7d9f",
            now=when,
        )
        created = await events.create(client, body)
        assert created["metadata"]["namespace"] == "team"
        assert created["metadata"]["name"].startswith("worker-0.")
        assert created["eventTime"] == "2026-01-02T03:04:05.678900Z"
        assert created["regarding"]["uid"] == pod["metadata"]["uid"]
        assert created["reportingController"] == "phalanx"
        core = events.core_event(
            pod, reason=events.FAILED_SCHEDULING, message="0/3 nodes", type_=events.WARNING
        )
        created_core = await events.create(client, core)
        assert created_core["involvedObject"]["name"] == "worker-0"
        assert len(server.objects("events.k8s.io/v1", "events")) == 1
        assert len(server.objects("v1", "events")) == 1
        listed = await client.list(EVENTS_V1, "team")
        assert [e["reason"] for e in listed.items] == ["Scheduled"]
        selected = await client.list(EVENTS, field_selector="involvedObject.name=worker-0")
        assert [e["type"] for e in selected.items] == ["Warning"]


async def test_event_about_a_cluster_scoped_object_goes_to_default() -> None:
    async with connected() as (_server, client):
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
        created = await events.create(
            client, events.event(node, reason="NodeNotReady", note="x", type_=events.WARNING)
        )
        assert created["metadata"]["namespace"] == "default"
        assert "namespace" not in created["regarding"]


async def test_lease_get_create_update_and_conflicts() -> None:
    async with connected() as (_server, client):
        assert await leases.get(client, "kube-system", "phalanx") is None
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        mine = await leases.create(client, leases.lease("kube-system", "phalanx", "a", 15, now=t0))
        assert mine["spec"]["holderIdentity"] == "a"
        assert mine["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"
        with pytest.raises(ApiError) as exists:
            await leases.create(client, leases.lease("kube-system", "phalanx", "b", 15))
        assert exists.value.status == 409 and exists.value.reason == "AlreadyExists"

        # Both replicas read the same version; the first write wins, the second gets 409.
        read_by_a = await leases.get(client, "kube-system", "phalanx")
        read_by_b = await leases.get(client, "kube-system", "phalanx")
        assert read_by_a is not None and read_by_b is not None
        renewed = await leases.update(client, leases.acquire(read_by_a, "a", 15))
        assert renewed["spec"]["leaseTransitions"] == 0
        with pytest.raises(ApiError) as stale:
            await leases.update(client, leases.acquire(read_by_b, "b", 15))
        assert stale.value.status == 409 and stale.value.reason == "Conflict"

        fresh = await leases.get(client, "kube-system", "phalanx")
        assert fresh is not None
        taken = await leases.update(client, leases.acquire(fresh, "b", 15))
        assert taken["spec"]["holderIdentity"] == "b"
        assert taken["spec"]["leaseTransitions"] == 1
        assert taken["spec"]["acquireTime"] != mine["spec"]["acquireTime"]
        listed = await client.list(LEASES, "kube-system")
        assert [lease["metadata"]["name"] for lease in listed.items] == ["phalanx"]


async def test_put_with_a_stale_resource_version_conflicts() -> None:
    async with connected() as (_server, client):
        first = await client.create(
            PODGROUPS, {"metadata": {"name": "g"}, "spec": {"minMember": 1}}
        )
        second = {**first, "spec": {"minMember": 2}}
        updated = await client.replace(PODGROUPS, second)
        assert updated["spec"]["minMember"] == 2
        assert updated["metadata"]["uid"] == first["metadata"]["uid"]
        stale = {**first, "spec": {"minMember": 3}}  # still carries the old resourceVersion
        with pytest.raises(ApiError) as caught:
            await client.replace(PODGROUPS, stale)
        assert caught.value.status == 409 and caught.value.conflict
        assert "the object has been modified" in caught.value.message
        unconditional = {**stale, "metadata": {**stale["metadata"], "resourceVersion": ""}}
        assert (await client.replace(PODGROUPS, unconditional))["spec"]["minMember"] == 3


async def test_delete_with_uid_precondition() -> None:
    async with connected() as (_server, client):
        created = await client.create(PODS, POD)
        with pytest.raises(ApiError) as caught:
            await client.delete(PODS, "worker-0", "team", uid="not-this-one")
        assert caught.value.status == 409
        deleted = await client.delete(PODS, "worker-0", "team", uid=created["metadata"]["uid"])
        assert deleted["metadata"]["name"] == "worker-0"
        with pytest.raises(ApiError) as missing:
            await client.get(PODS, "worker-0", "team")
        assert missing.value.not_found
