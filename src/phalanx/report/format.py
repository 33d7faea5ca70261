"""How a metric value is written for people: times, percentages, GPU-hours, dollars, counts.

A :class:`Column` describes one metric of a comparison: its key in the metrics dict, a header,
the kind of value (which picks the formatter) and which direction is better (``None`` when a
higher or lower value is not better by itself). The plain-text table and the HTML report use
the same columns, so both print the same numbers the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from phalanx.sim.instants import note as livelock_note
from phalanx.sim.loops import note as retry_loop_note

Kind = Literal["time", "percent", "gpu_hours", "dollars", "count"]
Better = Literal["lower", "higher"] | None
Value = float | int | None


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    kind: Kind
    better: Better
    help: str


def human_time(seconds: float) -> str:
    """``0.5s``, ``45s``, ``12m30s``, ``3h05m``, ``2d03h``."""
    if seconds < 0:
        return "-" + human_time(-seconds)
    if seconds < 59.5:
        if seconds < 10 and round(seconds, 1) != round(seconds):
            return f"{seconds:.1f}s"
        return f"{round(seconds)}s"
    s = round(seconds)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 48 * 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def format_value(kind: Kind, value: Value) -> str:
    if value is None:
        return "-"
    if kind == "time":
        return human_time(float(value))
    if kind == "percent":
        return f"{value:.1f}%"
    if kind == "gpu_hours":
        return f"{value:.2f}"
    if kind == "dollars":
        return f"${value:,.2f}"
    return f"{int(value)}"


def best_rows(column: Column, values: Sequence[Value]) -> set[int]:
    """Indices of the best values of a column; none when it is unranked or all values tie."""
    if column.better is None:
        return set()
    present = [(i, float(v)) for i, v in enumerate(values) if v is not None]
    if len(present) < 2 or len({v for _, v in present}) == 1:
        return set()
    pick = min if column.better == "lower" else max
    best = pick(v for _, v in present)
    return {i for i, v in present if abs(v - best) <= 1e-9 * max(1.0, abs(best))}


def table_rows(
    columns: Sequence[Column], metrics: Mapping[str, Mapping[str, Value]]
) -> list[list[str]]:
    """One row of formatted values per policy (the policy name first)."""
    return [
        [name, *(format_value(c.kind, row.get(c.key)) for c in columns)]
        for name, row in metrics.items()
    ]


def estimates_note(estimates: str) -> str:
    """`` · estimates MODEL`` for a comparison whose schedulers saw runtime estimates of the
    ``--estimates`` model MODEL; empty for ``given`` (the manifests' own hints, the default)."""
    return "" if estimates == "given" else f" · estimates {estimates}"


def run_notes(results: Mapping[str, Mapping[str, object]]) -> list[str]:
    """One line per fact a reader of a comparison must not miss: gangs that ran the default
    duration (real manifests carry none), and each policy that placed no pod, with why."""
    notes: list[str] = []
    first = next(iter(results.values()), {})
    count = first.get("default_duration_gangs")
    default = first.get("default_duration")
    gangs = first.get("gangs")
    if isinstance(count, int) and count and isinstance(default, int | float):
        total = len(gangs) if isinstance(gangs, list) else count
        notes.append(
            f"{count} of {total} gangs ran the default duration {human_time(float(default))} "
            "(no phalanx.dev/duration or activeDeadlineSeconds; set it with --default-duration)"
        )
    for policy, result in results.items():
        why = result.get("nothing_placed")
        if isinstance(why, str) and why:
            notes.append(f"{policy}: {why}")
        cut = result.get("livelocks")
        if isinstance(cut, list) and cut:
            notes.append(livelock_note(policy, cut))
        loop = result.get("retry_loop")
        if isinstance(loop, dict):
            notes.append(retry_loop_note(policy, loop))
    return notes
