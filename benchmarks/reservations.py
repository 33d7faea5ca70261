"""Reservation rules on the workloads of issue 12: worst big-gang wait vs mean JCT vs GPU
allocation, and the ETA error of each estimate model.

Each (workload, rule, estimate model) is one simulation; one JSON object per line goes to
stdout (and ``--out``). ``max_wait`` figures are in hours, JCT in hours, allocation in percent;
``eta_mean_h``/``eta_p90_h`` is the error of the first expected start over gangs that waited;
``worst_floor`` names the gang with the worst wait of the largest size drawn, its wait and its
floor (``phalanx.sim.waits.wait_floor``: the least wait the gangs already running at its
arrival left it, under any rule that does not preempt), hours; ``whole_floor_*`` the same for a
gang of the whole cluster arriving at a random time (``whole_cluster_floor``; ``_over``: the
share of such arrivals that would wait more than ``OVER``).

    python benchmarks/reservations.py [--cases synthetic-0.8,...] [--rules volcano,easy,...]
        [--estimates auto,given,perfect,noisy,none]

``--cases`` also takes workload specs (e.g. ``philly:vc=ee9e8c,nodes=14``); ``--rules`` the
names of ``RULES``, ``reserve:KEY=VALUE:...`` (over textbook EASY) or ``phalanx:KEY=VALUE:...``
(the policy, over its default); ``--estimates auto`` (the default) is ``perfect``, except
``given`` for the previous demo (``demo-200``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from phalanx.compare import load_workload, summarize
from phalanx.sim.metrics import GangRecord, SimResult
from phalanx.sim.simulator import SimOptions, simulate
from phalanx.sim.waits import BUCKETS, bucket, cluster_floor, wait_floor, wait_of

STARVATION = str(Path(__file__).parents[1] / "examples" / "04-starvation.yaml")
CASES = {
    # contended: 5,000 jobs with durations capped at a day (uncapped, Philly's lognormal tail
    # of up to 53 days sets the makespan and nothing queues); no commas in a case's name
    **{
        f"synthetic-{load}": f"synthetic:mix=philly,load={load},jobs=5000,max_duration=86400"
        for load in ("0.8", "0.9", "1.0")
    },
    "philly-ee9e8c-16": "philly:vc=ee9e8c,nodes=16",
    "philly-2869ce-8": "philly:vc=2869ce,nodes=8",
    "starvation": STARVATION,
    # ``make demo``'s comparison (the Makefile's DEMO_WORKLOAD, with its DEMO_ESTIMATES)
    "demo": "synthetic:jobs=800,nodes=8,mix=multi,load=1.0,max_duration=21600,seed=1",
    # the demo's comparison before issue 12's demo change (learned estimates)
    "demo-200": "synthetic:jobs=200,nodes=8,mix=multi,gpus_per_pod=1,load=1.0,"
    "max_duration=21600,seed=1",
}
#: hours: issue 12's aim for the worst 33+-GPU wait on ee9e8c (0.6 × ``volcano``'s 323 h)
OVER = 195.0
#: ``--estimates auto``: the model each case is judged with: perfect, as ``make demo`` runs the
#: demo (``DEMO_ESTIMATES``), except the previous demo as it ran (the manifests' own hints:
#: none for synthetic gangs, so estimates are learned)
AUTO = {"demo-200": "given"}
#: Every reserve option, as textbook EASY has it: a rule states only what it changes, so a
#: change of ``phalanx``'s default (``RESERVE``) changes no other rule.
EASY = {
    "mode": "easy",
    "depth": "1",
    "aging": "off",
    "min-gpus": "0",
    "min-share": "0",
    "aging-factor": "0",
    "max-aged": "all",
    "aging-cap": "off",
    "head-wait": "0s",
    "quantile": "0.8",
    "big-first": "false",
    "slack": "0",
    "pooled": "false",
}


def reserve(**options: str) -> tuple[str, tuple[str, ...]]:
    """``phalanx`` with these reserve options (keys with ``_`` for ``-``) over textbook EASY."""
    merged = EASY | {key.replace("_", "-"): value for key, value in options.items()}
    return (
        "phalanx",
        (":".join(["reserve", *(f"{k}={v}" for k, v in merged.items())]), "allocate"),
    )


#: rule name → (policy, actions or None for the policy's own); ``--rules`` also takes
#: ``reserve:KEY=VALUE:...`` (over textbook EASY) for a rule not listed here.
RULES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "volcano": ("volcano", None),
    "fifo-reserve": ("fifo-reserve", None),
    "easy": reserve(),
    "easy-16gpu": reserve(min_gpus="16"),
    "easy-33gpu": reserve(min_gpus="33"),
    "easy-16gpu-aged1-1h": reserve(min_gpus="16", aging="1h", max_aged="1"),
    "easy-16gpu-aged1-4x": reserve(min_gpus="16", aging="1h", aging_factor="4", max_aged="1"),
    "easy-33gpu-aged1-4x": reserve(min_gpus="33", aging="1h", aging_factor="4", max_aged="1"),
    "easy-33gpu-aged1-3x": reserve(min_gpus="33", aging="1h", aging_factor="3", max_aged="1"),
    "easy-33gpu-first": reserve(min_gpus="33", big_first="true"),
    "easy-33gpu-first-aged1-3x": reserve(
        min_gpus="33", aging="1h", aging_factor="3", max_aged="1", big_first="true"
    ),
    "easy-33gpu-first-aged2-3x": reserve(
        min_gpus="33", aging="1h", aging_factor="3", max_aged="2", big_first="true"
    ),
    "aged1-3x": reserve(min_gpus="1e9", aging="1h", aging_factor="3", max_aged="1"),
    "aged1-1h": reserve(min_gpus="1e9", aging="1h", max_aged="1"),
    "aged-all-1h": reserve(min_gpus="1e9", aging="1h"),
    "conservative": reserve(mode="conservative"),
    "phalanx": ("phalanx", None),
}
DEFAULT_RULES = ",".join(rule for rule in RULES if rule not in ("conservative", "aged-all-1h"))


def rule_of(name: str) -> tuple[str, tuple[str, ...] | None]:
    if name in RULES:
        return RULES[name]
    base, *options = name.split(":")
    if base == "phalanx":  # the policy, its reserve default changed by these options
        return ("phalanx", (":".join(["reserve", *options]), "allocate", "preempt", "reclaim"))
    if base != "reserve":
        raise SystemExit(f"unknown rule {name!r} (choose from {', '.join(RULES)} or reserve:...)")
    return reserve(**dict(option.split("=", 1) for option in options))


def one(case: str, rule: str, estimates: str) -> dict[str, Any]:
    policy, actions = rule_of(rule)
    estimates = AUTO.get(case, "perfect") if estimates == "auto" else estimates
    began = time.process_time()
    options = SimOptions(policy=policy, actions=actions, estimates=estimates)
    result = simulate(load_workload(CASES.get(case, case)), options)
    doc = result.to_json()
    metrics = summarize(doc)
    hours = 3600.0

    def h(value: Any) -> float | None:
        return None if value is None else round(float(value) / hours, 2)

    return {
        "case": case,
        "rule": rule,
        "estimates": estimates,
        "max_wait_h": h(doc["max_wait"]),
        "max_wait_by_size_h": {k: h(v) for k, v in doc["max_wait_by_size"].items()},
        "mean_wait_by_size_h": mean_waits(doc["gangs"]),
        "jct_mean_h": h(metrics["jct_mean"]),
        "gpu_alloc_pct": None
        if metrics["gpu_alloc_ratio"] is None
        else round(float(metrics["gpu_alloc_ratio"]), 1),
        "completed": doc["completed"],
        "makespan_h": h(metrics["makespan"]),
        "eta_mean_h": h(doc["eta_error"]["mean"]),
        "eta_p90_h": h(doc["eta_error"]["p90"]),
        "eta_unknown": doc["eta_error"]["unknown"],
        "worst_floor": worst_floor(result),
        **whole_cluster_floor(result),
        "cpu_seconds": round(time.process_time() - began, 1),
    }


def worst_floor(result: SimResult) -> dict[str, Any] | None:
    """The gang with the worst wait of the largest size drawn: its name, wait and floor (the
    least wait the gangs already running when it arrived left it), hours."""
    gangs = result.gangs
    for name, _, _ in reversed(BUCKETS):
        sized = [g for g in gangs if bucket(g.gpus) == name]
        if sized:
            break
    else:
        return None
    worst: GangRecord = max(sized, key=lambda g: wait_of(g, result.end))
    floor = wait_floor(worst, gangs, result.gpu_capacity)
    return {
        "gang": worst.name,
        "wait_h": round(wait_of(worst, result.end) / 3600, 2),
        "floor_h": None if floor is None else round(floor / 3600, 2),
    }


def whole_cluster_floor(result: SimResult) -> dict[str, float | None]:
    """The least wait (hours) of a whole-cluster gang arriving at a random time (each hour until
    the last arrival), under any rule that does not preempt: its mean, its p90 and the share of
    those arrivals at which it exceeds ``OVER``."""
    last = max((g.submit for g in result.gangs), default=0.0)
    floor = cluster_floor(result.gangs, np.arange(0.0, last, 3600.0)) / 3600
    if not floor.size:
        return dict.fromkeys(("whole_floor_mean_h", "whole_floor_p90_h", "whole_floor_over"))
    return {
        "whole_floor_mean_h": round(float(floor.mean()), 1),
        "whole_floor_p90_h": round(float(np.percentile(floor, 90)), 1),
        "whole_floor_over": round(float((floor > OVER).mean()), 3),
    }


def mean_waits(gangs: list[dict[str, Any]]) -> dict[str, float]:
    """Mean wait (hours) of the gangs that started, per size bucket."""
    waits: dict[str, list[float]] = {}
    for gang in gangs:
        if gang["queue_delay"] is not None:
            waits.setdefault(bucket(gang["gpus"]), []).append(gang["queue_delay"] / 3600)
    return {size: round(sum(w) / len(w), 2) for size, w in sorted(waits.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rules", default=DEFAULT_RULES)
    parser.add_argument("--estimates", default="auto")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for case in args.cases.split(","):
        for rule in args.rules.split(","):
            for model in args.estimates.split(","):
                line = json.dumps(one(case, rule, model))
                print(line, flush=True)
                if args.out is not None:
                    with args.out.open("a", encoding="utf-8") as out:
                        out.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
