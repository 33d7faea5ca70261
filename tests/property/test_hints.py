"""Queueing hints never lose a wake-up: on random small workloads the hinted engine makes
exactly the decisions of the coarse reference, where any release wakes every parked gang
(a gang that failed for room is retried after every release, as if there were no hints)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from phalanx.api.errors import InputError
from phalanx.api.queues import QueueSpec
from phalanx.api.specs import GangRef, GangSpec, NodeSpec, Placement, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.sim.simulator import SimOptions, Simulation

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"
DECISIONS = (
    "bind",
    "reserve",
    "unreserve",
    "start",
    "finish",
    "delete",
    "timeout",
    "evict",
    "grow",
)
#: coscheduling can thrash for ever (two groups that each hold part of what both need, forever
#: rejected at PostFilter and retried): its runs are compared over a bounded horizon
UNTIL = {"coscheduling": 3600.0}


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    items: list[Item] = []
    for n in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([2, 4, 8]))
        zone = draw(st.sampled_from(["a", "b"]))
        spec = NodeSpec(f"n{n}", {"cpu": 64_000, GPU: gpus * 1000, "pods": 110}, {"zone": zone})
        items.append(Item(spec))
    for g in range(draw(st.integers(1, 24))):
        size = draw(st.integers(1, 4))
        gpus = draw(st.sampled_from([0, 1, 1, 2, 4]))
        cpu = draw(st.sampled_from([1000, 8000, 30_000]))
        at = float(draw(st.sampled_from([0, 0, 5, 10, 20, 40])))
        duration = float(draw(st.integers(5, 60)))
        priority = draw(st.sampled_from([0, 0, 10]))
        placement = (
            Placement(node_selector=(("zone", "a"),)) if draw(st.booleans()) else Placement()
        )
        timing = Timing(submit_after=at)
        if draw(st.integers(0, 9)) == 0:
            timing = Timing(submit_after=at, delete_after=float(draw(st.integers(1, 30))))
        lone = size == 1 and draw(st.booleans())
        ref = None if lone else GangRef(f"g{g}", API)
        if not lone:
            minimum = draw(st.integers(1, size))
            gang = GangSpec("default", f"g{g}", minimum, API, priority=priority, duration=duration)
            items.append(Item(gang, Timing(submit_after=at)))
        for i in range(size):
            requests: dict[str, Any] = {"cpu": cpu, "pods": 1}
            if gpus:
                requests[GPU] = gpus * 1000
            spec = PodSpec(
                "default",
                f"g{g}-{i}",
                requests,
                placement=placement,
                priority=priority,
                gang=ref,
                duration=duration if lone else None,
            )
            items.append(Item(spec, timing))
    return Workload(items)


def decisions(
    workload: Workload, policy: str, seed: int, *, hints: bool, until: float | None = None
) -> list[str]:
    """The run's decisions as lines (evictions with their reason); ``hints`` off is the
    coarse reference."""
    events: list[dict[str, Any]] = []
    horizon = until if until is not None else UNTIL.get(policy)
    options = SimOptions(policy=policy, seed=seed, until=horizon)
    try:
        sim = Simulation(workload, options, events.append)
    except InputError:  # a gang bigger than the whole cluster: refused up front
        assume(False)
        raise
    sim.state.hints = hints
    sim.run()
    return [
        f"{e['t']} {e['type']} {e['pod'] or e['gang']} {e['node']} {e.get('reason', '')}"
        for e in events
        if e["type"] in DECISIONS
    ]


def assert_as_reference(workload: Workload, policy: str, seed: int) -> None:
    """The hinted run decides exactly as the reference (hints off)."""
    assert decisions(workload, policy, seed, hints=True) == decisions(
        workload, policy, seed, hints=False
    )


@settings(max_examples=80, deadline=None)
@given(
    workloads(),
    st.sampled_from(["phalanx", "volcano", "kube-default", "coscheduling"]),
    st.integers(0, 3),
)
def test_hinted_engine_decides_as_the_coarse_reference(
    workload: Workload, policy: str, seed: int
) -> None:
    assert_as_reference(workload, policy, seed)


def lone(name: str, gpus: int, at: float = 0.0, duration: float = 10.0) -> Item:
    requests = {"cpu": 1000, GPU: gpus * 1000, "pods": 1}
    return Item(PodSpec("default", name, requests, duration=duration), Timing(submit_after=at))


@pytest.mark.parametrize("policy", ["phalanx", "volcano", "kube-default", "coscheduling"])
def test_one_release_wakes_every_waiting_pod_it_makes_room_for(policy: str) -> None:
    """An 8-GPU pod runs for 10 s; six 1-GPU pods that failed for room all bind when it
    ends, in one cycle, not one per release."""
    node = NodeSpec("n0", {"cpu": 64_000, GPU: 8000, "pods": 110})
    items = [Item(node), lone("hog", 8), *(lone(f"p{i}", 1, at=1.0) for i in range(6))]
    events: list[dict[str, Any]] = []
    Simulation(Workload(items), SimOptions(policy=policy), events.append).run()
    binds = [(e["t"], e["pod"]) for e in events if e["type"] == "bind"]
    assert binds[0] == (0.0, "default/hog")
    assert sorted(binds[1:]) == [(10.0, f"default/p{i}") for i in range(6)]


@st.composite
def reserving_workloads(draw: st.DrawFn) -> Workload:
    """Gangs with runtime estimates (the true duration times a drawn factor, or none), on
    nodes small enough that big gangs get reservations and small ones are gated."""
    items: list[Item] = [
        Item(NodeSpec(f"n{n}", {"cpu": 64_000, GPU: 4000, "pods": 110}))
        for n in range(draw(st.integers(2, 4)))
    ]
    for g in range(draw(st.integers(2, 20))):
        size = draw(st.sampled_from([1, 1, 2, 4, 8]))
        duration = float(draw(st.integers(5, 90)))
        factor = draw(st.sampled_from([None, 0.5, 1.0, 1.0, 2.0]))
        hints = () if factor is None else (("runtime-estimate", duration * factor),)
        at = float(draw(st.sampled_from([0, 0, 3, 10, 25, 50])))
        priority = draw(st.sampled_from([0, 0, 0, 10]))
        gang = GangSpec(
            "default",
            f"g{g}",
            size,
            API,
            priority=priority,
            duration=duration,
            runtime_hints=hints,
        )
        items.append(Item(gang, Timing(submit_after=at)))
        for i in range(size):
            requests = {"cpu": 1000, GPU: 1000 * draw(st.sampled_from([1, 1, 2])), "pods": 1}
            pod = PodSpec("default", f"g{g}-{i}", requests, gang=GangRef(f"g{g}", API))
            items.append(Item(pod, Timing(submit_after=at)))
    return Workload(items)


@settings(max_examples=120, deadline=None)
@given(
    reserving_workloads(),
    st.sampled_from(["phalanx-reserve", "fifo-reserve", "phalanx"]),
    st.integers(0, 3),
)
def test_gated_gangs_wake_as_the_reference_retries_them(
    workload: Workload, policy: str, seed: int
) -> None:
    """Gangs the reservation gate refused are parked until the gate's stamp moves; the
    reference (hints off) retries them every cycle: both decide alike."""
    assert_as_reference(workload, policy, seed)


def queued_cluster(weights: dict[str, int], nodes: int) -> list[Item]:
    """Queues of these weights (reclaimable) and ``nodes`` 4-GPU nodes."""
    items = [Item(QueueSpec(name, weight=weight)) for name, weight in weights.items()]
    return items + [
        Item(NodeSpec(f"n{n}", {"cpu": 64_000, GPU: 4000, "pods": 110})) for n in range(nodes)
    ]


def queued_gang(
    name: str,
    minimum: int,
    queue: str,
    priority: int,
    run: float,
    at: float,
    gpus: tuple[int, ...],
    estimate: float | None = None,
) -> list[Item]:
    """A gang of ``queue`` arriving at ``at`` that runs ``run`` seconds (estimated so, when
    ``estimate`` is given), with one pod of each GPU count in ``gpus``."""
    hints = () if estimate is None else (("runtime-estimate", estimate),)
    gang = GangSpec(
        "default",
        name,
        minimum,
        API,
        queue=queue,
        priority=priority,
        duration=float(run),
        runtime_hints=hints,
    )
    items = [Item(gang, Timing(submit_after=float(at)))]
    for i, count in enumerate(gpus):
        requests = {"cpu": 1000, GPU: 1000 * count, "pods": 1}
        pod = PodSpec("default", f"{name}-{i}", requests, gang=GangRef(name, API))
        items.append(Item(pod, Timing(submit_after=float(at))))
    return items
