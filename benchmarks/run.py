"""Throughput benchmark of the scheduling engine alone, in the manner of kube-scheduler's
scheduler_perf.

Design. No simulator and no YAML: each case builds a :class:`ClusterState` of identical GPU
nodes directly from specs, then feeds pods in arrival batches. A batch adds whole PodGroups
(``GangSpec`` with ``min_member`` = gang size, members carrying a ``GangRef``) and lone pods,
in a seeded random order, then runs one ``Scheduler.cycle`` and applies every committed bind
with ``state.bind(pod, node, now)``, as the simulator does. Only the cycle and the binds are
timed (``time.perf_counter``); building nodes, creating pods and the correctness checks are
not. With ``--all-at-once`` every pod arrives before the first cycle instead.

Correctness is checked after every cycle, outside the timer, so the figure is never that of a
broken engine: no node is over-committed (``requested <= allocatable`` everywhere), every
PodGroup is bound whole (at least ``min_member`` members) or not at all, binds name pending
pods and real nodes. At the end the node table's usage must equal the sum of the bound pods'
requests, recomputed independently.

Workloads are data: :data:`CASES` names each case as scheduler_perf does
(``SchedulingGangs/5000Nodes_10000Pods``). Each case runs in its own process when several are
selected, so ``peak_memory_mb`` (``ru_maxrss``: the process's peak resident set, interpreter
and numpy included) belongs to that case alone.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import platform
import pstats
import random
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec, Resources
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
from phalanx.framework.backend import MemoryBackend, apply
from phalanx.policies import Scheduler, get_policy

GIB = 1 << 30
GPU = "nvidia.com/gpu"
#: scheduler-plugins' coscheduling PodGroup API group.
PODGROUP_API = "scheduling.x-k8s.io"
NAMESPACE = "bench"
RESULTS = Path(__file__).resolve().parent / "results"
#: kube-scheduler's published floor for SchedulingBasic/5000Nodes_10000Pods (pods/s).
KUBE_SCHEDULER_FLOOR = 680


@dataclass(frozen=True, slots=True)
class Case:
    """One workload: identical nodes, gangs of one shape, lone pods of one shape."""

    nodes: int
    node: Resources  # allocatable of every node
    gang_size: int  # pods per PodGroup; min_member = gang_size
    gang_pods: int  # pods in gangs, in total (a multiple of gang_size)
    gang_pod: Resources  # requests of each gang member
    single_pods: int  # pods without a PodGroup
    single_pod: Resources  # requests of each lone pod
    batch_size: int  # pods per arrival batch (one cycle per batch); gangs are never split
    min_pods_per_second: int = 1000


#: 8-GPU node: 96 cores, 1 TiB, 8 GPUs, kubelet's default 110 pods.
GPU_NODE: Resources = {"cpu": 96_000, "memory": 1024 * GIB, GPU: 8_000, "pods": 110}
#: Gang member: one GPU with 8 cores and 64 GiB, so 8 members fill one node exactly on GPUs.
GANG_POD: Resources = {"cpu": 8_000, "memory": 64 * GIB, GPU: 1_000, "pods": 1}
#: Lone pod: CPU and memory only (a data loader, a notebook, a controller), no GPU.
SINGLE_POD: Resources = {"cpu": 2_000, "memory": 8 * GIB, "pods": 1}

CASES: dict[str, Case] = {
    "SchedulingGangs/500Nodes_1000Pods": Case(
        nodes=500,
        node=GPU_NODE,
        gang_size=8,
        gang_pods=1_000,
        gang_pod=GANG_POD,
        single_pods=100,
        single_pod=SINGLE_POD,
        batch_size=100,
    ),
    "SchedulingGangs/5000Nodes_10000Pods": Case(
        nodes=5_000,
        node=GPU_NODE,
        gang_size=8,
        gang_pods=10_000,
        gang_pod=GANG_POD,
        single_pods=1_000,
        single_pod=SINGLE_POD,
        batch_size=200,
    ),
}


# -- workload -------------------------------------------------------------------------------
Arrival = tuple[GangSpec | None, list[PodSpec]]  # a PodGroup with its members, or one lone pod


def build_state(case: Case) -> ClusterState:
    names = {*case.node, *case.gang_pod, *case.single_pod}
    nodes = [
        NodeSpec(
            name=f"node-{i:05d}",
            allocatable=dict(case.node),
            labels={"kubernetes.io/hostname": f"node-{i:05d}"},
        )
        for i in range(case.nodes)
    ]
    return ClusterState(nodes, ResourceIndex(names))


def arrivals(case: Case, seed: int) -> list[Arrival]:
    """Every PodGroup (whole) and lone pod, in a seeded random arrival order."""
    if case.gang_pods % case.gang_size:
        raise ValueError("gang_pods must be a multiple of gang_size")
    out: list[Arrival] = []
    for g in range(case.gang_pods // case.gang_size):
        name = f"pg-{g:05d}"
        gang = GangSpec(NAMESPACE, name, min_member=case.gang_size, api=PODGROUP_API)
        ref = GangRef(name=name, api=PODGROUP_API)
        pods = [
            PodSpec(NAMESPACE, f"{name}-{i}", requests=dict(case.gang_pod), gang=ref)
            for i in range(case.gang_size)
        ]
        out.append((gang, pods))
    for s in range(case.single_pods):
        out.append((None, [PodSpec(NAMESPACE, f"single-{s:05d}", requests=dict(case.single_pod))]))
    random.Random(seed).shuffle(out)
    return out


def batches(items: list[Arrival], size: int) -> list[list[Arrival]]:
    """Consecutive arrivals of about ``size`` pods each; a PodGroup is never split."""
    out: list[list[Arrival]] = []
    current: list[Arrival] = []
    count = 0
    for item in items:
        current.append(item)
        count += len(item[1])
        if count >= size:
            out.append(current)
            current, count = [], 0
    if current:
        out.append(current)
    return out


# -- checks (never timed) -------------------------------------------------------------------
def check_cycle(state: ClusterState, binds: Sequence[tuple[PodInfo, int]]) -> None:
    table = state.table
    assert (table.requested <= table.allocatable).all(), "a node is over-committed"
    touched: dict[str, GangInfo] = {}
    for pod, node in binds:
        assert 0 <= node < len(table), f"{pod.key} bound to a node that does not exist"
        assert pod.status is PodStatus.BOUND and pod.node == node, f"{pod.key} not bound"
        touched[pod.gang.ident] = pod.gang
    for gang in touched.values():
        check_gang(gang)


def check_gang(gang: GangInfo) -> None:
    bound = sum(pod.status is PodStatus.BOUND for pod in gang.members)
    assert bound == 0 or bound >= gang.min_member, (
        f"gang {gang.key} partly bound: {bound} of min_member {gang.min_member}"
    )


def check_final(state: ClusterState) -> None:
    for gang in state.gangs.values():
        check_gang(gang)
    usage = np.zeros_like(state.table.requested)
    for pod in state.pods.values():
        if pod.status is PodStatus.BOUND:
            usage[pod.node] += pod.request
    assert (usage == state.table.requested).all(), "node usage differs from the bound pods"
    assert (state.table.requested <= state.table.allocatable).all(), "a node is over-committed"


# -- the run --------------------------------------------------------------------------------
def run_case(
    name: str,
    case: Case,
    *,
    seed: int,
    all_at_once: bool,
    profiler: cProfile.Profile | None = None,
) -> dict[str, Any]:
    state = build_state(case)
    scheduler = Scheduler(get_policy("phalanx"), seed=seed)
    items = arrivals(case, seed)
    plan = [items] if all_at_once else batches(items, case.batch_size)
    pods_total = sum(len(pods) for _, pods in items)

    cycle_seconds: list[float] = []
    cpu_cycle: list[float] = []  # CPU seconds of this process (the machine may be shared)
    bind_seconds = 0.0
    now = 0.0

    def cycle() -> int:
        nonlocal bind_seconds
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        cpu_start = time.process_time()
        result = scheduler.cycle(state, now)
        middle = time.perf_counter()
        apply(result, state, MemoryBackend(state, now))
        end = time.perf_counter()
        cpu_cycle.append(time.process_time() - cpu_start)
        if profiler is not None:
            profiler.disable()
        cycle_seconds.append(end - start)
        bind_seconds += end - middle
        check_cycle(state, result.binds)
        return len(result.binds)

    for batch in plan:
        for gang, pods in batch:
            if gang is not None:
                state.add_gang(gang, now)
            for pod in pods:
                state.add_pod(pod, now)
        cycle()
        now += 1.0
    # Drain: more cycles while pods are pending and the last cycle still bound something.
    while state.waiting and cycle():
        now += 1.0
    check_final(state)

    scheduled = sum(pod.status is PodStatus.BOUND for pod in state.pods.values())
    seconds = sum(cycle_seconds)
    rate = scheduled / seconds if seconds > 0 else 0.0
    ms = np.array(cycle_seconds) * 1000.0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "case": name,
        "mode": "all-at-once" if all_at_once else f"batches of {case.batch_size} pods",
        "seed": seed,
        "nodes": case.nodes,
        "gang_size": case.gang_size,
        "pods_scheduled": scheduled,
        "pods_total": pods_total,
        "seconds": round(seconds, 4),
        "bind_seconds": round(bind_seconds, 4),
        "cpu_seconds": round(sum(cpu_cycle), 4),
        "pods_per_cpu_second": round(scheduled / sum(cpu_cycle), 1) if sum(cpu_cycle) else 0.0,
        "pods_per_second": round(rate, 1),
        "cycles": len(cycle_seconds),
        "cycle_ms": {
            "p50": round(float(np.percentile(ms, 50)), 2),
            "p90": round(float(np.percentile(ms, 90)), 2),
            "p99": round(float(np.percentile(ms, 99)), 2),
            "max": round(float(ms.max()), 2),
        },
        "peak_memory_mb": round(peak_kib / 1024, 1),
        "peak_memory_source": "resource.getrusage(RUSAGE_SELF).ru_maxrss",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "min_pods_per_second": case.min_pods_per_second,
        "passed": scheduled == pods_total and rate >= case.min_pods_per_second,
    }


def result_path(name: str, all_at_once: bool) -> Path:
    return RESULTS / (name.replace("/", "_") + ("_AllAtOnce" if all_at_once else "") + ".json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--case", choices=sorted(CASES), help="run one case (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="arrival order and tie-breaks")
    parser.add_argument(
        "--all-at-once", action="store_true", help="submit every pod before the first cycle"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the timed part (cycles and binds); top functions to stderr",
    )
    args = parser.parse_args(argv)

    if args.case is None:  # one process per case, so each peak RSS is that case's own
        failed = 0
        for name in CASES:
            command = [sys.executable, __file__, "--case", name, "--seed", str(args.seed)]
            if args.all_at_once:
                command.append("--all-at-once")
            if args.profile:
                command.append("--profile")
            failed += subprocess.run(command, check=False).returncode != 0
        return 1 if failed else 0

    profiler = cProfile.Profile(time.process_time) if args.profile else None
    report = run_case(
        args.case, CASES[args.case], seed=args.seed, all_at_once=args.all_at_once, profiler=profiler
    )
    if profiler is not None:
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(25)
        stats.sort_stats("tottime").print_stats(15)
    text = json.dumps(report)
    print(text, flush=True)
    RESULTS.mkdir(exist_ok=True)
    result_path(args.case, args.all_at_once).write_text(text + "\n")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
