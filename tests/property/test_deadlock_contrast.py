"""The seed deadlock: two gangs that each need the whole cluster, pods arriving interleaved.

``kube-default`` places pod by pod (a0, b0, a1, b1, ...) and ends with each gang half placed:
neither can start and the GPUs are held forever. ``phalanx`` places gang ``a`` whole and leaves
``b`` pending with nothing held; when ``a`` finishes, ``b`` gets the whole cluster.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.backend import run_cycle
from phalanx.policies import Scheduler, get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"


def deadlock_cluster(nodes: int = 4) -> ClusterState:
    specs = [
        NodeSpec(f"n{i}", {"cpu": 8000, "memory": 2**34, "pods": 110, GPU: 1000})
        for i in range(nodes)
    ]
    state = ClusterState(specs, ResourceIndex())
    for gang in ("a", "b"):
        state.add_gang(GangSpec("ns", gang, nodes, API), 0.0)
    for i in range(nodes):  # interleaved arrivals: a0, b0, a1, b1, ...
        for gang in ("a", "b"):
            requests = {"cpu": 1000, GPU: 1000, "pods": 1}
            state.add_pod(PodSpec("ns", f"{gang}{i}", requests, gang=GangRef(gang, API)), 0.0)
    return state


def bound_per_gang(state: ClusterState, policy: str, seed: int) -> Counter[str]:
    result = run_cycle(Scheduler(get_policy(policy), seed=seed), state, 0.0)
    return Counter(pod.gang.name for pod, _ in result.binds)


def test_kube_default_deadlocks_two_and_two() -> None:
    state = deadlock_cluster()
    bound = bound_per_gang(state, "kube-default", 0)
    assert bound == Counter({"a": 2, "b": 2})
    assert not state.gangs["ns/a"].ready() and not state.gangs["ns/b"].ready()
    # Every GPU is held, and a further cycle changes nothing: a real deadlock.
    assert (state.table.free()[:, state.index.position[GPU]] == 0).all()
    assert not Scheduler(get_policy("kube-default"), seed=0).cycle(state, 1.0).binds


def test_phalanx_places_a_whole_and_b_nothing() -> None:
    state = deadlock_cluster()
    bound = bound_per_gang(state, "phalanx", 0)
    assert bound == Counter({"a": 4})
    assert state.gangs["ns/a"].ready()
    assert state.gangs["ns/b"].placed == 0
    assert all(p.status is PodStatus.PENDING for p in state.gangs["ns/b"].members)
    assert sorted(p.node for p in state.gangs["ns/a"].members) == [0, 1, 2, 3]


def test_phalanx_places_b_once_a_finishes() -> None:
    state = deadlock_cluster()
    scheduler = Scheduler(get_policy("phalanx"), seed=0)
    run_cycle(scheduler, state, 0.0)
    for pod in state.gangs["ns/a"].members:
        state.release(pod)
    result = scheduler.cycle(state, 1.0)
    assert sorted(pod.key for pod, _ in result.binds) == ["ns/b0", "ns/b1", "ns/b2", "ns/b3"]


@settings(max_examples=30, deadline=None)
@given(half=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_contrast_holds_for_any_even_cluster_and_seed(half: int, seed: int) -> None:
    nodes = 2 * half
    assert bound_per_gang(deadlock_cluster(nodes), "kube-default", seed) == Counter(
        {"a": half, "b": half}
    )
    assert bound_per_gang(deadlock_cluster(nodes), "phalanx", seed) == Counter({"a": nodes})
