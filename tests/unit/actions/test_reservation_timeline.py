"""Timeline.earliest: windows start after ``after`` and last the whole duration."""

from __future__ import annotations

import numpy as np

from phalanx.actions.timeline import Found, Memo, Timeline

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


def test_memo_reuses_an_answer_while_the_timeline_holds_what_it_held() -> None:
    """0 GPUs free until 10, 4 from 10: a 4-GPU gang starts at 10. Time passing keeps the
    answer (and its version); a take changes the version and the answer is searched again;
    an answer in the past is searched again."""
    line = timeline([0, 4], [0.0, 10.0])
    request = np.array([1000, 4000], dtype=np.int64)
    searches: list[float] = []

    def search() -> Found:
        searches.append(line.now)
        return line.earliest([request], [MASK], 5.0)

    memo = Memo()
    found = memo.earliest("g", line.version, line.now, search)
    assert found is not None and found[0] == 10.0
    line.advance(4.0)
    assert memo.earliest("g", line.version, line.now, search) == found
    assert searches == [0.0]  # nothing taken or given back: reused
    line.take(10.0, 30.0, found[1])
    later = memo.earliest("g", line.version, line.now, search)
    assert later is not None and later[0] == 30.0 and searches == [0.0, 4.0]
    line.advance(31.0)
    again = memo.earliest("g", line.version, line.now, search)
    assert again is not None and again[0] == 31.0 and searches == [0.0, 4.0, 31.0]
