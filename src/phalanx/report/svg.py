"""Small building blocks for hand-written SVG charts: scales, nice ticks, axes, legends.

Coordinates are rounded to 0.1 px to keep the documents small. Text is escaped with
:func:`esc`. Nothing here knows about scheduling; :mod:`phalanx.report.plots` draws the charts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
AXIS_COLOR = "#555"
GRID_COLOR = "#e5e5e5"
TEXT_COLOR = "#222"


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def num(value: float) -> str:
    """A coordinate: at most one decimal, no trailing zeros."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def label(value: float) -> str:
    """A tick label: ``0``, ``2.5``, ``1,000``, ``0.25``."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.6g}"


def nice_step(span: float, target: int) -> float:
    """A step of 1, 2, 2.5 or 5 × 10^k giving about ``target`` intervals over ``span``."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(1, target)
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if factor * power >= raw * (1 - 1e-9):
            return factor * power
    return 10.0 * power  # pragma: no cover - the loop always returns


def nice_ticks(hi: float, target: int = 6) -> tuple[float, list[float]]:
    """Ticks from 0 to a nice upper bound ≥ ``hi``: ``(upper, [0, step, 2·step, ...])``, with
    ``target − 2`` to ``target + 2`` intervals, choosing the bound closest to ``hi``."""
    if hi <= 0 or not math.isfinite(hi):
        hi = 1.0
    options = []  # about ``target`` intervals, the nice upper bound that wastes least space
    for wanted in range(max(2, target - 2), target + 3):
        step = nice_step(hi, wanted)
        count = math.ceil(hi / step - 1e-9)
        options.append((count * step, abs(count - target), count, step))
    upper, _, count, step = min(options)
    return upper, [round(i * step, 10) for i in range(count + 1)]


@dataclass(frozen=True, slots=True)
class TimeUnit:
    name: str  # s, min, h, d
    seconds: float


def time_unit(max_seconds: float) -> TimeUnit:
    """The unit that keeps tick labels short for a time axis reaching ``max_seconds``."""
    if max_seconds <= 180:
        return TimeUnit("s", 1.0)
    if max_seconds <= 3 * 3600:
        return TimeUnit("min", 60.0)
    if max_seconds <= 3 * 86400:
        return TimeUnit("h", 3600.0)
    return TimeUnit("d", 86400.0)


#: Value axes reach a little above their top tick, so a line at the maximum stays visible.
HEADROOM = 1.04


@dataclass(frozen=True, slots=True)
class Axis:
    """An axis from 0 to ``hi`` (data units) with ticks and their labels; or, with ``log``, a
    logarithmic axis from ``lo`` (> 0) to ``hi``, where smaller values sit at ``lo``."""

    hi: float
    ticks: list[float]
    labels: list[str]
    title: str
    lo: float = 0.0
    log: bool = False

    def fraction(self, value: float) -> float:
        """Where ``value`` falls between the ends, 0 to 1 (clamped)."""
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            share = (math.log10(max(value, self.lo)) - lo) / ((hi - lo) or 1.0)
        else:
            share = value / (self.hi or 1.0)
        return min(max(share, 0.0), 1.0)


def value_axis(hi: float, title: str, *, target: int = 5, integer: bool = False) -> Axis:
    upper, ticks = nice_ticks(hi, target)
    if integer and ticks[1] < 1:  # counts: whole-number ticks only
        upper = float(max(1, math.ceil(hi)))
        ticks = [float(i) for i in range(int(upper) + 1)]
    return Axis(upper * HEADROOM, ticks, [label(t) for t in ticks], title)


def percent_axis(title: str) -> Axis:
    ticks = [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    return Axis(100.0 * HEADROOM, ticks, [f"{int(t)}%" for t in ticks], title)


def time_axis(max_seconds: float, title: str, *, target: int = 6) -> Axis:
    """A time axis in seconds whose ticks are nice numbers of the chosen unit."""
    unit = time_unit(max_seconds)
    upper, ticks = nice_ticks(max_seconds / unit.seconds, target)
    return Axis(
        upper * unit.seconds,
        [t * unit.seconds for t in ticks],
        [label(t) for t in ticks],
        f"{title} ({unit.name})",
    )


#: Ticks of a logarithmic time axis: decades, in the units people read.
LOG_TIME_TICKS = (
    (1.0, "1s"),
    (10.0, "10s"),
    (60.0, "1m"),
    (600.0, "10m"),
    (3600.0, "1h"),
    (36000.0, "10h"),
    (86400.0, "1d"),
    (864000.0, "10d"),
    (8640000.0, "100d"),
)


def log_time_axis(values: Sequence[float], title: str) -> Axis | None:
    """A logarithmic time axis for ``values`` when they span more than two decades (a heavy
    tail squeezes a linear axis to a wall and a plateau); None otherwise."""
    positive = [v for v in values if v > 0]
    if not positive:
        return None
    low, high = min(positive), max(positive)
    if high / low <= 100:
        return None
    lo = max([t for t, _ in LOG_TIME_TICKS if t <= low], default=LOG_TIME_TICKS[0][0])
    hi = min([t for t, _ in LOG_TIME_TICKS if t >= high], default=high)
    chosen = [(t, name) for t, name in LOG_TIME_TICKS if lo <= t <= hi]
    return Axis(
        hi,
        [t for t, _ in chosen],
        [name for _, name in chosen],
        f"{title} (log scale)",
        lo=lo,
        log=True,
    )


@dataclass(frozen=True, slots=True)
class Frame:
    """The plot area of a chart inside its SVG: pixel box and the two axes."""

    left: float
    top: float
    width: float
    height: float
    x: Axis
    y: Axis

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def px(self, value: float) -> float:
        return self.left + self.width * self.x.fraction(value)

    def py(self, value: float) -> float:
        return self.bottom - self.height * self.y.fraction(value)


def text(
    x: float,
    y: float,
    content: str,
    *,
    anchor: str = "start",
    size: float = 12,
    color: str = TEXT_COLOR,
    weight: str = "normal",
    extra: str = "",
) -> str:
    return (
        f'<text x="{num(x)}" y="{num(y)}" text-anchor="{anchor}" font-size="{num(size)}" '
        f'fill="{color}" font-weight="{weight}"{extra}>{esc(content)}</text>'
    )


def x_axis(frame: Frame, *, grid: bool = True) -> str:
    parts = []
    for tick, name in zip(frame.x.ticks, frame.x.labels, strict=True):
        x = num(frame.px(tick))
        if grid:
            parts.append(
                f'<line x1="{x}" y1="{num(frame.top)}" x2="{x}" y2="{num(frame.bottom)}" '
                f'stroke="{GRID_COLOR}"/>'
            )
        parts.append(
            f'<line x1="{x}" y1="{num(frame.bottom)}" x2="{x}" y2="{num(frame.bottom + 5)}" '
            f'stroke="{AXIS_COLOR}"/>'
        )
        parts.append(text(frame.px(tick), frame.bottom + 18, name, anchor="middle", size=11))
    parts.append(
        f'<line x1="{num(frame.left)}" y1="{num(frame.bottom)}" x2="{num(frame.right)}" '
        f'y2="{num(frame.bottom)}" stroke="{AXIS_COLOR}"/>'
    )
    parts.append(
        text(
            frame.left + frame.width / 2,
            frame.bottom + 36,
            frame.x.title,
            anchor="middle",
            color=AXIS_COLOR,
            extra=' class="axis-title"',
        )
    )
    return f'<g class="x-axis">{"".join(parts)}</g>'


def y_axis(frame: Frame, *, grid: bool = True) -> str:
    parts = []
    for tick, name in zip(frame.y.ticks, frame.y.labels, strict=True):
        y = num(frame.py(tick))
        if grid:
            parts.append(
                f'<line x1="{num(frame.left)}" y1="{y}" x2="{num(frame.right)}" y2="{y}" '
                f'stroke="{GRID_COLOR}"/>'
            )
        parts.append(
            f'<line x1="{num(frame.left - 5)}" y1="{y}" x2="{num(frame.left)}" y2="{y}" '
            f'stroke="{AXIS_COLOR}"/>'
        )
        parts.append(text(frame.left - 8, frame.py(tick) + 4, name, anchor="end", size=11))
    parts.append(
        f'<line x1="{num(frame.left)}" y1="{num(frame.top)}" x2="{num(frame.left)}" '
        f'y2="{num(frame.bottom)}" stroke="{AXIS_COLOR}"/>'
    )
    cx, cy = frame.left - 48, frame.top + frame.height / 2
    parts.append(
        text(
            cx,
            cy,
            frame.y.title,
            anchor="middle",
            color=AXIS_COLOR,
            extra=f' transform="rotate(-90 {num(cx)} {num(cy)})" class="axis-title"',
        )
    )
    return f'<g class="y-axis">{"".join(parts)}</g>'


@dataclass(frozen=True, slots=True)
class LegendItem:
    label: str
    color: str
    dash: str = ""  # stroke-dasharray for a line sample
    swatch: str = "line"  # line | box


def legend(items: Sequence[LegendItem], x: float, y: float, max_width: float) -> tuple[str, float]:
    """A legend laid out left to right, wrapping at ``max_width``; returns (svg, height)."""
    parts = []
    cx, cy = x, y
    for item in items:
        width = 34 + 7.2 * len(item.label) + 18
        if cx > x and cx + width > x + max_width:
            cx, cy = x, cy + 20
        if item.swatch == "line":
            dash = f' stroke-dasharray="{item.dash}"' if item.dash else ""
            parts.append(
                f'<line x1="{num(cx)}" y1="{num(cy)}" x2="{num(cx + 26)}" y2="{num(cy)}" '
                f'stroke="{item.color}" stroke-width="3"{dash}/>'
            )
        else:
            parts.append(
                f'<rect x="{num(cx + 4)}" y="{num(cy - 6)}" width="18" height="12" '
                f'fill="{item.color}" stroke="#888" stroke-width="0.5"/>'
            )
        parts.append(text(cx + 32, cy + 4, item.label))
        cx += width
    return f'<g class="legend">{"".join(parts)}</g>', cy - y + 20


def svg(name: str, title: str, width: float, height: float, body: str) -> str:
    return (
        f'<svg data-plot="{esc(name)}" viewBox="0 0 {num(width)} {num(height)}" '
        f'width="{num(width)}" height="{num(height)}" role="img" '
        f'font-family="{esc(FONT)}" preserveAspectRatio="xMinYMin meet">'
        f"<title>{esc(title)}</title>{body}</svg>"
    )
