"""The real-cluster end-to-end test (``tests/e2e/test_real_cluster.py``), run against the API
test server so that its code is exercised where no cluster is at hand.

Stand-ins replace what a real control plane adds: the PodGroup API is served once its
CustomResourceDefinition exists (and no longer after it is deleted); a ResourceQuota's status
repeats its spec; a Job gets its pods one at a time, named ``JOB-N``, labelled ``job-name``, as
many as the namespace's pod quota allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from apiserver import PODGROUPS_X, FakeApiServer, ResourceInfo
from apiserver.harness import fast_backoff
from test_live_serve import node

from phalanx.live import kubeconfig_config
from phalanx.live.manifests import podgroup_crd

CRDS = ResourceInfo(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    subresources=("status",),
)
JOBS = ResourceInfo("batch", "v1", "jobs", "Job", namespaced=True, subresources=("status",))
QUOTAS = ResourceInfo(
    "", "v1", "resourcequotas", "ResourceQuota", namespaced=True, subresources=("status",)
)
CRD_NAME = "podgroups.scheduling.x-k8s.io"


def load_e2e() -> ModuleType:
    """``tests/e2e/test_real_cluster.py`` under its own name (its folder is not on sys.path)."""
    path = Path(__file__).resolve().parents[1] / "e2e" / "test_real_cluster.py"
    spec = importlib.util.spec_from_file_location("phalanx_e2e_real_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


e2e = load_e2e()


def serve_crd(server: FakeApiServer) -> None:
    """What apiextensions does: serve the PodGroup API exactly while its CRD exists."""
    exists = server.get(CRDS.api_version, CRDS.plural, CRD_NAME) is not None
    served = server.store.lookup(*PODGROUPS_X.key) is not None
    if exists and not served:
        server.register(PODGROUPS_X)
    elif served and not exists:
        server.unregister(PODGROUPS_X)


def enforce_quotas(server: FakeApiServer) -> dict[str, int]:
    """What the quota controller does (status = spec); namespace → pods allowed."""
    allowed: dict[str, int] = {}
    for quota in server.objects(QUOTAS.api_version, QUOTAS.plural):
        hard = quota["spec"]["hard"]
        if (quota.get("status") or {}).get("hard") != hard:
            server.put(QUOTAS.api_version, QUOTAS.plural, {**quota, "status": {"hard": hard}})
        allowed[quota["metadata"]["namespace"]] = int(hard["pods"])
    return allowed


def run_jobs(server: FakeApiServer, allowed: dict[str, int]) -> None:
    """What the Job controller does, one pod per call: create the next missing pod."""
    for job in server.objects(JOBS.api_version, JOBS.plural):
        meta, spec = job["metadata"], job["spec"]
        namespace, name = meta["namespace"], meta["name"]
        pods = [p for p in server.objects("v1", "pods") if p["metadata"]["namespace"] == namespace]
        if len(pods) >= min(spec["parallelism"], allowed.get(namespace, spec["parallelism"])):
            continue
        template = spec["template"]
        labels = {**template["metadata"].get("labels", {}), "job-name": name}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{len(pods)}", "namespace": namespace, "labels": labels},
            "spec": copy.deepcopy(template["spec"]),
            "status": {"phase": "Pending"},
        }
        server.put("v1", "pods", pod)


async def control_plane(server: FakeApiServer) -> None:
    while True:
        serve_crd(server)
        run_jobs(server, enforce_quotas(server))
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def fake_cluster(tmp_path: Path, crd_installed: bool) -> AsyncIterator[FakeApiServer]:
    """The API test server with one node, the controller stand-ins, and a kubeconfig."""
    crds = (PODGROUPS_X,) if crd_installed else ()
    async with FakeApiServer(crds=(*crds, CRDS, JOBS, QUOTAS)) as server:
        if crd_installed:
            server.put(CRDS.api_version, CRDS.plural, podgroup_crd())
        server.put("v1", "nodes", node("kind-worker"))
        server.kubeconfig(tmp_path / "kubeconfig")
        controllers = asyncio.create_task(control_plane(server))
        try:
            yield server
        finally:
            controllers.cancel()


async def scenario(tmp_path: Path, **options: Any) -> Any:
    config = kubeconfig_config(tmp_path / "kubeconfig")
    return await e2e.run_scenario(
        config, period=0.05, interval=0.01, trust_env=False, backoff=fast_backoff(), **options
    )


@pytest.mark.parametrize("crd_installed", [False, True], ids=["crd-missing", "crd-present"])
async def test_the_real_cluster_scenario_against_the_api_test_server(
    tmp_path: Path, crd_installed: bool
) -> None:
    async with fake_cluster(tmp_path, crd_installed) as server:
        outcome = await scenario(tmp_path)
        e2e.check(outcome)
        assert set(outcome.nodes.values()) == {"kind-worker"}
        assert outcome.installed_crd is not crd_installed
        # Cleaned up: the namespace is gone, and the CRD only if the test installed it.
        assert server.get("v1", "namespaces", outcome.namespace) is None
        assert (server.get(CRDS.api_version, CRDS.plural, CRD_NAME) is not None) is crd_installed
        for pod in server.objects("v1", "pods"):
            assert server.count("POST", rf"/pods/{pod['metadata']['name']}/binding$") == 1


async def test_the_scenario_fails_a_scheduler_that_binds_pod_by_pod(tmp_path: Path) -> None:
    async with fake_cluster(tmp_path, crd_installed=True) as server:
        with pytest.raises(AssertionError, match=r"bound while the gang had 2 of 3 pods"):
            await scenario(tmp_path, policy="kube-default")
        assert server.objects("v1", "namespaces") == []
