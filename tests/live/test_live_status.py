"""PodGroup status in each API's vocabulary: Volcano's phases and conditions, scheduler-plugins'
older API group, and the pure rules behind them."""

from __future__ import annotations

from typing import Any

from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_recovery import events_about, settle_phases
from test_live_serve import (
    NS,
    bound_to,
    create_group,
    create_pod,
    node,
    pod,
    podgroup,
    scheduled_condition,
)

from phalanx.live import PODGROUPS_SIGS, VOLCANO_PODGROUPS, VOLCANO_QUEUES
from phalanx.live.cache import ClusterCache
from phalanx.live.group_status import Verdict, volcano_conditions, volcano_status
from phalanx.live.loop import LiveScheduler

VOLCANO = "scheduling.volcano.sh/v1beta1"
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def volcano_group(name: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": VOLCANO,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member, "queue": "default", **spec},
    }


def volcano_pod(name: str, group: str, *, gpus: int = 1) -> dict[str, Any]:
    obj = pod(name, gpus=gpus)
    obj["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    return obj


def status_of(server: FakeApiServer, api_version: str, name: str) -> dict[str, Any]:
    stored = server.get(api_version, "podgroups", name, NS)
    assert stored is not None
    return dict(stored.get("status") or {})


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [c for c in status.get("conditions") or [] if c["type"] == type_]
    return dict(found)


# -- the rules -------------------------------------------------------------------------------
def test_volcano_phase_follows_allocation_and_admission() -> None:
    group = volcano_group("g", 2)
    pending = {"spec": {}, "status": {"phase": "Pending"}}
    bound = {"spec": {"nodeName": "n"}, "status": {"phase": "Pending"}}
    running = {"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
    done = {"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}}
    waits = Verdict(placed=False, reason="NotEnoughResources", message="m", pending=1, members=2)

    def phase(pods: list[Any], **kw: Any) -> str:
        return str(volcano_status(group, pods, now=T0, **kw)["phase"])

    assert phase([pending, pending]) == "Pending"
    assert phase([pending, pending], admitted=True) == "Inqueue"
    assert phase([bound, pending]) == "Pending"
    assert phase([bound, pending], assumed=[1]) == "Running"  # an assumed bind counts
    assert phase([running, bound]) == "Running"
    assert phase([done, done]) == "Completed"
    assert phase([running, pending], verdict=waits) == "Unknown"
    inqueue = {**group, "status": {"phase": "Inqueue"}}
    assert volcano_status(inqueue, [pending], now=T0)["phase"] == "Inqueue"  # never back
    status = volcano_status(group, [running, done, {"status": {"phase": "Failed"}}], now=T0)
    assert (status["running"], status["succeeded"], status["failed"]) == (1, 1, 1)


def test_volcano_conditions_replace_by_type_and_keep_transition_times() -> None:
    waits = Verdict(placed=False, reason="NotEnoughMembers", message="1 of 3", pending=1, members=2)
    first = volcano_conditions([], waits, T0)
    assert first == [
        {
            "type": "Unschedulable",
            "status": "True",
            "reason": "NotEnoughTasks",
            "message": "1/2 tasks in gang unschedulable: 1 of 3",
            "lastTransitionTime": T0,
        }
    ]
    again = Verdict(
        placed=False, reason="NotEnoughResources", message="no gpu", pending=2, members=3
    )
    (second,) = volcano_conditions(first, again, T1)
    assert second["reason"] == "NotEnoughResources" and second["lastTransitionTime"] == T0
    other = {"type": "Custom", "status": "True", "lastTransitionTime": T0}
    placed = volcano_conditions([second, other], Verdict(placed=True), T1)
    assert [c["type"] for c in placed] == ["Unschedulable", "Custom", "Scheduled"]
    assert placed[0]["status"] == "False" and placed[0]["lastTransitionTime"] == T1
    assert placed[2] == {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "message": "",
        "lastTransitionTime": T1,
    }
    assert volcano_conditions([], Verdict(placed=True), T0)[0]["type"] == "Scheduled"
    assert volcano_conditions(placed, None, T1) == placed  # no verdict: untouched


def queue(name: str, state: str) -> dict[str, Any]:
    return {
        "apiVersion": VOLCANO,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
        "status": {"state": state},
    }


# -- through the loop ------------------------------------------------------------------------
async def create_volcano_group(scheduler: LiveScheduler, obj: dict[str, Any]) -> None:
    """Create a Volcano PodGroup; its queue ``default`` too, as installing Volcano does."""
    queues = scheduler.informers[VOLCANO_QUEUES].store
    if obj["spec"]["queue"] == "default" and "default" not in queues:
        await scheduler.client.create(VOLCANO_QUEUES, queue("default", "Open"))
        await eventually(lambda: "default" in queues, what="default queue")
    await scheduler.client.create(VOLCANO_PODGROUPS, obj)
    store = scheduler.informers[VOLCANO_PODGROUPS].store
    await eventually(lambda: f"{NS}/{obj['metadata']['name']}" in store, what="volcano group")


async def test_a_volcano_group_goes_inqueue_unschedulable_then_running() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_volcano_group(scheduler, volcano_group("vc", 3))
            await scheduler.run_once(1.0)
            assert status_of(server, VOLCANO, "vc")["phase"] == "Inqueue"  # no minResources
            for i in range(2):
                await create_pod(scheduler, client, volcano_pod(f"vc-{i}", "vc"))
            await scheduler.run_once(2.0)
            status = status_of(server, VOLCANO, "vc")
            assert status["phase"] == "Inqueue"
            waiting = condition(status, "Unschedulable")
            assert (waiting["status"], waiting["reason"]) == ("True", "NotEnoughTasks")
            assert waiting["message"].startswith("2/2 tasks in gang unschedulable: ")
            (event,) = events_about(server, "vc", "FailedScheduling")
            assert event["regarding"]["apiVersion"] == VOLCANO

            await create_pod(scheduler, client, volcano_pod("vc-2", "vc"))
            result = await scheduler.run_once(3.0)
            assert len(result.binds) == 3
            status = status_of(server, VOLCANO, "vc")
            assert status["phase"] == "Running"  # bound (assumed) to minMember
            assert condition(status, "Scheduled")["status"] == "True"
            assert condition(status, "Unschedulable")["status"] == "False"
            (event,) = events_about(server, "vc", "Scheduled")
            assert event["regarding"]["kind"] == "PodGroup"

            await settle_phases(server, scheduler, [f"vc-{i}" for i in range(3)], "Succeeded")
            await scheduler.run_once(4.0)
            status = status_of(server, VOLCANO, "vc")
            assert (status["phase"], status["succeeded"]) == ("Completed", 3)
            writes = server.count("PATCH", r"/podgroups/vc/status$")
            await scheduler.run_once(5.0)  # nothing changed: no write
            assert server.count("PATCH", r"/podgroups/vc/status$") == writes


async def test_volcano_admission_holds_a_group_whose_min_resources_do_not_fit() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            first = volcano_group("first", 2, minResources={"nvidia.com/gpu": "3"})
            await create_volcano_group(scheduler, first)
            second = volcano_group("second", 2, minResources={"nvidia.com/gpu": "2"})
            await create_volcano_group(scheduler, second)
            await scheduler.run_once(1.0)
            # 4 GPUs free: "first" (older, or first by name) takes 3 at admission; "second" waits.
            assert status_of(server, VOLCANO, "first")["phase"] == "Inqueue"
            assert status_of(server, VOLCANO, "second")["phase"] == "Pending"
            for i in range(2):
                await create_pod(scheduler, client, volcano_pod(f"first-{i}", "first"))
            await scheduler.run_once(2.0)
            assert status_of(server, VOLCANO, "first")["phase"] == "Running"
            # "first" runs now: its reservation is its pods; 2 GPUs are free for "second".
            await scheduler.run_once(3.0)
            assert status_of(server, VOLCANO, "second")["phase"] == "Inqueue"
            assert [bound_to(server, f"first-{i}") for i in range(2)] == ["node-a", "node-a"]


async def test_the_older_scheduler_plugins_group_gets_its_status_too() -> None:
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "old", "namespace": NS},
        "spec": {"minMember": 2},
    }
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await client.create(PODGROUPS_SIGS, group)
            store = scheduler.informers[PODGROUPS_SIGS].store
            await eventually(lambda: f"{NS}/old" in store, what="sigs group")
            for i in range(2):
                obj = pod(f"old-{i}")
                obj["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "old"}
                await create_pod(scheduler, client, obj)
            await scheduler.run_once(1.0)
            status = status_of(server, "scheduling.sigs.k8s.io/v1alpha1", "old")
            assert status["phase"] == "Scheduling" and status["scheduleStartTime"]
            (event,) = events_about(server, "old", "Scheduled")
            assert event["regarding"]["apiVersion"] == "scheduling.sigs.k8s.io/v1alpha1"


# -- Volcano queues --------------------------------------------------------------------------
async def test_a_volcano_group_waits_until_its_queue_exists_and_is_open() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_volcano_group(scheduler, volcano_group("vc", 2, queue="research"))
            for i in range(2):
                await create_pod(scheduler, client, volcano_pod(f"vc-{i}", "vc"))
            key = f"{NS}/vc"
            result = await scheduler.run_once(1.0)
            assert result.binds == [] and result.waiting[key].reason == "QueueMissing"
            assert "'research' does not exist" in result.waiting[key].message
            waiting = condition(status_of(server, VOLCANO, "vc"), "Unschedulable")
            assert waiting["reason"] == "QueueMissing"

            queues = scheduler.informers[VOLCANO_QUEUES].store
            server.put(VOLCANO, "queues", queue("research", "Closed"))
            await eventually(lambda: "research" in queues, what="queue")
            result = await scheduler.run_once(2.0)
            assert result.binds == [] and result.waiting[key].reason == "QueueClosed"

            server.put(VOLCANO, "queues", queue("research", "Open"))
            await eventually(
                lambda: queues["research"]["status"]["state"] == "Open", what="queue open"
            )
            result = await scheduler.run_once(3.0)
            assert len(result.binds) == 2
        assert [bound_to(server, f"vc-{i}") for i in range(2)] == ["node-a", "node-a"]


def test_queues_are_not_checked_when_volcano_is_not_installed() -> None:
    group = {
        **volcano_group("vc", 1, queue="anything"),
        "metadata": {"name": "vc", "namespace": NS},
    }
    cache = ClusterCache()
    snapshot = cache.build(nodes=[node("node-a")], pods=[], volcano_podgroups=[group], now=1.0)
    assert snapshot.state.gangs[f"{NS}/vc"].hold is None
    snapshot = cache.build(
        nodes=[node("node-a")], pods=[], volcano_podgroups=[group], volcano_queues=[], now=2.0
    )
    assert snapshot.state.gangs[f"{NS}/vc"].hold == (
        "QueueMissing",
        "Volcano queue 'anything' does not exist",
    )


# -- objects phalanx cannot use --------------------------------------------------------------
async def test_a_malformed_podgroup_and_a_missing_one_get_events_and_explanations() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await create_group(scheduler, client, podgroup("broken", 0))
            await create_pod(scheduler, client, pod("broken-0", group="broken"))
            await create_pod(scheduler, client, pod("lost-0", group="nowhere"))
            await create_pod(scheduler, client, pod("solo"))
            await scheduler.run_once(1.0)
            await scheduler.run_once(2.0)  # once per object version: no second Invalid event
            (event,) = events_about(server, "broken", "Invalid")
            assert event["type"] == "Warning" and event["regarding"]["kind"] == "PodGroup"
            assert "spec.minMember" in event["note"]
            (event,) = events_about(server, "broken-0", "FailedScheduling")
            assert event["note"].startswith(
                f"PodGroup {NS}/broken (scheduling.x-k8s.io) is invalid"
            )
            (event,) = events_about(server, "lost-0", "FailedScheduling")
            assert event["note"] == f"PodGroup {NS}/nowhere (scheduling.x-k8s.io) does not exist"
            lost = scheduled_condition(server, "lost-0")
            assert lost is not None and lost["reason"] == "Unschedulable"
            assert lost["message"] == event["note"]
        assert bound_to(server, "solo") == "node-a"  # the others keep scheduling
        assert bound_to(server, "broken-0") is None and bound_to(server, "lost-0") is None
