"""The charts of a comparison report, drawn as inline SVG from SimResult JSON dicts.

* :func:`step_chart` — step functions of time (GPU allocation, GPU utilization, queue length),
  one line per policy;
* :func:`cdf_chart` — the distribution of job completion times, one line per policy;
* :func:`gantt_chart` — one panel per policy, one row per gang (same rows in every panel):
  a light bar from submit to start (waiting), a solid bar from start to finish (running).

Each chart is one ``<svg data-plot="NAME">`` with a ``<title>``, axes with ticks and units, and
a legend. Every policy keeps its color (and dash pattern) in all charts: see :func:`styles`.
Long series are thinned to what a pixel column can show (first, lowest, highest and last value).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phalanx.report.format import human_time
from phalanx.report.svg import (
    AXIS_COLOR,
    Axis,
    Frame,
    LegendItem,
    esc,
    label,
    legend,
    log_time_axis,
    nice_ticks,
    num,
    percent_axis,
    svg,
    text,
    time_axis,
    x_axis,
    y_axis,
)

#: Tableau-like colors, distinguishable and readable on white; no pure red (deadlocks use it).
PALETTE = (
    "#4e79a7",  # blue
    "#f28e2b",  # orange
    "#59a14f",  # green
    "#b07aa1",  # purple
    "#76b7b2",  # teal
    "#edc948",  # yellow
    "#9c755f",  # brown
    "#ff9da7",  # pink
    "#bab0ac",  # grey
)
DASHES = ("", "7 4", "2 3", "9 3 2 3")
DEADLOCK_COLOR = "#f3b3b3"
DEADLOCK_EDGE = "#c0392b"


@dataclass(frozen=True, slots=True)
class Style:
    color: str
    dash: str
    tint: str  # the light color of waiting bars


def tint(color: str, amount: float = 0.68) -> str:
    """``color`` mixed with white (``amount`` of white)."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    mixed = (round(c + (255 - c) * amount) for c in (r, g, b))
    return "#" + "".join(f"{c:02x}" for c in mixed)


def styles(policies: Sequence[str], order: Sequence[str] = ()) -> dict[str, Style]:
    """A color and dash pattern per policy, the same in every chart.

    A policy's style follows its position in ``order`` (pass the policy registry so that a
    policy keeps its color from one report to the next), then policies not in ``order`` follow
    in the order given.
    """
    ranked = [*order, *(name for name in policies if name not in order)]
    out = {}
    for name in policies:
        i = ranked.index(name)
        color = PALETTE[i % len(PALETTE)]
        out[name] = Style(color, DASHES[i % len(DASHES)], tint(color))
    return out


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    style: Style
    points: Sequence[tuple[float, float]]  # a step function: each value holds until the next
    end: float  # where the last value stops


def step_d(frame: Frame, points: Sequence[tuple[float, float]], end: float) -> str:
    """The ``d`` of a step line through ``points`` up to ``end``.

    Points that fall in the same half-pixel column collapse to its first, lowest, highest and
    last value, so a series of a million changes still draws as a few thousand commands.
    """
    columns: list[tuple[float, list[float]]] = []
    for t, value in sorted(points):
        if t > end:
            break
        x, y = round(frame.px(t) * 2) / 2, round(frame.py(value), 1)  # half-pixel columns
        if columns and columns[-1][0] == x:
            columns[-1][1].append(y)
        else:
            columns.append((x, [y]))
    if not columns:
        return ""
    parts: list[str] = []
    last_y = 0.0
    for x, ys in columns:
        if not parts:
            parts.append(f"M{num(x)},{num(ys[0])}")
        else:
            parts.append(f"H{num(x)}")
            if ys[0] != last_y:
                parts.append(f"V{num(ys[0])}")
        last_y = ys[0]
        if len(ys) > 1:
            for y in (min(ys), max(ys), ys[-1]):
                if y != last_y:
                    parts.append(f"V{num(y)}")
                    last_y = y
    end_x = round(frame.px(end) * 2) / 2
    if end_x > columns[-1][0]:
        parts.append(f"H{num(end_x)}")
    return "".join(parts)


def _line(frame: Frame, series: Series) -> str:
    d = step_d(frame, series.points, series.end)
    dash = f' stroke-dasharray="{series.style.dash}"' if series.style.dash else ""
    return (
        f'<path class="series" data-policy="{esc(series.label)}" '
        f'data-points="{len(series.points)}" d="{d}" fill="none" stroke="{series.style.color}" '
        f'stroke-width="2.2" stroke-linejoin="round" stroke-opacity="0.9"{dash}>'
        f"<title>{esc(series.label)}</title></path>"
    )


def _legend_items(series: Sequence[Series]) -> list[LegendItem]:
    return [LegendItem(s.label, s.style.color, s.style.dash) for s in series]


def _chart(
    name: str,
    title: str,
    lines: Sequence[Series],
    x: Axis,
    y: Axis,
    width: float,
    height: float,
) -> str:
    left, right, bottom = 72.0, 18.0, 48.0
    key, key_height = legend(_legend_items(lines), left, 16, width - left - right)
    top = 16 + key_height + 6
    frame = Frame(left, top, width - left - right, height - top - bottom, x, y)
    body = [x_axis(frame), y_axis(frame), key]
    body.extend(_line(frame, s) for s in lines)
    return svg(name, title, width, height, "".join(body))


def step_chart(
    name: str,
    title: str,
    lines: Sequence[Series],
    y: Axis,
    *,
    width: float = 640,
    height: float = 330,
) -> str:
    """Step functions of time, one line per series, on a shared time axis."""
    horizon = max((s.end for s in lines), default=0.0)
    x = time_axis(horizon if horizon > 0 else 1.0, "simulated time")
    return _chart(name, title, lines, x, y, width, height)


def cdf_chart(
    name: str,
    title: str,
    samples: Mapping[str, Sequence[float]],
    totals: Mapping[str, int],
    policy_styles: Mapping[str, Style],
    *,
    width: float = 640,
    height: float = 330,
) -> str:
    """Share of all gangs (in percent) completed within each completion time; the time axis is
    logarithmic when the completion times span more than two decades."""
    every = [v for values in samples.values() for v in values]
    x = log_time_axis(every, "job completion time") or time_axis(
        max(every, default=0.0) or 1.0, "job completion time"
    )
    lines = []
    for policy, values in samples.items():
        total = max(1, totals.get(policy, len(values)))
        points = [(0.0, 0.0)]
        for i, value in enumerate(sorted(values), start=1):
            points.append((value, 100.0 * i / total))
        lines.append(Series(policy, policy_styles[policy], points, x.hi))
    y = percent_axis("gangs completed (% of all)")
    return _chart(name, title, lines, x, y, width, height)


@dataclass(frozen=True, slots=True)
class Bar:
    submit: float
    start: float | None
    finish: float | None
    state: str


def _bar_title(key: str, bar: Bar, end: float) -> str:
    """The tooltip of a gang's bars; ``end`` is when its run ended."""
    parts = [key, f"submitted at {human_time(bar.submit)}"]
    if bar.start is not None:
        parts.append(f"waited {human_time(bar.start - bar.submit)}")
        stop = bar.finish if bar.finish is not None else end
        parts.append(f"ran {human_time(stop - bar.start)}")
    elif bar.finish is not None:
        parts.append(f"waited {human_time(bar.finish - bar.submit)}")
    else:
        parts.append(f"waited {human_time(end - bar.submit)} until the run ended")
    parts.append(bar.state)
    return " · ".join(parts)


def gantt_rows(
    results: Mapping[str, Mapping[str, Any]], limit: int
) -> tuple[list[str], dict[str, dict[str, Bar]], int]:
    """Gang keys in submit order (at most ``limit``), each policy's bars, and the gang count."""
    bars: dict[str, dict[str, Bar]] = {}
    first_submit: dict[str, float] = {}
    for policy, result in results.items():
        bars[policy] = {}
        for gang in result.get("gangs", []):
            key = f"{gang['namespace']}/{gang['name']}"
            if gang.get("kind", "PodGroup") != "PodGroup":
                key += " (pod)"
            bar = Bar(float(gang["submit"]), gang.get("start"), gang.get("finish"), gang["state"])
            bars[policy][key] = bar
            first_submit[key] = min(first_submit.get(key, bar.submit), bar.submit)
    order = sorted(first_submit, key=lambda k: (first_submit[k], k))
    return order[:limit], bars, len(order)


def gantt_chart(
    name: str,
    title: str,
    results: Mapping[str, Mapping[str, Any]],
    policy_styles: Mapping[str, Style],
    *,
    limit: int = 200,
    width: float = 1320,
) -> tuple[str, int, int]:
    """The Gantt chart; returns (svg, gangs drawn, gangs in all)."""
    rows, bars, total = gantt_rows(results, limit)
    horizon = max((float(r.get("end", 0.0)) for r in results.values()), default=0.0)
    x_scale = time_axis(horizon if horizon > 0 else 1.0, "simulated time", target=4)
    count = max(1, len(rows))
    row = max(160.0 / count, min(16.0, max(2.5, 560.0 / count)))  # ≥ 160 px in all
    bar_height = min(row * 0.76, 22.0)
    left, right, gap, bottom = 72.0, 18.0, 22.0, 48.0
    key, key_height = legend(
        [
            LegendItem("waiting (submit → start), light", "#cfcfcf", swatch="box"),
            LegendItem("running (start → finish), solid", "#6f6f6f", swatch="box"),
            LegendItem("waiting, deadlocked at the end", DEADLOCK_COLOR, swatch="box"),
        ],
        left,
        16,
        width - left - right,
    )
    top = 16 + key_height + 30
    plot_height = row * count
    height = top + plot_height + bottom
    policies = list(results)
    panel = (width - left - right - gap * (len(policies) - 1)) / max(1, len(policies))
    _, steps = nice_ticks(float(count), 5)
    numbers = sorted({1, *(int(t) for t in steps if 1 <= t <= count)})
    row_axis = Axis(  # gang #1 on top: the tick of row k is at the middle of that row
        float(count),
        [count - k + 0.5 for k in numbers],
        [label(k) for k in numbers],
        "gangs, in submit order (#)",
    )
    body = [key]
    for i, policy in enumerate(policies):
        style = policy_styles[policy]
        frame = Frame(left + i * (panel + gap), top, panel, plot_height, x_scale, row_axis)
        done = sum(b.state == "completed" for b in bars[policy].values())
        body.append(
            text(
                frame.left,
                top - 10,
                f"{policy}",
                size=13,
                color=style.color,
                weight="bold",
            )
        )
        body.append(
            text(
                frame.right,
                top - 10,
                f"{done}/{len(bars[policy])} done",
                anchor="end",
                size=11,
                color=AXIS_COLOR,
            )
        )
        body.append(x_axis(frame))
        if i == 0:
            body.append(y_axis(frame, grid=False))
        else:
            body.append(
                f'<line x1="{num(frame.left)}" y1="{num(frame.top)}" x2="{num(frame.left)}" '
                f'y2="{num(frame.bottom)}" stroke="{AXIS_COLOR}"/>'
            )
        end = float(results[policy].get("end", 0.0))
        marks = [f'<g class="gantt" data-policy="{esc(policy)}">']
        for r, gang in enumerate(rows):
            bar = bars[policy].get(gang)
            if bar is None:
                continue
            h = bar_height
            y = frame.top + r * row + (row - h) / 2
            # A run that ended before the horizon ended because nothing could change any more:
            # what was still open stays open, so its bar runs on to the horizon.
            stop_wait = bar.start if bar.start is not None else bar.finish
            if stop_wait is None:
                stop_wait = horizon
            shapes = []
            x0, x1 = frame.px(bar.submit), frame.px(stop_wait)
            if x1 - x0 > 0.05:
                deadlocked = bar.state == "deadlocked"
                fill = DEADLOCK_COLOR if deadlocked else style.tint
                edge = f' stroke="{DEADLOCK_EDGE}" stroke-width="0.6"' if deadlocked else ""
                shapes.append(
                    f'<rect class="waiting" x="{num(x0)}" y="{num(y)}" '
                    f'width="{num(max(x1 - x0, 0.1))}" height="{num(h)}" fill="{fill}"{edge}/>'
                )
            if bar.start is not None:
                x2 = frame.px(bar.finish if bar.finish is not None else horizon)
                x1 = frame.px(bar.start)
                shapes.append(
                    f'<rect class="running" x="{num(x1)}" y="{num(y)}" '
                    f'width="{num(max(x2 - x1, 1.0))}" height="{num(h)}" fill="{style.color}"/>'
                )
            marks.append(
                f"<g><title>{esc(_bar_title(gang, bar, end))}</title>{''.join(shapes)}</g>"
            )
        marks.append("</g>")
        body.append("".join(marks))
    return svg(name, title, width, height, "".join(body)), len(rows), total
