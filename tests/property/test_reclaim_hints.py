"""Queueing hints never change a decision with preemption and reclaim between declared,
reclaimable queues of different weights and gangs of more than one priority: the hinted
engine decides exactly as the reference (hints off), evictions included."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_hints import (
    assert_as_reference,
    decisions,
    queued_cluster,
    queued_gang,
    reserving_workloads,
    workloads,
)

from phalanx.api.queues import QueueSpec
from phalanx.api.specs import GangSpec
from phalanx.api.workload import Item, Workload

Row = tuple[Any, ...]


@st.composite
def elastic_workloads(draw: st.DrawFn) -> Workload:
    """Elastic gangs (a minimum below their size) of three priorities, some estimated, on two
    to four 4-GPU nodes: surplus members are victims too."""
    items = queued_cluster({}, nodes=draw(st.integers(2, 4)))
    for g in range(draw(st.integers(2, 16))):
        gpus = tuple(draw(st.lists(st.sampled_from([1, 1, 2, 4]), min_size=1, max_size=4)))
        run = draw(st.integers(5, 90))
        factor = draw(st.sampled_from([None, 0.5, 1.0, 2.0]))
        row = (
            f"g{g}",
            draw(st.integers(1, len(gpus))),
            "",
            draw(st.sampled_from([0, 0, 5, 10])),
            run,
            draw(st.sampled_from([0, 0, 3, 10, 25, 50, 70])),
            gpus,
            None if factor is None else run * factor,
        )
        items += queued_gang(*row)
    return Workload(items)


@st.composite
def reclaiming_workloads(draw: st.DrawFn) -> Workload:
    """Workloads (with runtime estimates or without) with their gangs spread over two or
    three queues of drawn weights, most of them reclaimable, at their drawn priorities."""
    queues = [f"q{i}" for i in range(draw(st.integers(2, 3)))]
    items = [
        Item(
            QueueSpec(
                name,
                weight=draw(st.integers(1, 3)),
                reclaimable=draw(st.sampled_from([True, True, False])),
            )
        )
        for name in queues
    ]
    base = draw(st.one_of(reserving_workloads(), workloads(), elastic_workloads()))
    for item in base.items:
        if isinstance(item.spec, GangSpec):
            item = replace(item, spec=replace(item.spec, queue=draw(st.sampled_from(queues))))
        items.append(item)
    return Workload(items)


@settings(max_examples=200, deadline=None)
@given(
    reclaiming_workloads(),
    st.sampled_from(["phalanx", "phalanx-reserve", "volcano"]),
    st.integers(0, 3),
)
def test_reclaim_and_preempt_decide_as_the_reference(
    workload: Workload, policy: str, seed: int
) -> None:
    assert_as_reference(workload, policy, seed)


def hinted_as_reference(weights: dict[str, int], rows: Sequence[Row]) -> list[str]:
    """The decisions of ``phalanx-reserve`` (seed 0) on three 4-GPU nodes in queues of these
    weights with the gangs of ``rows``, hinted, once checked equal to the reference's."""
    items = queued_cluster(weights, nodes=3)
    for row in rows:
        items += queued_gang(*row)
    hinted = decisions(Workload(items), "phalanx-reserve", 0, hints=True)
    assert hinted == decisions(Workload(items), "phalanx-reserve", 0, hints=False)
    return hinted


#: (gang, minimum, queue, priority, runtime, arrival, GPUs of each pod, estimate) on three
#: 4-GPU nodes in queues q0 (weight 1), q1 and q2 (weight 2): found by the property above
GUARDED = (
    ("g0", 2, "q1", 0, 82, 0, (1, 1)),
    ("g1", 2, "q0", 10, 5, 0, (1, 2)),
    ("g2", 4, "q0", 10, 78, 0, (1, 1, 1, 2)),
    ("g3", 1, "q0", 0, 5, 0, (1,)),
    ("g4", 2, "q2", 0, 5, 25, (2, 2)),
    ("g5", 4, "q2", 0, 5, 0, (1, 1, 1, 1)),
    ("g6", 1, "q0", 0, 5, 0, (1,)),
    ("g7", 1, "q1", 0, 38, 25, (1,)),
    ("g8", 1, "q1", 0, 38, 25, (1,), 19.0),
    ("g9", 1, "q2", 10, 59, 3, (2,), 29.5),
    ("g10", 2, "q2", 0, 5, 50, (2, 2), 2.5),
)


def test_a_guard_refusal_is_not_shared_with_a_gang_it_would_not_refuse() -> None:
    """At t=62 g9 ends and q2 falls below its share: g4 and g10 (q2, two 2-GPU pods each:
    one failure class) may reclaim from q1. The reservation guard refuses g4's plan (no
    estimate: it would delay g5's reservation, ranked ahead of both) but not g10's
    (estimated at 2.5 s, it ends before); the reference reclaims g7 for g10. The memo of
    guard refusals was kept per failure class and refused g10 as it had refused g4; it is
    now kept per what the guard reads of the preemptor (the carves ranked ahead of it and
    its estimated runtime)."""
    hinted = hinted_as_reference({"q0": 1, "q1": 2, "q2": 2}, GUARDED)
    assert "62.0 evict default/g7-0 None reclaim" in hinted
    assert "62.0 start default/g10 None " in hinted


#: (gang, minimum, queue, priority, runtime, arrival, GPUs of each pod, estimate) on three
#: 4-GPU nodes in queues q0 and q1 of weight 1: found by the property above
FITS_ALONE = (
    ("g0", 1, "q1", 0, 35, 0, (4,), 35.0),
    ("g1", 1, "q0", 0, 27, 0, (4, 1), 27.0),
    ("g2", 1, "q0", 0, 77, 50, (1,)),
    ("g3", 3, "q1", 0, 34, 0, (1, 4, 4)),
    ("g4", 3, "q1", 5, 31, 25, (1, 1, 2)),
    ("g5", 1, "q0", 5, 88, 0, (2,)),
    ("g6", 2, "q1", 10, 5, 10, (1, 4, 1, 1), 2.5),
    ("g9", 1, "q0", 10, 44, 25, (4, 1, 1, 2)),
    ("g11", 4, "q0", 5, 66, 25, (1, 1, 1, 1)),
    ("g12", 1, "q0", 5, 76, 0, (2,)),
    ("g13", 1, "q1", 0, 5, 0, (4,)),
    ("g14", 1, "q0", 10, 15, 0, (1, 1, 2)),
)


def test_a_preemptor_that_fits_without_victims_tries_again_after_a_bind() -> None:
    """g9 (priority 10), whose whole gang reclaim took at t=41.7, is parked with one free
    GPU left that its minimum (one 1-GPU pod) fits in: preempt finds no victim needed and
    no plan. At t=50 g2 arrives and binds on that GPU; the reference then preempts g1 for
    g9. The memo kept "no plan" as a failure for room under a stamp that binds leave as it
    is, and g9 waited until t=62; an attempt that needed no victim is no longer kept."""
    hinted = hinted_as_reference({"q0": 1, "q1": 1}, FITS_ALONE)
    assert "50.0 evict default/g1-1 None preempt" in hinted
    assert "50.0 start default/g9 None " in hinted
