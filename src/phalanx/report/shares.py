"""Queue shares over time, for the compare report: one chart per policy.

Each queue of a run is one color: its held GPUs as a solid step line and its deserved GPUs as
a dashed one, both in percent of the cluster's GPUs, from the run's ``queues[].share`` series
(``[[t, held, deserved]]`` at each change). Nothing is drawn for runs with a single queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phalanx.report.plots import Series, Style, step_chart, styles
from phalanx.report.svg import esc, percent_axis


def queue_share_figures(
    results: Mapping[str, Mapping[str, Any]], capacity: float, end: float
) -> list[str]:
    """HTML figures (empty when no run has two queues or more)."""
    figures: list[str] = []
    scale = 100.0 / capacity if capacity > 0 else 0.0
    for policy, result in results.items():
        queues: Mapping[str, Any] = result.get("queues", {})
        if len(queues) < 2:
            continue
        colors = styles(sorted(queues))
        lines: list[Series] = []
        for name in sorted(queues):
            points: Sequence[Sequence[float]] = queues[name].get("share", [])
            style = colors[name]
            held = [(float(t), float(h) * scale) for t, h, _ in points]
            deserved = [(float(t), float(d) * scale) for t, _, d in points]
            lines.append(Series(f"{name} held", Style(style.color, "", style.tint), held, end))
            lines.append(
                Series(f"{name} deserved", Style(style.color, "6 4", style.tint), deserved, end)
            )
        chart = step_chart(
            f"queue-shares-{policy}",
            f"Queue shares over time under {policy}: held (solid) and deserved (dashed)",
            lines,
            percent_axis("GPUs (% of capacity)"),
        )
        figures.append(
            f"<figure><figcaption>Queue shares — {esc(policy)} <span>held solid, deserved "
            f"dashed</span></figcaption>{chart}</figure>"
        )
    return figures
