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

A release in the cycle itself (Permit holds given back) looks at parked groups too, but only
at those of a class whose shape the room holds a pod of (one capacity test per class), of the
coarse class, and those the rejection made pending again (``ClusterState.parked_where``). A
parked group of a full shape would send no pod and stay parked, and the release moves the
state's count past every mark, so leaving it out changes nothing: such a cycle costs its
classes and the groups that may move, not every parked pod.

The queue is QueueSort's order (priority, group creation, group name, pod arrival). A group's
pods share the last-but-one keys, so when each group's pods share one priority the queue is the
groups in order, each with its pods by arrival, without a key per pod; a group whose members
differ in priority (or two groups alike in all three keys) sends every pod through the sort.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from operator import attrgetter, itemgetter

from phalanx.cluster.hints import CapacityOf, Hint
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Retry, Session


def queue(
    session: Session, released_now: bool, shapes: Shapes
) -> tuple[list[GangInfo], list[PodInfo]]:
    """The groups looked at and their pending pods that may be tried, in QueueSort order;
    ``released_now``: this cycle already gave back Permit holds (the parked groups are looked
    at too, as after any release: those that could send a pod, see :func:`_parked`)."""
    gangs = session.state.waiting_gangs(session.table)
    capacity = CapacityOf(session.table)
    if released_now:
        gangs = [*gangs, *_parked(session, capacity)]
    return gangs, _woken(session, _in_order(session, gangs), released_now, capacity, shapes)


def _in_order(session: Session, gangs: list[GangInfo]) -> list[PodInfo]:
    """The groups' pending pods for this scheduler in QueueSort order: priority, then the
    group's creation, then its name, then the pod's arrival. A group's pods share its
    creation and name, so when each group's pods share one priority and no two groups share
    all three, the order is the groups' order with each group's pods by arrival (no key per
    pod); otherwise every pod is sorted by the whole key."""
    runs: list[tuple[tuple[float, float, str], list[PodInfo]]] = []
    uniform = True
    for gang in gangs:
        pods = [pod for pod in gang.pending() if session.ours(pod, gang)]
        if not pods:
            continue
        priority = pods[0].priority
        last = -1
        for pod in pods:
            if pod.priority != priority:
                uniform = False
            if pod.seq < last:
                pods.sort(key=attrgetter("seq"))
                break
            last = pod.seq
        runs.append(((-priority, gang.created, gang.key), pods))
    runs.sort(key=itemgetter(0))
    if uniform and all(a[0] != b[0] for a, b in pairwise(runs)):
        return [pod for _, pods in runs for pod in pods]
    every = [pod for _, pods in runs for pod in pods]
    every.sort(key=lambda p: (-p.priority, p.gang.created, p.gang.key, p.seq))
    return every


def _parked(session: Session, capacity: CapacityOf) -> list[GangInfo]:
    """The parked groups worth a look after a release in this cycle: those of a class whose
    shape the room holds a pod of, of the coarse class, and those this cycle rejected (their
    pods are pending again, unmarked). The others are all marked and of a shape no node
    holds: :func:`_woken` would send none of their pods, and they stay parked (this cycle's
    release moves the state's count, so their marks need no refresh). A release then costs
    the classes and the groups that may move, not every parked pod."""

    def worth(hint: Hint | None) -> bool:
        return hint is None or any(capacity(request, where) for request, where, _ in hint.shapes)

    rejected = {pod.gang.ident for pod, _ in session.result.retries.values()}
    return session.state.parked_where(worth, rejected)


class Shapes:
    """Each pod's shape (request, placement) as a small number, so that a queue of pods is
    bucketed by shape without hashing a placement per pod and cycle (kept while the pod's
    request and placement are the same objects)."""

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self._ids: dict[tuple[bytes, object], int] = {}
        self._of: dict[int, tuple[object, object, int]] = {}  # id(pod) → request, placement, id

    def __call__(self, pod: PodInfo) -> int:
        known = self._of.get(id(pod))
        request, placement = pod.request, pod.spec.placement
        if known is not None and known[0] is request and known[1] is placement:
            return known[2]
        if len(self._of) > self.LIMIT:
            self._of.clear()
        shape = self._ids.setdefault((request.tobytes(), placement), len(self._ids))
        self._of[id(pod)] = (request, placement, shape)
        return shape


def _woken(
    session: Session,
    pods: list[PodInfo],
    released_now: bool,
    capacity: CapacityOf,
    shapes: Shapes,
) -> list[PodInfo]:
    """The pods not marked, and the marked ones a release sends back (see the module)."""
    freed = session.freed
    retries = session.result.retries
    sent: Counter[int] = Counter()
    room: dict[int, int] = {}
    out: list[PodInfo] = []
    for pod in pods:
        noted = retries.get(id(pod)) if retries else None
        mark = pod.blocked_at if noted is None else noted[1].blocked_at
        if mark == -1:
            out.append(pod)
            continue
        if mark == freed and not released_now:
            continue  # nothing was freed since it found no node
        shape = shapes(pod)
        holds = room.get(shape)
        if holds is None:
            holds = room[shape] = capacity(pod.request, pod.spec.placement)
        if sent[shape] < holds:
            sent[shape] += 1
            out.append(pod)
        elif mark != freed:  # looked at for this release: it waits for the next one
            retry = Retry(pod.failures, pod.backoff_until, freed)
            if noted is not None:
                retry = Retry(noted[1].failures, noted[1].backoff_until, freed)
            session.retry(pod, retry)
    return out


def park(session: Session, gangs: list[GangInfo]) -> None:
    """Park the groups whose every pending pod is marked at the current release count; wake
    a parked one whose pod may be tried again without a release (a rejection at Permit). A
    group already parked stays so (parking it again would change nothing: the applier parks
    only a group that waits, at an unchanged release count)."""
    freed = session.freed
    parked = session.state.blocked
    retries = session.result.retries
    for gang in gangs:
        pending = gang.pending()
        marked = bool(pending)
        for pod in pending:
            noted = retries.get(id(pod)) if retries else None
            if (pod.blocked_at if noted is None else noted[1].blocked_at) != freed:
                marked = False
                break
        if not marked:
            if gang.ident in parked:
                session.result.unblocked.append(gang)
            continue
        if gang.ident in parked:
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
