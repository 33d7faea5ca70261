"""Kueue-shaped contention: capped ClusterQueues in a cohort, Jobs admitted whole.

Case ``KueueCohort/NJobs``: a workload in Kueue's documented shape, as its users write it:
eight-GPU nodes, a ``ResourceFlavor``, three ``ClusterQueue``s in one cohort (``alpha`` and
``beta`` with a nominal quota of 24 GPUs, ``gamma`` 16, each a borrowing limit of 16), a
``LocalQueue`` per team namespace, and suspended ``batch/v1`` Jobs labelled
``kueue.x-k8s.io/queue-name``: 60 % of 1 or 2 pods of 1, 2 or 4 GPUs for 10 minutes to 2 hours,
30 % of 2 or 4 pods of 8 GPUs for 1 to 6 hours, 10 % of 4 or 6 pods of 8 GPUs for 2 to 10
hours (a 48-GPU Job is beyond every queue's capability: it never runs, as Kueue would leave it
inadmissible), arriving about every four minutes; each carries ``phalanx.dev/duration`` and
no runtime estimate, so ``phalanx`` learns its estimates. The queue is long: the arrivals
outrun the cluster many times over. Session 10 found three faults with it (a gang refused for
capability never retried, a reservation for a gang beyond its queue's capability, and
reservations that ignored a full queue: benchmarks/README.md).

Each run loads the YAML through ``phalanx.k8s.load_files`` (as ``phalanx simulate`` does) and
is timed in this process (CPU seconds; the machine may be shared). One JSON object per run is
printed and all are saved to ``results/kueue_cohort.json``.

    python benchmarks/kueue_cohort.py --policies volcano,phalanx --jobs 400
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

from phalanx.compare import summarize
from phalanx.k8s import load_files
from phalanx.sim.simulator import SimOptions, Simulation

RESULTS = Path(__file__).resolve().parent / "results"
TEAMS = (("alpha", 24), ("beta", 24), ("gamma", 16))  # ClusterQueue, nominal GPU quota
NODES = 8


def documents(jobs: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    gpu = "nvidia.com/gpu"
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"h100-{i}", "labels": {"nvidia.com/gpu.product": "H100"}},
            "status": {"allocatable": {"cpu": "190", "memory": "1900Gi", gpu: "8", "pods": "110"}},
        }
        for i in range(NODES)
    ]
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100"},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": "H100"}},
        }
    )
    for team, quota in TEAMS:
        resources = [
            {"name": "cpu", "nominalQuota": 500},
            {"name": "memory", "nominalQuota": "5000Gi"},
            {"name": gpu, "nominalQuota": quota, "borrowingLimit": 16},
        ]
        group = {
            "coveredResources": ["cpu", "memory", gpu],
            "flavors": [{"name": "h100", "resources": resources}],
        }
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "ClusterQueue",
                "metadata": {"name": team},
                "spec": {"namespaceSelector": {}, "cohort": "lab", "resourceGroups": [group]},
            }
        )
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"namespace": team, "name": "q"},
                "spec": {"clusterQueue": team},
            }
        )
    at = 0.0
    for j in range(jobs):
        at += rng.expovariate(1 / 240)
        docs.append(_job(rng, j, at, rng.choice([team for team, _ in TEAMS])))
    return docs


def _job(rng: random.Random, j: int, at: float, team: str) -> dict[str, Any]:
    kind = rng.random()
    if kind < 0.6:
        pods, gpus, minutes = rng.choice([1, 2]), rng.choice([1, 2, 4]), rng.randint(10, 120)
    elif kind < 0.9:
        pods, gpus, minutes = rng.choice([2, 4]), 8, rng.randint(60, 360)
    else:
        pods, gpus, minutes = rng.choice([4, 6]), 8, rng.randint(120, 600)
    requests = {"cpu": "16", "memory": "200Gi", "nvidia.com/gpu": str(gpus)}
    container = {"name": "t", "image": "train", "resources": {"requests": requests}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"j{j}",
            "namespace": team,
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
            "annotations": {
                "phalanx.dev/submit-after": f"{int(at)}s",
                "phalanx.dev/duration": f"{minutes}m",
            },
        },
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def run(policy: str, path: Path, jobs: int) -> dict[str, Any]:
    cpu = time.process_time()
    doc = Simulation(load_files([str(path)]), SimOptions(policy=policy)).run().to_json()
    cpu = time.process_time() - cpu
    metrics = summarize(doc)
    alloc = metrics["gpu_alloc_ratio"]
    return {
        "case": f"KueueCohort/{jobs}Jobs",
        "policy": policy,
        "jobs": len(doc["gangs"]),
        "completed": doc["completed"],
        "jct_mean_h": None if metrics["jct_mean"] is None else round(metrics["jct_mean"] / 3600, 2),
        "gpu_alloc_pct": None if alloc is None else round(float(alloc), 1),
        "max_wait_by_size_h": {k: round(v / 3600, 1) for k, v in doc["max_wait_by_size"].items()},
        "cpu_seconds": round(cpu, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--policies", default="volcano,phalanx")
    parser.add_argument("--jobs", default="400")
    parser.add_argument("--write", type=Path, help="keep the workload file in this directory")
    args = parser.parse_args()
    out = []
    for jobs in (int(n) for n in args.jobs.split(",")):
        folder = args.write or Path(tempfile.mkdtemp())
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"kueue-{jobs}.yaml"
        path.write_text(yaml.safe_dump_all(documents(jobs), sort_keys=False))
        for policy in args.policies.split(","):
            record = run(policy, path, jobs)
            print(json.dumps(record), flush=True)
            out.append(record)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "kueue_cohort.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
