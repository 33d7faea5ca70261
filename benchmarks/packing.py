"""openb packing: reproduce the FGD paper's table (Weng et al., USENIX ATC'23) in phalanx.

Design. Every (variant, policy, seed) cell is one :func:`phalanx.packing.replay` of the
experiment (1213 GPU nodes, the pod list shuffled and tuned to 1.3 × GPU capacity, pods placed
one by one with the policy's Score plugin; see ``phalanx.packing.experiment``). Cells run in a
process pool (``--jobs``, default: every core); each worker loads a variant's files once. For
each (variant, policy) the mean over the seeds of the GPU allocation ratio at arrived = 100 %
and 130 % is compared with the mean of the same seeds in the artifact's published results
(``fgd-expected-results/csv``); the difference is in percentage points, and a cell is flagged
when it exceeds ``--tolerance`` (0.5). Fragmentation (FGD's measure: fragmented GPU as % of
capacity, and fragmented / idle) is compared the same way. Per-replay wall time (loading
excluded) is recorded.

Output: a table, then the per-cell summary as JSON, on stdout; ``--json PATH`` writes the
summary and every replay (seeds, seconds, values) to PATH instead of printing the JSON.

Usage::

    .venv/bin/python benchmarks/packing.py                      # default + multigpu20..50
    .venv/bin/python benchmarks/packing.py --variants published # all 17 published lists
    .venv/bin/python benchmarks/packing.py --variants default --policies fgd --seeds 42
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phalanx.packing import POLICIES, load, replay
from phalanx.packing.data import OpenbData
from phalanx.packing.published import Published, read_published

DEFAULT_VARIANTS = ("default", "multigpu20", "multigpu30", "multigpu40", "multigpu50")
#: The 17 pod lists of the published table, in its order.
PUBLISHED_VARIANTS = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)
ARRIVED = (100, 130)
METRICS = ("alloc_ratio", "frag_amount", "frag_ratio")


@dataclass(frozen=True)
class Cell:
    variant: str
    policy: str
    seed: int
    values: dict[str, dict[int, float | None]]  # metric → arrived → percent
    seconds: float
    pods: int
    placed: int


_DATA: dict[str, OpenbData] = {}


def _run(task: tuple[str, str, int, str | None]) -> Cell:
    variant, policy, seed, root = task
    data = _DATA.get(variant)
    if data is None:
        data = _DATA[variant] = load(variant, None if root is None else Path(root))
    result = replay(data, policy, seed)
    values: dict[str, dict[int, float | None]] = {m: {} for m in METRICS}
    for arrived in ARRIVED:
        point = result.point(arrived)
        for metric in METRICS:
            values[metric][arrived] = None if point is None else getattr(point, metric)
    return Cell(variant, policy, seed, values, result.seconds, result.pods, result.placed)


def _mean(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.fmean(found) if found else None


def _diff(ours: float | None, theirs: float | None) -> float | None:
    return None if ours is None or theirs is None else ours - theirs


def summarise(
    cells: list[Cell], published: dict[str, Published], seeds: Sequence[int], tolerance: float
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    keys = sorted({(c.variant, c.policy) for c in cells}, key=_order)
    for variant, policy in keys:
        mine = [c for c in cells if c.variant == variant and c.policy == policy]
        row: dict[str, Any] = {
            "variant": variant,
            "policy": policy,
            "seeds": len(mine),
            "seconds_mean": round(statistics.fmean(c.seconds for c in mine), 3),
            "seconds_max": round(max(c.seconds for c in mine), 3),
            "pods_mean": round(statistics.fmean(c.pods for c in mine), 1),
            "failed_mean": round(statistics.fmean(c.pods - c.placed for c in mine), 1),
        }
        for metric in METRICS:
            for arrived in ARRIVED:
                ours = _mean([c.values[metric][arrived] for c in mine])
                theirs = published[metric].mean(variant, policy, arrived, seeds)
                name = f"{metric}_{arrived}"
                diff = _diff(ours, theirs)
                row[name] = {
                    "ours": None if ours is None else round(ours, 3),
                    "published": None if theirs is None else round(theirs, 3),
                    "diff": None if diff is None else round(diff, 3),
                    "ours_stdev": _stdev([c.values[metric][arrived] for c in mine]),
                }
        row["within_tolerance"] = all(
            row[f"alloc_ratio_{a}"]["diff"] is None
            or abs(row[f"alloc_ratio_{a}"]["diff"]) <= tolerance
            for a in ARRIVED
        )
        rows.append(row)
    return rows


def _stdev(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return round(statistics.stdev(found), 3) if len(found) > 1 else None


def _order(key: tuple[str, str]) -> tuple[int, int]:
    variant, policy = key
    variants = list(PUBLISHED_VARIANTS)
    v = variants.index(variant) if variant in variants else len(variants)
    names = list(POLICIES)  # the paper's order; other registry plugins after them
    return (v, names.index(policy) if policy in names else len(names))


def _fmt(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    headers = [
        "variant",
        "policy",
        "ours 100",
        "pub 100",
        "Δ100",
        "ours 130",
        "pub 130",
        "Δ130",
        "frag% 100 ours/pub",
        "s/replay",
        "",
    ]
    body = []
    for row in rows:
        a100, a130, f100 = row["alloc_ratio_100"], row["alloc_ratio_130"], row["frag_amount_100"]
        body.append(
            [
                row["variant"],
                row["policy"],
                _fmt(a100["ours"]),
                _fmt(a100["published"]),
                _fmt(a100["diff"], sign=True),
                _fmt(a130["ours"]),
                _fmt(a130["published"]),
                _fmt(a130["diff"], sign=True),
                f"{_fmt(f100['ours'])}/{_fmt(f100['published'])}",
                _fmt(row["seconds_mean"]),
                "" if row["within_tolerance"] else "!",
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *body, strict=True)]
    lines = [
        "  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [headers, *body]
    ]
    return "\n".join(line.rstrip() for line in lines)


def _progress(done: int, total: int, started: float) -> None:
    if done == total or done % 10 == 0:
        elapsed = time.perf_counter() - started
        print(f"  {done}/{total} replays, {elapsed:.0f} s", file=sys.stderr, flush=True)


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",") if s]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help="comma-separated pod lists, or 'published' for all 17 (default: %(default)s)",
    )
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43 (default 42-51)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tolerance", type=float, default=0.5, help="points (default 0.5)")
    parser.add_argument("--root", help="trace root (default: $PHALANX_TRACES or discovery)")
    parser.add_argument("--json", metavar="PATH", help="write summary and per-replay JSON to PATH")
    args = parser.parse_args(argv)
    variants = (
        list(PUBLISHED_VARIANTS)
        if args.variants == "published"
        else [v for v in args.variants.split(",") if v]
    )
    policies = [p for p in args.policies.split(",") if p]
    seeds = _seeds(args.seeds)
    root = None if args.root is None else Path(args.root)
    published = {m: read_published(m, root) for m in METRICS}
    tasks = [(v, p, s, args.root) for v in variants for p in policies for s in seeds]
    started = time.perf_counter()
    cells: list[Cell] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for cell in pool.map(_run, tasks, chunksize=1):
                cells.append(cell)
                _progress(len(cells), len(tasks), started)
    else:
        for task in tasks:
            cells.append(_run(task))
            _progress(len(cells), len(tasks), started)
    wall = time.perf_counter() - started
    rows = summarise(cells, published, seeds, args.tolerance)
    out = sys.stdout
    out.write(table(rows) + "\n")
    out.write(
        f"{len(cells)} replays in {wall:.1f} s on {args.jobs} process(es); "
        f"per replay mean {statistics.fmean(c.seconds for c in cells):.2f} s, "
        f"max {max(c.seconds for c in cells):.2f} s; "
        f"{sum(not r['within_tolerance'] for r in rows)} cell(s) beyond ±{args.tolerance} points\n"
    )
    document: dict[str, Any] = {
        "benchmark": "openb packing (FGD reproduction)",
        "seeds": seeds,
        "tolerance_points": args.tolerance,
        "wall_seconds": round(wall, 1),
        "jobs": args.jobs,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rows": rows,
    }
    if args.json in (None, "-"):
        out.write(json.dumps(document, indent=2) + "\n")  # the summary; replays with --json PATH
    if args.json is not None and args.json != "-":
        document["replays"] = [
            {
                "variant": c.variant,
                "policy": c.policy,
                "seed": c.seed,
                "seconds": round(c.seconds, 3),
                "pods": c.pods,
                "placed": c.placed,
                **{f"{m}_{a}": c.values[m][a] for m in METRICS for a in ARRIVED},
            }
            for c in cells
        ]
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
