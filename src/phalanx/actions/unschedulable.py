"""Coscheduling's unschedulable queue, with queueing hints as kube-scheduler has them.

A pod that found no node waits in the unschedulable queue (its *mark* is the state's release
count ``freed`` at that moment). kube-scheduler moves such a pod back to the active queue on
an event its plugins' QueueingHints say could make it schedulable; for resources, a release
on nodes it may use. Here a release (``freed`` moved since the mark, or a Permit rejection at
the start of this cycle) sends a marked pod back only if the free room of the nodes its shape
may use holds a pod of that shape — and, pods in queue order, only as many pods of one shape
as that room holds (:class:`~phalanx.cluster.hints.CapacityOf`). The others stay marked for
this release, with no attempt and no failure counted, until the next one. A pod that goes back
and still finds no node counts a failure as before (its backoff grows, PostFilter runs).

Groups whose every pending pod is marked are parked in the state with a hint: their shape
(one shape and one priority per group; otherwise the coarse hint, any release wakes them) and
their order (priority, creation, then the state's tie-break on the group's name, which is
QueueSort's order). The state then wakes, after a release, only the first groups of a shape
that the room could hold: a superset of the pods this module lets through, so parking changes
no decision (hints on and off give the same events, property-tested) and a release costs what
it can wake, not the length of the queue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from phalanx.cluster.hints import CapacityOf, Hint
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session


def queue(session: Session, released_now: bool) -> tuple[list[GangInfo], list[PodInfo]]:
    """The groups looked at and their pending pods that may be tried, in QueueSort order;
    ``released_now``: this cycle already gave back Permit holds (the parked groups are looked
    at too, as after any release)."""
    gangs = session.state.waiting_gangs(session.table)
    if released_now:
        gangs = [*gangs, *session.state.blocked.values()]
    pods = [pod for gang in gangs for pod in gang.pending() if session.ours(pod, gang)]
    pods.sort(key=lambda p: (-p.priority, p.gang.created, p.gang.key, p.seq))
    return gangs, _woken(session, pods, released_now)


def _woken(session: Session, pods: list[PodInfo], released_now: bool) -> list[PodInfo]:
    """The pods not marked, and the marked ones a release sends back (see the module)."""
    freed = session.freed
    capacity: CapacityOf | None = None
    sent: Counter[tuple[bytes, object]] = Counter()
    out: list[PodInfo] = []
    for pod in pods:
        mark = session.blocked_at(pod)
        if mark == -1:
            out.append(pod)
            continue
        if mark == freed and not released_now:
            continue  # nothing was freed since it found no node
        capacity = capacity or CapacityOf(session.table)
        shape = (pod.request.tobytes(), pod.spec.placement)
        if sent[shape] < capacity(pod.request, pod.spec.placement):
            sent[shape] += 1
            out.append(pod)
        elif mark != freed:  # looked at for this release: it waits for the next one
            session.retry(pod, replace(session.retry_of(pod), blocked_at=freed))
    return out


def park(session: Session, gangs: list[GangInfo]) -> None:
    """Park the groups whose every pending pod is marked at the current release count; wake
    a parked one whose pod may be tried again without a release (a rejection at Permit)."""
    freed = session.freed
    parked = session.state.blocked
    for gang in gangs:
        pending = gang.pending()
        if not pending or any(session.blocked_at(p) != freed for p in pending):
            if gang.ident in parked:
                session.result.unblocked.append(gang)
            continue
        session.result.blocked.append(gang)
        session.result.hints[gang.ident] = (
            _hint(gang, pending),
            (-pending[0].priority, gang.created),
        )


def _hint(gang: GangInfo, pending: list[PodInfo]) -> Hint | None:
    """One shape and one priority: the class of that shape (groups and lone pods apart, so
    the state's tie-break on the name follows QueueSort); else any release wakes it."""
    first = pending[0]
    shape = (first.request.tobytes(), first.spec.placement)
    for pod in pending[1:]:
        if pod.priority != first.priority or (pod.request.tobytes(), pod.spec.placement) != shape:
            return None
    key = ("coscheduling", gang.implicit, *shape)
    return Hint(key, ((first.request, first.spec.placement, len(pending)),), 1)
