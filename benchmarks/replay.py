"""Trace replay speed: the whole simulator (engine, events, metrics) on a real trace.

Case ``philly``: all 82,247 Microsoft Philly jobs on Philly's own cluster size (the sum of its
virtual clusters' nodes, 8 GPUs each) under one policy. The target is at most 60 s on this
2-core machine. Prints one JSON object; loading the trace is timed apart from simulating it.

    python benchmarks/replay.py [--trace philly] [--policy phalanx]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time

import numpy as np

from phalanx.sim.simulator import SimOptions, simulate
from phalanx.traces import load

TARGET_SECONDS = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--policy", default="phalanx")
    args = parser.parse_args()
    started = time.perf_counter()
    workload = load(args.trace)
    loaded = time.perf_counter()
    result = simulate(workload, SimOptions(policy=args.policy))
    finished = time.perf_counter()
    total = finished - started
    print(
        json.dumps(
            {
                "case": f"Replay/{args.trace}",
                "policy": args.policy,
                "jobs": len(result.gangs),
                "completed": result.count("completed"),
                "cycles": result.cycles,
                "scheduling_attempts": result.attempts,
                "simulated_days": round(result.end / 86400, 1),
                "load_seconds": round(loaded - started, 2),
                "simulate_seconds": round(finished - loaded, 2),
                "total_seconds": round(total, 2),
                "max_seconds": TARGET_SECONDS,
                "passed": total <= TARGET_SECONDS,
                "peak_memory_mb": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
                ),
                "python": platform.python_version(),
                "numpy": np.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
