"""Cost per job as the queue grows: contended Philly replays, and one very large Job.

Case ``Replay/philly-contended``: ``philly:vc=6214e9,nodes=16,jobs=N`` (one virtual cluster's
jobs on 16 nodes, 128 GPUs, so the queue is long) for N = 2,500 … 41,226, under each policy.
Each replay runs in this process after a warm-up import; the figures are seconds (wall and
CPU of this process — the machine may be shared) and seconds per job. The target: at most
30 s for the whole virtual cluster under phalanx, volcano and kube-default (120 s under
coscheduling), and the cost per job at 41,226 jobs within 1.5× of that at 5,000.

Case ``BigJob/1000000Pods``: one ``batch/v1`` Job of N pods (parallelism = completions = N,
0.1 CPU each) on one node, loaded and simulated up to its first cycle (``--until 0``); the
target is under 20 s for a million pods.

Case ``Replay/SPEC`` (``--spec``: another workload, without ``jobs=``), e.g. the thrash of
interleaving groups under coscheduling, ``synthetic:nodes=8,mix=large,load=1.0,seed=1,
gpus_per_pod=1`` (Philly's jobs of 8 GPUs and more as one-GPU pods on 64 GPUs): every cycle
holds or rejects pods, so its cost is cycles times what one tries (``benchmarks/README.md``).

One JSON object per run is printed and all are saved to ``results/scaling.json`` (with
``--spec``: ``results/scaling-spec.json``).

    python benchmarks/scaling.py --policies phalanx --jobs 2500,5000,10000,20000,41226
    python benchmarks/scaling.py --big-job 1000000
    python benchmarks/scaling.py --policies coscheduling --jobs 300 \
        --spec synthetic:nodes=8,mix=large,load=1.0,seed=1,gpus_per_pod=1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from phalanx.api.specs import JobSpec, NodeSpec, PodSpec
from phalanx.api.workload import Item, Workload
from phalanx.compare.runner import load_workload
from phalanx.sim.simulator import SimOptions, Simulation

RESULTS = Path(__file__).resolve().parent / "results"
SPEC = "philly:vc=6214e9,nodes=16"
MAX_SECONDS = {"phalanx": 30.0, "volcano": 30.0, "kube-default": 30.0, "coscheduling": 120.0}


def replay(policy: str, jobs: int | None, base: str = SPEC) -> dict[str, Any]:
    spec = base if jobs is None else f"{base},jobs={jobs}"
    wall, cpu = time.perf_counter(), time.process_time()
    workload = load_workload(spec)
    result = Simulation(workload, SimOptions(policy=policy)).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    count = len(result.gangs)
    return {
        "case": "Replay/philly-contended" if base == SPEC else f"Replay/{base}",
        "workload": spec,
        "policy": policy,
        "jobs": count,
        "cycles": result.cycles,
        "attempts": result.attempts,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "ms_per_job": round(1000 * wall / count, 3),
        "cpu_ms_per_job": round(1000 * cpu / count, 3),
        "max_seconds_whole_vc": MAX_SECONDS.get(policy) if base == SPEC else None,
    }


def big_job(pods: int) -> dict[str, Any]:
    node = NodeSpec("n0", {"cpu": 64_000, "memory": 256 << 30, "pods": 110})
    template = PodSpec("default", "big", {"cpu": 100, "memory": 128 << 20, "pods": 1})
    job = JobSpec("default", "big", pods, pods, template)
    wall, cpu = time.perf_counter(), time.process_time()
    sim = Simulation(Workload([Item(node), Item(job)]), SimOptions(until=0.0))
    result = sim.run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(result.gangs) == pods and result.cycles == 1  # made or unborn (sim/unborn.py)
    return {
        "case": f"BigJob/{pods}Pods",
        "pods": pods,
        "bound": sum(1 for p in sim.state.pods.values() if p.node >= 0),
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "max_seconds": 20.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--policies", default="phalanx")
    parser.add_argument("--jobs", default="2500,5000,10000,20000,41226")
    parser.add_argument("--big-job", type=int, help="pods of the big Job case (skips replays)")
    parser.add_argument("--spec", default=SPEC, help="the replayed workload, without jobs=")
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    if args.big_job:
        runs.append(big_job(args.big_job))
        print(json.dumps(runs[-1]), flush=True)
    else:
        load_workload(f"{SPEC},jobs=10")  # warm up: imports and the trace file's cache
        for policy in args.policies.split(","):
            for jobs in (int(n) for n in args.jobs.split(",")):
                runs.append(replay(policy, jobs, args.spec))
                print(json.dumps(runs[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    name = "scaling.json" if args.spec == SPEC else "scaling-spec.json"
    path = RESULTS / ("bigjob.json" if args.big_job else name)
    path.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
