"""The comparison metrics of one run, computed from its ``SimResult.to_json()`` dict.

All figures come from the run's JSON document (docs/events.md), so a saved ``phalanx simulate
-o json`` output can be summarized the same way. Times are in seconds, ratios in percent; a
figure with nothing to measure is ``None`` (``null`` in JSON).

``jct_mean``, ``jct_p50``, ``jct_p95``, ``jct_p99``
    Job completion time, ``finish − submit``, of the gangs that completed (``completion_time``
    not null): mean and percentiles. Gangs that did not finish are not counted, so read these
    next to ``completed``.
``queue_mean``, ``queue_p99``
    Queueing delay, ``start − submit``, of the gangs whose work started (``queue_delay`` not
    null), whether or not they finished.
``makespan``
    Last ``finish`` of any gang minus the first ``submit`` of any gang; null if no gang finished.
``gpu_alloc_ratio``
    Time-weighted mean over ``[0, end]`` of ``gpu_allocation / gpu_capacity``, in percent: the
    share of the cluster's GPUs bound to pods, idle or not. Null when there are no GPUs or
    ``end`` is 0.
``gpu_util``
    The same with ``gpu_running``: only GPUs of gangs whose work is running count.
    ``gpu_alloc_ratio − gpu_util`` is the share held idle.
``idle_gpu_hours``, ``idle_cost``
    As in the run: GPU-hours held by members of gangs whose work has not started, and their
    price.
``max_wait``, ``max_wait_big``
    The longest wait (start − submit; a gang still waiting at the end counts with its wait
    so far), over all gangs and over gangs of more than 32 GPUs (null: none).
``deadlocked``, ``timed_out``, ``completed``
    Gangs deadlocked at the end, gangs that exceeded ``scheduleTimeoutSeconds``, gangs completed.

``preemptions``, ``reclaims``, ``lost_gpu_hours``, ``lost_per_preemption``
    Gangs whose work was stopped by an eviction (of which by reclaim), GPU-hours of work lost
    with them, and lost GPU-hours per preemption (null without preemptions).
``high_queue_p99``
    99th percentile of the queueing delay of gangs with priority above 0.
``share_error_max``
    The largest ``share_error`` of any queue (percentage points of the cluster's GPUs,
    time-averaged while the queue had demand; see the run's ``queues``).

Percentiles use numpy's ``percentile(..., method="linear")``; an empty set gives ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from phalanx.report.format import Column, Value

#: The metric keys, in the order they are printed and written.
METRICS: tuple[str, ...] = (
    "jct_mean",
    "jct_p50",
    "jct_p95",
    "jct_p99",
    "queue_mean",
    "queue_p99",
    "max_wait",
    "max_wait_big",
    "makespan",
    "gpu_alloc_ratio",
    "gpu_util",
    "idle_gpu_hours",
    "idle_cost",
    "deadlocked",
    "timed_out",
    "completed",
    "frag_ratio",
    "attempts",
    "preemptions",
    "reclaims",
    "lost_gpu_hours",
    "lost_per_preemption",
    "high_queue_p99",
    "share_error_max",
)

COLUMNS: tuple[Column, ...] = (
    Column("completed", "DONE", "count", "higher", "gangs whose work completed"),
    Column("jct_mean", "JCT MEAN", "time", "lower", "mean finish − submit of completed gangs"),
    Column("jct_p50", "JCT P50", "time", "lower", "median finish − submit of completed gangs"),
    Column("jct_p95", "JCT P95", "time", "lower", "95th percentile of the completion time"),
    Column("jct_p99", "JCT P99", "time", "lower", "99th percentile of the completion time"),
    Column("queue_mean", "QUEUE MEAN", "time", "lower", "mean start − submit of started gangs"),
    Column("queue_p99", "QUEUE P99", "time", "lower", "99th percentile of start − submit"),
    Column("max_wait", "MAX WAIT", "time", "lower", "longest wait, still waiting included"),
    Column("max_wait_big", "MAX WAIT 33+", "time", "lower", "longest wait of 33+-GPU gangs"),
    Column("makespan", "MAKESPAN", "time", "lower", "last finish − first submit"),
    Column(
        "gpu_alloc_ratio",
        "GPU ALLOC",
        "percent",
        None,
        "time-weighted share of GPUs bound to pods, idle or not (not ranked: idle GPUs count)",
    ),
    Column(
        "gpu_util",
        "GPU UTIL",
        "percent",
        "higher",
        "time-weighted share of GPUs of gangs whose work is running",
    ),
    Column(
        "idle_gpu_hours",
        "IDLE GPU-H",
        "gpu_hours",
        "lower",
        "GPU-hours held by members of gangs that have not started",
    ),
    Column("idle_cost", "IDLE COST", "dollars", "lower", "idle GPU-hours × price"),
    Column("deadlocked", "DEADLOCKED", "count", "lower", "gangs holding GPUs that can never start"),
    Column("timed_out", "TIMED OUT", "count", "lower", "gangs past scheduleTimeoutSeconds"),
    Column(
        "frag_ratio",
        "FRAG",
        "percent",
        "lower",
        "time-weighted FGD fragmentation: idle GPU the workload's own pod shapes cannot use",
    ),
    Column("attempts", "ATTEMPTS", "count", None, "placement attempts of gangs or pods"),
    Column("preemptions", "PREEMPT", "count", None, "gangs stopped by preemption or reclaim"),
    Column("reclaims", "RECLAIM", "count", None, "of which stopped by reclaim across queues"),
    Column("lost_gpu_hours", "LOST GPU-H", "gpu_hours", "lower", "work lost to evictions"),
    Column(
        "lost_per_preemption", "LOST/PREEMPT", "gpu_hours", "lower", "lost GPU-hours per preemption"
    ),
    Column("high_queue_p99", "HIGH P99", "time", "lower", "p99 wait of gangs with priority > 0"),
    Column(
        "share_error_max",
        "SHARE ERR",
        "percent",
        "lower",
        "largest queue |used − deserved| GPU share, time-averaged while it had demand",
    ),
)


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q, method="linear"))


def mean(values: Sequence[float]) -> float | None:
    return float(np.mean(np.asarray(values, dtype=float))) if values else None


def time_average(points: Sequence[Sequence[float]], end: float) -> float | None:
    """Mean over ``[0, end]`` of a step function given as ``[[t, value], ...]`` (0 before the
    first point; each value holds until the next point, the last one until ``end``)."""
    if end <= 0:
        return None
    ordered = sorted((float(t), float(v)) for t, v in points)
    area = 0.0
    for i, (t, value) in enumerate(ordered):
        lo = min(max(t, 0.0), end)
        hi = min(ordered[i + 1][0], end) if i + 1 < len(ordered) else end
        if hi > lo:
            area += value * (hi - lo)
    return area / end


def _ratio(points: Sequence[Sequence[float]], capacity: float, end: float) -> float | None:
    average = time_average(points, end)
    if average is None or capacity <= 0:
        return None
    return 100.0 * average / capacity


def summarize(result: Mapping[str, Any]) -> dict[str, Value]:
    """The metrics of :data:`METRICS` for one run's JSON document."""
    gangs: list[Mapping[str, Any]] = list(result.get("gangs", []))
    jct = [float(g["completion_time"]) for g in gangs if g.get("completion_time") is not None]
    queue = [float(g["queue_delay"]) for g in gangs if g.get("queue_delay") is not None]
    finishes = [float(g["finish"]) for g in gangs if g.get("finish") is not None]
    submits = [float(g["submit"]) for g in gangs]
    end = float(result.get("end", 0.0))
    capacity = float(result.get("gpu_capacity", 0.0))
    makespan = max(finishes) - min(submits) if finishes else None
    return {
        "jct_mean": mean(jct),
        "jct_p50": percentile(jct, 50),
        "jct_p95": percentile(jct, 95),
        "jct_p99": percentile(jct, 99),
        "queue_mean": mean(queue),
        "queue_p99": percentile(queue, 99),
        "max_wait": result.get("max_wait"),
        "max_wait_big": result.get("max_wait_by_size", {}).get("33+"),
        "makespan": makespan,
        "gpu_alloc_ratio": _ratio(result.get("gpu_allocation", []), capacity, end),
        "gpu_util": _ratio(result.get("gpu_running", []), capacity, end),
        "idle_gpu_hours": float(result.get("idle_gpu_hours", 0.0)),
        "idle_cost": float(result.get("idle_cost", 0.0)),
        "deadlocked": int(result.get("deadlocked", 0)),
        "timed_out": int(result.get("timed_out", 0)),
        "completed": int(result.get("completed", 0)),
        "frag_ratio": time_average(result.get("fragmentation", []), end),
        "attempts": int(result.get("scheduling_attempts", 0)),
        **_queue_metrics(result, gangs),
    }


def _queue_metrics(result: Mapping[str, Any], gangs: list[Mapping[str, Any]]) -> dict[str, Value]:
    preemptions = int(result.get("preemptions", 0))
    lost = float(result.get("lost_gpu_hours", 0.0))
    high = [
        float(g["queue_delay"])
        for g in gangs
        if g.get("queue_delay") is not None and int(g.get("priority", 0)) > 0
    ]
    errors = [
        float(q["share_error"])
        for q in dict(result.get("queues", {})).values()
        if q.get("share_error") is not None
    ]
    return {
        "preemptions": preemptions,
        "reclaims": int(result.get("reclaims", 0)),
        "lost_gpu_hours": lost,
        "lost_per_preemption": lost / preemptions if preemptions else None,
        "high_queue_p99": percentile(high, 99),
        "share_error_max": max(errors) if errors else None,
    }
