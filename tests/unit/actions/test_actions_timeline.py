"""Timeline.take / give_back add a plan's slots in a few vector operations: the same cube as
adding slot by slot, whatever the plan (slots sharing a node, GPU shares on one device)."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.actions.timeline import Slot, Timeline
from phalanx.api.specs import NodeSpec
from phalanx.cluster import devices
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import ResourceIndex

GPU = devices.GPU


def _timeline(nodes: int) -> Timeline:
    index = ResourceIndex({"cpu", "memory", "pods", GPU})
    specs = [
        NodeSpec(f"n{i}", {"cpu": 8_000, "memory": 64, "pods": 10, GPU: 4_000})
        for i in range(nodes)
    ]
    table = NodeTable.build(specs, index)
    timeline = Timeline.of(table, 0.0)
    timeline.row(10.0)
    timeline.row(20.0)
    return timeline


def _slot(rng: np.random.Generator, timeline: Timeline, nodes: int) -> Slot:
    request = np.zeros(timeline.free.shape[2], dtype=np.int64)
    request[0] = rng.integers(1, 4_000)
    request[timeline.gpu_col] = int(rng.choice([0, 250, 500, 1_000, 2_000]))
    count, _ = devices.shape(int(request[timeline.gpu_col]))
    gpus = tuple(int(d) for d in rng.choice(4, size=count, replace=False)) if count else ()
    return Slot(int(rng.integers(nodes)), request, gpus)


def _reference(timeline: Timeline, start: float, end: float, plan: list[Slot], sign: int) -> bool:
    """Slot by slot, as the timeline did before."""
    first, last = timeline.row(start), timeline.row(end)
    for slot in plan:
        timeline.free[first:last, slot.node] += sign * slot.request
        if slot.gpus:
            share = devices.per_device(int(slot.request[timeline.gpu_col]))
            timeline.gpus[first:last, slot.node, list(slot.gpus)] += sign * share
    if not plan or first >= last:
        return False
    nodes = [slot.node for slot in plan]
    return bool(
        np.any(timeline.free[first:last, nodes] < 0) or np.any(timeline.gpus[first:last, nodes] < 0)
    )


@pytest.mark.parametrize("seed", range(40))
def test_take_and_give_back_match_slot_by_slot(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 5))
    fast, slow = _timeline(nodes), _timeline(nodes)
    for _ in range(6):
        plan = [_slot(rng, fast, nodes) for _ in range(int(rng.integers(0, 9)))]
        if plan and rng.random() < 0.3:  # a gang's pods: one request vector, one node
            one = plan[0]
            plan = [Slot(one.node, one.request, one.gpus if i == 0 else ()) for i in range(4)]
        start = float(rng.choice([0.0, 5.0, 10.0, 15.0]))
        end = float(rng.choice([start, start + 5.0, 20.0, np.inf]))
        if rng.random() < 0.7:
            assert fast.take(start, end, tuple(plan)) == _reference(slow, start, end, plan, -1)
        else:
            fast.give_back(start, end, tuple(plan))
            _reference(slow, start, end, plan, +1)
        assert fast.times == slow.times
        np.testing.assert_array_equal(fast.free, slow.free)
        np.testing.assert_array_equal(fast.gpus, slow.gpus)
