"""End to end on a real cluster: a Job's pods bound as one gang by the live scheduler (issue 4).

Runs only when ``PHALANX_E2E_KUBECONFIG`` names a kubeconfig (e.g. a kind cluster's)::

    PHALANX_E2E_KUBECONFIG=~/.kube/config .venv/bin/python -m pytest tests/e2e -v

What it does (docs/e2e.md has the details): install the scheduler-plugins PodGroup CRD if the
cluster lacks it (and remove it afterwards); create a namespace ``phalanx-e2e-XXXXXXXX`` with a
ResourceQuota of 2 pods; run :class:`LiveScheduler` in this process (no leader election); apply
the seed example of ``phalanx manifests --example`` — a PodGroup of ``minMember: 3`` and a
``batch/v1`` Job of ``parallelism: 4`` with ``schedulerName: phalanx`` and tiny requests. The
quota lets the Job create only 2 pods: the scheduler must explain them (``PodScheduled=False``)
and bind neither. Then the quota is deleted, the Job controller creates the other two, and all
four must be bound within ``TIMEOUT`` seconds, each exactly once, the first binding cycle
binding at least ``minMember`` of them. The namespace is deleted at the end, pass or fail.
Nothing else may schedule ``schedulerName: phalanx`` pods meanwhile (do not run it next to an
installed ``phalanx serve``).

``tests/live/test_live_e2e_scenario.py`` runs :func:`run_scenario` against the API test
server, with stand-ins for the controllers, so this code runs on every ``make test``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from phalanx.framework.session import CycleResult
from phalanx.live import (
    NAMESPACES,
    PODGROUPS,
    PODS,
    ClusterConfig,
    KubeClient,
    LiveError,
    Resource,
    kubeconfig_config,
)
from phalanx.live.example import example_gang
from phalanx.live.loop import LiveScheduler
from phalanx.live.manifests import podgroup_crd

KUBECONFIG_VARIABLE = "PHALANX_E2E_KUBECONFIG"
#: Seconds each wait may take (pods appearing, being explained, being bound).
TIMEOUT = 120.0
MIN_MEMBER = 3
PARALLELISM = 4
QUOTA = 2
NAME = "train"
CRD_NAME = "podgroups.scheduling.x-k8s.io"

JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True, status_subresource=True)
QUOTAS = Resource(
    "", "v1", "resourcequotas", "ResourceQuota", namespaced=True, status_subresource=True
)
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    status_subresource=True,
)

Check = Callable[[], Awaitable[bool]]


class RecordingScheduler(LiveScheduler):
    """A :class:`LiveScheduler` that remembers the pods of one namespace each cycle bound."""

    def __init__(self, client: KubeClient, namespace: str, **options: Any) -> None:
        super().__init__(client, **options)
        self.namespace = namespace
        #: pod names, one list per cycle that bound any pod of the namespace.
        self.bind_cycles: list[list[str]] = []

    async def run_once(self, *args: Any, **kwargs: Any) -> CycleResult:
        result = await super().run_once(*args, **kwargs)
        names = sorted(p.spec.name for p, _ in result.binds if p.spec.namespace == self.namespace)
        if names:
            self.bind_cycles.append(names)
        return result


@dataclass
class Outcome:
    namespace: str
    installed_crd: bool = False
    #: pod name → spec.nodeName, as last read from the API server.
    nodes: dict[str, str | None] = field(default_factory=dict)
    #: the pods that existed while the quota held the gang below its minimum.
    held: dict[str, str | None] = field(default_factory=dict)
    #: pod names, per cycle that bound any (from :class:`RecordingScheduler`).
    bind_cycles: list[list[str]] = field(default_factory=list)


async def poll(what: str, check: Check, timeout: float, interval: float) -> None:
    """Await ``check()`` until it is truthy; AssertionError after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


async def ensure_podgroup_crd(client: KubeClient, interval: float) -> bool:
    """Install ``podgroups.scheduling.x-k8s.io`` unless served; True when this installed it."""
    if await client.served(PODGROUPS):
        return False
    await client.create(CRDS, podgroup_crd())

    async def served() -> bool:
        return await client.served(PODGROUPS)

    await poll("the PodGroup CRD to be served", served, TIMEOUT, interval)
    return True


def unschedulable(pod: dict[str, Any]) -> bool:
    """Whether the scheduler explained why ``pod`` waits (``PodScheduled=False``)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


class GangJob:
    """The seed example in one namespace, with the scheduler running, step by step."""

    def __init__(self, client: KubeClient, outcome: Outcome, interval: float) -> None:
        self.client = client
        self.outcome = outcome
        self.namespace = outcome.namespace
        self.interval = interval
        self.pods: list[dict[str, Any]] = []

    async def read(self) -> list[dict[str, Any]]:
        listed = await self.client.list(PODS, self.namespace, label_selector=f"job-name={NAME}")
        self.pods = listed.items
        self.outcome.nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in self.pods}
        return self.pods

    async def until(self, what: str, check: Check) -> None:
        try:
            await poll(what, check, TIMEOUT, self.interval)
        except AssertionError as exc:
            explained = {p["metadata"]["name"]: unschedulable(p) for p in self.pods}
            raise AssertionError(
                f"{exc}; pods → node: {self.outcome.nodes}; explained: {explained}"
            ) from None

    async def quota(self) -> None:
        """A ResourceQuota of ``QUOTA`` pods, enforced (its status computed)."""
        meta = {"name": "pods", "namespace": self.namespace}
        spec = {"hard": {"pods": str(QUOTA)}}
        quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": spec}
        await self.client.create(QUOTAS, quota)

        async def enforced() -> bool:
            current = await self.client.get(QUOTAS, "pods", self.namespace)
            return "pods" in ((current.get("status") or {}).get("hard") or {})

        await self.until("the quota to be enforced", enforced)

    async def held_below_minimum(self) -> None:
        """The quota's ``QUOTA`` pods exist and are explained; none may be bound."""

        async def explained() -> bool:
            pods = await self.read()
            bound = [name for name, node in self.outcome.nodes.items() if node]
            assert not bound, f"{bound} bound while the gang had {len(pods)} of {MIN_MEMBER} pods"
            return len(pods) == QUOTA and all(unschedulable(p) for p in pods)

        await self.until(f"{QUOTA} pods held and explained", explained)
        self.outcome.held = dict(self.outcome.nodes)

    async def all_bound(self) -> None:
        async def bound() -> bool:
            await self.read()
            return len(self.pods) >= PARALLELISM and all(self.outcome.nodes.values())

        await self.until(f"{PARALLELISM} bound pods", bound)


async def run_gang_job(
    client: KubeClient,
    outcome: Outcome,
    gang: list[dict[str, Any]],
    *,
    period: float,
    interval: float,
    **options: Any,
) -> None:
    """Quota, scheduler, PodGroup and Job; the gang held, then the quota gone, then bound."""
    steps = GangJob(client, outcome, interval)
    await steps.quota()
    scheduler = RecordingScheduler(client, outcome.namespace, **options)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.serve(stop, period=period))

    async def synced() -> bool:
        if task.done():
            task.result()  # serve ended early: raise its error
        return all(i.synced.is_set() for i in scheduler.informers.values())

    try:
        await steps.until("the scheduler's informers to sync", synced)
        group, job = gang
        await client.create(PODGROUPS, group)
        await client.create(JOBS, job)
        await steps.held_below_minimum()
        await client.delete(QUOTAS, "pods", outcome.namespace)
        await steps.all_bound()
    finally:
        stop.set()
        await asyncio.wait_for(task, 30.0)
        outcome.bind_cycles = scheduler.bind_cycles


async def run_scenario(
    config: ClusterConfig,
    *,
    period: float = 0.5,
    interval: float = 0.5,
    trust_env: bool = True,
    **options: Any,
) -> Outcome:
    """The whole test on the cluster of ``config``, cleanup included; ``options`` go to
    :class:`LiveScheduler`."""
    async with KubeClient(config, timeout=30.0, trust_env=trust_env) as client:
        outcome = Outcome(namespace=f"phalanx-e2e-{uuid.uuid4().hex[:8]}")
        outcome.installed_crd = await ensure_podgroup_crd(client, interval)
        namespace, *gang = example_gang(outcome.namespace, name=NAME)
        try:
            await client.create(NAMESPACES, namespace)
            try:
                await run_gang_job(
                    client, outcome, gang, period=period, interval=interval, **options
                )
            finally:
                with contextlib.suppress(LiveError):
                    await client.delete(NAMESPACES, outcome.namespace)
        finally:
            if outcome.installed_crd:
                with contextlib.suppress(LiveError):
                    await client.delete(CRDS, CRD_NAME)
        return outcome


def check(outcome: Outcome) -> None:
    """Held whole, then all bound, each once; the first binding cycle bound ``minMember``+."""
    assert len(outcome.held) == QUOTA and not any(outcome.held.values()), outcome.held
    assert len(outcome.nodes) == PARALLELISM and all(outcome.nodes.values()), outcome.nodes
    bound = [name for names in outcome.bind_cycles for name in names]
    assert sorted(bound) == sorted(outcome.nodes), outcome.bind_cycles  # each pod once
    first = outcome.bind_cycles[0]
    assert len(first) >= MIN_MEMBER, f"a cycle bound {first} before the gang could run"


@pytest.mark.skipif(
    not os.environ.get(KUBECONFIG_VARIABLE),
    reason=f"needs a real cluster: set {KUBECONFIG_VARIABLE} to a kubeconfig (e.g. kind's)",
)
def test_a_job_gang_binds_whole_on_a_real_cluster() -> None:
    path = Path(os.environ[KUBECONFIG_VARIABLE]).expanduser()
    check(asyncio.run(run_scenario(kubeconfig_config(path))))
