"""Configuration loading, errors, lists and watches of the client, and the dict hand-off to
phalanx's converters."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from pathlib import Path

import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected
from lightkube.config.client_adapter import BearerTokenFileAuth
from lightkube.config.kubeconfig import User

from phalanx.k8s import PriorityTable, gang_from_dict, node_from_dict, pod_from_dict
from phalanx.k8s.priority import priority_class_from_dict
from phalanx.live import (
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    ApiError,
    ConfigError,
    KubeClient,
    TransportError,
    config_for_server,
    label_selector,
    load_config,
)


async def test_kubeconfig_with_token(tmp_path: Path) -> None:
    async with FakeApiServer(token="s3cret") as server:
        path = server.kubeconfig(tmp_path / "config", token="s3cret", namespace="team")
        config = load_config(path)
        assert config.server == server.url
        assert config.namespace == "team"
        async with KubeClient(config, trust_env=False) as client:
            assert (await client.list(NODES)).items == []
        assert server.requests[-1].authorization == "Bearer s3cret"
        wrong = server.kubeconfig(tmp_path / "wrong", token="nope")
        async with KubeClient(load_config(wrong), trust_env=False) as client:
            with pytest.raises(ApiError) as caught:
                await client.list(NODES)
            assert caught.value.status == 401


async def test_a_rotated_token_file_is_read_again_after_a_401(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    read = BearerTokenFileAuth._read_token
    monkeypatch.setattr(BearerTokenFileAuth, "_read_token", lambda a: reads.append("") or read(a))
    token = tmp_path / "token"
    token.write_text("first")
    async with FakeApiServer(token="first") as server:
        base = load_config(server.kubeconfig(tmp_path / "config"))
        user = User(token_file=str(token))
        config = dataclasses.replace(base, single=base.single._replace(user=user))
        async with KubeClient(config, trust_env=False) as client:
            await client.list(NODES)
            token.write_text("second")  # the kubelet rotated it
            server.token = "second"
            assert (await client.list(NODES)).items == []  # a 401, the file again, once more
            assert [r.authorization for r in list(server.requests)[-2:]] == [
                "Bearer first",
                "Bearer second",
            ]
            server.token = "third"  # the file has no newer token: the 401 is the answer
            with pytest.raises(ApiError) as caught:
                await client.list(NODES)
            assert caught.value.status == 401
            token.write_text("fourth")
            server.token = "fourth"
            reads.clear()
            await asyncio.gather(*(client.list(NODES) for _ in range(5)))  # five 401s at once
            assert len(reads) == 1  # one renewal for all of them
            token.write_text("fifth")
            server.token = "fifth"
            with pytest.raises(ApiError):  # a watch is not sent again, but renews...
                async for _ in client.watch(PODS, timeout_seconds=1):
                    pass
            async for _ in client.watch(PODS, timeout_seconds=1):  # ...for the next one
                pass
            assert list(server.requests)[-1].authorization == "Bearer fifth"


def test_in_cluster_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("tok")
    (tmp_path / "namespace").write_text("phalanx-system")
    (tmp_path / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = load_config(service_account_dir=tmp_path)
    assert config.source == "in-cluster"
    assert config.server == "https://10.0.0.1:443"
    assert config.namespace == "phalanx-system"
    assert config.single.user is not None and config.single.user.token_file is not None


def test_in_cluster_without_service_account(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError, match="in-cluster"):
        load_config(service_account_dir=tmp_path / "absent", environ=env)


def test_kubeconfig_env_list_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    with pytest.raises(ConfigError, match="no cluster configuration"):
        load_config(environ={})
    config_file = tmp_path / "kc"
    config_file.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: x}}]\n"
    )
    env = {"KUBECONFIG": f"{tmp_path / 'missing'}:{config_file}"}
    config = load_config(environ=env)
    assert config.server == "http://127.0.0.1:1"
    assert config.single.user is not None  # a context without a user still works
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent")
    with pytest.raises(ConfigError, match="nope"):
        load_config(config_file, context="nope")


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_unreachable_server_is_a_transport_error() -> None:
    config = config_for_server(f"http://127.0.0.1:{_free_port()}")
    async with KubeClient(config, timeout=2, trust_env=False) as client:
        with pytest.raises(TransportError, match="GET /api/v1/nodes"):
            await client.list(NODES)
        with pytest.raises(TransportError):
            async for _ in client.watch(PODS):
                pass


async def test_errors_carry_status_reason_and_message() -> None:
    async with connected(crds=()) as (server, client):
        with pytest.raises(ApiError) as missing:
            await client.get(PODS, "nope", "default")
        assert missing.value.status == 404 and missing.value.reason == "NotFound"
        assert 'pods "nope" not found' in missing.value.message
        with pytest.raises(ApiError) as not_served:  # plain-text 404 of an unknown group
            await client.list(VOLCANO_PODGROUPS)
        assert not_served.value.not_found and "404 page not found" in str(not_served.value)
        with pytest.raises(ApiError) as bad:
            await client.list(PODS, field_selector="spec.nope=x")
        assert bad.value.status == 400
        server.fail("GET", "/nodes$", 503, message="etcd is sad")
        with pytest.raises(ApiError, match="etcd is sad") as unavailable:
            await client.list(NODES)
        assert unavailable.value.status == 503


async def test_watch_raises_410_from_an_error_event() -> None:
    async with connected() as (server, client):
        await client.create(PODS, {"metadata": {"name": "a"}, "spec": {}})
        server.compact()
        with pytest.raises(ApiError) as caught:
            async for _ in client.watch(PODS, resource_version="1000"):
                pass
        assert caught.value.gone
        assert "too old resource version" in caught.value.message


async def test_watch_stream_ends_at_timeout_with_a_bookmark() -> None:
    async with connected(bookmark_interval=30) as (_server, client):
        await client.create(PODS, {"metadata": {"name": "a"}, "spec": {}})
        seen = [
            (event.type, event.resource_version)
            async for event in client.watch(PODS, resource_version="1000", timeout_seconds=1)
        ]
        assert seen == [("ADDED", "1001"), ("BOOKMARK", "1001")]


async def test_bookmarks_on_demand() -> None:
    async with connected(bookmark_interval=30) as (server, client):
        await client.create(PODS, {"metadata": {"name": "a"}, "spec": {}})
        seen = []
        async for event in client.watch(PODS, timeout_seconds=5):
            seen.append(event.type)
            if event.type == "ADDED":
                await client.create(NODES, {"metadata": {"name": "n"}})
                assert server.send_bookmarks() == 1
            else:
                assert event.resource_version == "1002"  # the node's revision
                break
        assert seen == ["ADDED", "BOOKMARK"]


async def test_list_pages_and_survives_an_expired_continue_token() -> None:
    async with connected() as (server, client):
        for i in range(5):
            await client.create(PODS, {"metadata": {"name": f"p{i}"}, "spec": {}})
        listed = await client.list(PODS, page_size=2)
        assert [p["metadata"]["name"] for p in listed.items] == [f"p{i}" for i in range(5)]
        assert listed.resource_version == "1005"
        assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in listed.items)
        first = len(server.requests)
        original = server.store.list

        def list_then_write(*args: object, **kwargs: object) -> object:
            result = original(*args, **kwargs)  # type: ignore[arg-type]
            server.put("v1", "nodes", {"metadata": {"name": "churn"}})
            server.compact()  # the first page's revision is gone: its continue token expires
            return result

        server.store.list = list_then_write  # type: ignore[method-assign]
        again = await client.list(PODS, page_size=2)
        assert len(again.items) == 5
        requests = list(server.requests)[first:]
        assert [("continue" in r.query, "limit" in r.query) for r in requests] == [
            (False, True),
            (True, True),
            (False, False),
        ]


async def test_label_selector_helper() -> None:
    assert label_selector({"a": "b", "scheduling.x-k8s.io/pod-group": "g"}) == (
        "a=b,scheduling.x-k8s.io/pod-group=g"
    )
    async with connected() as (_server, client):
        for name, labels in (("x", {"a": "b"}), ("y", {"a": "c"})):
            await client.create(PODS, {"metadata": {"name": name, "labels": labels}, "spec": {}})
        listed = await client.list(PODS, label_selector=label_selector({"a": "b"}))
        assert [p["metadata"]["name"] for p in listed.items] == ["x"]


async def test_listed_dicts_feed_the_manifest_converters() -> None:
    """The live path hands the same dicts to phalanx.k8s as the simulator does."""
    async with connected() as (server, client):
        await client.create(
            PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000, "description": "x"}
        )
        await client.create(
            NODES,
            {
                "metadata": {"name": "gpu-1", "labels": {"zone": "a"}},
                "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}},
            },
        )
        await client.create(
            PODGROUPS,
            {"metadata": {"name": "train", "namespace": "ml"}, "spec": {"minMember": 2}},
        )
        for i in range(2):
            await client.create(
                PODS,
                {
                    "metadata": {
                        "name": f"train-{i}",
                        "namespace": "ml",
                        "labels": {"scheduling.x-k8s.io/pod-group": "train"},
                    },
                    "spec": {
                        "schedulerName": "phalanx",
                        "priorityClassName": "high",
                        "containers": [
                            {
                                "name": "main",
                                "image": "trainer",
                                "resources": {"limits": {"nvidia.com/gpu": "4"}},
                            }
                        ],
                    },
                },
            )
        classes = (await client.list(PRIORITY_CLASSES)).items
        table = PriorityTable(priority_class_from_dict(c) for c in classes)
        nodes = [node_from_dict(n) for n in (await client.list(NODES)).items]
        pods = [pod_from_dict(p, table) for p in (await client.list(PODS)).items]
        gangs = [gang_from_dict(g, table) for g in (await client.list(PODGROUPS)).items]
        assert nodes[0].name == "gpu-1" and nodes[0].allocatable["nvidia.com/gpu"] == 8000
        assert [p.priority for p in pods] == [1000, 1000]  # admission set spec.priority
        assert gangs[0].min_member == 2 and gangs[0].api == "scheduling.x-k8s.io"
        assert server.count("GET", "priorityclasses") == 1
