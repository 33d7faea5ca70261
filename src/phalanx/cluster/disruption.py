"""Work lost when a running gang is stopped by an eviction: one rule for both runners.

A gang that falls below its minimum while its work runs restarts: the GPU-time since its work
started is lost, or, when its pods carry ``phalanx.dev/checkpoint-interval``, only the time
since its last checkpoint (``ran // interval × interval`` is kept). The simulator counts it on
its virtual clock (:mod:`phalanx.sim.tenancy`); the live scheduler counts it on the wall clock
from when the gang's pods were bound (:mod:`phalanx.live.preemption`), for its metrics.
"""

from __future__ import annotations

from phalanx.api.durations import parse_duration
from phalanx.cluster.workloads import GangInfo

CHECKPOINT = "phalanx.dev/checkpoint-interval"


def checkpoint_interval(gang: GangInfo) -> float | None:
    """Seconds between the gang's checkpoints (its first member's annotation), or None."""
    text = gang.members[0].spec.annotations.get(CHECKPOINT) if gang.members else None
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def kept_seconds(ran: float, interval: float | None) -> float:
    """Of ``ran`` seconds of work, what the last checkpoint kept (0 without checkpoints)."""
    return (ran // interval) * interval if interval else 0.0


def lost_gpu_seconds(gang: GangInfo, gpus: float, ran: float) -> float:
    """GPU-seconds lost when ``gang``, holding ``gpus`` GPUs for ``ran`` seconds, restarts."""
    ran = max(ran, 0.0)
    return gpus * (ran - kept_seconds(ran, checkpoint_interval(gang)))
