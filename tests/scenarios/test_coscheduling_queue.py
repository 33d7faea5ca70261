"""Coscheduling's queue order and failure notes, through the scheduler's public cycle.

The queue is built group by group (each group's pods by arrival) when every group's pods share
one priority, and sorted pod by pod otherwise; a group's failure message is written once at
the end of the cycle from what was noted at the failure. Both must decide and say exactly
what QueueSort over every pod and a message per failure did.
"""

from __future__ import annotations

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodStatus
from phalanx.framework.backend import MemoryBackend, apply
from phalanx.policies import Scheduler, get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"


def cluster(gpus: int) -> ClusterState:
    return ClusterState([NodeSpec("n0", {GPU: gpus * 1000, "pods": 110})], ResourceIndex())


def group(
    state: ClusterState, name: str, pods: list[tuple[int, int]], created: float = 0.0
) -> GangInfo:
    """A PodGroup of ``len(pods)`` required members; each pod is (GPUs, priority)."""
    gang = state.add_gang(GangSpec("default", name, len(pods), API), created)
    for i, (gpus, priority) in enumerate(pods):
        request = {GPU: gpus * 1000, "pods": 1}
        ref = GangRef(name, API)
        spec = PodSpec("default", f"{name}-{i}", request, priority=priority, gang=ref)
        state.add_pod(spec, created)
    return gang


def cycle(state: ClusterState, now: float = 0.0) -> object:
    result = Scheduler(get_policy("coscheduling")).cycle(state, now)
    apply(result, state, MemoryBackend(state, now))
    return result


def test_a_group_with_members_of_two_priorities_is_ordered_pod_by_pod() -> None:
    # QueueSort puts a-0 (priority 100) first, b-0 (50) next and a-1 (0) last: b's lone
    # member binds between a's two, and a, short of its second member, is rejected
    state = cluster(2)
    a = group(state, "a", [(1, 100), (1, 0)])
    b = group(state, "b", [(1, 50)])
    result = cycle(state)
    assert [pod.spec.name for pod, _ in result.binds] == ["b-0"]  # type: ignore[attr-defined]
    assert all(pod.status is PodStatus.BOUND for pod in b.members)
    assert all(pod.status is PodStatus.PENDING for pod in a.members)


def test_groups_of_one_priority_go_whole_in_creation_order() -> None:
    state = cluster(3)
    late = group(state, "early-name", [(1, 0), (1, 0)], created=5.0)
    first = group(state, "late-name", [(1, 0), (1, 0)], created=1.0)
    result = cycle(state, 10.0)
    names = [pod.spec.name for pod, _ in result.binds]  # type: ignore[attr-defined]
    assert names == ["late-name-0", "late-name-1"]
    assert all(pod.status is PodStatus.BOUND for pod in first.members)
    # the later group gets one GPU for two members: 50 % short, rejected at PostFilter
    assert all(pod.status is PodStatus.PENDING for pod in late.members)


def test_a_rejected_group_is_told_about_its_last_member_rejected() -> None:
    state = cluster(3)
    gang = group(state, "g", [(1, 0)] * 4)  # 3 fit, the 4th does not: 25 % short, rejected
    cycle(state)
    assert gang.condition is not None and gang.condition.reason == "NotEnoughResources"
    assert gang.condition.message == (
        "0/4 required members placed, 4 more needed; "
        "pod default/g-2 needs {nvidia.com/gpu: 1}; no node fits"
    )


def test_a_failure_message_counts_the_members_placed_when_it_failed() -> None:
    # 18 members fit, g-18 (4 GPUs) does not: 10 % short, so the group keeps holding and
    # g-19 is placed after it; the message counts the 18 placed when g-18 failed
    state = cluster(19)
    gang = group(state, "g", [(1, 0)] * 18 + [(4, 0), (1, 0)])
    result = cycle(state)
    assert len(result.reservations) == 19  # type: ignore[attr-defined]
    assert gang.condition is not None
    assert gang.condition.message == (
        "18/20 required members placed, 2 more needed; "
        "pod default/g-18 needs {nvidia.com/gpu: 4}; no node fits"
    )
