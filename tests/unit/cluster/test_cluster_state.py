"""ClusterState (phalanx.cluster.state) and gang counters (phalanx.cluster.workloads)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.hints import Hint
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
POD = {"cpu": 1000, GPU: 1000, "pods": 1}


def cluster(nodes: int = 2) -> ClusterState:
    specs = [NodeSpec(f"n{i}", {"cpu": 8000, "pods": 10, GPU: 4000}) for i in range(nodes)]
    return ClusterState(specs, ResourceIndex())


def member(name: str, gang: str = "g", role: str = "") -> PodSpec:
    return PodSpec("ns", name, POD, gang=GangRef(gang, API), role=role)


def test_lone_pod_gets_an_implicit_gang_of_one() -> None:
    state = cluster()
    pod = state.add_pod(PodSpec("ns", "solo", POD), 0.0)
    assert pod.gang.implicit and pod.gang.min_member == 1
    assert pod.gang.ident == "pod:ns/solo"
    assert state.gangs["pod:ns/solo"] is pod.gang
    assert list(state.waiting) == ["pod:ns/solo"]


def test_pods_wait_as_orphans_until_their_podgroup_appears() -> None:
    state = cluster()
    early = state.add_pod(member("a0"), 0.0)
    assert early.gang.invalid and "does not exist" in early.gang.invalid
    assert "ns/g" not in state.gangs and "ns/g" not in state.waiting
    gang = state.add_gang(GangSpec("ns", "g", 2, API), 1.0)
    assert early.gang is gang and gang.invalid is None
    late = state.add_pod(member("a1"), 2.0)
    assert gang.members == [early, late]
    assert list(state.waiting) == ["ns/g"]


def test_pod_requesting_an_unknown_resource_is_kept_but_invalid() -> None:
    state = cluster()
    pod = state.add_pod(PodSpec("ns", "p", {"example.com/fpga": 1, "cpu": 500, "pods": 1}), 0.0)
    assert pod.invalid is not None and "example.com/fpga" in pod.invalid
    assert state.index.mapping(pod.request) == {"cpu": 500, "pods": 1, "example.com/fpga": 1}
    assert state.pods["ns/p"] is pod and "pod:ns/p" in state.waiting
    state.add_node(NodeSpec("fpga-node", {"cpu": 8000, "pods": 10, "example.com/fpga": 2}))
    assert pod.invalid is None, "a node offering the resource makes the pod valid"


def test_zero_request_of_an_unknown_resource_does_not_crash() -> None:
    state = cluster()
    pod = state.add_pod(PodSpec("ns", "p", {"example.com/fpga": 0, "cpu": 500, "pods": 1}), 0.0)
    assert state.index.mapping(pod.request) == {"cpu": 500, "pods": 1}


@pytest.mark.parametrize(
    ("bind", "release", "requested_cpu", "placed", "waiting"),
    [
        ((), (), [0, 0], 0, True),
        (((0, 0),), (), [1000, 0], 1, True),
        (((0, 0), (1, 1)), (), [1000, 1000], 2, False),
        (((0, 0), (1, 0)), (0,), [1000, 0], 2, False),  # SUCCEEDED still counts as placed
        (((0, 1), (1, 1)), (0, 1), [0, 0], 2, False),
    ],
)
def test_bind_and_release_keep_table_and_counters_exact(
    bind, release, requested_cpu, placed, waiting
) -> None:
    state = cluster()
    state.add_gang(GangSpec("ns", "g", 2, API), 0.0)
    pods = [state.add_pod(member(f"p{i}"), 0.0) for i in range(2)]
    for i, node in bind:
        state.bind(pods[i], node, 1.0)
        assert pods[i].status is PodStatus.BOUND and pods[i].bound_at == 1.0
    for i in release:
        state.release(pods[i])
        assert pods[i].status is PodStatus.SUCCEEDED
    cpu = state.index.position["cpu"]
    assert state.table.requested[:, cpu].tolist() == requested_cpu
    assert state.gangs["ns/g"].placed == placed
    assert ("ns/g" in state.waiting) is waiting


def test_release_of_a_pending_pod_returns_nothing() -> None:
    state = cluster()
    pod = state.add_pod(PodSpec("ns", "p", POD), 0.0)
    state.release(pod, PodStatus.DELETED)
    assert pod.status is PodStatus.DELETED
    assert not state.table.requested.any()
    assert not state.waiting


@pytest.mark.parametrize("status", [PodStatus.BOUND, PodStatus.SUCCEEDED, PodStatus.DELETED])
def test_bind_refuses_a_pod_that_is_not_pending_or_allocated(status: PodStatus) -> None:
    state = cluster()
    pod = state.add_pod(PodSpec("ns", "p", POD), 0.0)
    pod.gang.move(pod, status)
    before = state.table.requested.copy()
    with pytest.raises(ValueError, match="cannot bind"):
        state.bind(pod, 0, 0.0)
    assert np.array_equal(state.table.requested, before)


@pytest.mark.parametrize(
    ("moves", "placed", "by_role", "pipelined"),
    [
        ([("w0", PodStatus.ALLOCATED)], 1, {"worker": 1}, 0),
        ([("w0", PodStatus.ALLOCATED), ("w0", PodStatus.BOUND)], 1, {"worker": 1}, 0),
        ([("w0", PodStatus.BOUND), ("w0", PodStatus.RELEASING)], 0, {}, 0),
        ([("l0", PodStatus.PIPELINED)], 0, {}, 1),
        ([("l0", PodStatus.PIPELINED), ("l0", PodStatus.PENDING)], 0, {}, 0),
        (
            [("l0", PodStatus.BOUND), ("w0", PodStatus.SUCCEEDED)],
            2,
            {"launcher": 1, "worker": 1},
            0,
        ),
        ([("w0", PodStatus.BOUND), ("w0", PodStatus.DELETED)], 0, {}, 0),
    ],
)
def test_gang_move_keeps_counters_exact(moves, placed, by_role, pipelined) -> None:
    state = cluster()
    gang = state.add_gang(GangSpec("ns", "g", 2, API, role_minimums={"launcher": 1}), 0.0)
    pods = {
        "l0": state.add_pod(member("l0", role="launcher"), 0.0),
        "w0": state.add_pod(member("w0", role="worker"), 0.0),
    }
    for name, status in moves:
        gang.move(pods[name], status)
    assert gang.placed == placed
    assert gang.placed_by_role == Counter(by_role)  # zero counts equal missing ones
    assert gang.pipelined == pipelined
    assert gang.ready() is (placed >= 2 and by_role.get("launcher", 0) >= 1)


def test_parked_where_gives_the_classes_worth_a_look_in_parking_order() -> None:
    """The unschedulable queue looks, after a release, only at the parked gangs of classes
    whose shape the room may hold (and at gangs it names): in the order they were parked."""
    state = cluster()
    small, big = np.array([1000, 1000, 1]), np.array([1000, 8000, 1])
    hints = {
        "small": Hint("small", ((small, None, 1),), 1),
        "big": Hint("big", ((big, None, 1),), 1),
    }
    for name, kind in [
        ("b0", "big"),
        ("s0", "small"),
        ("b1", "big"),
        ("c0", None),
        ("s1", "small"),
    ]:
        gang = state.add_pod(PodSpec("ns", name, POD), 0.0).gang
        state.block(
            gang, state.freed, hints[kind] if kind else None, (0.0, float(len(state.blocked)))
        )
    assert list(state.blocked) == ["pod:ns/b0", "pod:ns/s0", "pod:ns/b1", "pod:ns/c0", "pod:ns/s1"]

    def holds_small(hint: Hint | None) -> bool:
        return hint is None or hint.key == "small"

    looked = state.parked_where(holds_small)
    assert [g.ident for g in looked] == ["pod:ns/s0", "pod:ns/c0", "pod:ns/s1"]
    named = state.parked_where(holds_small, also=["pod:ns/b1", "pod:ns/gone"])
    assert [g.ident for g in named] == ["pod:ns/s0", "pod:ns/b1", "pod:ns/c0", "pod:ns/s1"]
    state.unblock(state.gangs["pod:ns/s0"])  # woken, then parked again: it goes last
    state.block(state.gangs["pod:ns/s0"], state.freed, hints["small"], (0.0, 9.0))
    assert [g.ident for g in state.parked_where(holds_small)] == [
        "pod:ns/c0",
        "pod:ns/s1",
        "pod:ns/s0",
    ]
