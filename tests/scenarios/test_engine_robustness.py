"""One bad object is marked with a reason and skipped; it never stops the others.
Timeouts give a condition and a backoff, never a partial bind."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.framework.backend import run_cycle
from phalanx.policies import Scheduler, get_policy
from phalanx.sim.simulator import SimOptions, simulate

API = "scheduling.x-k8s.io"
GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 4) -> NodeSpec:
    return NodeSpec(name, {"cpu": 32000, GPU: gpus * 1000, "pods": 110})


def pod(name: str, gpus: int = 1, group: str | None = None, **extra: Any) -> PodSpec:
    requests = {GPU: gpus * 1000, "pods": 1, **extra.pop("requests", {})}
    ref = GangRef(group, API) if group else None
    return PodSpec("default", name, requests, gang=ref, **extra)


def cycle(state: ClusterState, policy: str) -> dict[str, int]:
    result = run_cycle(Scheduler(get_policy(policy)), state, 0.0)
    return {p.spec.name: n for p, n in result.binds}


@pytest.mark.parametrize("policy", ["phalanx", "kube-default"])
def test_pod_requesting_an_unknown_resource_waits_with_a_reason(policy: str) -> None:
    state = ClusterState([node("n0")], ResourceIndex())
    bad = state.add_pod(pod("bad", requests={"example.com/fpga": 1}), 0.0)
    state.add_pod(pod("good"), 0.0)
    assert cycle(state, policy) == {"good": 0}
    assert bad.invalid == "requests example.com/fpga, which no node offers"
    assert bad.gang.condition is not None
    assert "example.com/fpga" in bad.gang.condition.message


def test_gang_larger_than_the_cluster_is_unresolvable_and_others_still_run() -> None:
    state = ClusterState([node("n0"), node("n1")], ResourceIndex())
    for name, size in (("huge", 3), ("small", 2)):
        gang = state.add_gang(GangSpec("default", name, size, API), 0.0)
        for i in range(size):
            state.add_pod(pod(f"{name}-{i}", gpus=4, group=name), 0.0)
    assert sorted(cycle(state, "phalanx")) == ["small-0", "small-1"]
    huge = state.gangs["default/huge"]
    assert huge.placed == 0 and huge.condition is not None
    assert huge.condition.reason == "Unresolvable"
    assert "nvidia.com/gpu 12 > 8" in huge.condition.message
    assert gang.placed == 2


def test_pods_of_other_schedulers_are_left_alone() -> None:
    state = ClusterState([node("n0")], ResourceIndex())
    other = state.add_pod(pod("theirs", scheduler_name="volcano"), 0.0)
    state.add_pod(pod("ours", scheduler_name="phalanx"), 0.0)
    state.add_pod(pod("unset"), 0.0)
    assert sorted(cycle(state, "phalanx")) == ["ours", "unset"]
    assert other.gang.condition is not None
    assert other.gang.condition.reason == "OtherScheduler"


def test_timeout_condition_and_backoff_never_partial() -> None:
    hog = pod("hog", gpus=2, duration=600.0)
    gang = GangSpec("default", "g", 2, API, timeout_seconds=60, duration=600.0)
    members = [pod(f"g-{i}", gpus=2, group="g") for i in range(2)]
    workload = Workload([Item(node("n0")), Item(hog), Item(gang), *map(Item, members)])
    events: list[dict[str, Any]] = []
    result = simulate(workload, SimOptions(), events.append)
    timeouts = [e for e in events if e["type"] == "timeout"]
    assert [(e["t"], e["gang"]) for e in timeouts] == [(60.0, "default/g")]
    assert "scheduleTimeoutSeconds 60" in timeouts[0]["message"]
    binds = [e["t"] for e in events if e["type"] == "bind" and e["gang"] == "default/g"]
    assert binds == [600.0, 600.0]  # nothing before the hog left, then both at once
    record = next(g for g in result.gangs if g.name == "g")
    assert (record.start, record.finish, record.state) == (600.0, 1200.0, "completed")


def test_late_podgroup_pods_wait_until_it_appears() -> None:
    gang = GangSpec("default", "g", 2, API, duration=60.0)
    members = [pod(f"g-{i}", group="g") for i in range(2)]
    workload = Workload(
        [Item(node("n0")), Item(gang, Timing(submit_after=30.0)), *map(Item, members)]
    )
    events: list[dict[str, Any]] = []
    simulate(workload, SimOptions(), events.append)
    assert [e["t"] for e in events if e["type"] == "bind"] == [30.0, 30.0]


def test_a_gang_that_failed_for_room_is_parked_until_room_frees() -> None:
    state = ClusterState([node("n0", gpus=4)], ResourceIndex())
    hog = state.add_pod(pod("hog", gpus=3), 0.0)
    state.bind(hog, 0, 0.0)
    state.add_gang(GangSpec("default", "g", 2, API), 0.0)
    for i in range(2):
        state.add_pod(pod(f"g-{i}", group="g"), 0.0)
    scheduler = Scheduler(get_policy("phalanx"))
    result = scheduler.cycle(state, 1.0)
    for gang in result.blocked:
        state.block(gang, state.freed)
    assert "default/g" in state.blocked and "default/g" not in state.waiting
    state.add_pod(pod("newcomer"), 2.0)  # an arrival only takes room away: still parked
    assert "default/g" in state.blocked
    assert run_cycle(scheduler, state, 2.0).attempts == 1  # only the newcomer was tried
    state.release(hog)  # room freed: the parked gang could fit now, so the next look wakes it
    assert "default/g" in {g.ident for g in state.waiting_gangs()} and not state.blocked
    retry = scheduler.cycle(state, 3.0)
    assert sorted(p.spec.name for p, _ in retry.binds) == ["g-0", "g-1"]
