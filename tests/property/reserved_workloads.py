"""Random contended workloads for the reservation properties of preemption and growth.

Small clusters of 4-GPU nodes, gangs of two priorities arriving over ten minutes, each with a
runtime estimate that may be wrong either way. Only aged gangs get reservations
(``min-gpus`` is out of reach), so a reservation is always an aged one; with ``elastic``,
some gangs have more replicas than ``minMember``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from phalanx.api.errors import InputError
from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.sim.simulator import SimOptions, Simulation

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Gang:
    name: str
    submit: float
    estimate: float
    minimum: int
    size: int
    priority: int
    gpus: int  # per pod
    run: float  # the true duration


@dataclass(frozen=True, slots=True)
class Case:
    workload: Workload
    gangs: dict[str, Gang]  # by key
    aging: float

    def summary(self) -> str:
        """What a failing example needs to be read."""
        nodes = sum(isinstance(item.spec, NodeSpec) for item in self.workload.items)
        return f"Case({nodes} nodes, aging {self.aging:g}, {list(self.gangs.values())})"

    def actions(self, *rest: str) -> tuple[str, ...]:
        reserve = f"reserve:aging={self.aging:g}s:aging-factor=0:min-gpus=100000:max-aged=all"
        return (reserve, "allocate", *rest)


@st.composite
def cases(draw: st.DrawFn, *, elastic: bool = False, priorities: bool = False) -> Case:
    """Gangs of two priorities whose estimates may be wrong either way, on one or two nodes;
    ``elastic``: one node, 1-GPU pods, some gangs elastic, estimates never too short (a rigid
    gang's is its runtime; an elastic gang's its runtime at its minimum), so nothing
    overruns, and one priority (nothing that arrives later outranks a gang reserved earlier)
    unless ``priorities``."""
    items: list[Item] = []
    for n in range(1 if elastic else draw(st.integers(1, 2))):
        items.append(Item(NodeSpec(f"n{n}", {"cpu": 64_000, GPU: 4000, "pods": 110})))
    gangs: dict[str, Gang] = {}
    for g in range(draw(st.integers(3, 10))):
        size = draw(st.integers(1, 4))
        minimum = size
        if elastic and size > 1 and draw(st.integers(0, 2)):  # two in three: truly elastic
            minimum = draw(st.integers(1, size - 1))
        run = float(draw(st.integers(30, 600)))
        estimate = float(-(-run * size // minimum)) if elastic else draw(st.integers(30, 600))
        gang = Gang(
            f"g{g}",
            float(draw(st.sampled_from([0, 0, 30, 60, 120, 200, 300, 450]))),
            estimate,
            minimum,
            size,
            0 if elastic and not priorities else draw(st.sampled_from([0, 10])),
            1 if elastic else draw(st.sampled_from([1, 1, 2])),
            run,
        )
        gangs[f"default/{gang.name}"] = gang
        items.extend(_items(gang))
    return Case(Workload(items), gangs, float(draw(st.sampled_from([60, 120]))))


def _items(gang: Gang) -> list[Item]:
    timing = Timing(submit_after=gang.submit)
    spec = GangSpec("default", gang.name, gang.minimum, API, priority=gang.priority)
    hints = (("runtime-estimate", gang.estimate),)
    items = [Item(replace(spec, duration=gang.run, runtime_hints=hints), timing)]
    requests = {"cpu": 1000, GPU: gang.gpus * 1000, "pods": 1}
    for i in range(gang.size):
        pod = PodSpec("default", f"{gang.name}-{i}", requests, priority=gang.priority)
        items.append(Item(replace(pod, gang=GangRef(gang.name, API)), timing))
    return items


def run(case: Case, actions: tuple[str, ...], until: float = 3600.0) -> list[dict[str, Any]]:
    """The run's event log."""
    events: list[dict[str, Any]] = []
    options = SimOptions(policy="phalanx", actions=actions, until=until)
    try:
        sim = Simulation(case.workload, options, events.append)
    except InputError:  # a gang bigger than the whole cluster: refused up front
        assume(False)
        raise
    sim.run()
    return events


def first_binds(events: list[dict[str, Any]]) -> dict[str, float]:
    """Gang key → the time of its first bind."""
    out: dict[str, float] = {}
    for e in events:
        if e["type"] == "bind":
            out.setdefault(e["gang"], e["t"])
    return out
