"""Gangs the reservation gate refuses are parked until the gate's stamp moves.

One 8-GPU node: a 4-GPU job runs for 1,000 s (estimated so), an 8-GPU gang arrives next and is
reserved for t=1,000; fifty 1-GPU jobs then arrive a second apart, each estimated to run
5,000 s: each fits in the free half but would delay the reservation, so the gate refuses it.
Nothing is taken or released and the reservation does not move while they arrive, so a
refused job is not attempted again before t=1,000: about one attempt per arrival, not one per
waiting job per cycle (1,277 attempts). The decisions are those of the reference, which
retries every refused gang every cycle (``hints`` off).

The second case moves the gate's stamp all the time: short jobs that end before the reserved
start keep arriving and are admitted (each takes room). The refused jobs are all alike, so a
move wakes the first of them; the gate refuses it and the walk of its class passes over the
rest (they rank after it and run as long): one attempt per move, not fifty."""

from __future__ import annotations

from typing import Any

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.sim.simulator import SimOptions, Simulation

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"


def job(name: str, gpus: int, pods: int, at: float, duration: float) -> list[Item]:
    estimate = (("runtime-estimate", duration),)
    gang = GangSpec("default", name, pods, API, duration=duration, runtime_hints=estimate)
    items = [Item(gang, Timing(submit_after=at))]
    for i in range(pods):
        requests = {"cpu": 1000, GPU: gpus * 1000, "pods": 1}
        pod = PodSpec("default", f"{name}-{i}", requests, gang=GangRef(name, API))
        items.append(Item(pod, Timing(submit_after=at)))
    return items


def workload(*, stream: bool = False) -> Workload:
    items = [Item(NodeSpec("n0", {"cpu": 64_000, GPU: 8000, "pods": 110}))]
    items += job("running", 4, 1, 0.0, 1000.0)
    items += job("big", 8, 1, 1.0, 100.0)
    for i in range(50):
        items += job(f"small{i}", 1, 1, 1.5 if stream else 2.0 + i, 5000.0)
    for i in range(150 if stream else 0):
        items += job(f"short{i}", 1, 1, 2.0 + 5 * i, 10.0)
    return Workload(items)


def run(hints: bool, *, stream: bool = False) -> tuple[int, list[str]]:
    events: list[dict[str, Any]] = []
    options = SimOptions(policy="phalanx-reserve", until=900.0)
    sim = Simulation(workload(stream=stream), options, events.append)
    sim.state.hints = hints
    result = sim.run()
    binds = [f"{e['t']} {e['pod']}" for e in events if e["type"] == "bind"]
    return result.attempts, binds


def test_refused_gangs_wait_for_the_gate_to_move() -> None:
    attempts, binds = run(hints=True)
    reference_attempts, reference_binds = run(hints=False)
    assert binds == reference_binds == ["0.0 default/running-0"]
    # the two first jobs, one attempt per small job, and a retry of those waiting while the
    # first arrivals are still among the gangs a plan may pick (and so may move it)
    assert attempts <= 60
    assert reference_attempts >= 1000  # every waiting small job, every cycle


def test_a_moving_gate_wakes_one_of_a_class_of_alike_refused_gangs() -> None:
    attempts, binds = run(hints=True, stream=True)
    reference_attempts, reference_binds = run(hints=False, stream=True)
    assert binds == reference_binds
    assert len(binds) == 151  # the running job and every short one; no long one
    assert all("small" not in bind for bind in binds)
    # each short job: its own attempt and the first refused long job's; each release (a
    # short job ends): the reserved 8-GPU gang, whose failures the book notices; and one
    # attempt of each long job when it arrives (503 measured; 7,752 when a move woke every
    # refused job)
    assert attempts <= 4 * 150
    assert reference_attempts >= 50 * 150  # every refused job, at every short arrival
