"""Session (phalanx.framework.session): units, node selection, conditions, timeouts, close."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.backend import MemoryBackend, apply
from phalanx.framework.session import Session, SessionConfig
from phalanx.plugins.gang import Gang
from phalanx.plugins.nodeorder import Binpack
from phalanx.plugins.predicates import Predicates
from phalanx.plugins.priority import Priority
from phalanx.policies import get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
ONE_GPU = {GPU: 1000, "pods": 1}


def cluster(nodes: int = 4, gpus: int = 1000) -> ClusterState:
    specs = [NodeSpec(f"n{i}", {"cpu": 8000, "pods": 110, GPU: gpus}) for i in range(nodes)]
    return ClusterState(specs, ResourceIndex())


def session(state: ClusterState, now: float = 0.0, seed: int = 0, **config) -> Session:
    plugins = [Priority(), Gang(), Predicates(), Binpack()]
    return Session(
        state, plugins, now=now, rng=np.random.default_rng(seed), config=SessionConfig(**config)
    )


def settle(s: Session) -> None:
    """Close the session and apply its result, as a runner does."""
    apply(s.close(), s.state, MemoryBackend(s.state, s.now))


def add_gang(state, name, k, *, now=0.0, priority=None, timeout=None, scheduler_name=""):
    gang = state.add_gang(
        GangSpec("ns", name, k, API, priority=priority, timeout_seconds=timeout), now
    )
    for i in range(k):
        spec = PodSpec(
            "ns",
            f"{name}-{i}",
            dict(ONE_GPU),
            gang=GangRef(name, API),
            scheduler_name=scheduler_name,
        )
        state.add_pod(spec, now)
    return gang


# -- units -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gangs", "expected"),
    [
        ([("a", 0, 0.0), ("b", 5, 1.0), ("c", 5, 0.5)], ["c", "b", "a"]),
        ([("a", 1, 2.0), ("b", 1, 1.0), ("c", 1, 1.0)], ["b", "c", "a"]),
        ([("a", 0, 0.0), ("b", 0, 0.0)], ["a", "b"]),
    ],
)
def test_units_are_ordered_by_priority_then_creation_then_arrival(gangs, expected) -> None:
    state = cluster()
    for name, priority, created in gangs:
        add_gang(state, name, 2, now=created, priority=priority)
    assert [u.gang.name for u in session(state, now=5.0).units()] == expected


def test_gang_units_versus_pod_units() -> None:
    state = cluster()
    add_gang(state, "a", 3)
    state.add_pod(PodSpec("ns", "solo", dict(ONE_GPU)), 0.0)
    gang_units = session(state).units()
    assert [len(u.pods) for u in gang_units] == [3, 1]
    pod_units = session(state, gang_units=False).units()
    assert [u.pods[0].key for u in pod_units] == ["ns/a-0", "ns/a-1", "ns/a-2", "ns/solo"]


def test_units_skip_gangs_in_backoff_and_note_their_retry() -> None:
    state = cluster()
    a = add_gang(state, "a", 2)
    add_gang(state, "b", 2)
    a.backoff_until = 7.0
    s = session(state, now=6.0)
    assert [u.gang.name for u in s.units()] == ["b"]
    assert s.result.deferred == {"ns/a": 7.0}
    assert [u.gang.name for u in session(state, now=7.0).units()] == ["a", "b"]


def test_pods_of_another_scheduler_are_left_alone() -> None:
    state = cluster()
    other = add_gang(state, "other", 2, scheduler_name="default-scheduler")
    add_gang(state, "ours", 2, scheduler_name="phalanx")
    s = session(state)
    assert [u.gang.name for u in s.units()] == ["ours"]
    assert other.condition is None  # recorded in the result, written by the applier
    settle(s)
    assert other.condition is not None and other.condition.reason == "OtherScheduler"


# -- node selection --------------------------------------------------------------------------
def test_select_node_prefers_the_best_score_and_none_when_infeasible() -> None:
    state = cluster(3, gpus=4000)
    filler = state.add_pod(PodSpec("ns", "filler", {GPU: 2000, "pods": 1}), 0.0)
    state.bind(filler, 2, 0.0)
    pod = state.add_pod(PodSpec("ns", "p", dict(ONE_GPU)), 0.0)
    assert session(state).select_node(pod) == 2  # binpack: the fuller node
    huge = state.add_pod(PodSpec("ns", "huge", {GPU: 5000, "pods": 1}), 0.0)
    assert session(state).select_node(huge) is None


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_ties_are_broken_by_the_seeded_rng(seed: int) -> None:
    state = cluster(8)
    pod = state.add_pod(PodSpec("ns", "p", dict(ONE_GPU)), 0.0)
    picks = [session(state, seed=seed).select_node(pod) for _ in range(3)]
    assert len(set(picks)) == 1 and 0 <= picks[0] < 8
    many = {session(state, seed=s).select_node(pod) for s in range(64)}
    assert len(many) > 1  # all eight nodes tie: the RNG, not the index, decides


# -- conditions and timeouts ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("created", "timeout", "now", "reason", "timed_out"),
    [
        (0.0, None, 100.0, "NotEnoughResources", False),
        (1.0, 10.0, 10.9, "NotEnoughResources", False),
        (1.0, 10.0, 11.0, "Timeout", True),  # at the timeout exactly
        (1.0, 10.0, 50.0, "Timeout", True),
        (1.0, 0.0, 1.0, "Timeout", True),
    ],
)
def test_wait_applies_the_timeout(created, timeout, now, reason, timed_out) -> None:
    state = cluster()
    gang = add_gang(state, "g", 2, now=created, timeout=timeout)
    s = session(state, now=now)
    s.wait(gang, "NotEnoughResources", "needs 2 × {nvidia.com/gpu: 1}")
    assert gang.condition is None, "a session records decisions; it does not apply them"
    settle(s)
    assert s.result.waiting["ns/g"] is gang.condition
    assert gang.condition.reason == reason
    assert gang.condition.message.endswith("needs 2 × {nvidia.com/gpu: 1}")
    assert gang.timed_out is timed_out
    assert (s.result.timeouts == [gang]) is timed_out
    assert (gang.backoff_until > now) is timed_out


def test_backoff_doubles_up_to_the_maximum_and_timeout_is_reported_once() -> None:
    state = cluster()
    gang = add_gang(state, "g", 2, timeout=1.0)
    delays, reports = [], 0
    for now in (1.0, 3.0, 6.0, 11.0, 20.0, 40.0, 60.0):
        s = session(state, now=now, backoff_base=1.0, backoff_max=10.0)
        s.wait(gang, "NotEnoughResources", "x")
        settle(s)
        delays.append(gang.backoff_until - now)
        reports += len(s.result.timeouts)
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert reports == 1


def test_placed_clears_the_backoff() -> None:
    state = cluster()
    gang = add_gang(state, "g", 2, timeout=1.0)
    s = session(state, now=5.0)
    s.wait(gang, "NotEnoughResources", "x")
    settle(s)
    assert gang.failures == 1 and gang.backoff_until > 5.0
    s = session(state, now=6.0)
    s.placed(gang)
    settle(s)
    assert gang.failures == 0 and gang.backoff_until == 0.0
    assert gang.condition.type == "Scheduled"


@pytest.mark.parametrize(
    ("first", "second", "reasons", "since"),
    [
        (1.0, 5.0, ("NotEnoughResources", "NotEnoughResources"), 1.0),  # unchanged reason
        (1.0, 5.0, ("NotEnoughMembers", "NotEnoughResources"), 5.0),  # a new reason
    ],
)
def test_condition_since_is_the_first_time_of_its_reason(first, second, reasons, since) -> None:
    state = cluster()
    gang = add_gang(state, "g", 2)
    settled = session(state, now=first)
    settled.wait(gang, reasons[0], "x")
    settle(settled)
    settled = session(state, now=second)
    settled.wait(gang, reasons[1], "y")
    settle(settled)
    assert gang.condition.since == since
    assert gang.condition.message == "y"


def test_condition_since_survives_time_zero() -> None:
    state = cluster()
    gang = add_gang(state, "g", 2)
    settled = session(state, now=0.0)
    settled.wait(gang, "NotEnoughResources", "x")
    settle(settled)
    settled = session(state, now=5.0)
    settled.wait(gang, "NotEnoughResources", "x")
    settle(settled)
    assert gang.condition.since == 0.0


# -- close -------------------------------------------------------------------------------------
def test_close_discards_open_statements_and_leaves_committed_ones_to_the_applier() -> None:
    state = cluster()
    add_gang(state, "g", 2)
    a, b = state.pods["ns/g-0"], state.pods["ns/g-1"]
    s = session(state)
    kept = s.statement()
    kept.allocate(a, 0)
    kept.commit()
    dropped = s.statement()
    dropped.allocate(b, 1)
    dropped.pipeline(state.add_pod(PodSpec("ns", "c", dict(ONE_GPU)), 0.0), 2)
    result = s.close()
    assert [(p.key, n) for p, n in result.binds] == [("ns/g-0", 0)]
    assert list(result.gpus) == [id(a)] and len(result.gpus[id(a)]) == 1  # one GPU
    # the shared pods are as the cycle found them: the bind waits for the applier
    assert a.status is PodStatus.PENDING and a.node == -1 and a.gpus == ()
    assert b.status is PodStatus.PENDING and b.node == -1
    assert state.pods["ns/c"].status is PodStatus.PENDING
    gpu = state.index.position[GPU]
    assert s.table.requested[:, gpu].tolist() == [1000, 0, 0, 0]  # the cycle's own table
    assert not s.table.pipelined.any()
    assert not state.table.requested.any()  # the authoritative state waits for the backend
    apply(result, state, MemoryBackend(state))
    assert a.status is PodStatus.BOUND and a.node == 0 and a.gpus == result.gpus[id(a)]
    assert state.table.requested[:, gpu].tolist() == [1000, 0, 0, 0]


def test_policy_config_matches_gang_awareness() -> None:
    assert get_policy("phalanx").config.gang_units is True
    assert get_policy("kube-default").config.gang_units is False
