"""Timeline.earliest: windows start after ``after`` and last the whole duration."""

from __future__ import annotations

import numpy as np

from phalanx.actions.timeline import Timeline

GPU_COL = 1
MASK = np.array([True])


def timeline(free_gpus: list[int], times: list[float]) -> Timeline:
    """One node; per row from ``times``, the whole GPUs free on it (cpu plentiful, one device
    per GPU)."""
    free = np.zeros((len(times), 1, 2), dtype=np.int64)
    free[:, 0, 0] = 64_000
    free[:, 0, GPU_COL] = np.array(free_gpus) * 1000
    gpus = np.zeros((len(times), 1, 4), dtype=np.int64)
    for k, count in enumerate(free_gpus):
        gpus[k, 0, :count] = 1000
    return Timeline(list(times), free, gpus, GPU_COL)


def start(line: Timeline, gpus: int, duration: float, after: float) -> float | None:
    request = np.array([1000, 1000 * gpus], dtype=np.int64)
    found = line.earliest([request], [MASK], duration, after=after)
    return None if found is None else found[0]


def test_after_skips_the_rows_up_to_it_and_windows_keep_their_length() -> None:
    """2 GPUs free from 0, none from 10, 4 from 20, 2 from 30 on."""
    line = timeline([2, 0, 4, 2], [0.0, 10.0, 20.0, 30.0])
    assert start(line, 2, 5.0, after=-1.0) == 0.0  # ends by 10
    assert start(line, 2, 15.0, after=0.0) == 20.0  # 20-35: at least 2 in every row
    assert start(line, 4, 10.0, after=0.0) == 20.0  # 4 only from 20 to 30
    assert start(line, 4, 15.0, after=0.0) is None
    assert start(line, 2, 15.0, after=20.0) == 30.0
