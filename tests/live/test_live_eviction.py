"""The Eviction API of the API test server honours PodDisruptionBudgets as the real one does,
and a live preemption goes through it within a budget, or falls back to DELETE on a server
without it (issue 11)."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_preemption import SCHEDULING, classed, priority_class
from test_live_recovery import exists
from test_live_serve import NS, bound_to, create_pod, node, pod

from phalanx.live import KubeClient
from phalanx.live.errors import ApiError
from phalanx.live.explain import explain
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import PDBS
from phalanx.live.writes import evict

POLICY = "policy/v1"


def budget(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": POLICY,
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def labelled(name: str, app: str, **options: Any) -> dict[str, Any]:
    obj = pod(name, **options)
    obj["metadata"]["labels"] = {"app": app}
    return obj


def running(server: FakeApiServer, name: str, *, ready: bool = True) -> None:
    """What the kubelet reports once the pod's containers run (and pass readiness)."""
    stored = server.get("v1", "pods", name, NS)
    assert stored is not None
    stored["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    server.put("v1", "pods", stored)


async def refused(client: KubeClient, name: str) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await evict(client, NS, name)
    return caught.value


def pdb_status(server: FakeApiServer, name: str) -> dict[str, Any]:
    stored = server.get(POLICY, "poddisruptionbudgets", name, NS)
    assert stored is not None
    return dict(stored["status"])


async def test_the_eviction_api_spends_a_budget_and_refuses_with_429() -> None:
    async with connected() as (server, client):
        for i in range(3):
            server.put("v1", "pods", labelled(f"web-{i}", "web", node_name="node-a"))
            running(server, f"web-{i}")
        server.put(POLICY, "poddisruptionbudgets", budget("web", "web", maxUnavailable=1))
        await evict(client, NS, "web-0")  # one disruption allowed: spent
        assert not exists(server, "web-0")
        status = pdb_status(server, "web")  # written when it allowed web-0's eviction
        assert (status["disruptionsAllowed"], status["currentHealthy"]) == (0, 3)
        assert list(status["disruptedPods"]) == ["web-0"]

        error = await refused(client, "web-1")  # 3 expected (web-0 not re-created yet)
        assert error.status == 429
        assert "would violate the pod's disruption budget" in str(error)
        assert exists(server, "web-1")
        status = pdb_status(server, "web")
        assert (status["expectedPods"], status["currentHealthy"]) == (3, 2)
        assert status["desiredHealthy"] == 2

        server.put("v1", "pods", labelled("web-9", "web"))  # Pending: budgets do not apply
        await evict(client, NS, "web-9")
        assert not exists(server, "web-9")

        running(server, "web-2", ready=False)  # unhealthy, and the budget is not healthy
        assert (await refused(client, "web-2")).status == 429
        server.put(POLICY, "poddisruptionbudgets", budget("web", "web", minAvailable="50%"))
        await evict(client, NS, "web-2")  # 1 healthy of 2 is 50%: an unhealthy pod may go

        server.put(POLICY, "poddisruptionbudgets", budget("web-too", "web"))
        assert (await refused(client, "web-1")).status == 500  # two budgets: not supported


async def test_eviction_checks_its_body_and_can_be_turned_off() -> None:
    async with connected() as (server, client):
        server.put("v1", "pods", labelled("web-0", "web", node_name="node-a"))
        path = "/api/v1/namespaces/team/pods/web-0/eviction"
        body = {"apiVersion": POLICY, "kind": "Eviction", "metadata": {"name": "other"}}
        with pytest.raises(ApiError) as caught:
            await client.request("POST", path, body=body)
        assert caught.value.status == 400
        with pytest.raises(ApiError) as caught:
            await evict(client, NS, "web-0", uid="not-its-uid")
        assert caught.value.status == 409
        assert (await refused(client, "missing")).status == 404
    async with connected(eviction=False) as (server, client):
        server.put("v1", "pods", labelled("web-0", "web", node_name="node-a"))
        assert (await refused(client, "web-0")).status == 404


async def preemption_within_a_budget(server: FakeApiServer, client: KubeClient) -> None:
    """Lone pods ``kept`` (priority 5, protected) and ``spare`` (10) hold the node's 4 GPUs;
    ``urgent`` (1000) needs 2. Without the budget ``kept`` would go (lowest priority first);
    with it, ``spare`` goes."""
    server.put("v1", "nodes", node("node-a", gpus=4))
    for name, value in (("kept", 5), ("spare", 10), ("urgent", 1000)):
        server.put(SCHEDULING, "priorityclasses", priority_class(name, value))
    async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
        for name in ("kept", "spare"):
            obj = classed(labelled(f"{name}-0", name, gpus=2), name)
            await create_pod(scheduler, client, obj)
        await scheduler.run_once(1.0)
        for name in ("kept", "spare"):
            assert bound_to(server, f"{name}-0") == "node-a"
            running(server, f"{name}-0")
        await create_pod(scheduler, client, classed(pod("urgent-0", gpus=2), "urgent"))
        (report,) = await explain(client, now=2.0)
        assert report.preempts == [f"{NS}/kept-0 (preempt)"]

        await client.create(PDBS, budget("kept", "kept", minAvailable=1))
        await eventually(lambda: scheduler.cache.state.queues.budgets, what="budget seen")
        (report,) = await explain(client, now=2.0)
        assert report.preempts == [f"{NS}/spare-0 (preempt)"]

        result = await scheduler.run_once(2.0)
        assert [p.key for p in result.evictions] == [f"{NS}/spare-0"]
        await eventually(lambda: not exists(server, "spare-0"), what="spare-0 evicted")
        await eventually(lambda: f"{NS}/spare-0" not in scheduler.cache.state.pods, what="gone")
        await scheduler.run_once(3.0)
        assert bound_to(server, "urgent-0") == "node-a"
        assert exists(server, "kept-0")


async def test_a_preemption_goes_through_the_eviction_api_within_a_budget() -> None:
    async with connected() as (server, client):
        await preemption_within_a_budget(server, client)
        assert server.count("POST", r"/pods/spare-0/eviction$") == 1
        assert server.count("DELETE", r"/pods/") == 0


async def test_without_the_eviction_api_a_preemption_deletes() -> None:
    async with connected(eviction=False) as (server, client):
        await preemption_within_a_budget(server, client)
        assert server.count("POST", r"/pods/spare-0/eviction$") == 1  # 404: not served
        assert server.count("DELETE", r"/pods/spare-0$") == 1
