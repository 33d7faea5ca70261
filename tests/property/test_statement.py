"""Statement: ``discard`` is an exact undo, ``commit`` reports exactly the allocations.

Random clusters (1–12 nodes, GPUs, labels, taints, cordons) and random pods (some in gangs
with roles, some already bound); a random sequence of allocate / pipeline / evict goes through
one Statement of a real Session with the ``phalanx`` plugins.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.api.specs import (
    GangRef,
    GangSpec,
    NodeSpec,
    Placement,
    PodSpec,
    Taint,
    TaintEffect,
    Toleration,
)
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.backend import MemoryBackend, apply
from phalanx.framework.session import Session
from phalanx.framework.statement import Op
from phalanx.policies import get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
GiB = 2**30

TAINTS = (
    Taint("gpu", "true", TaintEffect.NO_SCHEDULE),
    Taint("gpu", "true", TaintEffect.NO_EXECUTE),
    Taint("spot", "yes", TaintEffect.PREFER_NO_SCHEDULE),
    Taint("dedicated", "ml", TaintEffect.NO_SCHEDULE),
)
TOLERATIONS = (
    Toleration("gpu", "Exists", "", None),
    Toleration("gpu", "Equal", "true", TaintEffect.NO_SCHEDULE),
    Toleration("dedicated", "Equal", "ml", None),
    Toleration(None, "Exists", "", None),
)

node_drafts = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from([0, 1000, 4000, 16000]),
        "memory": st.sampled_from([0, 4 * GiB, 64 * GiB]),
        "pods": st.sampled_from([0, 1, 3, 110, 110]),
        "gpu": st.sampled_from([0, 500, 1000, 2000, 4000, 8000]),
        "zone": st.sampled_from([None, "a", "b"]),
        "taints": st.lists(st.sampled_from(TAINTS), max_size=1),
        "unschedulable": st.sampled_from([False, False, False, True]),
    }
)

pod_drafts = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from([0, 250, 1000, 4000]),
        "memory": st.sampled_from([0, GiB, 16 * GiB]),
        "gpu": st.sampled_from([0, 0, 500, 1000, 2000]),
        "zone": st.sampled_from([None, None, "a", "b"]),
        "tolerations": st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique=True),
        "gang": st.sampled_from([None, "g0", "g1", "g2"]),
        "role": st.sampled_from(["", "launcher", "worker"]),
        "bind_to": st.none() | st.integers(0, 11),
    }
)


def build(nodes: list[dict[str, object]], pods: list[dict[str, object]]) -> ClusterState:
    specs = [
        NodeSpec(
            name=f"n{i}",
            allocatable={
                "cpu": d["cpu"],
                "memory": d["memory"],
                "pods": d["pods"],
                GPU: d["gpu"],
            },
            labels={} if d["zone"] is None else {"zone": d["zone"]},
            taints=tuple(d["taints"]),
            unschedulable=d["unschedulable"],
        )
        for i, d in enumerate(nodes)
    ]
    state = ClusterState(specs, ResourceIndex())
    for g, minimum in (("g0", 1), ("g1", 2), ("g2", 3)):
        roles = {"launcher": 1} if g == "g2" else {}
        state.add_gang(GangSpec("ns", g, minimum, API, role_minimums=roles), 0.0)
    for i, d in enumerate(pods):
        spec = PodSpec(
            namespace="ns",
            name=f"p{i}",
            requests={"cpu": d["cpu"], "memory": d["memory"], GPU: d["gpu"], "pods": 1},
            placement=Placement(
                node_selector=() if d["zone"] is None else (("zone", d["zone"]),),
                tolerations=tuple(d["tolerations"]),
            ),
            gang=None if d["gang"] is None else GangRef(d["gang"], API),
            role=d["role"],
        )
        pod = state.add_pod(spec, 0.0)
        target = d["bind_to"]
        if target is not None and target < len(specs) and state.table.fits(pod.request)[target]:
            state.bind(pod, target, 0.0)
    return state


def snapshot(session: Session) -> dict[str, object]:
    state = session.state
    return {
        "requested": session.table.requested.copy(),
        "releasing": session.table.releasing.copy(),
        "pipelined": session.table.pipelined.copy(),
        "gpu_free": session.table.gpu_free.copy(),
        "pods": {key: (pod.status, pod.node, pod.gpus) for key, pod in state.pods.items()},
        "gangs": {
            ident: (gang.placed, gang.pipelined, Counter(gang.placed_by_role))
            for ident, gang in state.gangs.items()
        },
    }


def run_operations(data: st.DataObject, session: Session, stmt: object) -> None:
    """Apply a random, legal sequence of allocate / pipeline / evict through ``stmt``."""
    pods = list(session.state.pods.values())
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        kind = data.draw(st.sampled_from(["allocate", "pipeline", "evict"]), label="op")
        if kind == "evict":
            # Only pods allocated in this statement, or bound before it.
            victims = [p for p in pods if p.status in (PodStatus.ALLOCATED, PodStatus.BOUND)]
            if victims:
                stmt.evict(data.draw(st.sampled_from(victims), label="victim"))
            continue
        pending = [p for p in pods if p.status is PodStatus.PENDING]
        if not pending:
            continue
        pod = data.draw(st.sampled_from(pending), label="pod")
        if kind == "allocate":
            nodes = np.flatnonzero(session.feasible(pod)).tolist()
            if nodes:
                stmt.allocate(pod, data.draw(st.sampled_from(nodes), label="node"))
        else:
            stmt.pipeline(pod, data.draw(st.integers(0, len(session.table) - 1), label="node"))


def open_session(state: ClusterState) -> Session:
    policy = get_policy("phalanx")
    return Session(
        state, policy.plugins(), now=0.0, rng=np.random.default_rng(0), config=policy.config
    )


clusters = st.lists(node_drafts, min_size=1, max_size=12)
workloads = st.lists(pod_drafts, min_size=1, max_size=14)


@settings(max_examples=150, deadline=None)
@given(nodes=clusters, pods=workloads, data=st.data())
def test_discard_restores_table_pods_and_gangs_exactly(nodes, pods, data) -> None:
    state = build(nodes, pods)
    session = open_session(state)
    before = snapshot(session)

    stmt = session.statement()
    run_operations(data, session, stmt)
    # Allocations only ever went to feasible nodes, so the snapshot never overcommits.
    assert (session.table.requested <= session.table.allocatable).all()
    stmt.discard()

    after = snapshot(session)
    for column in ("requested", "releasing", "pipelined", "gpu_free"):
        assert after[column].dtype == before[column].dtype
        assert np.array_equal(after[column], before[column]), column
    assert after["pods"] == before["pods"]
    assert after["gangs"] == before["gangs"]
    assert len(stmt) == 0 and stmt.closed
    # The authoritative table was never touched by the session.
    assert np.array_equal(state.table.requested, before["requested"])


@settings(max_examples=100, deadline=None)
@given(nodes=clusters, pods=workloads, data=st.data())
def test_commit_reports_exactly_the_allocations_and_evictions(nodes, pods, data) -> None:
    state = build(nodes, pods)
    session = open_session(state)
    requested_before = session.table.requested.copy()
    pods_before = {k: (p.status, p.node, p.gpus) for k, p in state.pods.items()}

    stmt = session.statement()
    run_operations(data, session, stmt)
    allocations = [(o.pod, o.node) for o in stmt.operations if o.op is Op.ALLOCATE]
    evictions = [o.pod for o in stmt.operations if o.op is Op.EVICT]
    stmt.commit()
    result = session.close()  # the result keeps the committed statement, for the applier

    assert [(p.key, n) for p, n in result.binds] == [(p.key, n) for p, n in allocations]
    assert all(a is b for (a, _), (b, _) in zip(result.binds, allocations, strict=True))
    assert [p.key for p in result.evictions] == [p.key for p in evictions]
    expected = requested_before.copy()
    for pod, node in allocations:
        expected[node] += pod.request
    assert np.array_equal(session.table.requested, expected)  # the session's own table
    # the shared pods are as the session found them until the applier carries the result out
    assert {k: (p.status, p.node, p.gpus) for k, p in state.pods.items()} == pods_before
    apply(result, state, MemoryBackend(state))
    assert np.array_equal(state.table.requested, expected)
    for pod, node in allocations:
        assert pod.node == node
        assert pod.status in (PodStatus.BOUND, PodStatus.RELEASING)
