"""Water-filling: entitlements first, the rest by weight along dominant resources."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.queues import QueueSpec
from phalanx.cluster.fairshare import Claim, water_fill
from phalanx.cluster.queues import QueueBook, QueueUse
from phalanx.cluster.resources import ResourceIndex

MASK = np.array([1.0, 1.0])  # two resources: gpu, cpu


def claim(
    demand: list[float], weight: float = 1, entitled: list[float] | None = None, prio: int = 0
) -> Claim:
    return Claim(np.array(demand), np.array(entitled or [0.0, 0.0]), weight, prio)


def test_weights_share_what_is_contended() -> None:
    out = water_fill(np.array([12.0, 12.0]), [claim([12, 0], 1), claim([12, 0], 2)], MASK)
    assert out[0][0] == pytest.approx(4) and out[1][0] == pytest.approx(8)


def test_a_satisfied_queue_leaves_the_rest_to_others() -> None:
    out = water_fill(np.array([12.0, 12.0]), [claim([2, 0]), claim([20, 0])], MASK)
    assert out[0][0] == pytest.approx(2) and out[1][0] == pytest.approx(10)


def test_entitlement_first_then_weights() -> None:
    out = water_fill(np.array([10.0, 10.0]), [claim([10, 0], 1, [6, 0]), claim([10, 0], 1)], MASK)
    assert out[0][0] == pytest.approx(8) and out[1][0] == pytest.approx(2)


def test_dominant_resources_drf() -> None:
    # the textbook DRF example: 9 CPU, 18 GB; A asks <1 CPU, 4 GB> per task, B <3 CPU, 1 GB>
    a = claim([100, 400], 1)  # ~unbounded demand along <1, 4>
    b = claim([300, 100], 1)
    out = water_fill(np.array([9.0, 18.0]), [a, b], MASK)
    assert out[0] == pytest.approx([3, 12]) and out[1] == pytest.approx([6, 2])


def test_higher_priority_siblings_first() -> None:
    out = water_fill(np.array([8.0, 8.0]), [claim([8, 0], 5), claim([6, 0], 1, prio=1)], MASK)
    assert out[1][0] == pytest.approx(6) and out[0][0] == pytest.approx(2)


def test_tree_capability_caps_demand_and_children_share_the_parent() -> None:
    index = ResourceIndex()
    gpu = index.position["nvidia.com/gpu"]
    book = QueueBook()
    book.add_queue(QueueSpec("org", capability={"nvidia.com/gpu": 6000}))
    book.add_queue(QueueSpec("a", parent="org", weight=1))
    book.add_queue(QueueSpec("b", parent="org", weight=2))
    book.add_queue(QueueSpec("c", weight=1))
    width = len(index)
    uses = {}
    for name, demand in (("a", 10000), ("b", 10000), ("c", 10000)):
        vec = np.zeros(width)
        vec[gpu] = demand
        uses[name] = QueueUse(np.zeros(width), vec)
    for name in ("org",):
        uses[name] = QueueUse(np.zeros(width), np.zeros(width))
    book._roll_up(uses, index)
    total = np.zeros(width)
    total[gpu] = 16000
    book._share(uses, index, total, np.ones(width))
    assert uses["org"].demand[gpu] == 6000  # capped by its capability
    assert uses["org"].deserved[gpu] == pytest.approx(6000)
    assert uses["c"].deserved[gpu] == pytest.approx(10000)
    assert uses["a"].deserved[gpu] == pytest.approx(2000)
    assert uses["b"].deserved[gpu] == pytest.approx(4000)
