"""Preemption and reclaim follow the queueing hints without changing a decision.

With hints on, ``preempt``/``reclaim`` skip attempts known to fail (no candidate victims, the
room with every candidate evicted cannot hold the minimum, or a gang of the same class failed
in an unchanged world). With hints off (``ClusterState.hints = False``) every attempt is
planned in full. On random multi-queue workloads with priorities, elastic gangs, min-runtimes
and disruption budgets, both give the same event stream, evictions and their reasons included.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_hints import decisions

from phalanx.api.queues import BudgetSpec, QueueSpec
from phalanx.api.specs import GangRef, GangSpec, NodeSpec, Placement, PodSpec
from phalanx.api.workload import Item, Timing, Workload

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"
QUEUES = ("a", "b", "c")


@st.composite
def contended(draw: st.DrawFn) -> Workload:
    """Few nodes, many gangs of mixed priority over three queues: preemption and reclaim
    happen often."""
    items: list[Item] = []
    for n in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([2, 4, 8]))
        zone = draw(st.sampled_from(["a", "b"]))
        spec = NodeSpec(f"n{n}", {"cpu": 64_000, GPU: gpus * 1000, "pods": 110}, {"zone": zone})
        items.append(Item(spec))
    if draw(st.booleans()):
        for name in QUEUES:
            deserved = {GPU: draw(st.sampled_from([0, 2000, 4000]))}
            guarantee = {GPU: draw(st.sampled_from([0, 0, 1000]))}
            reclaimable = draw(st.sampled_from([True, True, False]))
            weight = draw(st.integers(1, 3))
            spec = QueueSpec(name, None, deserved, guarantee, weight=weight)
            items.append(Item(replace(spec, reclaimable=reclaimable)))
    if draw(st.booleans()):
        budget = BudgetSpec("default", "pdb", (("team", "x"),), max_unavailable=1)
        items.append(Item(budget))
    # one queue only: queue keys stay put, so allocate's fine queueing hints apply too
    queues = ("default",) if draw(st.booleans()) else QUEUES
    count, total = 0, draw(st.integers(2, 16))
    while count < total:
        copies = draw(st.integers(1, 3))  # gangs of one shape share failure classes
        items.extend(draw(gangs(range(count, count + copies), queues)))
        count += copies
    return Workload(items)


@st.composite
def gangs(draw: st.DrawFn, numbers: range, queues: tuple[str, ...]) -> list[Item]:
    """Gangs of one template (shape, priority, queue, arrival), one per number."""
    size = draw(st.integers(1, 4))
    gpus = draw(st.sampled_from([0, 1, 1, 2, 4]))
    cpu = draw(st.sampled_from([1000, 8000, 30_000]))
    at = float(draw(st.sampled_from([0, 0, 5, 10, 20, 40])))
    duration = float(draw(st.integers(5, 80)))
    priority = draw(st.sampled_from([0, 5, 10]))
    queue = draw(st.sampled_from(queues))
    minimum = draw(st.integers(1, size))
    placement = Placement(node_selector=(("zone", "a"),)) if draw(st.booleans()) else Placement()
    annotations: dict[str, str] = {}
    if draw(st.integers(0, 4)) == 0:
        annotations["phalanx.dev/min-runtime"] = f"{draw(st.integers(1, 30))}s"
    if draw(st.integers(0, 6)) == 0:
        annotations["phalanx.dev/preemption-policy"] = "Never"
    labels = {"team": "x"} if draw(st.booleans()) else {}
    requests: dict[str, Any] = {"cpu": cpu, "pods": 1}
    if gpus:
        requests[GPU] = gpus * 1000
    items = []
    for g in numbers:
        spec = GangSpec("default", f"g{g}", minimum, API, priority=priority, queue=queue)
        items.append(Item(replace(spec, duration=duration), Timing(submit_after=at)))
        for i in range(size):
            pod = PodSpec("default", f"g{g}-{i}", requests, placement, priority)
            pod = replace(pod, gang=GangRef(f"g{g}", API), labels=labels, annotations=annotations)
            items.append(Item(pod, Timing(submit_after=at)))
    return items


@settings(max_examples=80, deadline=None)
@given(contended(), st.sampled_from(["phalanx", "volcano"]))
def test_preempt_and_reclaim_with_hints_decide_as_without(workload: Workload, policy: str) -> None:
    on = decisions(workload, policy, 0, hints=True, until=600.0)
    assert on == decisions(workload, policy, 0, hints=False, until=600.0)
