"""Statement (phalanx.framework.statement): each operation's effect, exact undo, closing."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.session import Session
from phalanx.framework.statement import Op
from phalanx.policies import get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
POD = {"cpu": 1000, GPU: 1000, "pods": 1}


@pytest.fixture
def setup() -> tuple[ClusterState, Session]:
    """Two nodes; gang g (minMember 2, launcher role) with pods l, w; w2 bound on node 1."""
    specs = [NodeSpec(f"n{i}", {"cpu": 8000, "pods": 10, GPU: 4000}) for i in range(2)]
    state = ClusterState(specs, ResourceIndex())
    state.add_gang(GangSpec("ns", "g", 2, API, role_minimums={"launcher": 1}), 0.0)
    for name, role in (("l", "launcher"), ("w", "worker"), ("w2", "worker")):
        state.add_pod(PodSpec("ns", name, dict(POD), gang=GangRef("g", API), role=role), 0.0)
    state.bind(state.pods["ns/w2"], 1, 0.0)
    policy = get_policy("phalanx")
    return state, Session(state, policy.plugins(), now=0.0, rng=np.random.default_rng(0))


def column(session: Session, matrix: str) -> list[int]:
    return getattr(session.table, matrix)[:, session.table.index.position[GPU]].tolist()


@pytest.mark.parametrize(
    ("ops", "requested", "releasing", "pipelined", "statuses", "placed", "roles"),
    [
        ([], [0, 1000], [0, 0], [0, 0], "PPB", 1, {"worker": 1}),
        (
            [("allocate", "l", 0)],
            [1000, 1000],
            [0, 0],
            [0, 0],
            "APB",
            2,
            {"launcher": 1, "worker": 1},
        ),
        (
            [("allocate", "l", 1), ("allocate", "w", 1)],
            [0, 3000],
            [0, 0],
            [0, 0],
            "AAB",
            3,
            {"launcher": 1, "worker": 2},
        ),
        ([("pipeline", "l", 0)], [0, 1000], [0, 0], [1000, 0], "LPB", 1, {"worker": 1}),
        ([("evict", "w2", None)], [0, 1000], [0, 1000], [0, 0], "PPR", 0, {}),
        (
            [("allocate", "w", 0), ("evict", "w", None)],
            [1000, 1000],
            [1000, 0],
            [0, 0],
            "PRB",
            1,
            {"worker": 1},
        ),
        (
            [("evict", "w2", None), ("pipeline", "l", 1)],
            [0, 1000],
            [0, 1000],
            [0, 1000],
            "LPR",
            0,
            {},
        ),
    ],
)
def test_operations_and_their_exact_undo(
    setup, ops, requested, releasing, pipelined, statuses, placed, roles
) -> None:
    state, session = setup
    gang = state.gangs["ns/g"]
    before = {m: getattr(session.table, m).copy() for m in ("requested", "releasing", "pipelined")}
    before_pods = {k: (p.status, p.node) for k, p in state.pods.items()}
    before_gang = (gang.placed, gang.pipelined, Counter(gang.placed_by_role))

    stmt = session.statement()
    for op, name, node in ops:
        pod = state.pods[f"ns/{name}"]
        if op == "evict":
            stmt.evict(pod)
        else:
            getattr(stmt, op)(pod, node)
    letter = {
        PodStatus.PENDING: "P",
        PodStatus.ALLOCATED: "A",
        PodStatus.PIPELINED: "L",
        PodStatus.BOUND: "B",
        PodStatus.RELEASING: "R",
    }
    assert column(session, "requested") == requested
    assert column(session, "releasing") == releasing
    assert column(session, "pipelined") == pipelined
    assert "".join(letter[state.pods[f"ns/{n}"].status] for n in ("l", "w", "w2")) == statuses
    assert gang.placed == placed and gang.placed_by_role == Counter(roles)
    assert gang.pipelined == statuses.count("L")
    assert len(stmt) == len(ops)

    stmt.discard()
    for m, array in before.items():
        assert np.array_equal(getattr(session.table, m), array), m
    assert {k: (p.status, p.node) for k, p in state.pods.items()} == before_pods
    assert (gang.placed, gang.pipelined, Counter(gang.placed_by_role)) == before_gang


@pytest.mark.parametrize("close", ["commit", "discard"])
@pytest.mark.parametrize("then", ["allocate", "pipeline", "evict", "commit", "discard"])
def test_a_closed_statement_refuses_everything(setup, close: str, then: str) -> None:
    state, session = setup
    stmt = session.statement()
    stmt.allocate(state.pods["ns/l"], 0)
    getattr(stmt, close)()
    assert stmt.closed
    requested = session.table.requested.copy()
    args = {"allocate": (state.pods["ns/w"], 0), "pipeline": (state.pods["ns/w"], 0)}
    args["evict"] = (state.pods["ns/w2"],)
    with pytest.raises(RuntimeError, match="already committed or discarded"):
        getattr(stmt, then)(*args.get(then, ()))
    assert np.array_equal(session.table.requested, requested)
    assert state.pods["ns/w"].status is PodStatus.PENDING


def test_evicting_a_pod_on_no_node_is_refused_and_not_logged(setup) -> None:
    state, session = setup
    stmt = session.statement()
    with pytest.raises(ValueError, match="not on a node"):
        stmt.evict(state.pods["ns/l"])
    assert len(stmt) == 0
    assert not session.table.releasing.any()


def test_commit_turns_operations_into_binds_and_evictions(setup) -> None:
    state, session = setup
    stmt = session.statement()
    stmt.allocate(state.pods["ns/l"], 0)
    stmt.pipeline(state.pods["ns/w"], 1)
    stmt.evict(state.pods["ns/w2"])
    operations = stmt.commit()
    assert [o.op for o in operations] == [Op.ALLOCATE, Op.PIPELINE, Op.EVICT]
    assert [(o.previous, o.previous_node) for o in operations] == [
        (PodStatus.PENDING, -1),
        (PodStatus.PENDING, -1),
        (PodStatus.BOUND, 1),
    ]
    assert [(p.key, n) for p, n in session.result.binds] == [("ns/l", 0)]
    assert [p.key for p in session.result.evictions] == ["ns/w2"]


def reserved_setup() -> tuple[ClusterState, Session]:
    """One node; pod l of gang g held at Permit (reserved, not bound) on it."""
    state = ClusterState([NodeSpec("n0", {"cpu": 8000, "pods": 10, GPU: 4000})], ResourceIndex())
    state.add_gang(GangSpec("ns", "g", 2, API), 0.0)
    state.add_pod(PodSpec("ns", "l", dict(POD), gang=GangRef("g", API)), 0.0)
    state.reserve(state.pods["ns/l"], 0)
    policy = get_policy("coscheduling")
    return state, Session(state, policy.plugins(), now=0.0, rng=np.random.default_rng(0))


@pytest.mark.parametrize("close", ["commit", "discard"])
def test_unreserve_gives_back_a_permit_hold_and_undoes_exactly(close: str) -> None:
    state, session = reserved_setup()
    pod = state.pods["ns/l"]
    gpus = pod.gpus
    stmt = session.statement()
    stmt.unreserve(pod)
    assert pod.status is PodStatus.PENDING and pod.node == -1 and pod.gpus == ()
    assert column(session, "requested") == [0]
    with pytest.raises(ValueError, match="cannot unreserve"):
        stmt.unreserve(pod)
    getattr(stmt, close)()
    if close == "discard":
        assert (pod.status, pod.node, pod.gpus) == (PodStatus.RESERVED, 0, gpus)
        assert column(session, "requested") == [1000] and not session.result.unreserved
    else:
        assert session.result.unreserved == [(pod, 0, gpus)]
        assert state.table.requested[0, state.table.gpu_col] == 1000  # until applied
