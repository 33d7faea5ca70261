"""The peer baselines in the same engine: coscheduling and volcano."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.backend import MemoryBackend
from phalanx.framework.backend import apply as apply_result
from phalanx.k8s import load_files
from phalanx.plugins.drf import Drf
from phalanx.policies import POLICIES, Scheduler, get_policy
from phalanx.sim.simulator import SimOptions, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"


def run(name: str, policy: str) -> tuple[Any, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    workload = load_files([EXAMPLES / name])
    return simulate(workload, SimOptions(policy=policy, until=7200), events.append), events


def test_policies_in_the_registry() -> None:
    names = [
        "kube-default",
        "coscheduling",
        "volcano",
        "fifo-reserve",
        "phalanx",
        "phalanx-reserve",
        "tas-greedy",
        "kueue",
    ]
    assert list(POLICIES) == names


def test_coscheduling_holds_an_almost_fitting_gang_until_the_permit_timeout() -> None:
    result, events = run("05-permit-hold.yaml", "coscheduling")
    first = [e for e in events if e["type"] == "reserve" and e["t"] == 60.0]
    assert len(first) == 9  # 9 of 10 workers assumed at Permit, holding 9 GPUs
    released = [e for e in events if e["type"] == "unreserve" and e["t"] == 120.0]
    assert len(released) == 9  # ... until the 60 s timeout
    assert [e["t"] for e in events if e["type"] == "timeout"] == [120.0]
    assert result.idle_gpu_hours >= 9 * 60 / 3600
    big = [e["t"] for e in events if e["type"] == "bind" and e["gang"] == "default/big"]
    assert len(big) == 10 and len(set(big)) == 1  # bound together, never partially
    phalanx, phalanx_events = run("05-permit-hold.yaml", "phalanx")
    assert phalanx.idle_gpu_hours == 0.0
    assert not [e for e in phalanx_events if e["type"] in ("reserve", "unreserve")]


@pytest.mark.parametrize("policy", ["coscheduling", "volcano"])
def test_gang_aware_baselines_avoid_the_interleaved_deadlock(policy: str) -> None:
    result, _ = run("01-deadlock.yaml", policy)
    assert result.count("deadlocked") == 0 and result.count("completed") == 2


def cluster(gpus_per_node: list[int]) -> ClusterState:
    nodes = [NodeSpec(f"n{i}", {GPU: g * 1000, "pods": 110}) for i, g in enumerate(gpus_per_node)]
    return ClusterState(nodes, ResourceIndex())


def add_gang(state: ClusterState, name: str, size: int, gpus: int = 1, created: float = 0.0):
    gang = state.add_gang(GangSpec("default", name, size, API), created)
    for i in range(size):
        spec = PodSpec(
            "default", f"{name}-{i}", {GPU: gpus * 1000, "pods": 1}, gang=GangRef(name, API)
        )
        state.add_pod(spec, created)
    return gang


def apply(state: ClusterState, result: Any, now: float) -> None:
    apply_result(result, state, MemoryBackend(state, now))


def test_coscheduling_post_filter_rejects_a_group_short_by_more_than_ten_percent() -> None:
    state = cluster([3])
    gang = add_gang(state, "g", 4)
    result = Scheduler(get_policy("coscheduling")).cycle(state, 0.0)
    apply(state, result, 0.0)
    assert result.reservations == [] and result.binds == []
    assert all(p.status is PodStatus.PENDING for p in gang.members)
    assert not state.table.requested.any()


def test_coscheduling_keeps_holding_when_short_by_ten_percent_or_less() -> None:
    state = cluster([9])
    gang = add_gang(state, "g", 10)
    scheduler = Scheduler(get_policy("coscheduling"))
    result = scheduler.cycle(state, 0.0)
    apply(state, result, 0.0)
    assert len(result.reservations) == 9 and result.binds == []
    assert Counter(p.status for p in gang.members) == {PodStatus.RESERVED: 9, PodStatus.PENDING: 1}
    assert result.wake_at == [60.0] and gang.permit_deadline == 60.0
    later = scheduler.cycle(state, 60.0)  # the Permit wait is over
    apply(state, later, 60.0)
    assert [g.key for g in later.timeouts] == ["default/g"]
    assert len(later.unreserved) == 9
    # the one member never reserved is out of backoff and is assumed again, alone
    assert [p.spec.name for p, _ in later.reservations] == ["g-9"]
    assert state.table.requested[0, state.table.gpu_col] == 1000


def test_coscheduling_binds_the_whole_group_once_it_reaches_quorum() -> None:
    state = cluster([2, 2])
    gang = add_gang(state, "g", 4)
    result = Scheduler(get_policy("coscheduling")).cycle(state, 0.0)
    apply(state, result, 0.0)
    assert len(result.binds) == 4 and result.reservations == []
    assert all(p.status is PodStatus.BOUND for p in gang.members)


def test_volcano_drf_orders_running_gangs_by_dominant_share() -> None:
    state = cluster([8, 8])
    big, small = add_gang(state, "big", 4, gpus=2), add_gang(state, "small", 2, gpus=1)
    for gang, count in ((big, 4), (small, 2)):
        for pod in gang.members[:count]:
            state.bind(pod, 0 if gang is big else 1, 0.0)
    table = state.table
    from phalanx.framework.unit import Unit

    shares = {g.name: Drf().order_key(Unit.of_gang(g, g.members), table) for g in (big, small)}
    assert shares == {"big": (0.5,), "small": (0.125,)}


def shared_fields(state: ClusterState) -> dict[str, tuple[object, ...]]:
    """What the actions must change only through the cycle's result: gangs' attempts, Permit
    deadlines, time-outs and conditions; pods' failures, backoffs and unschedulable marks.
    (A pod's status and node change through Statements, undone when the session closes: the
    result lists them for the applier.)"""
    fields: dict[str, tuple[object, ...]] = {}
    for ident, gang in state.gangs.items():
        fields[ident] = (
            gang.attempted,
            gang.permit_deadline,
            gang.timed_out,
            gang.condition,
        )
    for key, pod in state.pods.items():
        fields[key] = (pod.failures, pod.backoff_until, pod.blocked_at)
    return fields


@pytest.mark.parametrize("policy", ["coscheduling", "kube-default", "phalanx", "volcano"])
def test_a_cycle_changes_shared_state_only_through_its_result(policy: str) -> None:
    """Permit holds (reserved, then rejected at the timeout), pod backoffs and gang attempts
    are recorded in the result; the state and its gangs and pods are as before until the
    applier carries the result out."""
    state = cluster([9])
    add_gang(state, "g", 10)  # 9 of 10 fit: held at Permit under coscheduling
    add_gang(state, "h", 3)  # finds no node behind g (coscheduling), or is placed
    scheduler = Scheduler(get_policy(policy))
    for now in (0.0, 30.0, 60.0, 61.0):  # 60 s: the Permit wait is over
        before = shared_fields(state)
        fingerprint = state.fingerprint()  # pods' status, node and devices, gangs' counts
        requested = state.table.requested.copy()
        result = scheduler.cycle(state, now)
        assert shared_fields(state) == before and state.fingerprint() == fingerprint
        assert np.array_equal(state.table.requested, requested)
        apply(state, result, now)
    gang = state.gangs["default/g"]
    if policy == "coscheduling":
        assert gang.timed_out
        assert any(p.failures for p in gang.members)
    else:
        assert state.gangs["default/h"].attempted >= 0  # g is invalid: more than the cluster


def test_coscheduling_rejection_is_a_statement_and_applied_by_the_applier() -> None:
    state = cluster([9])
    gang = add_gang(state, "g", 10)
    scheduler = Scheduler(get_policy("coscheduling"))
    apply(state, scheduler.cycle(state, 0.0), 0.0)
    assert gang.permit_deadline == 60.0 and state.permits == {"default/g": gang}
    later = scheduler.cycle(state, 60.0)
    assert len(later.unreserved) == 9 and later.permits["default/g"][1] is not None
    assert state.table.requested[0, state.table.gpu_col] == 9000  # still held: not applied
    assert sum(p.status is PodStatus.RESERVED for p in gang.members) == 9  # as before
    assert all(p.failures == 0 for p in gang.members[:9])
    apply(state, later, 60.0)
    assert sum(p.status is PodStatus.RESERVED for p in gang.members) == 1  # g-9, assumed anew
    assert all(p.failures == 1 for p in gang.members[:9])
    assert gang.permit_deadline == 120.0 and state.permits == {"default/g": gang}


def _kueue_pod(group: str, index: int) -> str:
    return (
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n"
        f"  name: {group}-{index}\n  namespace: team-a\n"
        "  labels:\n    kueue.x-k8s.io/queue-name: user-queue\n"
        f"    kueue.x-k8s.io/pod-group-name: {group}\n"
        '  annotations: {kueue.x-k8s.io/pod-group-total-count: "4", phalanx.dev/duration: 30m}\n'
        "spec:\n  containers:\n  - name: worker\n    image: registry.example/train:1\n"
        '    resources: {limits: {nvidia.com/gpu: "1"}}\n'
    )


def test_kueue_admits_a_workload_whole_so_two_groups_never_split_one_quota(
    tmp_path: Path,
) -> None:
    """Kueue reserves a Workload's quota for all its pods at admission. Two 4-pod groups whose
    pods arrive interleaved, in a ClusterQueue of 4 GPUs on a cluster of 8: admitting pod by
    pod gave each group 2 pods and the quota was full, so both waited forever. Admitted whole,
    the first runs, then the second."""
    nodes = "".join(
        f"---\napiVersion: v1\nkind: Node\nmetadata: {{name: gpu-{i}}}\n"
        'status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "1", pods: "110"}}\n'
        for i in range(8)
    )
    queues = (
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"
        "metadata: {name: default-flavor}\n"
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\n"
        "metadata: {name: team-a-cq}\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n"
        "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: default-flavor\n"
        "      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]\n"
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {name: user-queue, namespace: team-a}\nspec: {clusterQueue: team-a-cq}\n"
    )
    pods = "".join(_kueue_pod(group, i) for i in range(4) for group in ("a", "b"))
    path = tmp_path / "kueue-interleaved.yaml"
    path.write_text(nodes + queues + pods)
    events: list[dict[str, Any]] = []
    result = simulate(load_files([path]), SimOptions(policy="kueue"), events.append)
    assert result.count("deadlocked") == 0 and result.count("completed") == 2
    binds = [(e["t"], e["gang"]) for e in events if e["type"] == "bind"]
    assert sorted(binds) == [(0.0, "team-a/a")] * 4 + [(1800.0, "team-a/b")] * 4
