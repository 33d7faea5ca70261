"""Reservation rules on the workloads of issue 12: worst big-gang wait vs mean JCT vs GPU
allocation, and the ETA error of each estimate model.

Each (workload, rule, estimate model) is one simulation; one JSON object per line goes to
stdout (and ``--out``). ``max_wait`` figures are in hours, JCT in hours, allocation in percent;
``eta_mean_h``/``eta_p90_h`` is the error of the first expected start over gangs that waited.

    python benchmarks/reservations.py [--cases synthetic-0.8,...] [--rules volcano,easy,...]
        [--estimates given,perfect,noisy]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from phalanx.compare import load_workload, summarize
from phalanx.sim.simulator import SimOptions, simulate

STARVATION = str(Path(__file__).parents[1] / "examples" / "04-starvation.yaml")
CASES = {
    "synthetic-0.8": "synthetic:mix=philly,load=0.8",
    "synthetic-0.9": "synthetic:mix=philly,load=0.9",
    "synthetic-1.0": "synthetic:mix=philly,load=1.0",
    "philly-ee9e8c-16": "philly:vc=ee9e8c,nodes=16",
    "philly-2869ce-8": "philly:vc=2869ce,nodes=8",
    "starvation": STARVATION,
}
#: rule name → (policy, actions or None for the policy's own)
RULES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "volcano": ("volcano", None),
    "fifo-reserve": ("fifo-reserve", None),
    "easy": ("phalanx", ("reserve:min-gpus=0:aging=off", "allocate")),
    "easy-16gpu": ("phalanx", ("reserve:min-gpus=16:aging=off", "allocate")),
    "easy-33gpu": ("phalanx", ("reserve:min-gpus=33:aging=off", "allocate")),
    "easy-16gpu-aged1-1h": ("phalanx", ("reserve:min-gpus=16:aging=1h:max-aged=1", "allocate")),
    "easy-16gpu-aged1-4x": (
        "phalanx",
        ("reserve:min-gpus=16:aging=1h:aging-factor=4:max-aged=1", "allocate"),
    ),
    "easy-33gpu-aged1-4x": (
        "phalanx",
        ("reserve:min-gpus=33:aging=1h:aging-factor=4:max-aged=1", "allocate"),
    ),
    "aged1-1h": ("phalanx", ("reserve:min-gpus=1e9:aging=1h:max-aged=1", "allocate")),
    "aged-all-1h": ("phalanx", ("reserve:min-gpus=1e9:aging=1h:max-aged=all", "allocate")),
    "conservative": ("phalanx", ("reserve:mode=conservative:aging=off", "allocate")),
    "phalanx": ("phalanx", None),
}
DEFAULT_RULES = ",".join(rule for rule in RULES if rule not in ("conservative", "aged-all-1h"))


def one(case: str, rule: str, estimates: str) -> dict[str, Any]:
    policy, actions = RULES[rule]
    began = time.process_time()
    options = SimOptions(policy=policy, actions=actions, estimates=estimates)
    doc = simulate(load_workload(CASES[case]), options).to_json()
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
        "jct_mean_h": h(metrics["jct_mean"]),
        "gpu_alloc_pct": None
        if metrics["gpu_alloc_ratio"] is None
        else round(float(metrics["gpu_alloc_ratio"]), 1),
        "completed": doc["completed"],
        "eta_mean_h": h(doc["eta_error"]["mean"]),
        "eta_p90_h": h(doc["eta_error"]["p90"]),
        "eta_unknown": doc["eta_error"]["unknown"],
        "cpu_seconds": round(time.process_time() - began, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rules", default=DEFAULT_RULES)
    parser.add_argument("--estimates", default="perfect")
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
