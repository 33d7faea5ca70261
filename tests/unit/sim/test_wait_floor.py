"""``wait_floor`` and ``cluster_floor``: the least wait the gangs running when a gang arrived
left it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from phalanx.sim.metrics import GangRecord
from phalanx.sim.waits import cluster_floor, wait_floor


def record(
    name: str, gpus: float, submit: float, start: float | None, finish: float | None
) -> GangRecord:
    return GangRecord("ns", name, "PodGroup", 1, submit, start, finish, gpus=gpus)


#: on 8 GPUs: a (4 GPUs) runs 0-100, b (2) 10-300, c (1) 20-50; x arrives at 30
RUNNING = [record("a", 4, 0, 0, 100), record("b", 2, 0, 10, 300), record("c", 1, 0, 20, 50)]


@pytest.mark.parametrize(
    ("gpus", "others", "floor"),
    [
        (1, RUNNING, 0.0),  # 1 GPU free at its arrival
        (2, RUNNING, 20.0),  # c's GPU comes back at 50
        (6, RUNNING, 70.0),  # a's 4 at 100
        (8, RUNNING, 270.0),  # the whole cluster: b's end at 300
        (9, RUNNING, None),  # more than the cluster
        (8, [*RUNNING[:2], record("c", 1, 0, 20, None)], None),  # c runs past the run's end
        (8, [*RUNNING, record("d", 1, 0, 30, 900)], 270.0),  # d started as it arrived: not counted
        (8, [*RUNNING, record("e", 1, 0, 0, 30)], 270.0),  # e ended as it arrived
        (8, [], 0.0),
    ],
)
def test_wait_floor(gpus: float, others: list[GangRecord], floor: float | None) -> None:
    gang = record("x", gpus, 30, None, None)
    assert wait_floor(gang, [*others, gang], 8.0) == floor


def test_cluster_floor_is_the_longest_remaining_run_at_each_time() -> None:
    """At 5 only a runs; at 30 a, b and c (b ends last); at 150 b; at 400 nothing; f never
    ends; z took no time."""
    gangs = [
        *RUNNING,
        record("z", 1, 0, 40, 40),
    ]
    times = np.array([5.0, 30.0, 150.0, 400.0])
    assert cluster_floor(gangs, times).tolist() == [95.0, 270.0, 150.0, 0.0]
    endless = [*gangs, record("f", 1, 0, 200, None)]
    assert cluster_floor(endless, times).tolist() == [95.0, 270.0, 150.0, math.inf]
