"""What keeps the live loop cheap: queueing hints, memoised conversions, background Events."""

from __future__ import annotations

from typing import Any

import pytest
from apiserver.harness import connected, fast_backoff
from test_live_serve import NS, node, pod, podgroup

from phalanx.live import PODGROUPS, VOLCANO_QUEUES, events
from phalanx.live.cache import ClusterCache
from phalanx.live.loop import LiveScheduler, pod_event_wakes
from phalanx.live.status import _assignments


def stamped(obj: dict[str, Any], version: str, uid: str = "u1") -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version, "uid": uid}}


def test_pod_events_wake_the_loop_only_when_they_can_help_a_waiting_gang() -> None:
    pending = pod("p")
    bound = {**pending, "spec": {**pending["spec"], "nodeName": "node-a"}}
    finished = {**bound, "status": {"phase": "Succeeded"}}
    theirs = pod("q", scheduler="default-scheduler")
    assert pod_event_wakes("ADDED", pending, "phalanx")
    assert pod_event_wakes("MODIFIED", pending, "phalanx")
    assert not pod_event_wakes("MODIFIED", bound, "phalanx")  # our bind coming back
    assert not pod_event_wakes("ADDED", bound, "phalanx")  # takes room, frees none
    assert pod_event_wakes("MODIFIED", finished, "phalanx")
    assert pod_event_wakes("DELETED", bound, "phalanx")
    assert not pod_event_wakes("ADDED", theirs, "phalanx")


async def test_status_only_updates_of_a_podgroup_do_not_wake_the_loop() -> None:
    async with connected() as (_, client):
        scheduler = LiveScheduler(client, backoff=fast_backoff())
        group = podgroup("g", 2)
        group["metadata"]["generation"] = 1

        def wakes(kind: str, obj: dict[str, Any]) -> bool:
            scheduler._wake.clear()
            scheduler._on_event(PODGROUPS, kind, obj)
            return scheduler._wake.is_set()

        assert wakes("ADDED", group)
        assert not wakes("MODIFIED", {**group, "status": {"phase": "Running"}})
        changed = {**group, "metadata": {**group["metadata"], "generation": 2}}
        assert wakes("MODIFIED", changed)
        assert wakes("DELETED", changed)
        assert wakes("MODIFIED", changed)  # forgotten on delete: seen anew
        queue = {"metadata": {"name": "q", "generation": 1}, "status": {"state": "Open"}}
        scheduler._wake.clear()
        scheduler._on_event(VOLCANO_QUEUES, "MODIFIED", queue)  # a queue's state is its status
        assert scheduler._wake.is_set()


def test_unchanged_objects_are_converted_once() -> None:
    cache = ClusterCache()
    nodes = [stamped(node("node-a"), "1", "n1")]
    pods = [stamped(pod("p", gpus=1), "5")]
    cache.build(nodes=nodes, pods=pods, now=1.0)
    assert (cache.conversions.hits, cache.conversions.misses) == (0, 2)
    cache.build(nodes=nodes, pods=pods, now=2.0)
    assert (cache.conversions.hits, cache.conversions.misses) == (2, 2)
    changed = [stamped(pod("p", gpus=2), "6")]
    snapshot = cache.build(nodes=nodes, pods=changed, now=3.0)
    assert cache.conversions.misses == 3
    (info,) = [p for g in snapshot.state.gangs.values() for p in g.members]
    assert info.spec.requests["nvidia.com/gpu"] == 2000  # the new version, not the memo


def test_a_bad_object_is_memoised_as_bad_and_still_reported() -> None:
    cache = ClusterCache()
    bad = stamped(pod("bad"), "7")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    for now in (1.0, 2.0):
        snapshot = cache.build(nodes=[node("node-a")], pods=[bad], now=now)
        assert snapshot.state.gangs == {}
        assert list(cache.rejected) == [f"Pod/{NS}/bad"]
    assert cache.conversions.misses == 1


async def test_events_are_written_in_the_background_and_flushed() -> None:
    async with connected() as (server, client):
        recorder = events.EventRecorder(client, workers=2, limit=3)
        for i in range(5):
            body = events.event(
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": NS}},
                reason="Scheduled",
                note=f"event {i}",
            )
            recorder.emit(body)
        assert recorder.dropped == 2  # the oldest two: the queue holds three
        await recorder.flush()
        notes = sorted(e["note"] for e in server.objects("events.k8s.io/v1", "events"))
        assert notes == ["event 2", "event 3", "event 4"]
        assert recorder.written == 3
        server.fail("POST", r"/events$", 500)
        recorder.emit(body)
        await recorder.aclose()
        assert recorder.failed == 1


@pytest.mark.parametrize("flush", [True, False])
async def test_run_once_waits_for_its_events_unless_told_not_to(flush: bool) -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "pods", pod("solo"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await scheduler.run_once(1.0, flush_events=flush)
            assert scheduler.status is not None
            if flush:
                assert scheduler.status.recorder.written == 1
            await scheduler.status.flush()
            (event,) = server.objects("events.k8s.io/v1", "events")
            assert event["reason"] == "Scheduled"


async def test_under_pressure_a_gangs_scheduled_events_fold_into_its_podgroups() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", podgroup("g", 3))
        for i in range(3):
            server.put("v1", "pods", pod(f"g-{i}", group="g"))
        server.put("v1", "pods", pod("solo"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            assert scheduler.status is not None
            recorder = scheduler.status.recorder
            recorder.fold_above = 0  # every queue length counts as pressure
            result = await scheduler.run_once(1.0)
            assert len(result.binds) == 4
            written = server.objects("events.k8s.io/v1", "events")
            scheduled = {e["regarding"]["name"]: e["note"] for e in written}
            assert sorted(scheduled) == ["g", "solo"]  # the gang's pods: folded; a lone pod: not
            assert scheduled["solo"] == f"Successfully assigned {NS}/solo to node-a"
            assert all(f"{NS}/g-{i} to node-a" in scheduled["g"] for i in range(3))
            assert scheduled["g"].startswith("gang of 3 pods bound")
            assert recorder.folded == 3


def test_a_folded_note_fits_an_events_note_and_says_how_many_it_left_out() -> None:
    binds = [
        ({"metadata": {"name": f"worker-{i:03d}", "namespace": NS}}, "node-x") for i in range(200)
    ]
    note = _assignments(binds)
    assert len(note) <= 1024
    shown = note.count(" to node-x")
    assert 10 < shown < 200
    assert note.endswith(f"... and {200 - shown} more")
