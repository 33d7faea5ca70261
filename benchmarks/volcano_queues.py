"""Cost per job with declared queues: Volcano-shaped workloads of growing size.

Case ``VolcanoQueues/NJobs``: a workload in Volcano's documented shape, as a new user writes
it: eight-GPU nodes, three ``scheduling.volcano.sh/v1beta1`` Queues (``research``, ``prod``,
``batch``; weights 1 / 3 / 1, reclaimable), two PriorityClasses (``prod-high`` for the prod
queue, ``research-low`` for the others) and ``batch.volcano.sh/v1alpha1`` Jobs of a CPU master
and 1 or 2 GPU workers of 1, 2, 4 or 8 GPUs, or 4 or 6 workers of 8 GPUs (``minAvailable`` =
workers + 1), run times from 6 minutes to 7 hours (median about 40 minutes; about half carry a
runtime estimate of one to three times the truth), arriving over about ten hours (the mix of
``/work/s9/vc160.yaml``, session 9's example). The sizes scale together: ``jobs`` Jobs on
``jobs / 160 × 6`` nodes (160 on 6, 320 on 12, 640 on 24), so the load per node and the
horizon stay the same and only the length of the queue grows.

The workload is written as YAML (``--write DIR`` keeps the files) and loaded with
``phalanx.k8s.load_files``, so it goes through the same reader as ``phalanx simulate``; each
run is timed in this process (wall and CPU; the machine may be shared) from loading to the
end of the simulation. One JSON object per run is printed and all are saved to
``results/volcano_queues.json``.

    python benchmarks/volcano_queues.py --policies coscheduling,kube-default --jobs 160,320,640
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from phalanx.k8s import load_files
from phalanx.sim.simulator import SimOptions, Simulation

RESULTS = Path(__file__).resolve().parent / "results"
JOBS_PER_NODE = 160 / 6
HORIZON = 37_000.0  # seconds over which the Jobs arrive
QUEUES = (("research", 1, 78), ("prod", 3, 44), ("batch", 1, 38))  # name, weight, share
#: (workers, GPUs per worker) of a Job, and how often: small Jobs of any width, big ones of
#: whole nodes
SHAPES = (
    ((1, 1), 14),
    ((1, 2), 18),
    ((1, 4), 19),
    ((1, 8), 17),
    ((2, 1), 14),
    ((2, 2), 9),
    ((2, 4), 11),
    ((2, 8), 8),
    ((4, 8), 25),
    ((6, 8), 25),
)


def _pick(rng: random.Random, table: tuple[tuple[Any, int], ...]) -> Any:
    return rng.choices([value for value, _ in table], weights=[w for _, w in table])[0]


def documents(jobs: int, seed: int = 0) -> list[dict[str, Any]]:
    """The workload's objects: nodes, queues, priority classes and ``jobs`` Volcano Jobs."""
    rng = random.Random(seed)
    nodes = max(1, round(jobs / JOBS_PER_NODE))
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"a100-{n}", "labels": {"nvidia.com/gpu.product": "A100"}},
            "status": {
                "allocatable": {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
            },
        }
        for n in range(nodes)
    ]
    for name, weight, _ in QUEUES:
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": weight, "reclaimable": True},
            }
        )
    for name, value in (("prod-high", 100_000), ("research-low", 100)):
        docs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    queues = tuple((name, share) for name, _, share in QUEUES)
    arrivals = sorted(rng.uniform(60.0, HORIZON) for _ in range(jobs))
    for j, at in enumerate(arrivals):
        docs.append(_job(rng, j, at, _pick(rng, queues)))
    return docs


def _job(rng: random.Random, j: int, at: float, queue: str) -> dict[str, Any]:
    workers, gpus = _pick(rng, SHAPES)
    duration = round(min(max(rng.lognormvariate(7.85, 0.85), 360.0), 25_000.0))
    notes = {"phalanx.dev/duration": f"{duration}s", "phalanx.dev/submit-after": f"{at:.0f}s"}
    if rng.random() < 0.5:
        notes["phalanx.dev/runtime-estimate"] = f"{round(duration * rng.uniform(1.0, 3.0))}s"
    master = {"cpu": "4", "memory": "16Gi"}
    worker = {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"job-{j}", "namespace": "ml", "annotations": notes},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "priorityClassName": "prod-high" if queue == "prod" else "research-low",
            "minAvailable": workers + 1,
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [
                _task("master", 1, master, {}),
                _task("worker", workers, worker, {"nvidia.com/gpu": str(gpus)}),
            ],
        },
    }


def _task(name: str, replicas: int, requests: dict[str, str], limits: dict[str, str]) -> Any:
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    container = {"name": name[0], "image": "pytorch", "resources": resources}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [container], "restartPolicy": "OnFailure"}},
    }


def run(policy: str, path: Path, jobs: int) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = Simulation(load_files([path]), SimOptions(policy=policy)).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "case": f"VolcanoQueues/{jobs}Jobs",
        "policy": policy,
        "jobs": jobs,
        "nodes": max(1, round(jobs / JOBS_PER_NODE)),
        "cycles": result.cycles,
        "attempts": result.attempts,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "cpu_ms_per_job": round(1000 * cpu / jobs, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--policies", default="coscheduling,kube-default,volcano,phalanx")
    parser.add_argument("--jobs", default="160,320,640")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", type=Path, help="keep the workload files in this directory")
    args = parser.parse_args()
    folder = args.write or Path(tempfile.mkdtemp(prefix="volcano-queues-"))
    folder.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for jobs in (int(n) for n in args.jobs.split(",")):
        path = folder / f"volcano-queues-{jobs}.yaml"
        path.write_text(yaml.safe_dump_all(documents(jobs, args.seed), sort_keys=False))
        for policy in args.policies.split(","):
            runs.append(run(policy, path, jobs))
            print(json.dumps(runs[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "volcano_queues.json").write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
