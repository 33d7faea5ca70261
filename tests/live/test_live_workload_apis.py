"""``phalanx serve`` against the API test server with the Workload API (by discovered version),
KAI-Scheduler PodGroups and scheduling gates: gangs bind whole or not at all, status is written
in each API's words, discovery picks only served versions, gated pods wait for their gates."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver import KAI_PODGROUPS, WORKLOAD_API_V1ALPHA2, WORKLOAD_API_V1BETA1, FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from apiserver.registry import WORKLOADS, ResourceInfo
from test_live_serve import NS, bound_to, create_pod, node, pod

from phalanx.live import PODS as PODS_RESOURCE
from phalanx.live import KubeClient
from phalanx.live.explain import explain
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import (
    KAI_PODGROUPS as KAI,
)
from phalanx.live.resources import (
    WORKLOAD_PODGROUPS_V1ALPHA2,
    WORKLOAD_PODGROUPS_V1BETA1,
    WORKLOADS_V1ALPHA2,
    WORKLOADS_V1BETA1,
    Resource,
)
from phalanx.live.resources import WORKLOADS as WORKLOADS_V1ALPHA1


def pod_group(version: str, name: str, min_count: int | None) -> dict[str, Any]:
    """A standalone Workload-API PodGroup (``basic`` when ``min_count`` is None)."""
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "podGroupTemplateRef": {
                "workload": {"workloadName": "job", "podGroupTemplateName": "w"}
            },
            "schedulingPolicy": policy,
        },
    }


def member(name: str, group: str, gpus: int = 1, gates: tuple[str, ...] = ()) -> Any:
    """A pod that joins the Workload-API PodGroup ``group`` (``spec.schedulingGroup``)."""
    obj = pod(name, gpus=gpus)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    if gates:
        obj["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return obj


def kai_group(name: str, min_member: int, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member, "queue": queue},
    }


def kai_member(name: str, group: str) -> Any:
    obj = pod(name, gpus=1)
    obj["metadata"]["annotations"] = {"pod-group-name": group}
    obj["metadata"]["labels"] = {"kai.scheduler/queue": "research"}
    return obj


async def add(scheduler: LiveScheduler, client: KubeClient, resource: Resource, obj: Any) -> None:
    await client.create(resource, obj)
    key = f"{NS}/{obj['metadata']['name']}"
    await eventually(lambda: key in scheduler.informers[resource].store, what=f"{resource} {key}")


def condition(server: FakeApiServer, version: str, name: str) -> dict[str, Any]:
    stored = server.get(f"scheduling.k8s.io/{version}", "podgroups", name, NS)
    assert stored is not None
    conditions = (stored.get("status") or {}).get("conditions") or []
    assert len(conditions) == 1, conditions
    return dict(conditions[0])


@pytest.mark.parametrize(
    ("version", "crds", "kind"),
    [
        ("v1beta1", WORKLOAD_API_V1BETA1, "PodGroupInitiallyScheduled"),
        ("v1alpha2", WORKLOAD_API_V1ALPHA2, "PodGroupScheduled"),
    ],
)
async def test_a_workload_api_podgroup_gang_binds_whole(
    version: str, crds: tuple[ResourceInfo, ...], kind: str
) -> None:
    async with connected(crds=crds) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            resource = scheduler.pod_groups
            assert resource is not None and resource.version == version
            await add(scheduler, client, resource, pod_group(version, "train", 3))
            for i in range(2):
                await create_pod(scheduler, client, member(f"w-{i}", "train"))
            result = await scheduler.run_once(1.0)
            assert result.binds == [] and server.count("POST", r"/binding$") == 0
            waiting = condition(server, version, "train")
            assert (waiting["type"], waiting["status"], waiting["reason"]) == (
                kind,
                "False",
                "Unschedulable",
            )
            assert waiting["message"].startswith("2/2 pods unschedulable")
            await create_pod(scheduler, client, member("w-2", "train"))
            result = await scheduler.run_once(2.0)
            assert len(result.binds) == 3
            await eventually(lambda: condition(server, version, "train")["status"] == "True")
            placed = condition(server, version, "train")
            assert (placed["type"], placed["reason"]) == (kind, "Scheduled")
        assert {bound_to(server, f"w-{i}") for i in range(3)} == {"node-a"}


async def test_a_gang_too_big_for_the_cluster_binds_nothing() -> None:
    async with connected(crds=WORKLOAD_API_V1BETA1) as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=2))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            assert scheduler.pod_groups is WORKLOAD_PODGROUPS_V1BETA1
            await add(scheduler, client, WORKLOAD_PODGROUPS_V1BETA1, pod_group("v1beta1", "t", 3))
            for i in range(3):
                await create_pod(scheduler, client, member(f"w-{i}", "t"))
            assert (await scheduler.run_once(1.0)).binds == []
        assert [bound_to(server, f"w-{i}") for i in range(3)] == [None] * 3


async def test_pods_of_a_basic_podgroup_bind_one_by_one_and_late_groups_are_joined() -> None:
    async with connected(crds=WORKLOAD_API_V1BETA1) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_pod(scheduler, client, member("solo-0", "loose"))
            await create_pod(scheduler, client, member("g-0", "late"))
            await create_pod(scheduler, client, member("g-1", "late"))
            assert (await scheduler.run_once(1.0)).binds == []  # their groups do not exist yet
            await add(
                scheduler, client, WORKLOAD_PODGROUPS_V1BETA1, pod_group("v1beta1", "loose", None)
            )
            await add(
                scheduler, client, WORKLOAD_PODGROUPS_V1BETA1, pod_group("v1beta1", "late", 2)
            )
            result = await scheduler.run_once(2.0)
            assert sorted(p.key for p, _ in result.binds) == [
                f"{NS}/g-0",
                f"{NS}/g-1",
                f"{NS}/solo-0",
            ]
            assert scheduler.cache.state.gangs[f"{NS}/late"].min_member == 2


@pytest.mark.parametrize(
    ("crds", "workloads", "pod_groups"),
    [
        ((), None, None),
        ((WORKLOADS,), WORKLOADS_V1ALPHA1, None),
        (WORKLOAD_API_V1ALPHA2, WORKLOADS_V1ALPHA2, WORKLOAD_PODGROUPS_V1ALPHA2),
        (WORKLOAD_API_V1BETA1, WORKLOADS_V1BETA1, WORKLOAD_PODGROUPS_V1BETA1),
        (
            (WORKLOADS, *WORKLOAD_API_V1ALPHA2, *WORKLOAD_API_V1BETA1),
            WORKLOADS_V1BETA1,
            WORKLOAD_PODGROUPS_V1BETA1,
        ),
    ],
    ids=["none", "v1alpha1", "v1alpha2", "v1beta1", "all"],
)
async def test_discovery_watches_the_newest_served_version_only(
    crds: tuple[ResourceInfo, ...], workloads: Resource | None, pod_groups: Resource | None
) -> None:
    async with connected(crds=crds) as (server, client):
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            assert (scheduler.workloads, scheduler.pod_groups) == (workloads, pod_groups)
            watched = {r for r in scheduler.informers if r.group == "scheduling.k8s.io"}
            assert watched - {r for r in scheduler.informers if r.plural == "priorityclasses"} == {
                r for r in (workloads, pod_groups) if r is not None
            }
        for info in (WORKLOADS_V1ALPHA1, *[WORKLOADS_V1ALPHA2, WORKLOADS_V1BETA1]):
            if info != workloads:  # never listed: not assumed
                assert server.count("GET", f"^{info.path()}$", watch=False) == 0


async def test_a_workload_api_enabled_later_is_discovered_and_scheduled() -> None:
    async with connected(crds=()) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        scheduler = LiveScheduler(client, backoff=fast_backoff(), recheck_missing=0.05)
        async with scheduler:
            assert scheduler.pod_groups is None
            for info in WORKLOAD_API_V1BETA1:
                server.register(info)
            await eventually(lambda: scheduler.pod_groups is not None, what="discovery")
            await eventually(
                lambda: scheduler.informers[WORKLOAD_PODGROUPS_V1BETA1].synced.is_set()
            )
            await add(scheduler, client, WORKLOAD_PODGROUPS_V1BETA1, pod_group("v1beta1", "t", 2))
            for i in range(2):
                await create_pod(scheduler, client, member(f"w-{i}", "t"))
            assert len((await scheduler.run_once(1.0)).binds) == 2


async def test_a_kai_podgroup_gang_binds_whole_with_its_queue() -> None:
    async with connected(crds=(KAI_PODGROUPS,)) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await add(scheduler, client, KAI, kai_group("llm", 2, "research"))
            await create_pod(scheduler, client, kai_member("llm-0", "llm"))
            assert (await scheduler.run_once(1.0)).binds == []
            gang = scheduler.cache.state.gangs[f"{NS}/llm"]
            assert gang.spec is not None and gang.spec.queue == "research"
            status = server.get("scheduling.run.ai/v2alpha2", "podgroups", "llm", NS)["status"]
            (waiting,) = status["schedulingConditions"]
            assert (waiting["type"], waiting["nodePool"], waiting["status"]) == (
                "UnschedulableOnNodePool",
                "default",
                "True",
            )
            assert waiting["reasons"][0]["reason"] == "NotEnoughMembers"
            assert status["pending"] == 1
            await create_pod(scheduler, client, kai_member("llm-1", "llm"))
            assert len((await scheduler.run_once(2.0)).binds) == 2

            def cleared() -> bool:
                stored = server.get("scheduling.run.ai/v2alpha2", "podgroups", "llm", NS)
                return (stored.get("status") or {}).get("schedulingConditions") == []

            await eventually(cleared, what="schedulingConditions cleared")
        assert {bound_to(server, f"llm-{i}") for i in range(2)} == {"node-a"}


async def test_a_kai_gang_with_a_member_missing_binds_nothing() -> None:
    async with connected(crds=(KAI_PODGROUPS,)) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await add(scheduler, client, KAI, kai_group("llm", 3, "research"))
            for i in range(2):
                await create_pod(scheduler, client, kai_member(f"llm-{i}", "llm"))
            for t in range(3):
                assert (await scheduler.run_once(float(t))).binds == []
        assert server.count("POST", r"/binding$") == 0


async def test_a_gated_pod_holds_its_gang_until_its_gates_are_removed() -> None:
    async with connected(crds=WORKLOAD_API_V1BETA1) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await add(scheduler, client, WORKLOAD_PODGROUPS_V1BETA1, pod_group("v1beta1", "t", 2))
            await create_pod(scheduler, client, member("w-0", "t"))
            await create_pod(scheduler, client, member("w-1", "t", gates=("example.com/quota",)))
            await create_pod(scheduler, client, member("lone", "missing", gates=("x.io/a",)))
            for t in range(2):
                assert (await scheduler.run_once(float(t))).binds == []
            reports = {r.name: r for r in await explain(client, now=2.0)}
            assert reports["t"].reason == "SchedulingGated"
            assert "w-1 is gated (example.com/quota)" in reports["t"].message
            await client.patch(PODS_RESOURCE, "w-1", {"spec": {"schedulingGates": None}}, NS)
            await eventually(
                lambda: (
                    not scheduler.informers[PODS_RESOURCE]
                    .store[f"{NS}/w-1"]["spec"]
                    .get("schedulingGates")
                )
            )
            assert len((await scheduler.run_once(3.0)).binds) == 2
        assert {bound_to(server, "w-0"), bound_to(server, "w-1")} == {"node-a"}


async def test_a_gated_lone_pod_binds_once_ungated() -> None:
    async with connected(crds=()) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            gated = pod("solo", gpus=1)
            gated["spec"]["schedulingGates"] = [{"name": "a.io/hold"}, {"name": "b.io/hold"}]
            await create_pod(scheduler, client, gated)
            assert (await scheduler.run_once(1.0)).binds == []
            gates = [{"name": "b.io/hold"}]  # one removed: still gated
            await client.patch(PODS_RESOURCE, "solo", {"spec": {"schedulingGates": gates}}, NS)
            store = scheduler.informers[PODS_RESOURCE].store
            await eventually(lambda: len(store[f"{NS}/solo"]["spec"]["schedulingGates"]) == 1)
            assert (await scheduler.run_once(2.0)).binds == []
            await client.patch(PODS_RESOURCE, "solo", {"spec": {"schedulingGates": None}}, NS)
            await eventually(lambda: not store[f"{NS}/solo"]["spec"].get("schedulingGates"))
            assert len((await scheduler.run_once(3.0)).binds) == 1
