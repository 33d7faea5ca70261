"""Explanations (phalanx.framework.explain): shapes, per-node reasons, progress, needs."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, Placement, PodSpec
from phalanx.cluster.queues import Hold
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.explain import needs, node_reasons, progress, shapes
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit
from phalanx.policies import get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"


def state_of(nodes: int = 4, *, cordoned: tuple[int, ...] = ()) -> ClusterState:
    specs = [
        NodeSpec(
            f"n{i}",
            {"cpu": 4000, "pods": 110, GPU: 1000},
            labels={"zone": "a" if i % 2 == 0 else "b"},
            unschedulable=i in cordoned,
        )
        for i in range(nodes)
    ]
    return ClusterState(specs, ResourceIndex())


def session_of(state: ClusterState) -> Session:
    return Session(state, get_policy("phalanx").plugins(), now=0.0, rng=np.random.default_rng(0))


def pod(state: ClusterState, name: str, requests: dict[str, int], zone: str | None = None):
    placement = Placement(node_selector=(("zone", zone),)) if zone else Placement()
    return state.add_pod(PodSpec("ns", name, {**requests, "pods": 1}, placement=placement), 0.0)


def test_shapes_group_by_request_and_placement() -> None:
    state = state_of()
    pods = [
        pod(state, "a", {GPU: 1000}),
        pod(state, "b", {GPU: 1000}),
        pod(state, "c", {GPU: 1000}, zone="a"),
        pod(state, "d", {GPU: 500}),
        pod(state, "e", {GPU: 1000}),
    ]
    assert [(example.key, n) for example, n in shapes(pods)] == [
        ("ns/a", 3),
        ("ns/c", 1),
        ("ns/d", 1),
    ]


@pytest.mark.parametrize(
    ("cordoned", "busy", "zone", "gpu", "expected"),
    [
        ((), (), None, 1000, "4/4 nodes have room"),
        ((), (0, 1), None, 1000, "2/4 nodes have room: 2 Insufficient nvidia.com/gpu"),
        (
            (3,),
            (0,),
            None,
            1000,
            "2/4 nodes have room: 1 node(s) were unschedulable, 1 Insufficient nvidia.com/gpu",
        ),
        (
            (),
            (0,),
            "a",
            1000,
            "1/4 nodes have room: 2 node(s) didn't match Pod's node affinity/selector, "
            "1 Insufficient nvidia.com/gpu",
        ),
        ((), (), None, 2000, "0/4 nodes have room: 4 Insufficient nvidia.com/gpu"),
    ],
)
def test_node_reasons(cordoned, busy, zone, gpu, expected) -> None:
    state = state_of(cordoned=cordoned)
    for node in busy:
        state.bind(pod(state, f"busy{node}", {GPU: 1000}), node, 0.0)
    assert node_reasons(session_of(state), pod(state, "p", {GPU: gpu}, zone)) == expected


def test_progress_for_gangs_and_lone_pods() -> None:
    state = state_of()
    gang = state.add_gang(GangSpec("ns", "g", 3, API), 0.0)
    for i in range(4):
        spec = PodSpec("ns", f"g{i}", {GPU: 1000, "pods": 1}, gang=GangRef("g", API))
        state.add_pod(spec, 0.0)
    state.bind(gang.members[0], 0, 0.0)
    assert progress(Unit.of_gang(gang, gang.pending())) == (
        "1/3 required members placed, 2 more needed; "
    )
    lone = pod(state, "solo", {GPU: 1000})
    assert progress(Unit.of_pod(lone)) == ""


def test_needs_lists_every_shape_with_what_fits() -> None:
    state = state_of()
    gang = state.add_gang(GangSpec("ns", "g", 5, API), 0.0)
    for i, gpu in enumerate([1000, 1000, 1000, 2000, 1000]):
        spec = PodSpec("ns", f"g{i}", {GPU: gpu, "pods": 1}, gang=GangRef("g", API))
        state.add_pod(spec, 0.0)
    text = needs(session_of(state), Unit.of_gang(gang, gang.pending()))
    assert text == (
        "needs 4 × {nvidia.com/gpu: 1}; 4 fit now; "
        "needs 1 × {nvidia.com/gpu: 2}; 0 fit now "
        "(0/4 nodes have room: 4 Insufficient nvidia.com/gpu)"
    )


def test_needs_is_kept_while_the_table_holds_and_follows_it_after() -> None:
    """The text of a shape is kept for the table's generation: the same cluster gives the same
    text, a release gives a new one, and room held for a preemptor (a filter reading more than
    the table) is never served from what was kept."""
    state = state_of()
    busy = [pod(state, f"busy{node}", {GPU: 1000}) for node in range(4)]
    for node, placed in enumerate(busy):
        state.bind(placed, node, 0.0)
    unit = Unit.of_pod(pod(state, "w", {GPU: 1000}))
    full = (
        "needs 1 × {nvidia.com/gpu: 1}; 0 fit now "
        "(0/4 nodes have room: 4 Insufficient nvidia.com/gpu)"
    )
    assert needs(session_of(state), unit) == full
    assert needs(session_of(state), unit) == full
    state.release(busy[0], PodStatus.SUCCEEDED)
    assert needs(session_of(state), unit) == "needs 1 × {nvidia.com/gpu: 1}; 1 fit now"
    holder = state.add_gang(GangSpec("ns", "holder", 2, API), 0.0)
    room = np.zeros(len(state.index))
    room[state.index.position[GPU]] = 1000
    state.queues.holds[holder.ident] = Hold(holder.ident, {0: room}, since=0.0)
    assert needs(session_of(state), unit) == (
        "needs 1 × {nvidia.com/gpu: 1}; 0 fit now (0/4 nodes have room: "
        "3 Insufficient nvidia.com/gpu, 1 room held for a preempting gang)"
    )
