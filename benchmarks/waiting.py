"""The cost of a long queue: cycles with 10,000 gangs already waiting that cannot fit.

Case ``SchedulingGangs/5000Nodes_10000WaitingGangs``: the 5,000 GPU nodes of ``run.py``, each
filled by one 8-GPU pod (bound before the clock starts), and 10,000 PodGroups of 8 one-GPU
pods that cannot fit. Timed (CPU and wall): the first cycle (every gang fails once, gangs of
equal shape sharing one attempt, and is parked), then ``--idle`` cycles with nothing new (the
target: under 5 ms each), then one node's 8-GPU pod finishes and one cycle places exactly one
waiting gang there (queueing hints wake the first gang of the class the room can hold).

Checks (not timed): idle cycles make no attempt and no bind; the release cycle binds one whole
gang of 8 on the freed node; no node is over-committed.

    python benchmarks/waiting.py [--nodes 5000] [--gangs 10000] [--idle 50]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.api.specs import GangRef, GangSpec, PodSpec
from phalanx.cluster.state import ClusterState
from phalanx.framework.session import CycleResult
from phalanx.policies import Scheduler, get_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import (
    GANG_POD,
    GPU,
    GPU_NODE,
    NAMESPACE,
    PODGROUP_API,
    RESULTS,
    SINGLE_POD,
    Case,
    build_state,
)

CASE = "SchedulingGangs/5000Nodes_10000WaitingGangs"
MAX_IDLE_MS = 5.0


def fill(state: ClusterState) -> list[Any]:
    """One 8-GPU pod bound on every node."""
    big = {**GANG_POD, GPU: 8_000, "cpu": 64_000}
    pods = []
    for node in range(len(state.table)):
        pod = state.add_pod(PodSpec(NAMESPACE, f"filler-{node:05d}", dict(big)), 0.0)
        state.bind(pod, node, 0.0)
        pods.append(pod)
    return pods


def submit(state: ClusterState, gangs: int) -> None:
    for g in range(gangs):
        name = f"pg-{g:05d}"
        state.add_gang(GangSpec(NAMESPACE, name, 8, PODGROUP_API), 0.0)
        ref = GangRef(name, PODGROUP_API)
        for i in range(8):
            state.add_pod(PodSpec(NAMESPACE, f"{name}-{i}", dict(GANG_POD), gang=ref), 0.0)


def timed_cycle(
    scheduler: Scheduler, state: ClusterState, now: float
) -> tuple[CycleResult, float, float]:
    """One cycle applied as the simulator applies it; (result, wall ms, CPU ms)."""
    freed = state.freed
    wall, cpu = time.perf_counter(), time.process_time()
    result = scheduler.cycle(state, now)
    for pod, node in result.binds:
        state.bind(pod, node, now, result.gpus.get(id(pod)) or None)  # the devices it chose
    for gang in result.blocked:
        state.block(gang, freed, *result.hints.get(gang.ident, (None, ())))
    return result, (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--gangs", type=int, default=10_000)
    parser.add_argument("--idle", type=int, default=50, help="cycles with nothing new")
    args = parser.parse_args()
    case = Case(args.nodes, GPU_NODE, 8, 8, GANG_POD, 0, SINGLE_POD, 0)
    state = build_state(case)
    fillers = fill(state)
    submit(state, args.gangs)
    scheduler = Scheduler(get_policy("phalanx"))

    first, first_ms, first_cpu = timed_cycle(scheduler, state, 1.0)
    assert not first.binds and len(state.blocked) == args.gangs, "every gang parks"
    idle_wall, idle_cpu = [], []
    for i in range(args.idle):
        result, wall, cpu = timed_cycle(scheduler, state, 2.0 + i)
        assert not result.binds and result.attempts == 0, "an idle cycle tried something"
        idle_wall.append(wall)
        idle_cpu.append(cpu)
    state.release(fillers[0])
    after, release_ms, release_cpu = timed_cycle(scheduler, state, 100.0)
    assert len(after.binds) == 8 and {node for _, node in after.binds} == {0}
    assert (state.table.requested <= state.table.allocatable).all(), "over-committed"

    report = {
        "case": CASE,
        "nodes": args.nodes,
        "waiting_gangs": args.gangs,
        "first_cycle_ms": {"wall": round(first_ms, 1), "cpu": round(first_cpu, 1)},
        "first_cycle_attempts": first.attempts,
        "idle_cycles": args.idle,
        "idle_cycle_ms": {
            "wall_p50": round(float(np.median(idle_wall)), 3),
            "wall_max": round(max(idle_wall), 3),
            "cpu_p50": round(float(np.median(idle_cpu)), 3),
            "cpu_max": round(max(idle_cpu), 3),
        },
        "release_cycle_ms": {"wall": round(release_ms, 2), "cpu": round(release_cpu, 2)},
        "release_cycle_attempts": after.attempts,
        "max_idle_ms": MAX_IDLE_MS,
        "passed": float(np.median(idle_wall)) < MAX_IDLE_MS,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    text = json.dumps(report)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / (CASE.replace("/", "_") + ".json")).write_text(text + "\n")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
