"""Big inputs: a Job of N pods loaded, expanded and simulated to its first cycle.

Two cases, each size in its own process (so CPU time and peak memory are its own):

* ``expand`` — a Volcano Job of N replicas: the loader converts its template once (load time
  does not grow with N), the owner controller creates the N pods (linear in N).
* ``first-cycle`` (``Simulate/JobNPods``) — a ``batch/v1`` Job with ``parallelism`` =
  ``completions`` = N, written as YAML as a user would have it, and a cluster of ``--nodes``
  CPU nodes (64 cores, 256 GiB, 110 pods): ``load_files`` reads both, a ``Simulation`` under
  ``--policy`` is built and run to the end of its first instant (``until=0``: the Job
  controller creates the N pods, one scheduling cycle runs, its binds are applied, the result is
  made). The cluster holds ``110 × nodes`` pods (11,000 with 100 nodes), so the first cycle
  binds that many and the rest wait; the run checks that it did. The output table is not timed.

Figures are CPU seconds of this process (``time.process_time``; the machine is shared, wall
time is given for honesty): ``load_s`` (YAML and conversion), ``simulate_s`` (expansion, the
cycle, the result), ``seconds`` (both) and ``us_per_pod``. JSON on stdout and in
``benchmarks/results/first-cycle.json``.

Usage::

    .venv/bin/python benchmarks/expand.py --sizes 1000,10000,100000,1000000
    .venv/bin/python benchmarks/expand.py --case expand --sizes 1000,4000,16000,64000
    .venv/bin/python benchmarks/expand.py --sizes 100000 --profile   # cProfile to stderr
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, PodSpec
from phalanx.k8s import load_documents, load_files
from phalanx.sim.controller import JobController
from phalanx.sim.controllers.owner import OwnerController
from phalanx.sim.simulator import SimOptions, Simulation

RESULTS = Path(__file__).resolve().parent / "results"
POD_SLOTS = 110  # pods per node: the cluster's capacity for the Job's pods

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: sweep
  namespace: research
spec:
  parallelism: {n}
  completions: {n}
  backoffLimit: 6
  template:
    metadata:
      labels: {{app: sweep}}
    spec:
      restartPolicy: Never
      containers:
        - name: trial
          image: registry.example/sweep:2
          args: ["--trial-from-index"]
          resources:
            requests: {{cpu: 500m, memory: 1Gi}}
            limits: {{memory: 1Gi}}
"""

NODE = """\
---
apiVersion: v1
kind: Node
metadata:
  name: cpu-{i:04d}
  labels: {{kubernetes.io/hostname: cpu-{i:04d}}}
status:
  allocatable: {{cpu: "64", memory: 256Gi, pods: "{slots}"}}
"""


def volcano_job(replicas: int) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}
    task = {"name": "w", "replicas": replicas, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "big"},
        "spec": {"tasks": [task]},
    }


def expand(replicas: int) -> dict[str, Any]:
    began = time.process_time()
    workload = load_documents([("bench", volcano_job(replicas))])
    loaded = time.process_time()
    pods: list[PodSpec] = []
    gangs: list[GangSpec] = []

    def create(pod: PodSpec) -> None:
        pods.append(pod)

    owners = OwnerController(create, gangs.append, JobController(create), seed=0)
    owners.add(next(workload.of(ControllerSpec)))
    expanded = time.process_time()
    assert len(pods) == replicas and len(gangs) == 1
    return {
        "case": "expand",
        "pods": replicas,
        "load_ms": round(1000 * (loaded - began), 2),
        "expand_ms": round(1000 * (expanded - loaded), 2),
        "per_pod_us": round(1e6 * (expanded - loaded) / replicas, 2),
    }


def first_cycle(pods: int, nodes: int, policy: str, profile: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster, job = Path(tmp, "cluster.yaml"), Path(tmp, "job.yaml")
        cluster.write_text("".join(NODE.format(i=i, slots=POD_SLOTS) for i in range(nodes)))
        job.write_text(JOB.format(n=pods))
        profiler = cProfile.Profile() if profile else None
        wall, began = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        workload = load_files([cluster, job])
        loaded = time.process_time()
        simulation = Simulation(workload, SimOptions(policy=policy, until=0.0))
        result = simulation.run()
        done, wall = time.process_time(), time.perf_counter() - wall
        if profiler is not None:
            profiler.disable()
            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(30)
    running = sum(record.start is not None for record in result.gangs)
    assert result.cycles == 1 and len(result.gangs) == pods
    assert running == min(pods, nodes * POD_SLOTS), (running, pods)
    return {
        "case": f"Simulate/Job{pods}Pods",
        "pods": pods,
        "nodes": nodes,
        "policy": policy,
        "bound_first_cycle": running,
        "load_s": round(loaded - began, 3),
        "simulate_s": round(done - loaded, 3),
        "seconds": round(done - began, 3),
        "us_per_pod": round(1e6 * (done - began) / pods, 2),
        "wall_s": round(wall, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "passed": done - began < 20.0 if pods >= 1_000_000 else True,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("first-cycle", "expand"), default="first-cycle")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--policy", default="phalanx")
    parser.add_argument("--profile", action="store_true", help="cProfile to stderr")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    default = "1000,4000,16000,64000" if args.case == "expand" else "1000,10000,100000,1000000"
    sizes = [int(size) for size in (args.sizes or default).split(",")]
    if args.one:
        size = sizes[0]
        run = (
            expand(size)
            if args.case == "expand"
            else first_cycle(size, args.nodes, args.policy, args.profile)
        )
        print(json.dumps(run))
        return
    runs = []
    for size in sizes:
        command = [sys.executable, __file__, "--one", "--case", args.case, "--sizes", str(size)]
        command += ["--nodes", str(args.nodes), "--policy", args.policy]
        command += ["--profile"] if args.profile else []
        out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.case}.json").write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
