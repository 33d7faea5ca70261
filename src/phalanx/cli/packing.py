"""``phalanx packing openb:VARIANT``: the FGD paper's GPU packing experiment, one replay.

Prints the GPU allocation ratio and FGD's fragmentation at arrived = 100 % and 130 % of the
cluster's GPU capacity, next to the authors' published allocation (mean of seeds 42–51) when
the results folder is present. ``-o json`` prints :meth:`PackingResult.to_json`.
"""

from __future__ import annotations

import argparse
import json
from typing import IO

from phalanx.api.errors import InputError
from phalanx.cli.options import seed
from phalanx.cli.output import table
from phalanx.packing import POLICIES, run_packing
from phalanx.packing.data import check_variant
from phalanx.packing.published import read_published
from phalanx.policies import SCORINGS

TRACE = "openb"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "packing",
        help="replay the FGD paper's GPU packing experiment on the openb trace",
        description=(
            "Replay openb:VARIANT as the FGD paper (USENIX ATC'23) does: the 1213 GPU nodes, "
            "pods shuffled and resampled to 1.3 x GPU capacity with SEED, placed one by one "
            "with the policy's score. Prints the GPU allocation and fragmentation ratios at "
            "100% and 130% arrived."
        ),
    )
    parser.add_argument("workload", metavar="openb:VARIANT")
    parser.add_argument(
        "--policy",
        default="fgd",
        help=(
            f"a scoring plugin of the registry: the paper's {', '.join(POLICIES)}, or "
            f"{', '.join(s for s in SCORINGS if s not in POLICIES)} (default: %(default)s)"
        ),
    )
    parser.add_argument("--seed", type=seed, default=42)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def parse_workload(text: str) -> str:
    """``openb:VARIANT`` (or ``openb``, meaning ``default``) → VARIANT."""
    trace, _, variant = text.partition(":")
    if trace != TRACE:
        raise InputError(
            f"unknown packing workload {text!r}: expected {TRACE}:VARIANT", field="workload"
        )
    return check_variant(variant or "default")


def _published(variant: str, policy: str) -> dict[int, float | None]:
    try:
        published = read_published("alloc_ratio")
    except InputError:
        return {}
    return {x: published.mean(variant, policy, x) for x in (100, 130)}


def packing_command(args: argparse.Namespace, out: IO[str]) -> int:
    variant = parse_workload(args.workload)
    result = run_packing(variant, args.policy, args.seed)
    if args.output == "json":
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
        return 0
    published = _published(variant, args.policy)
    rows = []
    for arrived in (100, 130):
        point = result.point(arrived)
        theirs = published.get(arrived)
        rows.append(
            [
                f"{arrived}%",
                "-" if point is None else f"{point.alloc_ratio:.2f}",
                "-" if point is None else f"{point.frag_ratio:.2f}",
                "-" if point is None else f"{point.frag_amount:.2f}",
                "-" if theirs is None else f"{theirs:.2f}",
            ]
        )
    lines = [
        f"{TRACE}:{variant} · policy {result.policy} · seed {result.seed} · "
        f"{result.pods} pods arrived, {result.placed} placed, {result.failed} failed · "
        f"{result.seconds:.1f}s",
        table(
            ["ARRIVED", "GPU ALLOC %", "FRAG/IDLE %", "FRAG/CAPACITY %", "PUBLISHED ALLOC %"],
            rows,
        ),
        "published: FGD artifact, mean of seeds 42-51 (fgd-expected-results)"
        if args.policy in POLICIES
        else f"published: none ({args.policy} is not one of the paper's policies)",
    ]
    out.write("\n".join(lines) + "\n")
    return 0
