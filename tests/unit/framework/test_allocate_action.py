"""The allocate action (phalanx.actions.allocate), driven through ``Scheduler.cycle``."""

from __future__ import annotations

import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, Placement, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodStatus
from phalanx.framework.backend import run_cycle
from phalanx.framework.session import CycleResult
from phalanx.policies import Scheduler, get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
ONE_GPU = {GPU: 1000, "pods": 1}


def cluster(nodes: int = 4, gpus: int = 1000, labels: dict[int, dict[str, str]] | None = None):
    specs = [
        NodeSpec(
            f"n{i}",
            {"cpu": 16000, "memory": 2**36, "pods": 110, GPU: gpus},
            labels=(labels or {}).get(i, {}),
        )
        for i in range(nodes)
    ]
    return ClusterState(specs, ResourceIndex())


def add_gang(
    state: ClusterState,
    name: str,
    k: int,
    requests: dict[str, int] = ONE_GPU,
    *,
    min_member: int | None = None,
    now: float = 0.0,
    priority: int | None = None,
    pod_priority: int = 0,
    timeout: float | None = None,
) -> GangInfo:
    spec = GangSpec(
        "ns",
        name,
        k if min_member is None else min_member,
        API,
        priority=priority,
        timeout_seconds=timeout,
    )
    gang = state.add_gang(spec, now)
    for i in range(k):
        pod = PodSpec(
            "ns", f"{name}-{i}", dict(requests), gang=GangRef(name, API), priority=pod_priority
        )
        state.add_pod(pod, now)
    return gang


def occupy(state: ClusterState, nodes: list[int], now: float = 0.0) -> None:
    """Bind a lone 1-GPU pod on each of ``nodes``."""
    for node in nodes:
        pod = state.add_pod(PodSpec("ns", f"busy-{node}", dict(ONE_GPU)), now)
        state.bind(pod, node, now)


def cycle(state: ClusterState, now: float = 0.0, seed: int = 0, *, scheduler=None) -> CycleResult:
    scheduler = scheduler or Scheduler(get_policy("phalanx"), seed=seed)
    return run_cycle(scheduler, state, now)


def bound(gang: GangInfo) -> int:
    return sum(p.status is PodStatus.BOUND for p in gang.members)


# -- whole gangs -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodes", "gpus", "k", "min_member", "pod_gpu", "expected", "reason"),
    [
        (4, 1000, 4, 4, 1000, 4, None),
        (2, 4000, 8, 8, 1000, 8, None),
        (2, 4000, 3, 3, 2500, 0, "Invalid"),  # 2.5 GPUs: above one GPU, only whole GPUs
        (3, 2000, 2, 2, 3000, 0, "NotEnoughResources"),  # no single node has 3 GPUs
        (4, 1000, 5, 5, 1000, 0, "Unresolvable"),  # more than the whole cluster
        (4, 1000, 6, 4, 1000, 4, None),  # ready: committed; 2 extra members stay pending
        (4, 2000, 4, 4, 500, 4, None),  # fractional GPUs share nodes
    ],
)
def test_a_gang_is_placed_whole_or_not_at_all(
    nodes, gpus, k, min_member, pod_gpu, expected, reason
) -> None:
    state = cluster(nodes, gpus)
    gang = add_gang(state, "g", k, {GPU: pod_gpu, "pods": 1}, min_member=min_member)
    result = cycle(state)
    assert len(result.binds) == expected == bound(gang)
    assert expected == 0 or expected >= min_member
    assert len(gang.pending()) == k - expected
    assert (state.table.requested <= state.table.allocatable).all()
    if reason is None:
        assert "ns/g" not in result.waiting and gang.condition.reason == "Scheduled"
    else:
        assert result.waiting["ns/g"].reason == reason
    if expected == 0:
        assert not state.table.requested.any()
        assert all(p.status is PodStatus.PENDING and p.node == -1 for p in gang.members)


def test_extra_members_of_a_ready_gang_are_placed_when_room_appears() -> None:
    state = cluster(4)
    gang = add_gang(state, "g", 6, min_member=4)
    cycle(state, 0.0)
    assert bound(gang) == 4 and gang.ready()
    first = gang.members[0]
    state.release(first)
    result = cycle(state, 1.0)
    assert len(result.binds) == 1 and result.binds[0][1] == first.node
    assert bound(gang) == 4


# -- no head-of-line blocking ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("big_priority", "big_created", "small_created"),
    [(10, 0.0, 1.0), (0, 0.0, 1.0), (10, 1.0, 0.5)],
)
def test_a_gang_that_cannot_fit_does_not_block_a_smaller_one(
    big_priority, big_created, small_created
) -> None:
    state = cluster(4)
    occupy(state, [0])
    big = add_gang(state, "big", 4, now=big_created, priority=big_priority)
    small = add_gang(state, "small", 2, now=small_created, priority=0)
    result = cycle(state, 2.0)
    assert {p.key for p, _ in result.binds} == {"ns/small-0", "ns/small-1"}
    assert bound(small) == 2 and bound(big) == 0
    assert result.waiting["ns/big"].reason == "NotEnoughResources"


def test_identical_failing_gangs_are_attempted_once() -> None:
    state = cluster(4)
    occupy(state, [0])
    add_gang(state, "a", 4)
    add_gang(state, "b", 4)
    result = cycle(state, 1.0)
    assert result.attempts == 1
    assert result.waiting["ns/a"].message == result.waiting["ns/b"].message
    assert not result.binds


# -- order ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gangs", "winner"),
    [
        # (name, gang priority, created, member pod priority), added in this order
        ([("x", 0, 0.0, 0), ("y", 10, 1.0, 0)], "y"),  # priority first
        ([("x", 5, 0.0, 0), ("y", 5, 1.0, 0)], "x"),  # then creation time
        ([("x", 5, 1.0, 0), ("y", 5, 0.0, 0)], "y"),  # creation, not arrival order
        ([("x", 5, 0.0, 0), ("y", 5, 0.0, 0)], "x"),  # then arrival order
        ([("x", None, 0.0, 0), ("y", None, 1.0, 7)], "y"),  # gang priority from its pods
        ([("x", 1, 0.0, 9), ("y", 2, 1.0, 0)], "y"),  # explicit gang priority wins over pods
    ],
)
def test_priority_then_creation_order(gangs, winner) -> None:
    state = cluster(4)
    for name, priority, created, pod_priority in gangs:
        add_gang(state, name, 4, now=created, priority=priority, pod_priority=pod_priority)
    result = cycle(state, 2.0)
    assert {p.gang.name for p, _ in result.binds} == {winner}
    assert len(result.binds) == 4


def test_gangs_run_one_after_another_in_priority_then_fifo_order() -> None:
    state = cluster(4)
    scheduler = Scheduler(get_policy("phalanx"), seed=0)
    for name, priority, created in [("p", 0, 0.0), ("q", 1, 1.0), ("r", 1, 2.0), ("s", 0, 3.0)]:
        add_gang(state, name, 4, now=created, priority=priority)
    order = []
    for step in range(4):
        result = cycle(state, 4.0 + step, scheduler=scheduler)
        names = {p.gang.name for p, _ in result.binds}
        assert len(names) == 1
        order.append(names.pop())
        for pod, _ in result.binds:
            state.release(pod)
    assert order == ["q", "r", "p", "s"]


# -- role minimums ---------------------------------------------------------------------------
@pytest.mark.parametrize("launcher_first", [True, False])
@pytest.mark.parametrize("launcher_can_run", [False, True])
def test_role_minimums_launcher_and_workers(launcher_first: bool, launcher_can_run: bool) -> None:
    state = cluster(4, labels={0: {"role": "launcher"}} if launcher_can_run else None)
    gang = state.add_gang(
        GangSpec("ns", "mpi", 3, API, role_minimums={"launcher": 1, "worker": 2}), 0.0
    )
    launcher = PodSpec(
        "ns",
        "mpi-launcher",
        {"cpu": 1000, "pods": 1},
        placement=Placement(node_selector=(("role", "launcher"),)),
        gang=GangRef("mpi", API),
        role="launcher",
    )
    workers = [
        PodSpec("ns", f"mpi-worker-{i}", dict(ONE_GPU), gang=GangRef("mpi", API), role="worker")
        for i in range(3)
    ]
    for spec in [launcher, *workers] if launcher_first else [*workers, launcher]:
        state.add_pod(spec, 0.0)
    result = cycle(state)
    if launcher_can_run:
        assert len(result.binds) == 4
        assert state.pods["ns/mpi-launcher"].node == 0
        assert gang.ready()
    else:
        # Three workers would fit and meet minMember 3, but the launcher minimum is not met.
        assert not result.binds
        assert gang.placed == 0 and not gang.placed_by_role["worker"]
        assert not state.table.requested.any()
        assert result.waiting["ns/mpi"].reason == "NotEnoughResources"


# -- explanations ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("busy", "fit", "detail"),
    [
        ([0], "3 fit now", None),
        ([0, 1, 2, 3], "0 fit now", "(0/4 nodes have room: 4 Insufficient nvidia.com/gpu)"),
    ],
)
def test_explanation_of_a_waiting_gang(busy, fit, detail) -> None:
    state = cluster(4)
    occupy(state, busy)
    add_gang(state, "g", 4)
    condition = cycle(state, 1.0).waiting["ns/g"]
    assert condition.type == "Unschedulable" and condition.reason == "NotEnoughResources"
    assert "0/4 required members placed, 4 more needed" in condition.message
    assert "needs 4 × {nvidia.com/gpu: 1}" in condition.message
    assert fit in condition.message
    if detail is not None:
        assert detail in condition.message
    else:
        assert "nodes have room" not in condition.message


# -- scheduleTimeoutSeconds ------------------------------------------------------------------
def test_timeout_condition_backoff_and_deferral() -> None:
    state = cluster(4)
    occupy(state, [0])
    gang = add_gang(state, "g", 4, timeout=10.0)
    scheduler = Scheduler(get_policy("phalanx"), seed=0)

    early = cycle(state, 5.0, scheduler=scheduler)
    assert early.waiting["ns/g"].reason == "NotEnoughResources"
    assert not early.timeouts and gang.backoff_until <= 5.0

    late = cycle(state, 10.0, scheduler=scheduler)
    assert late.waiting["ns/g"].reason == "Timeout"
    assert "scheduleTimeoutSeconds 10" in late.waiting["ns/g"].message
    assert [g.key for g in late.timeouts] == ["ns/g"]
    assert gang.timed_out and gang.backoff_until > 10.0
    assert late.retry_at["ns/g"] == gang.backoff_until

    midway = (10.0 + gang.backoff_until) / 2
    unchanged = cycle(state, midway, scheduler=scheduler)
    assert unchanged.deferred == {}  # nothing changed since it failed: no retry needed
    state.add_pod(PodSpec("ns", "newcomer", {"cpu": 1, "pods": 1}), midway)
    assert cycle(state, midway, scheduler=scheduler).deferred == {}  # arrivals free nothing
    state.add_pod(PodSpec("ns", "newcomer-2", {"cpu": 1, "pods": 1}), midway)
    passing = state.add_pod(PodSpec("ns", "passing", {"cpu": 1, "pods": 1}), midway)
    state.bind(passing, 1, midway)
    state.release(passing)  # resources were freed: the parked gang may fit now
    during = cycle(state, midway, scheduler=scheduler)
    assert during.deferred == {"ns/g": gang.backoff_until}  # the cluster changed: retry
    assert "ns/g" not in during.waiting and during.attempts == 1  # only newcomer-2

    first_backoff = gang.backoff_until - 10.0
    now = gang.backoff_until
    again = cycle(state, now, scheduler=scheduler)
    assert again.waiting["ns/g"].reason == "Timeout"
    assert not again.timeouts  # reported once
    assert gang.backoff_until - now > first_backoff  # the backoff grew

    # Once room appears the gang is placed and its backoff is cleared.
    state.release(state.pods["ns/busy-0"])
    placed = cycle(state, gang.backoff_until, scheduler=scheduler)
    assert len(placed.binds) == 4
    assert gang.backoff_until == 0.0 and gang.failures == 0
    assert gang.condition.reason == "Scheduled"
