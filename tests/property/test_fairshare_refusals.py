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
from test_hints import decisions, reserving_workloads

from phalanx.api.queues import QueueSpec
from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.sim.simulator import SimOptions, Simulation

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"


def queued(items: list[Item], queue: str) -> list[Item]:
    """``items`` with their gangs in ``queue``."""
    return [
        replace(item, spec=replace(item.spec, queue=queue))
        if isinstance(item.spec, GangSpec)
        else item
        for item in items
    ]


@st.composite
def queued_workloads(draw: st.DrawFn) -> Workload:
    """Reserving workloads (big gangs reserved for, small ones refused by the gate) with
    their gangs spread over weighted queues."""
    queues = [f"q{i}" for i in range(draw(st.integers(2, 3)))]
    items = [Item(QueueSpec(name, weight=draw(st.integers(1, 3)))) for name in queues]
    for item in draw(reserving_workloads()).items:
        items += queued([item], draw(st.sampled_from(queues)))
    return Workload(items)


@settings(max_examples=120, deadline=None)
@given(queued_workloads(), st.sampled_from(["phalanx", "phalanx-reserve"]), st.integers(0, 3))
def test_kept_refusals_decide_as_the_reference_retries(
    workload: Workload, policy: str, seed: int
) -> None:
    assert decisions(workload, policy, seed, hints=True) == decisions(
        workload, policy, seed, hints=False
    )


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
