"""``phalanx`` entry point.

Input errors (bad manifests, unknown options) print one line, ``phalanx: error: ...``, and exit
with status 2; nothing else is caught, so a bug still shows its traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import IO, Any

from phalanx import __version__
from phalanx.api.durations import format_duration
from phalanx.api.errors import InputError
from phalanx.api.specs import JobSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.cli.demo import demo_table, run_demo
from phalanx.cli.explain import add_parser as add_explain_parser
from phalanx.cli.explain import explain_command
from phalanx.cli.install import add_parser as add_install_parser
from phalanx.cli.install import manifests_command
from phalanx.cli.options import OneLineParser, non_negative, seconds, seed
from phalanx.cli.output import run_json, run_table, table
from phalanx.cli.packing import add_parser as add_packing_parser
from phalanx.cli.packing import packing_command
from phalanx.cli.serve import add_parser as add_serve_parser
from phalanx.cli.serve import serve_command
from phalanx.cli.snapshot import cluster_documents
from phalanx.compare import (
    COLUMNS,
    comparison_json,
    html_report,
    load_workload,
    metrics_of,
    progress_for,
    run_policies,
)
from phalanx.k8s import load_documents, load_files
from phalanx.k8s.load import manifest_documents
from phalanx.policies import COMPARED, POLICIES, SCORINGS
from phalanx.report.format import estimates_note, run_notes, table_rows
from phalanx.sim.estimates import MODELS
from phalanx.sim.metrics import DEFAULT_GPU_HOUR_PRICE
from phalanx.sim.simulator import SimOptions, simulate
from phalanx.traces import TRACE_NAMES

SCORING_HELP = (
    "node scoring plugin for every policy (default: the policy's own); fgd descends the "
    "fragmentation of the run's own pod shapes"
)


def _add_workload_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help="the policy places only pods naming NAME; kube-default places the others "
        "(default: the policy places every pod, whatever its schedulerName)",
    )
    command.add_argument(
        "--default-duration",
        type=seconds,
        default=3600.0,
        metavar="DURATION",
        help="how long a gang with no phalanx.dev/duration or activeDeadlineSeconds runs "
        "(default 1h)",
    )


ESTIMATES_HELP = (
    "runtime estimates the scheduler sees: given (the manifests' own), none, perfect, or "
    "noisy (docs/traces.md); default %(default)s"
)


def parser() -> argparse.ArgumentParser:
    root = OneLineParser(
        prog="phalanx", description="Gang scheduling for AI and HPC batch work on Kubernetes."
    )
    root.add_argument("--version", action="version", version=f"phalanx {__version__}")
    commands: argparse._SubParsersAction[argparse.ArgumentParser]
    commands = root.add_subparsers(dest="command", required=True)  # type: ignore[assignment]
    sim = commands.add_parser(
        "simulate",
        help="run the scheduler on a simulated cluster described by Kubernetes manifests",
        description="Simulate FILEs (YAML manifests), or one workload as compare takes it "
        "(FILE,FILE or a trace NAME:OPTIONS, e.g. philly:vc=6214e9,nodes=16). With no FILE, "
        "run the built-in demo.",
    )
    sim.add_argument("files", nargs="*", metavar="FILE")
    sim.add_argument("--policy", default="phalanx", choices=sorted(POLICIES))
    sim.add_argument(
        "--actions",
        metavar="A,B",
        help="the policy's actions in order, e.g. allocate (default: the policy's own list)",
    )
    sim.add_argument(
        "--orderings",
        metavar="A,B",
        help="the policy's ordering plugins in tier order, e.g. queues,priority,least-slack,gang "
        "(default: the policy's own)",
    )
    sim.add_argument("--seed", type=seed, default=0)
    sim.add_argument("--until", type=seconds, help="simulated horizon, e.g. 2h")
    sim.add_argument("--estimates", choices=MODELS, default="given", help=ESTIMATES_HELP)
    sim.add_argument("--events", metavar="PATH", help="write the event log as JSON Lines")
    sim.add_argument("-o", "--output", choices=("table", "json"), default="table")
    sim.add_argument("--scoring", choices=list(SCORINGS), help=SCORING_HELP)
    sim.add_argument(
        "--price",
        type=non_negative,
        default=DEFAULT_GPU_HOUR_PRICE,
        help="dollars per GPU-hour for the idle cost (default %(default)s)",
    )
    sim.add_argument(
        "--startup-delay", type=seconds, default=0.0, help="time from bind to running (default 0)"
    )
    _add_workload_options(sim)
    sim.add_argument(
        "--from-cluster",
        action="store_true",
        help="start from the present state of the cluster (its nodes, pods, PodGroups and "
        "queues), then add the FILEs",
    )
    sim.add_argument(
        "--kubeconfig", metavar="PATH", help="with --from-cluster (default: in-cluster or ~/.kube)"
    )
    sim.add_argument(
        "--usage-half-life",
        type=seconds,
        help="order queues by usage with memory: past usage above the deserved share counts, "
        "decaying with this half-life (e.g. 1h; default: current usage only)",
    )
    cmp = commands.add_parser(
        "compare",
        help="run several policies on the same workload and compare them",
        description=(
            "Run the policies on WORKLOAD and print one row of metrics per policy. WORKLOAD is "
            "a manifest file (several: comma-separated) or a trace NAME:OPTIONS, e.g. "
            "synthetic:jobs=200,seed=1."
        ),
    )
    cmp.add_argument("workload", metavar="WORKLOAD")
    cmp.add_argument(
        "--policies",
        default=",".join(COMPARED),
        help="comma-separated policies, in table order (default: %(default)s)",
    )
    cmp.add_argument("--seed", type=seed, default=0)
    cmp.add_argument("--scoring", choices=list(SCORINGS), help=SCORING_HELP)
    cmp.add_argument("--until", type=seconds, help="simulated horizon, e.g. 2h")
    cmp.add_argument("--estimates", choices=MODELS, default="given", help=ESTIMATES_HELP)
    cmp.add_argument("--report", metavar="PATH", help="write a self-contained HTML report")
    cmp.add_argument("-o", "--output", choices=("table", "json"), default="table")
    cmp.add_argument(
        "--progress", action="store_true", help="show progress on stderr even when not a terminal"
    )
    _add_workload_options(cmp)
    add_packing_parser(commands)
    add_install_parser(commands)
    add_serve_parser(commands)
    add_explain_parser(commands)
    return root


def compare_command(args: argparse.Namespace, out: IO[str]) -> int:
    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    progress = progress_for(sys.stderr, len(names), force=args.progress)
    results = run_policies(
        args.workload,
        names,
        seed=args.seed,
        until=args.until,
        progress=progress,
        scoring=args.scoring,
        scheduler_name=args.scheduler_name,
        default_duration=args.default_duration,
        estimates=args.estimates,
    )
    if args.report:
        page = html_report(
            args.workload, args.seed, results, until=args.until, estimates=args.estimates
        )
        with open(args.report, "w", encoding="utf-8") as report:
            report.write(page)
    if args.output == "json":
        doc = comparison_json(args.workload, args.seed, results, estimates=args.estimates)
        out.write(json.dumps(doc, indent=2) + "\n")
        return 0
    context = estimates_note(args.estimates)
    if args.until is not None:
        context += f" · until {format_duration(args.until)}"
    if args.scoring is not None:
        context += f" · scoring {args.scoring}"
    rows = table_rows(COLUMNS, metrics_of(results))
    lines = [
        f"workload {args.workload} · seed {args.seed}{context}",
        table(["POLICY", *(c.header for c in COLUMNS)], rows),
        *run_notes(results),
    ]
    if args.report:
        lines.append(f"report: {args.report}")
    out.write("\n".join(lines) + "\n")
    return 0


#: Above this many pods, ``simulate`` says on stderr how big the run is before it starts.
LARGE_RUN_PODS = 100_000


def announce_size(workload: Workload, err: IO[str] | None = None) -> None:
    """One line on stderr for a run with more than :data:`LARGE_RUN_PODS` pods: what is
    coming, and how to stop it."""
    pods = sum(1 for _ in workload.of(PodSpec)) + sum(
        max(job.parallelism, job.completions or 0) for job in workload.of(JobSpec)
    )
    if pods > LARGE_RUN_PODS:
        print(
            f"phalanx: simulating {pods:,} pods; this may take a while (Ctrl-C stops it)",
            file=err or sys.stderr,
        )


def simulate_command(args: argparse.Namespace, out: IO[str]) -> int:
    if args.kubeconfig is not None and not args.from_cluster:
        raise InputError(
            "reads a cluster only with --from-cluster (without it the files alone are simulated)",
            field="--kubeconfig",
        )
    if not args.files and not args.from_cluster:
        runs = run_demo(seed=args.seed)
        if args.output == "json":
            out.write(json.dumps([r.to_json() for _, _, r in runs], indent=2) + "\n")
        else:
            out.write(demo_table(runs) + "\n")
        return 0
    if args.from_cluster:
        docs = cluster_documents(args.kubeconfig)
        for path in args.files:
            docs.extend(manifest_documents(path))
        workload = load_documents(docs, seed=args.seed)
    elif len(args.files) == 1 and _names_a_workload(args.files[0]):
        workload = load_workload(args.files[0], seed=args.seed)  # as ``compare`` takes it
    else:
        workload = load_files(args.files, seed=args.seed)
    announce_size(workload)
    options = SimOptions(
        policy=args.policy,
        seed=args.seed,
        until=args.until,
        price=args.price,
        startup_delay=args.startup_delay,
        scoring=args.scoring,
        actions=_names(args.actions),
        orderings=_names(args.orderings),
        scheduler_name=args.scheduler_name,
        default_duration=args.default_duration,
        estimates=args.estimates,
        usage_half_life=args.usage_half_life,
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


def _names_a_workload(arg: str) -> bool:
    """Is ``arg`` what ``compare`` takes and a path is not: a trace ``NAME[:OPTIONS]`` or
    comma-separated files?"""
    if arg == "-" or os.path.exists(arg):
        return False
    return "," in arg or ":" in arg or arg in TRACE_NAMES


def _names(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(name.strip() for name in text.split(",") if name.strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "simulate":
            return simulate_command(args, sys.stdout)
        if args.command == "compare":
            return compare_command(args, sys.stdout)
        if args.command == "packing":
            return packing_command(args, sys.stdout)
        if args.command == "manifests":
            return manifests_command(args, sys.stdout)
        if args.command == "serve":
            return serve_command(args)
        if args.command == "explain":
            return explain_command(args)
    except InputError as err:
        for line in err.lines():
            print(f"phalanx: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: stopped as asked, one line and no traceback
        print("phalanx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): not an error
        sys.stderr.close()
        return 0
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        print(f"phalanx: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
