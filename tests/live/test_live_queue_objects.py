"""KAI Queues, Kueue ClusterQueues/LocalQueues and ElasticQuotas enforced by ``phalanx serve``:
the live scheduler against the API test server, each queue limiting two 8-GPU gangs on two
free 8-GPU nodes to one until the limit is raised, the first gang goes, or the quota is
deleted; a malformed queue object is reported and the others still hold."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from apiserver import ALL_CRDS, KUEUE_V1BETA2, QUEUE_CRDS, FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_recovery import events_about
from test_live_serve import NS, node

from phalanx.live import PODGROUPS, PODS
from phalanx.live.cache import ClusterCache
from phalanx.live.explain import explain
from phalanx.live.hints import WakeHints
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import (
    CLUSTER_QUEUE_VERSIONS,
    ELASTIC_QUOTAS,
    KAI_QUEUES,
    LOCAL_QUEUE_VERSIONS,
    VOLCANO_QUEUES,
)

CRDS = (*ALL_CRDS, *QUEUE_CRDS)
GPU = "nvidia.com/gpu"
KAI = "scheduling.run.ai/v2"
KUEUE = "kueue.x-k8s.io/v1beta1"
QUOTA = "scheduling.x-k8s.io/v1alpha1"


def kai_queue(name: str, gpus: Any, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"gpu": {"quota": 0, "limit": gpus}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": KAI, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str, gpus: int, api_version: str = KUEUE, cohort: str = "", kind: str = "ClusterQueue"
) -> dict[str, Any]:
    flavor = {"name": "default", "resources": [{"name": GPU, "nominalQuota": gpus}]}
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": [GPU], "flavors": [flavor]}]}
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def cohort(name: str, gpus: int) -> dict[str, Any]:
    return cluster_queue(name, gpus, "kueue.x-k8s.io/v1alpha1", kind="Cohort")


def resource_flavor(name: str = "default", **labels: str) -> dict[str, Any]:
    spec = {"nodeLabels": labels} if labels else {}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def kueue_queues(server: FakeApiServer, gpus: int) -> None:
    """ClusterQueue ``gpus`` of ``gpus`` GPUs (flavor ``default``), and its LocalQueue
    ``team-queue``."""
    server.put(KUEUE, "resourceflavors", resource_flavor())
    server.put(KUEUE, "clusterqueues", cluster_queue("gpus", gpus))
    server.put(KUEUE, "localqueues", local_queue("team-queue", "gpus"))


def kueue_cohort(server: FakeApiServer, *, declared: bool) -> None:
    """ClusterQueues ``a`` and ``b`` of 8 GPUs each in cohort ``pool`` (of 8 GPUs when
    ``declared``, else only named: no limit), a gang of 8 GPUs in each."""
    server.put(KUEUE, "resourceflavors", resource_flavor())
    if declared:
        server.put("kueue.x-k8s.io/v1alpha1", "cohorts", cohort("pool", 8))
    for name in ("a", "b"):
        server.put(KUEUE, "clusterqueues", cluster_queue(name, 8, cohort="pool"))
        server.put(KUEUE, "localqueues", local_queue(f"lq-{name}", name))
        kueue_gang(server, f"gang-{name}", f"lq-{name}")


def local_queue(name: str, target: str, api_version: str = KUEUE) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterQueue": target},
    }


def elastic_quota(gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": QUOTA,
        "kind": "ElasticQuota",
        "metadata": {"name": "quota", "namespace": NS},
        "spec": {"min": {GPU: 0}, "max": {GPU: gpus}},
    }


def gang_pods(
    name: str, labels: dict[str, str], annotations: dict[str, str]
) -> list[dict[str, Any]]:
    """Two 4-GPU pods of gang ``name``: 8 GPUs in all."""
    resources = {"requests": {"cpu": "1", GPU: "4"}, "limits": {GPU: "4"}}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": NS,
                "labels": dict(labels),
                "annotations": dict(annotations),
            },
            "spec": {
                "schedulerName": "phalanx",
                "containers": [{"name": "main", "image": "busybox", "resources": resources}],
            },
        }
        for i in range(2)
    ]


def lone_pod(server: FakeApiServer, name: str, labels: dict[str, str]) -> None:
    """An 8-GPU pod of no gang (a gang of one) with ``labels``."""
    (obj, _) = gang_pods(name, labels, {})
    obj["spec"]["containers"][0]["resources"] = {"limits": {GPU: "8"}}
    server.put("v1", "pods", obj)


def kai_gang(server: FakeApiServer, name: str, queue: str) -> None:
    """A KAI PodGroup in ``queue`` and its pods (annotated, and labelled as KAI's podgrouper
    labels them)."""
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": 2, "queue": queue},
    }
    server.put("scheduling.run.ai/v2alpha2", "podgroups", group)
    labels = {"kai.scheduler/queue": queue}
    for obj in gang_pods(name, labels, {"pod-group-name": name}):
        server.put("v1", "pods", obj)


def kueue_gang(server: FakeApiServer, name: str, queue: str) -> None:
    """A Kueue pod group (``pod-group-name`` + total count) submitted to LocalQueue ``queue``."""
    labels = {"kueue.x-k8s.io/pod-group-name": name, "kueue.x-k8s.io/queue-name": queue}
    annotations = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    for obj in gang_pods(name, labels, annotations):
        server.put("v1", "pods", obj)


def plain_gang(server: FakeApiServer, name: str) -> None:
    """A scheduler-plugins PodGroup naming no queue (its namespace's ElasticQuota holds it)."""
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": 2},
    }
    server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", group)
    for obj in gang_pods(name, {"scheduling.x-k8s.io/pod-group": name}, {}):
        server.put("v1", "pods", obj)


def bound_gangs(server: FakeApiServer) -> dict[str, int]:
    """Gang name → its bound pods."""
    out: dict[str, int] = {}
    for pod in server.objects("v1", "pods"):
        if (pod.get("spec") or {}).get("nodeName"):
            gang = pod["metadata"]["name"].rsplit("-", 1)[0]
            out[gang] = out.get(gang, 0) + 1
    return out


async def settle(scheduler: LiveScheduler, pods: int) -> None:
    """Wait until the scheduler's cache holds ``pods`` pods."""
    await eventually(lambda: len(scheduler.cache.pods) == pods, what=f"{pods} pods")


def gpu_limit(scheduler: LiveScheduler, queue: str) -> int | None:
    spec = scheduler.cache.state.queues.specs.get(queue)
    return None if spec is None else spec.capability.get(GPU)


async def cluster(server: FakeApiServer) -> None:
    for name in ("node-a", "node-b"):
        server.put("v1", "nodes", node(name, gpus=8))


async def test_a_kai_queue_limit_holds_live_until_it_is_raised() -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        server.put(KAI, "queues", kai_queue("team", 8))
        kai_gang(server, "first", "team")
        kai_gang(server, "second", "team")
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 4)
            assert gpu_limit(scheduler, "team") == 8000
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert sorted(bound_gangs(server).values()) == [2]  # one whole gang, not two
            await client.patch(KAI_QUEUES, "team", {"spec": {"resources": {"gpu": {"limit": 16}}}})
            await eventually(lambda: gpu_limit(scheduler, "team") == 16000, what="raised")
            await scheduler.run_once(3.0)
        assert bound_gangs(server) == {"first": 2, "second": 2}


async def test_a_kai_parent_queue_limits_its_children() -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        server.put(KAI, "queues", kai_queue("org", 8))
        server.put(KAI, "queues", kai_queue("team-a", 16, parent="org"))
        server.put(KAI, "queues", kai_queue("team-b", 16, parent="org"))
        kai_gang(server, "first", "team-a")
        kai_gang(server, "second", "team-b")
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 4)
            await scheduler.run_once(1.0)
            assert sorted(bound_gangs(server).values()) == [2]
            first = next(iter(bound_gangs(server)))
            for i in range(2):  # the bound gang finishes: the other takes its room
                await client.delete(PODS, f"{first}-{i}", NS)
            await settle(scheduler, 2)
            await scheduler.run_once(2.0)
        assert set(bound_gangs(server)) == {"first", "second"} - {first}


async def test_a_kueue_cluster_queue_holds_gangs_of_its_local_queues() -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        kueue_queues(server, 8)
        kueue_gang(server, "first", "team-queue")
        kueue_gang(server, "second", "team-queue")
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            assert CLUSTER_QUEUE_VERSIONS[1] in scheduler.informers  # v1beta1: the one served
            await settle(scheduler, 4)
            assert scheduler.cache.state.queues.bindings == {(NS, "team-queue"): "gpus"}
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert sorted(bound_gangs(server).values()) == [2]
            resource = CLUSTER_QUEUE_VERSIONS[1]
            raised = cluster_queue("gpus", 16)["spec"]
            await client.patch(resource, "gpus", {"spec": raised})
            await eventually(lambda: gpu_limit(scheduler, "gpus") == 16000, what="raised")
            await scheduler.run_once(3.0)
        assert bound_gangs(server) == {"first": 2, "second": 2}


@pytest.mark.parametrize(
    ("label", "queue"), [("kai.scheduler/queue", "team"), ("kueue.x-k8s.io/queue-name", "lq")]
)
async def test_lone_pods_labelled_for_a_queue_are_held_by_it(label: str, queue: str) -> None:
    """Pods of no gang (each a gang of one) go to the KAI queue or LocalQueue they name."""
    async with connected(CRDS) as (server, client):
        await cluster(server)
        server.put(KAI, "queues", kai_queue("team", 8))
        server.put(KUEUE, "resourceflavors", resource_flavor())
        server.put(KUEUE, "clusterqueues", cluster_queue("gpus", 8))
        server.put(KUEUE, "localqueues", local_queue("lq", "gpus"))
        for name in ("first", "second"):
            lone_pod(server, name, {label: queue})
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 2)
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
        assert sorted(bound_gangs(server).values()) == [1]


@pytest.mark.parametrize("declared", [True, False])
async def test_a_kueue_cohort_object_limits_its_cluster_queues(declared: bool) -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        kueue_cohort(server, declared=declared)
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 4)
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
        assert sorted(bound_gangs(server).values()) == ([2] if declared else [2, 2])


async def test_the_newest_kueue_version_served_is_watched() -> None:
    async with connected((*CRDS, *KUEUE_V1BETA2)) as (server, client):
        await cluster(server)
        newest = "kueue.x-k8s.io/v1beta2"
        server.put(newest, "clusterqueues", cluster_queue("gpus", 8, newest))
        server.put(newest, "localqueues", local_queue("lq", "gpus", newest))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            assert {CLUSTER_QUEUE_VERSIONS[0], LOCAL_QUEUE_VERSIONS[0]} <= set(scheduler.informers)
            assert not {CLUSTER_QUEUE_VERSIONS[1], LOCAL_QUEUE_VERSIONS[1]} & set(
                scheduler.informers
            )
            await eventually(lambda: gpu_limit(scheduler, "gpus") == 8000, what="queue")
            assert scheduler.cache.state.queues.bindings == {(NS, "lq"): "gpus"}


async def test_kueue_installed_after_the_start_is_picked_up() -> None:
    async with connected(ALL_CRDS) as (server, client):
        await cluster(server)
        async with LiveScheduler(client, backoff=fast_backoff(), recheck_missing=0.05) as scheduler:
            for info in QUEUE_CRDS:
                server.register(info)
            server.put(KUEUE, "clusterqueues", cluster_queue("gpus", 8))
            server.put(KUEUE, "localqueues", local_queue("lq", "gpus"))
            await eventually(lambda: gpu_limit(scheduler, "gpus") == 8000, what="queue")
            await eventually(lambda: scheduler.cache.state.queues.bindings, what="binding")


async def test_an_elastic_quota_max_holds_its_namespace_until_deleted() -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        server.put(QUOTA, "elasticquotas", elastic_quota(8))
        plain_gang(server, "first")
        plain_gang(server, "second")
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 4)
            assert gpu_limit(scheduler, NS) == 8000
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert sorted(bound_gangs(server).values()) == [2]
            await client.delete(ELASTIC_QUOTAS, "quota", NS)
            await eventually(lambda: gpu_limit(scheduler, NS) is None, what="quota gone")
            await scheduler.run_once(3.0)
        assert bound_gangs(server) == {"first": 2, "second": 2}


async def test_a_malformed_queue_is_reported_and_the_others_still_hold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="phalanx.live.convert")
    async with connected(CRDS) as (server, client):
        await cluster(server)
        server.put(KAI, "queues", kai_queue("broken", -3))
        server.put(KAI, "queues", kai_queue("team", 8))
        server.put(QUOTA, "elasticquotas", {**elastic_quota(8), "spec": {"max": {GPU: "x"}}})
        kai_gang(server, "first", "team")
        kai_gang(server, "second", "team")
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 4)
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert sorted(bound_gangs(server).values()) == [2]  # team still holds
            rejected = scheduler.cache.rejected
            assert rejected["Queue.scheduling.run.ai/broken"] == (
                "Queue broken: spec.resources.gpu.limit: must be -1 (unlimited) or at least 0, "
                "not -3"
            )
            assert rejected[f"ElasticQuota/{NS}/quota"] == (
                f"ElasticQuota {NS}/quota: spec.max[nvidia.com/gpu]: malformed quantity 'x'"
            )
            warnings = [r.getMessage() for r in caplog.records if "broken" in r.getMessage()]
            assert len(warnings) == 1 and "\n" not in warnings[0]
            (event,) = events_about(server, "broken", "Invalid")  # on the object, once
            assert event["regarding"]["kind"] == "Queue" and "gpu.limit" in event["note"]
            await client.patch(KAI_QUEUES, "broken", {"spec": {"resources": {"gpu": {"limit": 4}}}})
            await eventually(lambda: gpu_limit(scheduler, "broken") == 4000, what="mended")
            assert "Queue.scheduling.run.ai/broken" not in scheduler.cache.rejected


def volcano_queue(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"capability": {GPU: gpus}},
        "status": {"state": "Open"},
    }


def test_queue_events_change_the_book_as_a_rebuild_would() -> None:
    """Events of every queue API change the one book in place: a name declared by two APIs
    is the first API's (Volcano before KAI) and the other's again when it goes; a status-only
    update changes nothing; the result equals a book built from the same objects at once."""
    cache = ClusterCache()
    book = cache.build(nodes=[node("node-a")], pods=[], volcano_queues=[], now=1.0).state.queues
    kai, volcano = kai_queue("gold", 8), volcano_queue("gold", 4)
    cluster_queues, local_queues = CLUSTER_QUEUE_VERSIONS[1], LOCAL_QUEUE_VERSIONS[1]
    cache.event(KAI_QUEUES, "ADDED", kai, 2.0)
    assert (book.specs["gold"].capability, book.specs["gold"].api) == (
        {GPU: 8000},
        "scheduling.run.ai",
    )
    cache.event(VOLCANO_QUEUES, "ADDED", volcano, 3.0)
    assert book.specs["gold"].capability == {GPU: 4000}
    generation = book.generation
    cache.event(KAI_QUEUES, "MODIFIED", {**kai, "status": {"allocated": {"gpu": 4}}}, 4.0)
    cache.event(VOLCANO_QUEUES, "MODIFIED", {**volcano, "status": {"state": "Open"}}, 4.0)
    assert book.generation == generation  # nothing the book holds changed
    cache.event(VOLCANO_QUEUES, "DELETED", volcano, 5.0)
    assert book.specs["gold"].capability == {GPU: 8000}
    objects = {
        cluster_queues: [cluster_queue("gpus", 8)],
        local_queues: [local_queue("lq", "gpus")],
        ELASTIC_QUOTAS: [elastic_quota(16)],
    }
    for resource, objs in objects.items():
        cache.event(resource, "ADDED", objs[0], 6.0)
    assert book.bindings == {(NS, "lq"): "gpus", (NS, ""): NS}
    rebuilt = ClusterCache().build(
        nodes=[node("node-a")],
        pods=[],
        volcano_queues=[],
        queue_objects={KAI_QUEUES: [kai], **objects},
        now=7.0,
    )
    assert (book.specs, book.bindings) == (
        rebuilt.state.queues.specs,
        rebuilt.state.queues.bindings,
    )
    cache.event(local_queues, "DELETED", local_queue("lq", "gpus"), 8.0)
    cache.event(ELASTIC_QUOTAS, "DELETED", elastic_quota(16), 8.0)
    assert book.bindings == {} and set(book.specs) == {"gold", "gpus"}


def test_only_a_queue_objects_spec_change_wakes_the_loop() -> None:
    """A queue controller's status writes keep ``metadata.generation``: no cycle for them. An
    ElasticQuota and a PodGroup of the same group and key keep their own generations."""
    hints = WakeHints("phalanx")
    quota = elastic_quota(8)
    quota["metadata"]["generation"] = 1
    group = {"metadata": {"name": "quota", "namespace": NS, "generation": 5}}
    assert hints.wakes(ELASTIC_QUOTAS, "ADDED", quota)
    assert hints.wakes(PODGROUPS, "ADDED", group)
    assert not hints.wakes(ELASTIC_QUOTAS, "MODIFIED", {**quota, "status": {"used": {}}})
    quota["metadata"]["generation"] = 2
    assert hints.wakes(ELASTIC_QUOTAS, "MODIFIED", quota)


async def test_explain_names_the_cluster_queue_that_holds_a_gang() -> None:
    async with connected(CRDS) as (server, client):
        await cluster(server)
        kueue_queues(server, 4)
        kueue_gang(server, "big", "team-queue")
        (report,) = await explain(client, now=1.0)
    assert (report.name, report.reason) == ("big", "QueueCapability")
    assert "queue 'gpus' has a capability of 4000 nvidia.com/gpu" in report.message


async def test_a_pod_labelled_for_a_queue_that_does_not_exist_waits_until_it_appears() -> None:
    """A typo in the KAI queue label: the pod waits (``QueueMissing``) while other queues are
    declared, as KAI leaves it pending, and binds once a queue of that name is created."""
    async with connected(CRDS) as (server, client):
        await cluster(server)
        server.put(KAI, "queues", kai_queue("team", 8))
        lone_pod(server, "typo", {"kai.scheduler/queue": "tema"})
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 1)
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
            assert bound_gangs(server) == {}
            server.put(KAI, "queues", kai_queue("tema", 8))
            book = scheduler.cache.state.queues
            await eventually(lambda: "tema" in book.specs, what="queue tema")
            await scheduler.run_once(3.0)
            await scheduler.run_once(4.0)
        assert sorted(bound_gangs(server).values()) == [1]


async def test_kueue_flavors_hold_each_gang_to_one_flavors_quota_and_nodes() -> None:
    """ClusterQueue ``gpus`` lists flavor ``gen-b`` (8 GPUs of quota, node ``fast`` of 16
    GPUs) before ``gen-a`` (16, nodes ``slow-a`` and ``slow-b``); three 8-GPU gangs: the first
    runs on ``fast``, the other two are admitted in gen-a and run on the slow nodes, live as
    in simulation (before, the quotas were summed and the second gang packed onto ``fast``)."""
    async with connected(CRDS) as (server, client):
        for name, accelerator in (("fast", "gen-b"), ("slow-a", "gen-a"), ("slow-b", "gen-a")):
            labelled = node(name, gpus=16 if name == "fast" else 8)
            labelled["metadata"]["labels"] = {"accelerator": accelerator}
            server.put("v1", "nodes", labelled)
        for flavor in ("gen-b", "gen-a"):
            server.put(KUEUE, "resourceflavors", resource_flavor(flavor, accelerator=flavor))
        queue = cluster_queue("gpus", 8)
        second = {"name": "gen-a", "resources": [{"name": GPU, "nominalQuota": 16}]}
        queue["spec"]["resourceGroups"][0]["flavors"] = [
            {"name": "gen-b", "resources": [{"name": GPU, "nominalQuota": 8}]},
            second,
        ]
        server.put(KUEUE, "clusterqueues", queue)
        server.put(KUEUE, "localqueues", local_queue("team-queue", "gpus"))
        for name in ("first", "second", "third"):
            kueue_gang(server, name, "team-queue")
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await settle(scheduler, 6)
            await eventually(lambda: len(scheduler.cache.state.queues.flavors) == 2, what="rf")
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)
        nodes: dict[str, set[str]] = {}
        for pod in server.objects("v1", "pods"):
            gang = pod["metadata"]["name"].rsplit("-", 1)[0]
            nodes.setdefault(gang, set()).add(pod["spec"].get("nodeName") or "")
        assert nodes["first"] == {"fast"}
        assert nodes["second"] | nodes["third"] == {"slow-a", "slow-b"}
