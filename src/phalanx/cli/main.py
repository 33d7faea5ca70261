"""``phalanx`` entry point.

Input errors (bad manifests, unknown options) print one line, ``phalanx: error: ...``, and exit
with status 2; nothing else is caught, so a bug still shows its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import IO, Any

from phalanx import __version__
from phalanx.api.durations import parse_duration
from phalanx.api.errors import InputError
from phalanx.cli.demo import demo_table, run_demo
from phalanx.cli.output import run_json, run_table
from phalanx.k8s import load_files
from phalanx.policies import POLICIES
from phalanx.sim.metrics import DEFAULT_GPU_HOUR_PRICE
from phalanx.sim.simulator import SimOptions, simulate


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="phalanx", description="Gang scheduling for AI and HPC batch work on Kubernetes."
    )
    root.add_argument("--version", action="version", version=f"phalanx {__version__}")
    commands = root.add_subparsers(dest="command", required=True)
    sim = commands.add_parser(
        "simulate",
        help="run the scheduler on a simulated cluster described by Kubernetes manifests",
        description="Simulate FILEs (YAML manifests). With no FILE, run the built-in demo.",
    )
    sim.add_argument("files", nargs="*", metavar="FILE")
    sim.add_argument("--policy", default="phalanx", choices=sorted(POLICIES))
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--until", type=_duration, help="simulated horizon, e.g. 2h")
    sim.add_argument("--events", metavar="PATH", help="write the event log as JSON Lines")
    sim.add_argument("-o", "--output", choices=("table", "json"), default="table")
    sim.add_argument(
        "--scoring", choices=("binpack", "spread"), help="node scoring (default: the policy's)"
    )
    sim.add_argument(
        "--price",
        type=float,
        default=DEFAULT_GPU_HOUR_PRICE,
        help="dollars per GPU-hour for the idle cost (default %(default)s)",
    )
    sim.add_argument(
        "--startup-delay", type=_duration, default=0.0, help="time from bind to running (default 0)"
    )
    return root


def simulate_command(args: argparse.Namespace, out: IO[str]) -> int:
    if not args.files:
        runs = run_demo(seed=args.seed)
        if args.output == "json":
            out.write(json.dumps([r.to_json() for _, _, r in runs], indent=2) + "\n")
        else:
            out.write(demo_table(runs) + "\n")
        return 0
    workload = load_files(args.files)
    options = SimOptions(
        policy=args.policy,
        seed=args.seed,
        until=args.until,
        price=args.price,
        startup_delay=args.startup_delay,
        scoring=args.scoring,
    )
    if args.events:
        with open(args.events, "w", encoding="utf-8") as log:

            def sink(event: dict[str, Any]) -> None:
                log.write(json.dumps(event, separators=(",", ":")) + "\n")

            result = simulate(workload, options, sink)
    else:
        result = simulate(workload, options)
    out.write((run_json(result) if args.output == "json" else run_table(result)) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "simulate":
            return simulate_command(args, sys.stdout)
    except InputError as err:
        print(f"phalanx: error: {err.line()}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"phalanx: error: {err.filename or ''}: {err.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
