"""A placement that raises is contained to its gang: the others in the cycle still bind."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.framework.backend import run_cycle
from phalanx.framework.session import Session
from phalanx.policies import Scheduler, get_policy

API = "scheduling.x-k8s.io"


def state_with_two_gangs() -> ClusterState:
    state = ClusterState([NodeSpec("n0", {"cpu": 8000, "pods": 110})], ResourceIndex())
    for name in ("bad", "good"):  # "bad" is tried first (arrival order)
        state.add_gang(GangSpec("ns", name, 2, API), 0.0)
        for i in range(2):
            spec = PodSpec("ns", f"{name}-{i}", {"cpu": 1000, "pods": 1}, gang=GangRef(name, API))
            state.add_pod(spec, 0.0)
    return state


@pytest.mark.parametrize("policy", ["phalanx", "volcano", "kube-default"])
def test_a_gang_whose_placement_raises_waits_and_the_others_bind(
    policy: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = Session.select_node

    def select_node(self: Session, pod: object, *args: object) -> int | None:
        if getattr(pod, "key", "") == "ns/bad-1":
            raise OverflowError("Python int too large to convert to C long")
        return real(self, pod, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "select_node", select_node)
    state = state_with_two_gangs()
    scheduler = Scheduler(get_policy(policy))
    waiting = {}
    for now in (1.0, 2.0):
        result = run_cycle(scheduler, state, now)  # the shared applier
        waiting = {**waiting, **result.waiting}
    bound = sorted(p.key for p in state.pods.values() if p.node >= 0)
    if policy == "kube-default":  # pod by pod: bad-0 binds, bad-1 is the one that raised
        assert bound == ["ns/bad-0", "ns/good-0", "ns/good-1"]
    else:
        assert bound == ["ns/good-0", "ns/good-1"]
        condition = waiting["ns/bad"]
        assert condition.reason == "InternalError"
        assert "OverflowError" in condition.message
    expected = np.zeros_like(state.table.requested)
    for pod in state.pods.values():
        if pod.node >= 0:
            expected[pod.node] += pod.request
    assert np.array_equal(state.table.requested, expected)  # nothing left half-placed
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # logged once, not once per cycle
