"""Plain-text tables and the JSON document of a simulation run."""

from __future__ import annotations

import json
from collections.abc import Sequence

from phalanx.api.durations import format_duration
from phalanx.sim.metrics import GangRecord, SimResult


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def _time(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def gang_row(gang: GangRecord) -> list[str]:
    key = f"{gang.namespace}/{gang.name}"
    why = gang.reason if gang.state in ("waiting", "deadlocked") else ""
    if len(why) > 100:
        why = why[:97] + "..."
    return [
        key,
        gang.kind,
        str(gang.min_member),
        _time(gang.submit),
        _time(gang.start),
        _time(gang.finish),
        gang.state,
        why,
    ]


def summary(result: SimResult) -> str:
    return (
        f"completed {result.count('completed')} · running {result.count('running')} · "
        f"waiting {result.count('waiting')} · deadlocked {result.count('deadlocked')} · "
        f"idle GPU-hours {result.idle_gpu_hours:.2f} (${result.idle_cost:.2f} at "
        f"${result.price:g}/GPU-hour)"
    )


def run_table(result: SimResult) -> str:
    head = f"policy {result.policy} · seed {result.seed} · ended at {_time(result.end)}"
    rows = [gang_row(gang) for gang in result.gangs]
    headers = ["GANG", "KIND", "MIN", "SUBMIT", "START", "FINISH", "STATE", "WHY"]
    if any(gang.queue not in ("", "default") for gang in result.gangs):
        headers.insert(3, "QUEUE")
        for row, gang in zip(rows, result.gangs, strict=True):
            row.insert(3, gang.queue or "-")
    lines = [head, table(headers, rows), summary(result)]
    if result.default_durations and result.default_duration is not None:
        lines.append(
            f"{result.default_durations} of {len(result.gangs)} gangs ran the default duration "
            f"{_time(result.default_duration)} (no phalanx.dev/duration or activeDeadlineSeconds)"
        )
    if result.nothing_placed:
        lines.append(result.nothing_placed)
    if result.suspended:
        lines.append(
            f"Jobs suspended (spec.suspend: true; no kueue.x-k8s.io/queue-name label for a "
            f"queue manager to admit them), no pods made: {', '.join(result.suspended)}"
        )
    if result.rejected:
        lines.append("pods refused by the API server:")
        lines.extend(f"  {line}" for line in result.rejected)
    return "\n".join(lines)


def run_json(result: SimResult) -> str:
    return json.dumps(result.to_json(), indent=2)
