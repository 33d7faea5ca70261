"""Statement: tentative placement with an exact undo.

Every change an action makes to a session goes through a Statement. ``allocate`` places a pod
on a node's free resources, ``pipeline`` claims a node's *future* free resources (what evicted
pods will return), ``evict`` marks a placed pod as releasing, ``unreserve`` gives back what a
pod held at Permit (coscheduling's rejection: the pod is pending again). Each operation is
logged with the pod's previous status and node; ``discard`` replays the log backwards so the
session's node table and every pod and gang counter are exactly as before (property-tested).
``commit`` hands the operations to the session, which turns them into binds, evictions and
given-back reservations for the backend. A unit is committed only when the plugins say it is ready.

Pods and gangs are shared with the long-lived state, so a committed operation is *tentative*
too: it holds for the rest of the cycle (later actions see it), and when the session closes
:func:`restore` puts every pod and gang back as the cycle found them. The table is the
session's own snapshot and is not touched. The state changes only when the applier carries
the cycle's result out, so a result that is dropped leaves no trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from phalanx.cluster.workloads import PodInfo, PodStatus

if TYPE_CHECKING:
    from phalanx.framework.session import Session


class Op(Enum):
    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"
    UNRESERVE = "unreserve"


@dataclass(frozen=True, slots=True)
class Operation:
    op: Op
    pod: PodInfo
    node: int
    previous: PodStatus
    previous_node: int
    gpus: tuple[int, ...] = ()  # devices taken by an allocate
    previous_gpus: tuple[int, ...] = ()


class Statement:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.table = session.table
        self.operations: list[Operation] = []
        self.closed = False

    def __len__(self) -> int:
        return len(self.operations)

    def allocate(self, pod: PodInfo, node: int, gpus: tuple[int, ...] | None = None) -> None:
        """Place ``pod`` on ``node``, on the given GPU devices or those the session chooses
        (a scoring plugin's choice, else the table's best fit)."""
        if gpus is None:
            gpus = self.session.choose_gpus(pod, node)
        self._log(Op.ALLOCATE, pod, node, gpus)
        self.table.add(node, pod.request, gpus)
        pod.gpus = gpus
        pod.node = node
        pod.gang.move(pod, PodStatus.ALLOCATED)

    def pipeline(self, pod: PodInfo, node: int) -> None:
        self._log(Op.PIPELINE, pod, node)
        self.table.pipeline(node, pod.request)
        pod.node = node
        pod.gang.move(pod, PodStatus.PIPELINED)

    def evict(self, pod: PodInfo) -> None:
        if pod.node < 0:
            raise ValueError(f"cannot evict {pod.key}: it is not on a node")
        self._log(Op.EVICT, pod, pod.node)
        self.table.mark_releasing(pod.node, pod.request)
        pod.gang.move(pod, PodStatus.RELEASING)

    def unreserve(self, pod: PodInfo) -> None:
        """Give back the node a pod holds without being bound (it is pending again)."""
        if pod.status is not PodStatus.RESERVED:
            raise ValueError(f"cannot unreserve {pod.key} in status {pod.status.value}")
        self._log(Op.UNRESERVE, pod, pod.node, pod.gpus)
        self.table.remove(pod.node, pod.request, pod.gpus)
        pod.node, pod.gpus = -1, ()
        pod.gang.move(pod, PodStatus.PENDING)

    def discard(self) -> None:
        """Undo every operation, newest first."""
        self._close()
        for operation in reversed(self.operations):
            pod, node = operation.pod, operation.node
            if operation.op is Op.ALLOCATE:
                self.table.remove(node, pod.request, operation.gpus)
            elif operation.op is Op.PIPELINE:
                self.table.pipeline(node, pod.request, -1)
            elif operation.op is Op.UNRESERVE:
                self.table.add(node, pod.request, operation.gpus)
            else:
                self.table.mark_releasing(node, pod.request, -1)
        restore(self.operations)
        self.operations.clear()

    def commit(self, *, reserve: bool = False) -> list[Operation]:
        """Make the operations final for this session; the session reports them to the backend
        as binds, or, with ``reserve``, as reservations (held, not bound: coscheduling)."""
        self._close()
        self.session.committed(self.operations, reserve=reserve)
        return self.operations

    def _log(self, op: Op, pod: PodInfo, node: int, gpus: tuple[int, ...] = ()) -> None:
        if self.closed:
            raise RuntimeError("statement already committed or discarded")
        self.operations.append(Operation(op, pod, node, pod.status, pod.node, gpus, pod.gpus))

    def _close(self) -> None:
        if self.closed:
            raise RuntimeError("statement already committed or discarded")
        self.closed = True


def restore(operations: list[Operation]) -> None:
    """Put the pods and gangs of ``operations`` back as they were before them, newest first
    (the node table is left alone: it is the session's own)."""
    for operation in reversed(operations):
        pod = operation.pod
        if operation.op is Op.ALLOCATE or operation.op is Op.UNRESERVE:
            pod.gpus = operation.previous_gpus
        pod.node = operation.previous_node
        pod.gang.move(pod, operation.previous)
