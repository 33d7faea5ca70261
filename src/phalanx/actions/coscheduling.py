"""Coscheduling: the scheduler-plugins Coscheduling plugin's semantics, in the same engine.

This is the baseline that kube-scheduler users run today; it is emulated to show where it
fails, not to be used. Semantics (kubernetes-sigs/scheduler-plugins, pkg/coscheduling):

- **QueueSort**: pods one at a time, by priority, then their PodGroup's creation time, then
  name — pods of one group are adjacent, but a failed pod goes to backoff (1 s doubling to
  10 s, kube-scheduler's defaults), so retries of different groups interleave. A pod that found
  no node waits in the unschedulable queue until resources are freed where a pod of its shape
  fits (kube-scheduler's QueueingHints, see :mod:`phalanx.actions.unschedulable`); backoffs
  complete on kube-scheduler's one-second flush, so wake-ups are rounded up to whole seconds.
- **PreFilter**: a pod whose group has fewer than ``minMember`` pods is rejected ("cannot
  find enough sibling pods"); if ``minResources`` is set, the sum of free resources over all
  nodes must cover it (an aggregate check that ignores fragmentation).
- **Permit**: a placed pod is *assumed*: it holds its node's resources but is not bound, and
  waits until its group has ``minMember`` pods assumed or bound; then all of them bind. If that
  does not happen within ``scheduleTimeoutSeconds`` (default ``permitWaitingTimeSeconds``,
  60 s), all waiting pods of the group are rejected and their resources released.
- **PostFilter**: when a pod of a group finds no node and the group is short of its minimum by
  more than ``podGroupRejectPercentage`` (10 %) of it, the group's waiting pods are rejected at
  once; otherwise they keep holding resources until the timeout.

The known failure follows: groups that interleave hold partial resources — paid for, idle —
until a timeout or a rejection frees them, and then may do it again.

Everything that lasts from one cycle to the next goes through the cycle's result: holds are
reservations (a Statement committed with ``reserve``), rejections give them back through a
Statement (``unreserve``), Permit deadlines and pods' backoffs are recorded in the result, and
the applier keeps the gangs waiting at Permit in ``ClusterState.permits``. The action itself
keeps only what one cycle needs and a cache of request descriptions.

**Cost.** Groups that interleave thrash: on large gangs of one-GPU pods a run makes one cycle
every few simulated seconds for as long as two groups wait, and each cycle really decides
(pods held, rejected, a new pod marked unschedulable; attempts draw the tie-break generator
on ties and every hold is paid for in the GPU meter), so no cycle can be skipped without
changing the run. What one costs is kept to what it tries: a pod's retry record is read in
place, the queue is ordered group by group (:mod:`phalanx.actions.unschedulable`), and a
group's failure message, of which only the last of a cycle is kept, is written once at the
end of the cycle from what was noted when the pod failed (its group's placed count then).
Most attempts are retries of pods rejected at Permit or PostFilter, which here come back after
their own backoff (1–10 s), as kube-scheduler sends them when a cluster event came during
their wait. With QueueingHints it keeps them unschedulable until an event Coscheduling
registers (a pod added, a PodGroup added or updated) or the five-minute flush
(``podMaxInUnschedulablePodsDuration``): far fewer retries, but other decisions, so it is not
modelled here (figures in ``benchmarks/README.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from phalanx.actions import unschedulable
from phalanx.cluster.workloads import Condition, GangInfo, PodInfo, PodStatus
from phalanx.framework.explain import progress_of
from phalanx.framework.session import Retry, Session
from phalanx.framework.statement import Statement

_GONE = (PodStatus.SUCCEEDED, PodStatus.DELETED)


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    permit_wait_seconds: float = 60.0  # permitWaitingTimeSeconds
    reject_percentage: int = 10  # podGroupRejectPercentage
    backoff_base: float = 1.0  # kube-scheduler podInitialBackoffSeconds
    backoff_max: float = 10.0  # podMaxBackoffSeconds


class Coscheduling:
    name = "coscheduling"

    def __init__(self, args: CoschedulingArgs = CoschedulingArgs()) -> None:
        self.args = args
        self.freed_now = False  # this cycle released reservations
        self._alive: dict[str, int] = {}  # live members per group, this cycle
        self._described: dict[bytes, str] = {}  # request → its description, for messages
        #: group ident → its failure note this cycle, the pod and its group's placed count
        #: then (the message is written once, at the end of the cycle)
        self._unwritten: dict[str, tuple[Condition, PodInfo, int]] = {}
        self._shapes = unschedulable.Shapes()  # pods' shapes as numbers (a cache)

    def execute(self, session: Session) -> None:
        self.freed_now = self._expire(session) > 0  # releases wake the unschedulable pods
        self._alive = {}
        waiting: dict[str, Statement] = {}
        rejected: set[str] = set()
        no_room: set[tuple[bytes, object]] = set()  # shapes that found no node this cycle
        gangs, queue = unschedulable.queue(session, self.freed_now, self._shapes)
        for pod in queue:
            gang = pod.gang
            if gang.ident in rejected or not self._ready_to_try(session, pod):
                continue
            if not self._pre_filter(session, pod):
                continue
            shape = (pod.request.tobytes(), pod.spec.placement)
            node = None
            if shape not in no_room:  # room only shrinks until a rejection frees some
                session.result.attempts += 1
                node = session.select_node(pod)
            if node is None:
                no_room.add(shape)
                self._fail(session, pod, blocked=True)
                released = self._post_filter(session, gang, waiting)
                if released is not None:
                    rejected.add(gang.ident)
                    if released:
                        no_room.clear()
                        self.freed_now = True
                continue
            stmt = waiting.setdefault(gang.ident, session.statement())
            stmt.allocate(pod, node)
            if gang.implicit or gang.placed >= gang.min_member:
                self._allow(session, gang, waiting.pop(gang.ident))
            elif session.permit_deadline(gang) is None:
                deadline = session.now + self._timeout(gang)
                session.set_permit_deadline(gang, deadline)
                session.result.wake_at.append(deadline)
        for stmt in waiting.values():  # held at Permit: their deadlines are set
            stmt.commit(reserve=True)
        unschedulable.park(session, gangs)
        self._write_notes(session)

    # -- queue ---------------------------------------------------------------------------------
    def _ready_to_try(self, session: Session, pod: PodInfo) -> bool:
        noted = session.result.retries.get(id(pod)) if session.result.retries else None
        if noted is None:  # read in place: this runs for every queued pod of every cycle
            blocked_at, backoff_until = pod.blocked_at, pod.backoff_until
        else:
            blocked_at, backoff_until = noted[1].blocked_at, noted[1].backoff_until
        if blocked_at == session.freed and not self.freed_now:
            return False  # unschedulable queue: nothing was freed since it found no node
        if backoff_until > session.now:
            session.result.wake_at.append(float(math.ceil(backoff_until)))
            return False
        return True

    def _pre_filter(self, session: Session, pod: PodInfo) -> bool:
        gang = pod.gang
        if gang.implicit:
            return True
        alive = self._alive.get(gang.ident)
        if alive is None:  # no member finishes or goes during a cycle
            alive = self._alive[gang.ident] = gang.alive()
        if alive < gang.min_member:
            message = f"cannot find enough sibling pods: {alive} of minMember {gang.min_member}"
            session.note(gang, "NotEnoughMembers", message)
            return False
        spec = gang.spec
        if spec is not None and spec.min_resources and session.permit_deadline(gang) is None:
            index = session.table.index
            want = index.vector({k: v for k, v in spec.min_resources.items() if k in index})
            free = session.table.free()[~session.table.facts.unschedulable].sum(axis=0)
            if (free < want).any():
                message = "the cluster's free resources are less than minResources"
                session.note(gang, "NotEnoughResources", message)
                return False
        return True

    # -- Permit ----------------------------------------------------------------------------------
    def _allow(self, session: Session, gang: GangInfo, stmt: Statement) -> None:
        """Quorum: every waiting pod of the group binds now."""
        stmt.commit()
        # a later member of a gang already allowed this cycle must not bind the waiting ones
        # a second time (they stay RESERVED until the backend applies the binds)
        listed = {id(pod) for pod, _ in session.result.binds}
        for pod in gang.members:
            if pod.status is PodStatus.RESERVED and id(pod) not in listed:
                session.result.binds.append((pod, pod.node))
        session.set_permit_deadline(gang, None)
        session.placed(gang)

    def _expire(self, session: Session) -> int:
        """Groups whose Permit wait ran out: reject their waiting pods; how many were freed."""
        released = 0
        for gang in list(session.state.permits.values()):
            if not any(p.status is PodStatus.RESERVED for p in gang.members):
                session.set_permit_deadline(gang, None)  # its holds went (deleted pods)
                continue
            deadline = session.permit_deadline(gang)
            if deadline is not None and session.now >= deadline:
                if not session.timed_out(gang):
                    session.result.timeouts.append(gang)
                released += self._reject(session, gang, None)
                message = f"rejected at Permit after waiting {self._timeout(gang):g}s"
                session.note(gang, "Timeout", message)
        return released

    def _post_filter(
        self, session: Session, gang: GangInfo, waiting: dict[str, Statement]
    ) -> int | None:
        """Reject the group's waiting pods if it is too far from its minimum: how many were
        released, or None if the group keeps waiting."""
        if gang.implicit or gang.placed >= gang.min_member:
            return None
        gap = (gang.min_member - gang.placed) / gang.min_member
        if gap * 100 <= self.args.reject_percentage:
            return None  # close enough: keep holding, hope a sibling fits soon
        return self._reject(session, gang, waiting.pop(gang.ident, None))

    def _reject(self, session: Session, gang: GangInfo, stmt: Statement | None) -> int:
        """Release every waiting pod of ``gang`` (this cycle's and earlier reservations)."""
        released = 0 if stmt is None else len(stmt)
        if stmt is not None:
            pods = [op.pod for op in stmt.operations]
            stmt.discard()
            for pod in pods:
                self._fail(session, pod)
        held = [pod for pod in gang.members if pod.status is PodStatus.RESERVED]
        if held:
            rejection = session.statement()  # the backend frees their nodes at apply time
            for pod in held:
                rejection.unreserve(pod)
                self._fail(session, pod)
            rejection.commit()
            released += len(held)
        session.set_permit_deadline(gang, None)
        return released

    # -- helpers -----------------------------------------------------------------------------------
    def _fail(self, session: Session, pod: PodInfo, *, blocked: bool = False) -> None:
        """``pod`` found no node (``blocked``: it waits for a release as well as its backoff)
        or was rejected: its backoff grows."""
        failures = session.retry_of(pod).failures
        delay = min(self.args.backoff_max, self.args.backoff_base * 2 ** min(failures, 16))
        mark = session.freed if blocked else -1
        session.retry(pod, Retry(failures + 1, session.now + delay, mark))
        if pod.status is PodStatus.PENDING:  # this path runs very often: see _write_notes
            gang = pod.gang
            unwritten = self._unwritten.get(gang.ident)
            if unwritten is None or session.result.waiting.get(gang.ident) is not unwritten[0]:
                condition = session.note(gang, "NotEnoughResources", "")
            else:  # the same reason, so the same condition: only its message would change
                condition = unwritten[0]
            self._unwritten[gang.ident] = (condition, pod, gang.placed)

    def _write_notes(self, session: Session) -> None:
        """The messages of this cycle's failure notes, each group's last one only (a note
        made later in the cycle replaces the condition anyway)."""
        for condition, pod, placed in self._unwritten.values():
            key = pod.request.tobytes()
            shape = self._described.get(key)
            if shape is None:
                if len(self._described) > 4096:
                    self._described.clear()
                shape = self._described[key] = session.table.index.describe(pod.request)
            progress = progress_of(pod.gang, placed)
            condition.message = f"{progress}pod {pod.key} needs {shape}; no node fits"
        self._unwritten.clear()

    def _timeout(self, gang: GangInfo) -> float:
        timeout = gang.timeout
        return self.args.permit_wait_seconds if timeout is None else timeout
