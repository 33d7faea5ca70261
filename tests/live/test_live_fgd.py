"""``phalanx serve`` with ``scoring: {fgd: 1}`` against the API test server.

The cluster is openb-like: two 8-GPU nodes labelled with their GPU model, pods already bound
with ``nodeName`` leaving node-a one whole free GPU and node-b one whole free GPU plus half a
GPU on a shared device. A pending half-GPU pod then goes where FGD's expected fragmentation
grows least — node-b's shared device, keeping both whole GPUs for the whole-GPU pods that
dominate the cluster's pod shapes — while binpack (the default) stacks it on the fuller
node-a and breaks its last whole GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from apiserver import FakeApiServer
from apiserver.harness import connected, eventually
from test_live_ops import FAST, runner, running
from test_live_serve import bound_to

from phalanx.cli.serve import ServeRunner
from phalanx.live.settings import ServeSettings, load_settings
from phalanx.plugins.fgd import FGD
from phalanx.policies import Scorer

NS = "team"
MODEL = "alibabacloud.com/gpu-card-model"


def node(name: str, model: str) -> dict[str, Any]:
    allocatable = {"cpu": "96", "memory": "384Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {MODEL: model}},
        "spec": {},
        "status": {"allocatable": allocatable},
    }


def pod(name: str, gpu: str, node_name: str | None = None) -> dict[str, Any]:
    requests = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": gpu}
    spec: dict[str, Any] = {
        "schedulerName": "phalanx",
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def cluster(server: FakeApiServer) -> None:
    server.put("v1", "nodes", node("node-a", "V100M16"))
    server.put("v1", "nodes", node("node-b", "V100M32"))
    for i in range(7):
        server.put("v1", "pods", pod(f"whole-a-{i}", "1", "node-a"))
    for i in range(6):
        server.put("v1", "pods", pod(f"whole-b-{i}", "1", "node-b"))
    server.put("v1", "pods", pod("half-b", "500m", "node-b"))
    server.put("v1", "pods", pod("half", "500m"))


@contextlib.asynccontextmanager
async def scheduled(settings: ServeSettings) -> AsyncIterator[tuple[FakeApiServer, ServeRunner]]:
    """The cluster, served with ``settings`` until the half-GPU pod is bound."""
    async with connected() as (server, _client):
        cluster(server)
        r = runner(server, "replica-a", settings)
        async with running(r):
            await eventually(lambda: bool(bound_to(server, "half")), what="the half-GPU pod")
            yield server, r


async def placed_with(settings: ServeSettings) -> str | None:
    async with scheduled(settings) as (server, _):
        return bound_to(server, "half")


async def test_serve_places_a_gpu_share_with_fgd_from_the_settings_file(tmp_path: Path) -> None:
    path = tmp_path / "phalanx.yaml"
    path.write_text("scoring: {fgd: 1}\n")
    loaded = load_settings(path)
    assert loaded.scoring == (Scorer("fgd", 1),)
    settings = dataclasses.replace(FAST, scoring=loaded.scoring)
    assert await placed_with(settings) == "node-b"  # FGD: onto the shared device
    assert await placed_with(FAST) == "node-a"  # binpack: the fuller node


async def test_fgd_learns_the_target_workload_from_the_cluster_pods() -> None:
    settings = dataclasses.replace(FAST, scoring=(Scorer("fgd", 1),))
    async with scheduled(settings) as (_, r):
        assert r.scheduler is not None
        (fgd,) = [p for p in r.scheduler.scheduler.plugins if isinstance(p, FGD)]
        assert fgd.fragmentation is not None
        target = fgd.fragmentation.workload
        # 13 whole-GPU pods and 2 half-GPU pods (the pending one included), 4 CPUs each
        shapes = {
            (t.gpu_milli, t.gpu_count, t.cpu): c
            for t, c in zip(target.types, target.counts, strict=True)
        }
        assert shapes == {(1000, 1, 4000): 13, (500, 1, 4000): 2}
