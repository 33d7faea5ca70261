"""Live scheduler speed: ``LiveScheduler`` against the API test server, through the real client.

The fake API server of the live tests (``tests/live/apiserver``) runs on 127.0.0.1 in this
process and event loop; the scheduler talks to it over HTTP with :class:`KubeClient`, its
informers watch it, and binds are ``POST pods/NAME/binding``. Server and scheduler share one
core, so the figures are a lower bound on the scheduler alone. ``tests/live`` is put on
``sys.path`` here (pytest does that for the tests only). Prints one JSON object per case.

Case ``gang``: one scheduler-plugins PodGroup (minMember 256) of 256 one-GPU pods on 1,000
nodes of 8 GPUs; seconds from "all pods exist and the informers have them" to "all 256 bound
on the server" (one ``run_once``, status writes included). Target < 2 s.

Case ``throughput``: 2,000 one-GPU pods in gangs of 8 on the same 1,000 nodes, arriving in
batches (``--batch`` pods every ``--interval`` s, stored on the server, which emits the watch
events) while ``LiveScheduler.serve`` runs; pods bound per second from the first arrival to the
last pod bound on the server. Target >= 300 pods/s.

    python benchmarks/live.py [--case gang|throughput|all] [--nodes 1000] [--no-status]

``--no-status`` turns off the Scheduled Events and PodGroup status writes (``write_status``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import sys
import time
from pathlib import Path
from typing import Any

from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import PODS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "live"))
# tests/live is not in mypy's files (src/phalanx, benchmarks): the test server is untyped here.
from apiserver.harness import connected, fast_backoff  # type: ignore[import-not-found]

NS = "bench"
GANG_TARGET_SECONDS = 2.0
THROUGHPUT_TARGET = 300.0


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": "64",
                "memory": "512Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            }
        },
    }


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member},
    }


def pod(name: str, group: str) -> dict[str, Any]:
    resources = {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"scheduling.x-k8s.io/pod-group": group},
        },
        "spec": {
            "schedulerName": "phalanx",
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
        "status": {"phase": "Pending"},
    }


class Bound:
    """Counts pods bound on the server; each poll looks only at those not seen bound yet
    (the poll runs in the measured event loop, so it must stay cheap)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.unbound: set[str] = set()
        self.count = 0

    def add(self, names: list[str]) -> None:
        self.unbound.update(names)

    def poll(self) -> int:
        done = set()
        for name in self.unbound:
            stored = self.server.get("v1", "pods", name, NS)
            if stored is not None and (stored.get("spec") or {}).get("nodeName"):
                done.add(name)
        self.unbound -= done
        self.count += len(done)
        return self.count


async def wait_for(predicate: Any, timeout: float, what: str, poll: float = 0.002) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(poll)


def report(
    case: str,
    nodes: int,
    pods: int,
    seconds: float,
    target: str,
    ok: bool,
    scheduler: LiveScheduler,
) -> None:
    print(
        json.dumps(
            {
                "case": f"Live/{case}",
                "nodes": nodes,
                "pods": pods,
                "seconds": round(seconds, 3),
                "pods_per_second": round(pods / seconds, 1),
                "target": target,
                "passed": ok,
                "cycles": scheduler.cycles,
                "write_status": scheduler.status is not None,
                "python": platform.python_version(),
            }
        ),
        flush=True,
    )


async def gang_case(nodes: int, size: int, write_status: bool) -> None:
    async with connected(history=100_000) as (server, client):
        for i in range(nodes):
            server.put("v1", "nodes", node(f"node-{i:04d}"))
        live = LiveScheduler(client, backoff=fast_backoff(), write_status=write_status)
        async with live as scheduler:
            server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", podgroup("big", size))
            names = [f"big-{i:03d}" for i in range(size)]
            for name in names:
                server.put("v1", "pods", pod(name, "big"))
            store = scheduler.informers[PODS].store
            await wait_for(lambda: all(f"{NS}/{n}" in store for n in names), 30.0, "informer")
            started = time.perf_counter()
            bound = Bound(server)
            bound.add(names)
            result = await scheduler.run_once()
            await wait_for(lambda: bound.poll() == size, 30.0, "binds")
            seconds = time.perf_counter() - started
            assert len(result.binds) == size, len(result.binds)
    ok = seconds < GANG_TARGET_SECONDS
    report("gang", nodes, size, seconds, f"< {GANG_TARGET_SECONDS} s", ok, scheduler)


async def throughput_case(
    nodes: int,
    total: int,
    gang: int,
    batch: int,
    interval: float,
    period: float,
    write_status: bool,
) -> None:
    async with connected(history=100_000) as (server, client):
        for i in range(nodes):
            server.put("v1", "nodes", node(f"node-{i:04d}"))
        scheduler = LiveScheduler(client, backoff=fast_backoff(), write_status=write_status)
        await scheduler.start()  # informers synced before timing; serve() finds them running
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.serve(stop, period=period))
        bound = Bound(server)
        started = time.perf_counter()
        for first in range(0, total, batch):
            for g in range(first // gang, min(total, first + batch) // gang):
                server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", podgroup(f"g{g}", gang))
                names = [f"g{g}-{m}" for m in range(gang)]
                for name in names:
                    server.put("v1", "pods", pod(name, f"g{g}"))
                bound.add(names)
            await asyncio.sleep(interval)
        await wait_for(lambda: bound.poll() == total, 120.0, "binds", poll=0.02)
        seconds = time.perf_counter() - started
        stop.set()
        await asyncio.wait_for(task, 10.0)
    rate = total / seconds
    target = f">= {THROUGHPUT_TARGET:g} pods/s"
    report("throughput", nodes, total, seconds, target, rate >= THROUGHPUT_TARGET, scheduler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("gang", "throughput", "all"), default="all")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gang-size", type=int, default=256)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--gang", type=int, default=8, help="throughput: pods per gang")
    parser.add_argument("--batch", type=int, default=200, help="throughput: pods per arrival")
    parser.add_argument("--interval", type=float, default=0.05, help="throughput: s per batch")
    parser.add_argument("--period", type=float, default=1.0, help="serve(): cycle period")
    parser.add_argument(
        "--no-status",
        action="store_true",
        help="write_status=False: no Events or PodGroup status",
    )
    args = parser.parse_args()
    status = not args.no_status
    logging.basicConfig(level=logging.WARNING)
    if args.case in ("gang", "all"):
        asyncio.run(gang_case(args.nodes, args.gang_size, status))
    if args.case in ("throughput", "all"):
        asyncio.run(
            throughput_case(
                args.nodes, args.pods, args.gang, args.batch, args.interval, args.period, status
            )
        )


if __name__ == "__main__":
    main()
