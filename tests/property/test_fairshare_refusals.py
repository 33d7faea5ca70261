"""Refusals kept under a moving order: with fair-share queues declared, the order of waiting
gangs moves with every change of usage, so a gang the reservation gate refused is not parked
but kept waiting, and the gate answers for it without an attempt while its refusal stands
(``Book.standing_refusal``). On random small workloads in two or three weighted queues the
engine decides exactly as the reference, which attempts every refused gang every cycle
(hints off); on a queue of refused jobs it makes far fewer attempts."""

from __future__ import annotations

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
)

from phalanx.api.queues import QueueSpec
from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.sim.simulator import SimOptions, Simulation

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"


def queued(items: list[Item], queue: str) -> list[Item]:
    """``items`` with their gangs in ``queue``, all of one priority."""
    return [
        replace(item, spec=replace(item.spec, queue=queue, priority=0))
        if isinstance(item.spec, GangSpec)
        else item
        for item in items
    ]


@st.composite
def queued_workloads(draw: st.DrawFn) -> Workload:
    """Reserving workloads (big gangs reserved for, small ones refused by the gate) with
    their gangs spread over weighted queues. One priority and no reclaimable queue: what
    is checked here is allocate and its gate (preemption and reclaim between declared
    queues are checked by ``test_reclaim_hints.py``)."""
    queues = [f"q{i}" for i in range(draw(st.integers(2, 3)))]
    items = [
        Item(QueueSpec(name, weight=draw(st.integers(1, 3)), reclaimable=False)) for name in queues
    ]
    for item in draw(reserving_workloads()).items:
        items += queued([item], draw(st.sampled_from(queues)))
    return Workload(items)


@settings(max_examples=120, deadline=None)
@given(queued_workloads(), st.sampled_from(["phalanx", "phalanx-reserve"]), st.integers(0, 3))
def test_kept_refusals_decide_as_the_reference_retries(
    workload: Workload, policy: str, seed: int
) -> None:
    assert_as_reference(workload, policy, seed)


#: (gang, minimum, queue, priority, runtime, arrival, GPUs of each pod): found by the
#: property above, once failures of preemption were remembered across cycles
HELD_ROOM = (
    ("g0", 2, "q0", 0, 11, 10, (1, 2)),
    ("g1", 1, "q0", 0, 5, 0, (1,)),
    ("g2", 1, "q1", 0, 29, 0, (2,)),
    ("g3", 2, "q0", 0, 5, 0, (1, 1)),
    ("g4", 1, "q0", 0, 5, 25, (1,)),
    ("g5", 4, "q0", 0, 87, 10, (1, 1, 1, 1)),
    ("g6", 2, "q0", 0, 5, 0, (1, 1)),
    ("g7", 1, "q0", 0, 5, 0, (1,)),
    ("g8", 2, "q0", 0, 5, 0, (1, 1)),
    ("g9", 2, "q2", 0, 41, 0, (1, 1)),
    ("g10", 1, "q0", 0, 69, 0, (2,)),
    ("g11", 8, "q2", 0, 73, 0, (1, 1, 1, 1, 1, 1, 2, 2)),
    ("g12", 2, "q0", 0, 5, 10, (1, 1)),
    ("g13", 2, "q1", 10, 5, 10, (1, 2)),
)


def test_a_failure_while_room_was_held_is_not_remembered_after() -> None:
    """g13 (priority 10) fails to preempt g2 at t=15 only because room is held for another
    preemptor (g0); at t=25 the hold is gone and it preempts g2, as the reference does: the
    memo of failed attempts covers the held room."""
    items = queued_cluster({"q0": 3, "q1": 1, "q2": 1}, nodes=4)
    for row in HELD_ROOM:
        items += queued_gang(*row)
    hinted = decisions(Workload(items), "phalanx", 0, hints=True)
    assert hinted == decisions(Workload(items), "phalanx", 0, hints=False)
    assert "25.0 evict default/g2-0 None preempt" in hinted


def job(name: str, queue: str, gpus: int, at: float, run: float) -> list[Item]:
    """A one-pod gang in ``queue`` that runs ``run`` seconds, estimated so."""
    estimate = (("runtime-estimate", run),)
    gang = GangSpec("default", name, 1, API, queue=queue, duration=run, runtime_hints=estimate)
    requests = {"cpu": 1000, GPU: gpus * 1000, "pods": 1}
    pod = PodSpec("default", f"{name}-0", requests, gang=GangRef(name, API))
    return [Item(gang, Timing(submit_after=at)), Item(pod, Timing(submit_after=at))]


def refused_queue() -> Workload:
    """One 8-GPU node in two queues: a 4-GPU job runs for 1,000 s, an 8-GPU gang is reserved
    for t=1,000, and fifty 1-GPU jobs estimated at 5,000 s arrive a second apart, alternating
    between the queues: each fits in the free half but would delay the reservation."""
    items = [Item(NodeSpec("n0", {"cpu": 64_000, GPU: 8000, "pods": 110}))]
    items += [Item(QueueSpec("a", weight=1)), Item(QueueSpec("b", weight=2))]
    items += job("running", "a", 4, 0.0, 1000.0) + job("big", "b", 8, 1.0, 100.0)
    for i in range(50):
        items += job(f"small{i}", "ab"[i % 2], 1, 2.0 + i, 5000.0)
    return Workload(items)


def run(hints: bool) -> tuple[int, list[str]]:
    events: list[dict[str, Any]] = []
    options = SimOptions(policy="phalanx-reserve", until=900.0)
    sim = Simulation(refused_queue(), options, events.append)
    sim.state.hints = hints
    result = sim.run()
    return result.attempts, [f"{e['t']} {e['pod']}" for e in events if e["type"] == "bind"]


def test_a_refusal_that_stands_is_not_attempted_again() -> None:
    attempts, binds = run(hints=True)
    reference_attempts, reference_binds = run(hints=False)
    assert binds == reference_binds == ["0.0 default/running-0"]
    assert reference_attempts >= 1000  # every waiting small job, every cycle
    # one attempt per small job as it arrives, and a retry of those waiting while the first
    # arrivals are still among the gangs a plan may pick (60 measured)
    assert attempts <= 100
