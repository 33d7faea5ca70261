"""A unit of placement: the pods an action tries to place together in one Statement.

Gang-aware policies place a whole gang's pending pods as one unit; the ``kube-default``
baseline places each pod as its own unit, which is exactly the behaviour that deadlocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.cluster.workloads import GangInfo, PodInfo


@dataclass(eq=False, slots=True)
class Unit:
    gang: GangInfo
    pods: list[PodInfo]  # pending pods to place, in task order
    priority: int
    created: float
    seq: int  # arrival order of its first pod, for deterministic ties
    order: tuple[float, ...] = ()  # its order key in this cycle (set by Session.units)

    @classmethod
    def of_gang(cls, gang: GangInfo, pods: list[PodInfo]) -> Unit:
        first = pods[0].seq if len(pods) == 1 else min(pod.seq for pod in pods)
        return cls(gang, pods, gang.priority, gang.created, first)

    @classmethod
    def of_pod(cls, pod: PodInfo) -> Unit:
        return cls(pod.gang, [pod], pod.priority, pod.created, pod.seq)
