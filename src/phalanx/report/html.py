"""A self-contained HTML report comparing policies on one workload.

One file, no network: inline CSS and inline SVG drawn by :mod:`phalanx.report.plots`, no
JavaScript. It holds a title with the workload and seed, the metrics table (one row per policy,
best value per column highlighted), GPU allocation and utilization over time, queue length
over time, the JCT CDF and a Gantt chart of the gangs. Its input is plain data — each policy's
``SimResult.to_json()`` dict and its metrics — so this module does not depend on the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phalanx import __version__
from phalanx.report.format import (
    Column,
    Value,
    best_rows,
    estimates_note,
    format_value,
    human_time,
    run_notes,
)
from phalanx.report.plots import Series, Style, cdf_chart, gantt_chart, step_chart, styles
from phalanx.report.shares import queue_share_figures
from phalanx.report.svg import esc, percent_axis, value_axis
from phalanx.report.waits import wait_by_size_chart

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif;
  margin: 24px 32px 48px; color: #222; background: #fff; max-width: 1340px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h1 code { font-size: 20px; background: #f3f3f3; padding: 1px 6px; border-radius: 4px; }
h2 { font-size: 16px; margin: 28px 0 6px; }
p.meta, p.note { color: #555; margin: 4px 0; font-size: 13px; }
table.metrics { border-collapse: collapse; font-size: 12px; margin-top: 8px;
  font-variant-numeric: tabular-nums; }
table.metrics th, table.metrics td { padding: 5px 4px; border-bottom: 1px solid #e3e3e3;
  text-align: right; white-space: nowrap; }
table.metrics th { background: #f6f6f6; font-weight: 600; font-size: 12px; cursor: help; }
table.metrics th:first-child, table.metrics td:first-child { text-align: left; }
table.metrics td.best { background: #dff3dc; font-weight: 700; color: #1d5e1a; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  margin-right: 7px; vertical-align: -1px; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr));
  gap: 18px 28px; }
figure { margin: 0; }
figcaption { font-weight: 600; font-size: 14px; margin: 18px 0 2px; }
figcaption span { font-weight: normal; color: #666; font-size: 12px; }
svg { max-width: 100%; height: auto; display: block; }
dl { font-size: 13px; display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; }
dt { font-weight: 600; } dd { margin: 0; color: #444; }
footer { margin-top: 32px; color: #888; font-size: 12px; }
"""


def metrics_table(
    columns: Sequence[Column],
    metrics: Mapping[str, Mapping[str, Value]],
    policy_styles: Mapping[str, Style],
) -> str:
    names = list(metrics)
    best = {c.key: best_rows(c, [metrics[n].get(c.key) for n in names]) for c in columns}
    head = "".join(f'<th title="{esc(c.help)}">{esc(c.header)}</th>' for c in columns)
    rows = []
    for i, name in enumerate(names):
        swatch = f'<span class="swatch" style="background:{policy_styles[name].color}"></span>'
        cells = [f"<td>{swatch}{esc(name)}</td>"]
        for column in columns:
            cls = ' class="best"' if i in best[column.key] else ""
            value = format_value(column.kind, metrics[name].get(column.key))
            cells.append(f'<td data-key="{esc(column.key)}"{cls}>{esc(value)}</td>')
        rows.append(f'<tr data-policy="{esc(name)}">{"".join(cells)}</tr>')
    return (
        f'<table class="metrics"><thead><tr><th>POLICY</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _pairs(points: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in points]


def _percent(points: Sequence[Sequence[float]], capacity: float) -> list[tuple[float, float]]:
    scale = 100.0 / capacity if capacity > 0 else 0.0
    return [(float(t), float(v) * scale) for t, v in points]


def _figure(caption: str, note: str, chart: str) -> str:
    extra = f" <span>{esc(note)}</span>" if note else ""
    return f"<figure><figcaption>{esc(caption)}{extra}</figcaption>{chart}</figure>"


def render_report(
    *,
    workload: str,
    seed: int,
    results: Mapping[str, Mapping[str, Any]],
    metrics: Mapping[str, Mapping[str, Value]],
    columns: Sequence[Column],
    until: float | None = None,
    gantt_limit: int = 200,
    color_order: Sequence[str] = (),
    estimates: str = "given",
) -> str:
    """The HTML document. ``results``: each policy's ``SimResult.to_json()``, in row order;
    ``metrics``: each policy's metrics, keyed like ``columns``; ``color_order``: policies in
    the order that assigns their colors (see :func:`~phalanx.report.plots.styles`);
    ``estimates``: the runs' ``--estimates`` model, named in the heading unless ``given``."""
    names = list(results)
    policy_styles = styles(names, color_order)
    first = next(iter(results.values()), {})
    capacity = float(first.get("gpu_capacity", 0.0))
    gangs = len(first.get("gangs", []))
    horizon = f"until {human_time(until)}" if until is not None else "until nothing can change"

    ends = [float(result.get("end", 0.0)) for result in results.values()]
    horizon_end = max(ends, default=0.0)

    def lines(key: str, percent: bool) -> list[Series]:
        # A run that ended early ended because nothing could change any more: its last value
        # holds, so every line runs on to the longest run's end.
        out = []
        for name, result in results.items():
            points = result.get(key, [])
            data = _percent(points, capacity) if percent else _pairs(points)
            out.append(Series(name, policy_styles[name], data, horizon_end))
        return out

    allocation = step_chart(
        "gpu-allocation",
        "GPU allocation over time: GPUs bound to pods, % of capacity",
        lines("gpu_allocation", True),
        percent_axis("GPUs allocated (% of capacity)"),
    )
    utilization = step_chart(
        "gpu-utilization",
        "GPU utilization over time: GPUs of running gangs, % of capacity",
        lines("gpu_running", True),
        percent_axis("GPUs running work (% of capacity)"),
    )
    queue_series = lines("queue_length", False)
    most = max((v for s in queue_series for _, v in s.points), default=0.0)
    queue = step_chart(
        "queue-length",
        "Queue length over time: gangs submitted whose work has not started",
        queue_series,
        value_axis(max(most, 1.0), "gangs waiting", integer=True),
    )
    samples = {
        name: [
            float(g["completion_time"])
            for g in result.get("gangs", [])
            if g.get("completion_time") is not None
        ]
        for name, result in results.items()
    }
    totals = {name: len(result.get("gangs", [])) for name, result in results.items()}
    cdf = cdf_chart(
        "jct-cdf",
        "Job completion time CDF: share of all gangs completed within a time",
        samples,
        totals,
        policy_styles,
    )
    waits = wait_by_size_chart(
        "wait-by-size",
        "Longest wait by gang size (GPUs), still waiting included",
        results,
        policy_styles,
    )
    gantt, drawn, total = gantt_chart(
        "gantt", "Gantt chart of gangs per policy", results, policy_styles, limit=gantt_limit
    )
    gantt_note = (
        f"showing the first {drawn} of {total} gangs by submit time"
        if drawn < total
        else f"all {total} gangs, by submit time"
    )
    definitions = "".join(f"<dt>{esc(c.header)}</dt><dd>{esc(c.help)}</dd>" for c in columns) + (
        "<dt>percentiles</dt><dd>numpy linear interpolation; "
        "“-” when there is nothing to measure</dd>"
    )
    title = f"phalanx compare — {workload} (seed {seed})"
    body = [
        f"<h1>phalanx compare: <code>{esc(workload)}</code></h1>",
        f'<p class="meta">seed {seed}{esc(estimates_note(estimates))} · {esc(horizon)} · '
        f"{gangs} gangs · "
        f"{capacity:g} GPUs · policies: {esc(', '.join(names))}</p>",
        "<h2>Metrics</h2>",
        metrics_table(columns, metrics, policy_styles),
        *(f'<p class="note">{esc(note)}</p>' for note in run_notes(results)),
        '<p class="note">Best value per column highlighted (none when all policies tie). '
        "GPU ALLOC is not ranked: GPUs held idle by gangs that have not started count as "
        "allocated. JCT and queue figures cover only the gangs that completed or started; "
        "read them next to DONE. Hover a header for its definition.</p>",
        "<h2>Over time</h2>",
        (
            '<p class="note">Runs end when nothing can change any more; a run that ended '
            "before the longest one keeps its final state to the right, in these plots and in "
            "the Gantt chart.</p>"
            if len(set(ends)) > 1
            else ""
        ),
        '<div class="plots">',
        _figure("GPU allocation", "GPUs bound to pods, idle or not", allocation),
        _figure("GPU utilization", "GPUs of gangs whose work is running", utilization),
        _figure("Queue length", "gangs submitted, not started", queue),
        _figure("JCT CDF", "curves end below 100% when gangs did not complete", cdf),
        _figure("Wait by gang size", "longest start − submit per GPU size", waits),
        "</div>",
        *(
            ['<h2>Queue shares</h2><div class="plots">', *shares, "</div>"]
            if (shares := queue_share_figures(results, capacity, horizon_end))
            else []
        ),
        "<h2>Gangs</h2>",
        _figure("Gantt chart", gantt_note, gantt),
        "<h2>Definitions</h2>",
        f"<dl>{definitions}</dl>",
        f"<footer>generated by phalanx {esc(__version__)}</footer>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )
