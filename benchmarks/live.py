"""Live scheduler speed: ``LiveScheduler`` against the API test server, through the real client.

The fake API server of the live tests (``tests/live/apiserver``) listens on 127.0.0.1; the
scheduler talks to it over HTTP with :class:`KubeClient`, its informers watch it, and binds are
``POST pods/NAME/binding``. By default the server runs in **a child process** (its own core, as
a real API server is its own process): the figures then charge the scheduler for its own work
and for the HTTP it does, not for the server's. ``--server inprocess`` runs the server in the
scheduler's process and event loop instead (one core for both: a lower bound). The objects are
stored straight on the server (``put``, which emits the watch events), as if another client had
created them; polling for "bound" also runs on the server's side. ``tests/live`` is put on
``sys.path`` here (pytest does that for the tests only). Prints one JSON object per case.

Case ``gang``: one scheduler-plugins PodGroup (minMember 256) of 256 one-GPU pods on 1,000
nodes of 8 GPUs; seconds from "all pods exist and the informers have them" to "all 256 bound
on the server" (one ``run_once``, status writes and Events included). Target < 2 s.

Case ``throughput``: 2,000 one-GPU pods in gangs of 8 on the same 1,000 nodes, arriving in
batches (``--batch`` pods every ``--interval`` s) while ``LiveScheduler.serve`` runs; pods bound
per second from the first arrival to the last pod bound on the server. Target >= 300 pods/s.

Case ``scale`` (issue 8's "live at scale"): 5,000 nodes (``--scale-nodes``) with 30,000 pods
(``--bound``) already bound by another scheduler, the state built once at start-up:

- ``Live/scale-idle-cycle``: scheduler CPU (``time.process_time``) of one ``run_once`` where
  nothing changed (median of ``--idle-cycles``). Target < 10 ms.
- ``Live/scale-idle-serve``: scheduler CPU seconds per minute of ``serve()`` (period 1 s) while
  nothing happens (``--idle-seconds`` of it, scaled to a minute). Recorded, no target.
- ``Live/scale-gang``: a 64-pod PodGroup created while ``serve()`` runs; seconds from its last
  pod stored on the server to all 64 bound there. Target < 1 s.
- ``Live/scale-throughput``: as ``throughput`` (2,000 pods in gangs of 8, status writes on) on
  that cluster. Target >= 500 pods/s. Also reported: the scheduler's CPU seconds (up to the
  last pod bound and the last Event written) and per pod, the server process's CPU seconds
  (it also creates the pods and answers the benchmark's polls), how long each process was
  runnable but waiting for a CPU over the same span (Linux ``schedstat``: what a loaded machine
  took from it), and how long the arrivals took.

    python benchmarks/live.py [--case gang|throughput|scale|all] [--server process|inprocess]
                              [--nodes 1000] [--no-status]

``--no-status`` turns off the Scheduled Events and PodGroup status writes (``write_status``);
``--fold-above N`` sets how many queued Events make the scheduler fold a gang's per-pod
``Scheduled`` Events into its PodGroup's (``events_folded`` in the output). ``--pin`` puts the
scheduler on CPU 0 and the server on CPU 1 (Linux): a core each, as far as other processes of
the machine let them.
``--profile FILE`` writes a cProfile (CPU time) of ``Live/scale-throughput``. The JSON objects
are also saved to ``benchmarks/results/live.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import multiprocessing
import os
import platform
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from phalanx.live import KubeClient, config_for_server
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import PODS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "live"))
# tests/live is not in mypy's files (src/phalanx, benchmarks): the test server is untyped here.
from apiserver import ALL_CRDS, FakeApiServer  # type: ignore[import-not-found]
from apiserver.harness import fast_backoff  # type: ignore[import-not-found]

NS = "bench"
GANG_TARGET_SECONDS = 2.0
THROUGHPUT_TARGET = 300.0
HISTORY = 100_000
#: Every case's JSON object of this run, saved to ``results/live.json`` (git-ignored).
RESULTS = Path(__file__).resolve().parent / "results" / "live.json"
REPORTED: list[dict[str, Any]] = []


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {"allocatable": allocatable},
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


def running(name: str, node_name: str) -> dict[str, Any]:
    obj = pod(name, "")
    obj["metadata"]["labels"] = {}
    obj["spec"]["schedulerName"] = "default-scheduler"
    obj["spec"]["nodeName"] = node_name
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    obj["status"] = {"phase": "Running"}
    return obj


# -- what the benchmark asks of the server (run where the server runs) ------------------------
#: ``time.perf_counter()`` (one clock for every process) when each batch of arrivals was made.
ARRIVED: list[float] = []


def schedule_arrivals(server: Any, total: int, gang: int, batch: int, every: float) -> list[str]:
    """Batches of gangs ``g0``, ``g1``... made on the server's own clock (its event loop), so
    the arrivals are not paced by round trips to the benchmark; the pods' names."""
    loop = asyncio.get_running_loop()
    ARRIVED.clear()
    names: list[str] = []

    def make(low: int, count: int) -> None:
        for g in range(low, low + count):
            make_gang(server, f"g{g}", gang)
        ARRIVED.append(time.perf_counter())

    for i, first in enumerate(range(0, total, batch)):
        low, high = first // gang, min(total, first + batch) // gang
        loop.call_later(i * every, make, low, high - low)
        names += [f"g{g}-{m}" for g in range(low, high) for m in range(gang)]
    return names


def make_gang(server: Any, name: str, size: int) -> list[str]:
    """A PodGroup ``name`` and its ``size`` pods on ``server``; the pods' names."""
    server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", podgroup(name, size))
    names = [f"{name}-{m}" for m in range(size)]
    for member in names:
        server.put("v1", "pods", pod(member, name))
    return names


def handle(server: Any, command: tuple[Any, ...]) -> Any:
    """``nodes N`` · ``gang NAME SIZE`` (a PodGroup and its pods; their names) ·
    ``bound NAMES`` (those of NAMES bound now) · ``cpu`` (the server's CPU seconds) ·
    ``arrive TOTAL GANG BATCH EVERY`` (:func:`schedule_arrivals`) · ``arrived``."""
    verb = command[0]
    if verb == "nodes":
        for i in range(command[1]):
            server.put("v1", "nodes", node(f"node-{i:04d}"))
        return None
    if verb == "gang":
        return make_gang(server, command[1], command[2])
    if verb == "arrive":  # ``total`` pods in gangs, ``batch`` every ``every`` s: all names
        return schedule_arrivals(server, *command[1:])
    if verb == "arrived":  # when the last batch was created (``time.perf_counter``)
        return ARRIVED[-1] if ARRIVED else None
    if verb == "running":  # pods of another scheduler, already bound, ``per`` per node
        nodes, per = command[1], command[2]
        for i in range(nodes * per):
            server.put("v1", "pods", running(f"run-{i}", f"node-{i // per:04d}"))
        return None
    if verb == "cpu":  # the server process's CPU seconds so far
        return time.process_time()
    if verb == "bound":
        out = []
        for name in command[1]:
            stored = server.get("v1", "pods", name, NS)
            if stored is not None and (stored.get("spec") or {}).get("nodeName"):
                out.append(name)
        return out
    raise ValueError(f"unknown command {verb!r}")


class LocalServer:
    """The server in this process and event loop."""

    def __init__(self) -> None:
        self.server = FakeApiServer(crds=ALL_CRDS, history=HISTORY)
        self.url = ""

    async def __aenter__(self) -> LocalServer:
        await self.server.start()
        self.url = self.server.url
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.stop()

    async def call(self, *command: Any) -> Any:
        return handle(self.server, command)


def _child(conn: Connection) -> None:
    async def main() -> None:
        async with FakeApiServer(crds=ALL_CRDS, history=HISTORY) as server:
            conn.send(server.url)
            loop = asyncio.get_running_loop()
            while True:
                command = await loop.run_in_executor(None, conn.recv)
                if command == ("stop",):
                    conn.send(None)
                    return
                conn.send(handle(server, command))

    asyncio.run(main())


class ChildServer:
    """The server in a child process; commands travel over a pipe, one at a time."""

    def __init__(self) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("fork").Process(target=_child, args=(child,))
        self.lock = asyncio.Lock()
        self.url = ""

    def _call(self, command: tuple[Any, ...]) -> Any:
        self.conn.send(command)
        return self.conn.recv()

    async def call(self, *command: Any) -> Any:
        async with self.lock:
            return await asyncio.get_running_loop().run_in_executor(None, self._call, command)

    async def __aenter__(self) -> ChildServer:
        self.process.start()
        if PIN[0] and self.process.pid is not None:
            os.sched_setaffinity(self.process.pid, {1})  # the scheduler keeps CPU 0
        self.url = await asyncio.get_running_loop().run_in_executor(None, self.conn.recv)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.call("stop")
        self.process.join(5)


def waiting_for_cpu(pid: int) -> float:
    """Seconds process ``pid`` has spent runnable but waiting for a CPU (Linux schedstat; 0.0
    elsewhere): on a loaded machine, the wall time a process lost to others."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def server_for(kind: str) -> LocalServer | ChildServer:
    return ChildServer() if kind == "process" else LocalServer()


class Bound:
    """Counts pods bound on the server, asking only about those not seen bound yet."""

    def __init__(self, server: LocalServer | ChildServer) -> None:
        self.server = server
        self.unbound: set[str] = set()
        self.count = 0

    def add(self, names: list[str]) -> None:
        self.unbound.update(names)

    async def poll(self) -> int:
        done = await self.server.call("bound", sorted(self.unbound))
        self.unbound.difference_update(done)
        self.count += len(done)
        return self.count


async def arrive(
    server: LocalServer | ChildServer, bound: Bound, total: int, gang: int, batch: int, every: float
) -> None:
    """``total`` pods in gangs of ``gang``, ``batch`` pods every ``every`` seconds, made by the
    server on its own clock (a call per gang or per batch from here costs a pipe round trip,
    tens of ms under load, and then sets the pace instead of the scheduler)."""
    bound.add(await server.call("arrive", total, gang, batch, every))


async def wait_bound(bound: Bound, total: int, timeout: float, poll: float) -> None:
    deadline = time.perf_counter() + timeout
    while await bound.poll() < total:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out: {bound.count} of {total} bound")
        await asyncio.sleep(poll)


def report(
    case: str, nodes: int, pods: int, seconds: float, target: str, ok: bool, **extra: Any
) -> None:
    line = {
        "case": f"Live/{case}",
        "nodes": nodes,
        "pods": pods,
        "seconds": round(seconds, 5),
        "pods_per_second": round(pods / seconds, 1) if seconds > 0 else None,
        "target": target,
        "passed": ok,
        **extra,
        "python": platform.python_version(),
    }
    print(json.dumps(line), flush=True)
    REPORTED.append(line)


#: ``--bind-concurrency``: API writes in flight
BIND_CONCURRENCY = [16]
#: ``--pin``: the scheduler on CPU 0, the server (child process) on CPU 1
PIN = [False]
#: ``--fold-above``: Events queued from which a gang's per-pod Scheduled Events fold (None:
#: the recorder's default)
FOLD_ABOVE: list[int | None] = [None]


def scheduler_for(client: KubeClient, write_status: bool) -> LiveScheduler:
    scheduler = LiveScheduler(
        client,
        backoff=fast_backoff(),
        write_status=write_status,
        bind_concurrency=BIND_CONCURRENCY[0],
    )
    if scheduler.status is not None and FOLD_ABOVE[0] is not None:
        scheduler.status.recorder.fold_above = FOLD_ABOVE[0]
    return scheduler


async def gang_case(nodes: int, size: int, write_status: bool, where: str) -> None:
    async with server_for(where) as server:
        await server.call("nodes", nodes)
        config = config_for_server(server.url)
        async with (
            KubeClient(config, trust_env=False) as client,
            scheduler_for(client, write_status) as scheduler,
        ):
            names = await server.call("gang", "big", size)
            store = scheduler.informers[PODS].store
            while not all(f"{NS}/{n}" in store for n in names):
                await asyncio.sleep(0.002)
            bound = Bound(server)
            bound.add(names)
            started = time.perf_counter()
            result = await scheduler.run_once()
            await wait_bound(bound, size, 30.0, poll=0.002)
            seconds = time.perf_counter() - started
            assert len(result.binds) == size, len(result.binds)
    ok = seconds < GANG_TARGET_SECONDS
    extra = {"server": where, "write_status": write_status, "cycles": scheduler.cycles}
    report("gang", nodes, size, seconds, f"< {GANG_TARGET_SECONDS} s", ok, **extra)


async def throughput_case(
    nodes: int,
    total: int,
    gang: int,
    batch: int,
    interval: float,
    period: float,
    write_status: bool,
    where: str,
) -> None:
    async with server_for(where) as server:
        await server.call("nodes", nodes)
        async with KubeClient(config_for_server(server.url), trust_env=False) as client:
            scheduler = scheduler_for(client, write_status)
            await scheduler.start()  # informers synced before timing; serve() finds them running
            stop = asyncio.Event()
            task = asyncio.create_task(scheduler.serve(stop, period=period))
            bound = Bound(server)
            started = time.perf_counter()
            await arrive(server, bound, total, gang, batch, interval)
            await wait_bound(bound, total, 120.0, poll=0.02)
            seconds = time.perf_counter() - started
            stop.set()
            await asyncio.wait_for(task, 10.0)
            events = scheduler.status.recorder.written if scheduler.status else 0
    rate = total / seconds
    target = f">= {THROUGHPUT_TARGET:g} pods/s"
    extra = {
        "server": where,
        "write_status": write_status,
        "cycles": scheduler.cycles,
        "events_written": events,
    }
    report("throughput", nodes, total, seconds, target, rate >= THROUGHPUT_TARGET, **extra)


async def scale_case(args: argparse.Namespace, write_status: bool, where: str) -> None:
    nodes, bound_pods = args.scale_nodes, args.bound
    async with server_for(where) as server:
        await server.call("nodes", nodes)
        await server.call("running", nodes, bound_pods // nodes)
        async with KubeClient(config_for_server(server.url), trust_env=False) as client:
            scheduler = scheduler_for(client, write_status)
            started = time.perf_counter()
            await scheduler.start(timeout=300.0)
            startup = time.perf_counter() - started
            await scheduler.run_once()  # the first cycle plans every group once
            common = {"server": where, "write_status": write_status, "bound": bound_pods}
            common["pinned"] = PIN[0]
            cpu = []
            for _ in range(args.idle_cycles):
                before = time.process_time()
                await scheduler.run_once()
                cpu.append(time.process_time() - before)
            cpu.sort()
            median = cpu[len(cpu) // 2]
            report(
                "scale-idle-cycle",
                nodes,
                bound_pods,
                median,
                "< 0.010 s CPU",
                median < 0.010,
                cpu_max=round(cpu[-1], 4),
                cycles_measured=len(cpu),
                startup_seconds=round(startup, 2),
                **common,
            )
            stop = asyncio.Event()
            task = asyncio.create_task(scheduler.serve(stop, period=1.0))
            await asyncio.sleep(1.0)
            before = time.process_time()
            await asyncio.sleep(args.idle_seconds)
            per_minute = (time.process_time() - before) * 60.0 / args.idle_seconds
            report(
                "scale-idle-serve",
                nodes,
                bound_pods,
                args.idle_seconds,
                "recorded",
                True,
                cpu_seconds_per_minute=round(per_minute, 3),
                **common,
            )
            bound = Bound(server)
            cpu_before = time.process_time()
            names = await server.call("gang", "big", 64)
            appeared = time.perf_counter()
            bound.add(names)
            await wait_bound(bound, 64, 30.0, poll=0.005)
            seconds = time.perf_counter() - appeared
            cpu_used = round(time.process_time() - cpu_before, 3)
            ok = seconds < 1.0
            report("scale-gang", nodes, 64, seconds, "< 1 s", ok, cpu_seconds=cpu_used, **common)
            await scale_throughput(args, server, scheduler, common)
            stop.set()
            await asyncio.wait_for(task, 30.0)


async def scale_throughput(
    args: argparse.Namespace,
    server: LocalServer | ChildServer,
    scheduler: LiveScheduler,
    common: dict[str, Any],
) -> None:
    """``Live/scale-throughput``: pods bound per second, and the CPU it cost the scheduler
    (``time.process_time``, up to the last pod bound *and* the last Event written, so
    writes still queued at the end are charged too) and the server."""
    bound = Bound(server)
    total, gang, batch = args.pods, args.gang, args.batch
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    if profiler is not None:
        profiler.enable()
    server_pid = server.process.pid if isinstance(server, ChildServer) else None
    queued = [waiting_for_cpu(os.getpid()), waiting_for_cpu(server_pid or 0)]
    server_before = await server.call("cpu")
    cycles_before, cpu_before = scheduler.cycles, time.process_time()
    started = time.perf_counter()
    await arrive(server, bound, total, gang, batch, args.interval)
    await wait_bound(bound, total, 120.0, poll=args.poll)
    seconds = time.perf_counter() - started
    arrived = await server.call("arrived") - started
    await scheduler.settle()
    if scheduler.status is not None:
        await scheduler.status.flush()
    drained = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_before
    server_cpu = await server.call("cpu") - server_before
    queued[0] = waiting_for_cpu(os.getpid()) - queued[0]
    queued[1] = waiting_for_cpu(server_pid or 0) - queued[1]
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    rate = total / seconds
    report(
        "scale-throughput",
        args.scale_nodes,
        total,
        seconds,
        ">= 500 pods/s",
        rate >= 500.0,
        cycles=scheduler.cycles - cycles_before,
        cpu_seconds=round(cpu_seconds, 3),
        cpu_ms_per_pod=round(cpu_seconds * 1000 / total, 3),
        seconds_arriving=round(arrived, 3),
        seconds_with_writes=round(drained, 3),
        server_cpu_seconds=round(server_cpu, 3),
        waiting_for_cpu_seconds=round(queued[0], 3),
        server_waiting_for_cpu_seconds=round(queued[1], 3) if server_pid else None,
        events_written=scheduler.status.recorder.written if scheduler.status else 0,
        events_folded=scheduler.status.recorder.folded if scheduler.status else 0,
        **common,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("gang", "throughput", "scale", "all"), default="all")
    parser.add_argument("--server", choices=("process", "inprocess"), default="process")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gang-size", type=int, default=256)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--gang", type=int, default=8, help="throughput: pods per gang")
    parser.add_argument("--batch", type=int, default=200, help="throughput: pods per arrival")
    parser.add_argument("--interval", type=float, default=0.05, help="throughput: s per batch")
    parser.add_argument("--period", type=float, default=1.0, help="serve(): cycle period")
    parser.add_argument("--scale-nodes", type=int, default=5000, help="scale: nodes")
    parser.add_argument(
        "--poll", type=float, default=0.02, help="scale-throughput: s between 'bound?' asks"
    )
    parser.add_argument("--bound", type=int, default=30000, help="scale: pods already bound")
    parser.add_argument("--idle-cycles", type=int, default=20, help="scale: cycles measured")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="scale: idle serve")
    parser.add_argument(
        "--bind-concurrency", type=int, default=16, help="API writes in flight (serve's default)"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin the scheduler to CPU 0 and the server process to CPU 1 (a core each)",
    )
    parser.add_argument(
        "--fold-above",
        type=int,
        help="Events queued from which a gang's per-pod Scheduled Events are folded into its "
        "PodGroup's (default: the scheduler's, 256; 100000: never)",
    )
    parser.add_argument(
        "--profile", default="", help="scale-throughput: write a cProfile of it to this file"
    )
    parser.add_argument(
        "--no-status",
        action="store_true",
        help="write_status=False: no Events or PodGroup status",
    )
    args = parser.parse_args()
    BIND_CONCURRENCY[0] = args.bind_concurrency
    FOLD_ABOVE[0] = args.fold_above
    if args.pin:
        PIN[0] = True
        os.sched_setaffinity(0, {0})
    status = not args.no_status
    logging.basicConfig(level=logging.WARNING)
    if args.case in ("gang", "all"):
        asyncio.run(gang_case(args.nodes, args.gang_size, status, args.server))
    if args.case in ("scale", "all"):
        asyncio.run(scale_case(args, status, args.server))
    if args.case in ("throughput", "all"):
        asyncio.run(
            throughput_case(
                args.nodes,
                args.pods,
                args.gang,
                args.batch,
                args.interval,
                args.period,
                status,
                args.server,
            )
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(REPORTED, indent=1) + "\n")


if __name__ == "__main__":
    main()
