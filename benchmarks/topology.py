"""Topology figures: gangs kept in one rack on Alibaba Lingjun's Clos network, and their cost.

Each workload runs on the 847-host Lingjun cluster (8 GPUs per host, racks = ToR switches,
blocks = PSWs; see ``phalanx.traces.lingjun``) with gangs of 8-128 GPUs:

- ``phalanx`` (best-fit domain) and ``tas-greedy`` (greedy first-fit domain, Kueue TAS's
  original) with a *preferred* rack constraint on every gang, and ``volcano`` (no topology)
  on the same jobs;
- ``phalanx`` and ``tas-greedy`` with a *required* rack constraint: the wait it costs (priced
  on ``synthetic-64``, the same jobs without the 128-GPU gangs, which no rack can ever hold).

Prints one JSON object per run (and writes them all to ``benchmarks/results/topology.json``):
percent of multi-pod gangs inside one rack / one block, mean racks per gang, mean and p99
queueing delay, GPU allocation (time-weighted, percent, over the whole run and over the
arrival span), completed gangs, gangs that never started (a required gang larger than every
rack waits for ever), and the mean queueing delay of the gangs of at most 64 GPUs (8 hosts:
the largest racks), which can start in every run; FGD's fragmentation per rack (time-weighted
mean over racks with idle GPU, ``fragmentation_by_domain``) and the run's CPU seconds
(``time.process_time``: the machine is shared, wall time is not a measure).

    python benchmarks/topology.py [--jobs 5000] [--philly-scale 0.01] [--seed 0]

``--fragfit`` instead measures FGD's fragmentation as best fit's tie-break (``topology-frag``:
among domains of equal room, the most fragmented first) against plain best fit, preferred
rack, on the workloads above and on ``mixed``: the synthetic gangs of 2 GPUs and more
(``mix=multi``: pods of 2, 4 and 8 GPUs, so hosts are partly used), at ``--load``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from phalanx.compare.summary import summarize, time_average
from phalanx.plugins.topology import FragTopologyPlacement
from phalanx.policies import POLICIES
from phalanx.policies.registry import PLACEMENTS
from phalanx.sim.simulator import SimOptions, simulate
from phalanx.traces import load
from phalanx.traces.lingjun import BLOCK_LABEL, RACK_LABEL

RUNS = (
    ("preferred", "phalanx"),
    ("preferred", "tas-greedy"),
    ("preferred", "volcano"),
    ("required", "phalanx"),
    ("required", "tas-greedy"),
)


def workloads(jobs: int, scale: float, seed: int) -> dict[str, str]:
    lingjun = "cluster=lingjun,topology={mode},level=rack"
    synthetic = f"synthetic:jobs={jobs},mix=large,seed={seed},load=1.0,max_duration=21600"
    return {
        "synthetic": f"{synthetic},{lingjun}",
        "synthetic-64": f"{synthetic},{lingjun},max_gpus=64",  # every gang fits a rack
        "philly": f"philly:scale={scale},min_gpus=8,{lingjun}",
    }


def fragfit(jobs: int, seed: int, load: float) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The fragmentation tie-break experiment: its workload and runs (registers the policy)."""
    PLACEMENTS["topology-frag"] = FragTopologyPlacement
    POLICIES["phalanx-fragfit"] = dataclasses.replace(
        POLICIES["phalanx"], name="phalanx-fragfit", placement="topology-frag"
    )
    synthetic = f"synthetic:jobs={jobs},mix=multi,seed={seed},load={load},max_duration=21600"
    mixed = f"{synthetic},cluster=lingjun,topology={{mode}},level=rack"  # {mode}: formatted later
    return mixed, (("preferred", "phalanx"), ("preferred", "phalanx-fragfit"))


def run(spec: str, policy: str, seed: int) -> dict[str, Any]:
    started = time.process_time()
    result = simulate(load(spec), SimOptions(policy=policy, seed=seed)).to_json()
    cpu = time.process_time() - started
    metrics = summarize(result)
    in_one, mean = result["gangs_in_one_domain"], result["mean_domains_per_gang"]
    small = [g["queue_delay"] for g in result["gangs"] if g["gpus"] <= 64]
    delays = [float(d) for d in small if d is not None]
    return {
        "workload": spec,
        "policy": policy,
        "gangs_in_one_rack": in_one.get(RACK_LABEL),
        "gangs_in_one_block": in_one.get(BLOCK_LABEL),
        "mean_racks_per_gang": mean.get(RACK_LABEL),
        "queue_mean": metrics["queue_mean"],
        "queue_p99": metrics["queue_p99"],
        "gpu_alloc_ratio": metrics["gpu_alloc_ratio"],
        "gpu_alloc_while_arriving": _busy_allocation(result),
        "completed": metrics["completed"],
        "never_started": sum(g["start"] is None for g in result["gangs"]),
        "queue_mean_upto_64_gpus": sum(delays) / len(delays) if delays else None,
        "rack_fragmentation": result.get("fragmentation_by_domain", {}).get(RACK_LABEL),
        "gangs": len(result["gangs"]),
        "cpu_seconds": round(cpu, 1),
    }


def _busy_allocation(result: dict[str, Any]) -> float | None:
    """Allocated GPUs / capacity, time-weighted over [0, last submission], in percent: the
    whole-run ratio is diluted by the long tail of the last jobs running alone."""
    last = max(g["submit"] for g in result["gangs"])
    average = time_average(result["gpu_allocation"], last)
    capacity = float(result["gpu_capacity"])
    return None if average is None or not capacity else 100.0 * average / capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="synthetic jobs")
    parser.add_argument("--philly-scale", type=float, default=0.01, help="Philly arrival scale")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("synthetic", "synthetic-64", "philly", "mixed"))
    parser.add_argument("--runs", help="only these runs, e.g. preferred:phalanx,required:phalanx")
    parser.add_argument("--fragfit", action="store_true", help="the tie-break experiment")
    parser.add_argument("--load", type=float, default=1.0, help="offered load (--fragfit)")
    args = parser.parse_args()
    rows = []
    runs: tuple[tuple[str, str], ...] = RUNS
    named = workloads(args.jobs, args.philly_scale, args.seed)
    if args.fragfit:
        mixed, runs = fragfit(args.jobs, args.seed, args.load)
        named["mixed"] = mixed
    for name, template in named.items():
        if args.only and name != args.only:
            continue
        for mode, policy in runs:
            if args.runs and f"{mode}:{policy}" not in args.runs.split(","):
                continue
            row = run(template.format(mode=mode), policy, args.seed)
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = Path(__file__).parent / "results" / ("fragfit.json" if args.fragfit else "topology.json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
