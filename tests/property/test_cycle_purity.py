"""A cycle changes shared state only through its result: dropped results leave no trace.

The session's Statements change the pods and gangs it shares with the long-lived state, and
undo them when it closes, committed ones included; everything else a cycle decides (binds,
reservations and their release, Permit deadlines, conditions, time-outs, backoffs, attempts,
queueing hints) is recorded in its :class:`CycleResult` and carried out by the one applier.
So a runner that drops a result (a live cycle whose binds all failed, a dry run such as
``phalanx explain``) finds the state exactly as before: its fingerprint, every gang's and
pod's history, the gangs waiting at Permit, the room held for preemptors.

:class:`DroppingDriver` runs the random engine (:mod:`random_engine`) with a dropped cycle
before every applied one, under every policy; the driver's invariants (no over-commit, no
partial gang, exact GPU devices, incremental state equal to a rebuilt one) must keep holding,
so the actions' own caches (reservations' timeline, preemption memos, coscheduling's
descriptions) may not depend on a result having been applied.
"""

from __future__ import annotations

import pytest
from random_engine import EngineDriver, check_untouched, footprint

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.backend import run_cycle
from phalanx.policies import POLICIES, Scheduler, get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
EPISODES = 12
STEPS = 300


class DroppingDriver(EngineDriver):
    """Every applied cycle is preceded by one at the same time whose result is dropped."""

    def cycle(self, dt: float | None = None) -> None:
        untouched = footprint(self.state)
        self.scheduler.cycle(self.state, self.now + 0.25)  # its result is dropped
        check_untouched(untouched, footprint(self.state))
        self.counts["dropped cycle"] += 1
        super().cycle(dt)


@pytest.mark.parametrize("policy", ["phalanx", "volcano", "coscheduling", "kube-default"])
def test_dropped_results_leave_no_trace_and_the_engine_stays_sound(policy: str) -> None:
    dropped = 0
    for seed in range(EPISODES):
        driver = DroppingDriver(7_000 + seed, policy)
        try:
            driver.run(STEPS)
        except AssertionError as exc:
            raise AssertionError(f"seed {7_000 + seed}, policy {policy}: {exc}") from exc
        dropped += driver.counts["dropped cycle"]
        assert driver.counts["bind"] > 0  # cycles did place pods once applied
    assert dropped > EPISODES * 10


def contended() -> ClusterState:
    """Two 4-GPU nodes; a 6-GPU gang (3 of 4 pods fit beside the lone pods under a pod-at-
    a-time policy, held at Permit by coscheduling), a gang too big for the cluster, a
    high-priority gang, lone pods."""
    nodes = [NodeSpec(f"n{i}", {"cpu": 32000, "pods": 110, GPU: 4000}) for i in range(2)]
    state = ClusterState(nodes, ResourceIndex())
    for name, size, gpus, priority in (("a", 4, 1500, 0), ("huge", 3, 4000, 0), ("p", 2, 1000, 9)):
        state.add_gang(GangSpec("ns", name, size, API, priority=priority, timeout_seconds=30), 0)
        for i in range(size):
            requests = {"cpu": 1000, "pods": 1, GPU: gpus}
            state.add_pod(PodSpec("ns", f"{name}-{i}", requests, gang=GangRef(name, API)), 0)
    for i in range(3):
        state.add_pod(PodSpec("ns", f"lone-{i}", {"cpu": 1000, "pods": 1, GPU: 1000}), 0)
    return state


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_dropped_cycle_changes_no_fingerprint_or_gang_field(policy: str) -> None:
    """Under every named policy: a cycle whose result is ignored leaves the state's
    fingerprint and every gang and pod field as they were; applied, the same kind of cycle
    does change it (so the check is not vacuous)."""
    state = contended()
    scheduler = Scheduler(get_policy(policy))
    changed = 0
    for now in (0.0, 1.0, 31.0, 62.0, 125.0):
        before = footprint(state)
        result = scheduler.cycle(state, now)  # dropped
        check_untouched(before, footprint(state))
        assert all(p.status is not PodStatus.ALLOCATED for p in state.pods.values())
        decided = result.binds or result.reservations or result.waiting
        applied = run_cycle(scheduler, state, now)
        changed += bool(decided) and footprint(state) != before
        assert applied.binds or applied.reservations or applied.waiting or not decided
    assert changed
