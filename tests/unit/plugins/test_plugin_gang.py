"""Gang plugin (phalanx.plugins.gang): validity, readiness, order; and the Priority plugin."""

from __future__ import annotations

import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodStatus
from phalanx.framework.unit import Unit
from phalanx.plugins.gang import Gang
from phalanx.plugins.priority import Priority
from phalanx.policies import Scheduler, get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"


def build(
    min_member: int,
    pods: list[tuple[str, int, PodStatus]],  # (role, milli-GPU, status)
    *,
    roles: dict[str, int] | None = None,
    nodes: int = 4,
    cordoned: int = 0,
) -> tuple[ClusterState, GangInfo]:
    specs = [
        NodeSpec(f"n{i}", {"cpu": 8000, "pods": 110, GPU: 1000}, unschedulable=i < cordoned)
        for i in range(nodes)
    ]
    state = ClusterState(specs, ResourceIndex())
    gang = state.add_gang(GangSpec("ns", "g", min_member, API, role_minimums=roles or {}), 0.0)
    for i, (role, gpu, status) in enumerate(pods):
        spec = PodSpec("ns", f"g{i}", {GPU: gpu, "pods": 1}, gang=GangRef("g", API), role=role)
        pod = state.add_pod(spec, 0.0)
        if status is PodStatus.BOUND:
            state.bind(pod, cordoned + i % (nodes - cordoned), 0.0)
        elif status is not PodStatus.PENDING:
            gang.move(pod, status)
    return state, gang


def verdict(state: ClusterState, gang: GangInfo) -> tuple[str, str] | None:
    return Gang().unit_valid(Unit.of_gang(gang, gang.pending()), state.table)


P, B, S, D = PodStatus.PENDING, PodStatus.BOUND, PodStatus.SUCCEEDED, PodStatus.DELETED
W = ("", 1000, P)  # a plain pending 1-GPU member


@pytest.mark.parametrize(
    ("min_member", "pods", "roles", "cordoned", "expected"),
    [
        (3, [W, W], None, 0, ("NotEnoughMembers", "2 of minMember 3 pods exist")),
        (3, [W, W, ("", 1000, S)], None, 0, ("NotEnoughMembers", "2 of minMember 3")),
        (3, [W, W, ("", 1000, D)], None, 0, ("NotEnoughMembers", "2 of minMember 3")),
        (
            2,
            [("launcher", 0, P), ("worker", 1000, P)],
            {"launcher": 1, "worker": 2},
            0,
            ("NotEnoughMembers", "role 'worker' has 1 of its minimum 2 pods"),
        ),
        (
            2,
            [("worker", 1000, P)] * 3,
            {"launcher": 1},
            0,
            ("NotEnoughMembers", "role 'launcher' has 0 of its minimum 1 pods"),
        ),
        (5, [W] * 5, None, 0, ("Unresolvable", "nvidia.com/gpu 5 > 4")),
        (4, [W] * 4, None, 1, ("Unresolvable", "nvidia.com/gpu 4 > 3")),  # cordons don't count
        (2, [("", 3000, P), W], None, 0, None),  # 4 GPUs in total: valid, if not placeable
        (4, [W] * 4, None, 0, None),
        (4, [W] * 6, None, 0, None),
        (
            3,
            [("launcher", 0, P), ("worker", 1000, P), ("worker", 1000, P)],
            {"launcher": 1, "worker": 2},
            0,
            None,
        ),
        (2, [("", 1000, B), ("", 1000, B), ("", 9000, P)], None, 0, None),  # ready already
    ],
)
def test_unit_valid(min_member, pods, roles, cordoned, expected) -> None:
    state, gang = build(min_member, pods, roles=roles, cordoned=cordoned)
    got = verdict(state, gang)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got[0] == expected[0]
        assert expected[1] in got[1]


def test_unresolvable_message_gives_the_total_need() -> None:
    state, gang = build(6, [W] * 6)
    reason, message = verdict(state, gang)
    assert reason == "Unresolvable"
    assert message.startswith("minMember 6 needs more than the whole cluster has")
    assert "it needs {nvidia.com/gpu: 6} in total" in message


def test_a_pod_whose_podgroup_is_missing_is_invalid() -> None:
    state = ClusterState([NodeSpec("n0", {"pods": 10, GPU: 1000})], ResourceIndex())
    pod = state.add_pod(PodSpec("ns", "p", {GPU: 1000, "pods": 1}, gang=GangRef("nope", API)), 0.0)
    reason, message = Gang().unit_valid(Unit.of_gang(pod.gang, [pod]), state.table)
    assert reason == "Invalid" and "does not exist" in message


def test_a_pod_requesting_an_unknown_resource_makes_its_gang_invalid() -> None:
    state, gang = build(2, [W])
    spec = PodSpec("ns", "odd", {"example.com/fpga": 1, "pods": 1}, gang=GangRef("g", API))
    state.add_pod(spec, 0.0)
    reason, message = verdict(state, gang)
    assert reason == "Invalid" and "ns/odd" in message and "example.com/fpga" in message


def test_a_lone_pod_is_always_valid() -> None:
    state = ClusterState([NodeSpec("n0", {"pods": 10, GPU: 1000})], ResourceIndex())
    pod = state.add_pod(PodSpec("ns", "huge", {GPU: 8000, "pods": 1}), 0.0)
    assert Gang().unit_valid(Unit.of_pod(pod), state.table) is None
    assert Gang().unit_ready(Unit.of_pod(pod)) is True


def test_validity_uses_the_cheapest_members_not_the_first() -> None:
    state, gang = build(2, [("", 8000, P), W, W])
    assert verdict(state, gang) is None
    result = Scheduler(get_policy("phalanx"), seed=0).cycle(state, 0.0)
    assert sorted(p.key for p, _ in result.binds) == ["ns/g1", "ns/g2"]


@pytest.mark.parametrize(
    ("min_member", "roles", "placed", "ready"),
    [
        (2, None, [], False),
        (2, None, ["", ""], True),
        (2, None, [""], False),
        (3, {"launcher": 1, "worker": 2}, ["worker", "worker", "worker"], False),
        (3, {"launcher": 1, "worker": 2}, ["launcher", "worker"], False),
        (3, {"launcher": 1, "worker": 2}, ["launcher", "worker", "worker"], True),
        (2, {"launcher": 1, "worker": 2}, ["launcher", "worker", "worker"], True),
        (4, {"launcher": 1, "worker": 2}, ["launcher", "worker", "worker"], False),
        (1, {"ps": 0}, ["worker"], True),
    ],
)
def test_unit_ready_and_order_key(min_member, roles, placed, ready) -> None:
    pods = [(role, 1000, P) for role in placed] + [("worker", 1000, P)]
    state, gang = build(min_member, pods, roles=roles)
    for pod in gang.members[: len(placed)]:
        gang.move(pod, PodStatus.ALLOCATED)
    unit = Unit.of_gang(gang, gang.pending())
    assert Gang().unit_ready(unit) is ready
    assert Gang().order_key(unit, state.table) == (
        (1.0,) if ready else (0.0,)
    )  # unready gangs go first


@pytest.mark.parametrize(
    ("priority", "created", "expected"),
    [(0, 0.0, (0, 0.0)), (10, 3.5, (-10, 3.5)), (-5, 1.0, (5, 1.0))],
)
def test_priority_order_key(priority: int, created: float, expected) -> None:
    state = ClusterState([NodeSpec("n0", {"pods": 10})], ResourceIndex())
    pod = state.add_pod(PodSpec("ns", "p", {"pods": 1}, priority=priority), created)
    assert Priority().order_key(Unit.of_pod(pod), state.table) == expected
