"""smallest_total: the sum of the ``count`` smallest requests per resource, capped at 2^63-1;
a gang of one template takes a shortcut that must give the same vector."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.cluster.resources import MAX_AMOUNT, saturating_sum, smallest_total


def reference(requests: np.ndarray, count: int) -> np.ndarray:
    return saturating_sum(np.sort(requests, axis=0)[:count])


@pytest.mark.parametrize("seed", range(30))
def test_smallest_total_equals_the_sorted_sum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pods = int(rng.integers(2, 9))
    high = int(rng.choice([10, 1 << 40, MAX_AMOUNT // 3]))
    row = rng.integers(0, high, size=5, dtype=np.int64)
    requests = np.tile(row, (pods, 1))  # one template
    if rng.random() < 0.5:  # or a few members asking for something else
        requests[rng.integers(pods)] = rng.integers(0, high, size=5, dtype=np.int64)
    for count in range(0, pods + 3):
        assert np.array_equal(smallest_total(requests, count), reference(requests, count))
