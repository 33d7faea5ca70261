"""Coscheduling: the scheduler-plugins Coscheduling plugin's semantics, in the same engine.

This is the baseline that kube-scheduler users run today; it is emulated to show where it
fails, not to be used. Semantics (kubernetes-sigs/scheduler-plugins, pkg/coscheduling):

- **QueueSort**: pods one at a time, by priority, then their PodGroup's creation time, then
  name — pods of one group are adjacent, but a failed pod goes to backoff (1 s doubling to
  10 s, kube-scheduler's defaults), so retries of different groups interleave.
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
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
from phalanx.framework.explain import needs, progress
from phalanx.framework.session import Session
from phalanx.framework.statement import Statement
from phalanx.framework.unit import Unit

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
        self.at_permit: dict[str, GangInfo] = {}  # gangs with pods waiting at Permit

    def execute(self, session: Session) -> None:
        self._expire(session)
        waiting: dict[str, Statement] = {}
        rejected: set[str] = set()
        for pod in self._queue(session):
            gang = pod.gang
            if gang.ident in rejected or not self._ready_to_try(session, pod):
                continue
            if not self._pre_filter(session, pod):
                continue
            session.result.attempts += 1
            node = session.select_node(pod)
            if node is None:
                self._fail(session, pod)
                if self._post_filter(session, gang, waiting):
                    rejected.add(gang.ident)
                continue
            stmt = waiting.setdefault(gang.ident, session.statement())
            stmt.allocate(pod, node)
            if gang.implicit or gang.placed >= gang.min_member:
                self._allow(session, gang, waiting.pop(gang.ident))
            elif gang.permit_deadline is None:
                gang.permit_deadline = session.now + self._timeout(gang)
                session.result.wake_at.append(gang.permit_deadline)
        for ident, stmt in waiting.items():
            stmt.commit(reserve=True)
            self.at_permit[ident] = stmt.operations[0].pod.gang

    # -- queue ---------------------------------------------------------------------------------
    def _queue(self, session: Session) -> list[PodInfo]:
        pods = [pod for unit in session.units() for pod in unit.pods]
        pods.sort(key=lambda p: (-p.priority, p.gang.created, p.gang.key, p.seq))
        return pods

    def _ready_to_try(self, session: Session, pod: PodInfo) -> bool:
        if pod.backoff_until > session.now:
            if pod.attempted < session.state.version:
                session.result.wake_at.append(pod.backoff_until)
            return False
        pod.attempted = session.state.version
        return True

    def _pre_filter(self, session: Session, pod: PodInfo) -> bool:
        gang = pod.gang
        if gang.implicit:
            return True
        alive = sum(member.status not in _GONE for member in gang.members)
        if alive < gang.min_member:
            message = f"cannot find enough sibling pods: {alive} of minMember {gang.min_member}"
            session.note(gang, "NotEnoughMembers", message)
            return False
        spec = gang.spec
        if spec is not None and spec.min_resources and gang.permit_deadline is None:
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
        for pod in gang.members:
            if pod.status is PodStatus.RESERVED:
                session.result.binds.append((pod, pod.node))
        gang.permit_deadline = None
        self.at_permit.pop(gang.ident, None)
        session.placed(gang)

    def _expire(self, session: Session) -> None:
        """Groups whose Permit wait ran out: reject their waiting pods."""
        for ident, gang in list(self.at_permit.items()):
            if not any(p.status is PodStatus.RESERVED for p in gang.members):
                del self.at_permit[ident]
            elif gang.permit_deadline is not None and session.now >= gang.permit_deadline:
                if not gang.timed_out:
                    gang.timed_out = True
                    session.result.timeouts.append(gang)
                self._reject(session, gang, None)
                message = f"rejected at Permit after waiting {self._timeout(gang):g}s"
                session.note(gang, "Timeout", message)

    def _post_filter(self, session: Session, gang: GangInfo, waiting: dict[str, Statement]) -> bool:
        if gang.implicit or gang.placed >= gang.min_member:
            return False
        gap = (gang.min_member - gang.placed) / gang.min_member
        if gap * 100 <= self.args.reject_percentage:
            return False  # close enough: keep holding, hope a sibling fits soon
        self._reject(session, gang, waiting.pop(gang.ident, None))
        return True

    def _reject(self, session: Session, gang: GangInfo, stmt: Statement | None) -> None:
        """Release every waiting pod of ``gang`` (this cycle's and earlier reservations)."""
        if stmt is not None:
            pods = [op.pod for op in stmt.operations]
            stmt.discard()
            for pod in pods:
                self._fail(session, pod)
        for pod in gang.members:
            if pod.status is PodStatus.RESERVED:
                session.table.remove(pod.node, pod.request, pod.gpus)
                session.result.unreserved.append((pod, pod.node, pod.gpus))
                gang.move(pod, PodStatus.PENDING)  # the backend frees its node at apply time
                pod.node, pod.gpus = -1, ()
                self._fail(session, pod)
        gang.permit_deadline = None
        self.at_permit.pop(gang.ident, None)

    # -- helpers -----------------------------------------------------------------------------------
    def _fail(self, session: Session, pod: PodInfo) -> None:
        delay = min(self.args.backoff_max, self.args.backoff_base * 2**pod.failures)
        pod.failures += 1
        pod.backoff_until = session.now + delay
        if pod.status is PodStatus.PENDING:
            unit = Unit.of_pod(pod)
            session.note(pod.gang, "NotEnoughResources", progress(unit) + needs(session, unit))

    def _timeout(self, gang: GangInfo) -> float:
        timeout = gang.timeout
        return self.args.permit_wait_seconds if timeout is None else timeout
