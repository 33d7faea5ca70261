"""The informer against the fake API server: store, event types, resume, relist, bookmarks."""

from __future__ import annotations

import asyncio
import logging

import pytest
from apiserver import VOLCANO_QUEUES as QUEUE_INFO
from apiserver import FakeApiServer
from apiserver.harness import Recorder, connected, eventually, fast_backoff

from phalanx.live import (
    NODES,
    PODGROUPS,
    PODS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Informer,
    KubeClient,
    bind,
    config_for_server,
)


def pod(name: str, namespace: str = "default", **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "train"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def pod_lists(server: FakeApiServer) -> int:
    return server.count("GET", r"^/api/v1/(namespaces/[^/]+/)?pods$", watch=False)


async def test_sees_creates_updates_and_deletes() -> None:
    async with connected() as (server, client):
        await client.create(PODS, pod("before"))
        recorder = Recorder()
        informer = Informer(client, PODS, recorder, backoff=fast_backoff())
        async with informer:
            assert await informer.wait_synced(5)
            assert recorder.events == [("ADDED", "default/before")]
            await client.create(PODS, pod("a", "ns1"))
            await recorder.wait("ADDED", "ns1/a")
            await client.patch(PODS, "a", {"metadata": {"labels": {"x": "y"}}}, "ns1")
            await recorder.wait("MODIFIED", "ns1/a")
            assert informer.store["ns1/a"]["metadata"]["labels"] == {"app": "train", "x": "y"}
            await client.delete(PODS, "before", "default")
            await recorder.wait("DELETED", "default/before")
            assert set(informer.store) == {"ns1/a"}
            assert informer.store["ns1/a"]["kind"] == "Pod"
            assert informer.resource_version == str(server.store.rv)  # the deletion's
        assert informer.stats.lists == 1
        assert recorder.events == [
            ("ADDED", "default/before"),
            ("ADDED", "ns1/a"),
            ("MODIFIED", "ns1/a"),
            ("DELETED", "default/before"),
        ]


async def test_cluster_scoped_keys_and_async_handler() -> None:
    seen: list[tuple[str, str]] = []

    async def handler(kind: str, obj: dict[str, object]) -> None:
        await asyncio.sleep(0)
        seen.append((kind, obj["metadata"]["name"]))  # type: ignore[index]

    async with connected() as (_server, client):
        await client.create(NODES, {"metadata": {"name": "n1"}})
        async with Informer(client, NODES, handler, backoff=fast_backoff()) as informer:
            await informer.wait_synced(5)
            await client.create(NODES, {"metadata": {"name": "n2"}})
            await eventually(lambda: len(seen) == 2)
            assert set(informer.store) == {"n1", "n2"}
            assert seen == [("ADDED", "n1"), ("ADDED", "n2")]


@pytest.mark.parametrize("abort", [False, True], ids=["clean-end", "connection-aborted"])
async def test_resumes_after_dropped_watch_without_relist(abort: bool) -> None:
    async with connected() as (server, client):
        recorder = Recorder()
        informer = Informer(client, PODS, recorder, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            await client.create(PODS, pod("a"))
            await recorder.wait("ADDED", "default/a")
            rv_before = informer.resource_version
            # Slow the re-watch down so that writes land while no watch is open.
            server.add_latency(0.2, "GET", "/pods$", watch=True)
            assert server.drop_watches(abort=abort) == 1
            await asyncio.sleep(0.05)
            await client.create(PODS, pod("b"))
            await client.delete(PODS, "a", "default")
            await recorder.wait("DELETED", "default/a")
            await recorder.wait("ADDED", "default/b")
            server.clear_latency()
        assert pod_lists(server) == 1
        assert informer.stats.lists == 1 and informer.stats.relists == 0
        assert informer.stats.watches >= 2
        watches = [r for r in server.requests if r.watch]
        assert watches[1].query["resourceVersion"] == rv_before
        assert all(r.query["allowWatchBookmarks"] == "true" for r in watches)
        assert all("timeoutSeconds" in r.query for r in watches)


async def test_relists_after_410_and_delivers_the_difference() -> None:
    async with connected() as (server, client):
        await client.create(PODS, pod("stays"))
        await client.create(PODS, pod("goes"))
        recorder = Recorder()
        informer = Informer(client, PODS, recorder, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            recorder.clear()
            server.add_latency(0.2, "GET", "/pods$", watch=True)
            server.force_gone()
            server.drop_watches()
            await asyncio.sleep(0.05)
            await client.delete(PODS, "goes", "default")
            await client.patch(PODS, "stays", {"metadata": {"labels": {"v": "2"}}}, "default")
            await client.create(PODS, pod("new"))
            await eventually(lambda: informer.stats.relists == 1, what="a relist")
            await recorder.wait("ADDED", "default/new")
            server.clear_latency()
        assert informer.stats.gone == 1
        assert pod_lists(server) == 2
        assert sorted(recorder.events) == [
            ("ADDED", "default/new"),
            ("DELETED", "default/goes"),
            ("MODIFIED", "default/stays"),
        ]
        assert set(informer.store) == {"default/stays", "default/new"}


async def test_relists_when_the_history_was_compacted() -> None:
    async with connected(history=2) as (server, client):
        informer = Informer(client, PODS, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            server.add_latency(0.2, "GET", "/pods$", watch=True)
            server.drop_watches()
            for i in range(5):  # more writes than the server keeps
                await client.create(PODS, pod(f"p{i}"))
            await eventually(lambda: len(informer.store) == 5, what="five pods")
            server.clear_latency()
        assert informer.stats.gone == 1
        assert informer.stats.relists == 1


async def test_bookmarks_advance_the_resource_version() -> None:
    async with connected(bookmark_interval=0.05) as (server, client):
        await client.create(PODS, pod("a"))
        informer = Informer(client, PODS, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            pod_rv = informer.resource_version
            node = await client.create(NODES, {"metadata": {"name": "n1"}})  # another resource
            node_rv = node["metadata"]["resourceVersion"]
            await eventually(lambda: informer.resource_version == node_rv, what="a bookmark")
            assert informer.stats.bookmarks >= 1
            assert int(node_rv) > int(pod_rv)
            assert informer.stats.events == 0  # bookmarks are not object events
            server.drop_watches()
            await eventually(lambda: informer.stats.watches >= 2)
            await eventually(lambda: server.count("GET", "/pods$", watch=True) >= 2)
        last_watch = [r for r in server.requests if r.watch][-1]
        assert last_watch.query["resourceVersion"] == node_rv
        assert informer.stats.relists == 0


async def test_watch_timeout_rewatches_without_relist() -> None:
    async with connected(bookmark_interval=10.0) as (server, client):
        informer = Informer(client, PODS, timeout_seconds=1, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            await client.create(PODS, pod("a"))
            await eventually(lambda: informer.stats.watches >= 2, timeout=5, what="a re-watch")
            await client.create(PODS, pod("b"))
            await eventually(lambda: "default/b" in informer.store)
        assert informer.stats.lists == 1
        assert all(r.query["timeoutSeconds"] == "1" for r in server.requests if r.watch)


async def test_missing_crd_is_logged_once_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="phalanx.live.informer")
    async with connected(crds=()) as (server, client):
        informer = Informer(client, VOLCANO_PODGROUPS, backoff=fast_backoff())
        task = informer.start()
        assert await informer.wait_synced(5) is False
        await asyncio.wait_for(task, 5)  # the informer ends by itself
        assert informer.missing
        assert server.count("GET", "podgroups") == 1  # no retries, no watch
        assert not await client.served(VOLCANO_PODGROUPS)
        assert await client.served(PODS)
    missing = [r for r in caplog.records if "not served" in r.getMessage()]
    assert len(missing) == 1
    assert "podgroups.scheduling.volcano.sh/v1beta1" in missing[0].getMessage()


async def test_a_crd_installed_later_is_picked_up_when_rechecking() -> None:
    async with connected(crds=()) as (server, client):
        recorder = Recorder()
        informer = Informer(
            client, VOLCANO_QUEUES, recorder, backoff=fast_backoff(), recheck_missing=0.05
        )
        informer.start()
        assert await informer.wait_synced(5) is False
        server.register(QUEUE_INFO)
        await client.create(VOLCANO_QUEUES, {"metadata": {"name": "q1"}, "spec": {"weight": 1}})
        await eventually(lambda: "q1" in informer.store, what="queue listed")
        assert not informer.missing
        await client.create(VOLCANO_QUEUES, {"metadata": {"name": "q2"}, "spec": {"weight": 1}})
        await eventually(lambda: "q2" in informer.store, what="queue watched")
        assert recorder.events == [("ADDED", "q1"), ("ADDED", "q2")]
        await informer.stop()


async def test_crd_removed_while_watching_deletes_its_objects() -> None:
    async with connected() as (server, client):
        await client.create(VOLCANO_QUEUES, {"metadata": {"name": "q1"}, "spec": {"weight": 1}})
        recorder = Recorder()
        informer = Informer(client, VOLCANO_QUEUES, recorder, backoff=fast_backoff())
        task = informer.start()
        await informer.wait_synced(5)
        server.unregister(QUEUE_INFO)
        await asyncio.wait_for(task, 5)
        assert informer.missing
        assert recorder.events == [("ADDED", "q1"), ("DELETED", "q1")]
        assert informer.store == {}


async def test_selectors_and_namespace_scope() -> None:
    async with connected() as (server, client):
        recorder = Recorder()
        informer = Informer(
            client,
            PODS,
            recorder,
            namespace="team",
            label_selector="app=train",
            field_selector="spec.schedulerName=phalanx,spec.nodeName=",
            backoff=fast_backoff(),
        )
        await client.create(PODS, pod("mine", "team", schedulerName="phalanx"))
        await client.create(PODS, pod("default-sched", "team"))
        await client.create(PODS, pod("elsewhere", "other", schedulerName="phalanx"))
        unlabelled = pod("unlabelled", "team", schedulerName="phalanx")
        unlabelled["metadata"]["labels"] = {}  # type: ignore[index]
        await client.create(PODS, unlabelled)
        async with informer:
            await informer.wait_synced(5)
            assert set(informer.store) == {"team/mine"}
            await client.create(PODS, pod("later", "team", schedulerName="phalanx"))
            await recorder.wait("ADDED", "team/later")
            # Binding moves the pod out of spec.nodeName= : the watch says DELETED.
            await bind(client, "team", "mine", "node-1")
            await recorder.wait("DELETED", "team/mine")
            assert set(informer.store) == {"team/later"}
        list_request = next(
            r for r in server.requests if r.method == "GET" and r.path.endswith("/pods")
        )
        assert list_request.path == "/api/v1/namespaces/team/pods"
        assert list_request.query["fieldSelector"] == "spec.schedulerName=phalanx,spec.nodeName="


async def test_errors_back_off_and_recover() -> None:
    async with connected() as (server, client):
        server.fail("GET", "/pods$", 500, times=2, watch=False)
        server.fail("GET", "/pods$", 503, times=2, watch=True)
        informer = Informer(client, PODS, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            await client.create(PODS, pod("a"))
            await eventually(lambda: "default/a" in informer.store)
        assert informer.stats.errors == 4
        assert informer.stats.lists == 1  # watch failures re-watch, they do not relist


async def test_handler_errors_do_not_stop_the_informer(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    def handler(kind: str, obj: dict[str, object]) -> None:
        name = obj["metadata"]["name"]  # type: ignore[index]
        seen.append(name)
        if name == "bad":
            raise RuntimeError("boom")

    async with connected() as (_server, client):
        informer = Informer(client, PODS, handler, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            await client.create(PODS, pod("bad"))
            await client.create(PODS, pod("good"))
            await eventually(lambda: seen == ["bad", "good"])
    assert any("handler failed" in r.getMessage() for r in caplog.records)


async def test_paged_initial_list() -> None:
    async with connected() as (server, client):
        for i in range(7):
            await client.create(PODS, pod(f"p{i}"))
        informer = Informer(client, PODS, page_size=3, backoff=fast_backoff())
        async with informer:
            await informer.wait_synced(5)
            assert len(informer.store) == 7
        assert pod_lists(server) == 3


async def test_several_informers_share_one_client() -> None:
    async with FakeApiServer() as server:
        config = config_for_server(server.url)
        async with KubeClient(config, trust_env=False) as client:
            informers = [
                Informer(client, resource, backoff=fast_backoff())
                for resource in (PODS, NODES, PODGROUPS)
            ]
            for informer in informers:
                informer.start()
            synced = await asyncio.gather(*(i.wait_synced(5) for i in informers))
            assert synced == [True, True, False]  # no CRDs registered on this server
            for informer in informers:
                await informer.stop()
