"""The wait-by-size chart: the longest wait of each policy per gang size bucket.

Grouped bars, one group per size bucket of the runs' ``max_wait_by_size`` (``1``, ``2-8``,
``9-32``, ``33+`` GPUs; see :mod:`phalanx.sim.waits`), one bar per policy in its color, on a
time axis. A gang still waiting at the end counts with its wait so far, so starvation shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.report.format import human_time
from phalanx.report.plots import Style
from phalanx.report.svg import Frame, LegendItem, esc, legend, num, svg, text, time_axis, y_axis

BUCKETS = ("1", "2-8", "9-32", "33+")


def wait_by_size_chart(
    name: str,
    title: str,
    results: Mapping[str, Mapping[str, Any]],
    policy_styles: Mapping[str, Style],
    *,
    width: float = 640,
    height: float = 330,
) -> str:
    waits = {policy: dict(run.get("max_wait_by_size") or {}) for policy, run in results.items()}
    buckets = [b for b in BUCKETS if any(b in w for w in waits.values())] or ["1"]
    top_wait = max((float(v) for w in waits.values() for v in w.values()), default=0.0)
    y = time_axis(top_wait or 1.0, "longest wait")
    left, right, bottom = 72.0, 18.0, 48.0
    items = [LegendItem(p, policy_styles[p].color, "") for p in results]
    key, key_height = legend(items, left, 16, width - left - right)
    top = 16 + key_height + 6
    frame = Frame(left, top, width - left - right, height - top - bottom, y, y)
    body = [y_axis(frame), key]
    group = frame.width / len(buckets)
    bar = group * 0.8 / max(1, len(results))
    ticks = []
    for g, bucket in enumerate(buckets):
        x0 = frame.left + g * group + group * 0.1
        for i, policy in enumerate(results):
            value = waits[policy].get(bucket)
            if value is None:
                continue
            y_top = frame.py(float(value))
            body.append(
                f'<rect class="bar" data-policy="{esc(policy)}" x="{num(x0 + i * bar)}" '
                f'y="{num(y_top)}" width="{num(bar * 0.92)}" '
                f'height="{num(frame.bottom - y_top)}" fill="{policy_styles[policy].color}">'
                f"<title>{esc(policy)}, {esc(bucket)} GPUs: {esc(human_time(float(value)))}"
                "</title></rect>"
            )
        label = f"{bucket} GPU" + ("" if bucket == "1" else "s")
        ticks.append(text(x0 + group * 0.4, frame.bottom + 18, label, anchor="middle"))
    axis = text(frame.left + frame.width / 2, frame.bottom + 38, "gang size", anchor="middle")
    body.append(f'<g class="x-axis">{"".join(ticks)}{axis}</g>')
    return svg(name, title, width, height, "".join(body))
