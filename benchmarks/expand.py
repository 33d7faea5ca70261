"""Controller expansion: a Volcano Job of N replicas, converted and expanded into its pods.

Design. The loader converts the Job once (its template, not each replica), so loading is
constant in N; the simulator's owner controller then creates the N pods, which must be linear
in N. Each size runs once (``--sizes``); the JSON on stdout has, per size, the milliseconds to
load and to expand and the microseconds per pod. The scheduling of the resulting gang is not
timed here (benchmarks/run.py covers the engine).

Usage::

    .venv/bin/python benchmarks/expand.py --sizes 1000,4000,16000,64000
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, PodSpec
from phalanx.k8s import load_documents
from phalanx.sim.controller import JobController
from phalanx.sim.controllers.owner import OwnerController


def volcano_job(replicas: int) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}
    task = {"name": "w", "replicas": replicas, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "big"},
        "spec": {"tasks": [task]},
    }


def measure(replicas: int) -> dict[str, float]:
    began = time.perf_counter()
    workload = load_documents([("bench", volcano_job(replicas))])
    loaded = time.perf_counter()
    pods: list[PodSpec] = []
    gangs: list[GangSpec] = []

    def create(pod: PodSpec) -> None:
        pods.append(pod)

    owners = OwnerController(create, gangs.append, JobController(create), seed=0)
    owners.add(next(workload.of(ControllerSpec)))
    expanded = time.perf_counter()
    assert len(pods) == replicas and len(gangs) == 1
    return {
        "pods": replicas,
        "load_ms": round(1000 * (loaded - began), 2),
        "expand_ms": round(1000 * (expanded - loaded), 2),
        "per_pod_us": round(1e6 * (expanded - loaded) / replicas, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,4000,16000,64000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(json.dumps({"benchmark": "expand", "runs": [measure(n) for n in sizes]}, indent=2))


if __name__ == "__main__":
    main()
