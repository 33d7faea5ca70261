"""GpuClustering node scores: keep GPU tasks of one kind together.

Source: the baseline "GpuClustering" of Weng et al., USENIX ATC'23 (FGD); tiers from the
authors' simulator (hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641,
``gpu_clustering_score.go``). Re-implemented here from the description, in integer arithmetic
as the artifact computes it.

A GPU task's *class* is ``share`` (a share of one GPU) or ``k-gpu`` (k whole GPUs). A node's
classes are those of the GPU tasks placed on it. With ``fill(n) = ⌊25 · (8000 − free_milli) /
8000⌋`` (fuller nodes first within a tier)::

    the node hosts only the task's class          score = 75 + fill(n)
    it hosts the task's class among others        score = 50 + fill(n)
    it hosts no GPU task                          score = 25 + fill(n)
    it hosts only other classes                   score =  0 + fill(n)

A CPU-only task scores 0 everywhere. phalanx's node table does not record which pods sit on a
node, so the plugin remembers the classes itself: when a session opens it reads them from the
pods that hold a node (again only when the cluster is another one, its nodes changed or
something was released since, as a release may take a class away: O(pods) then), and the
session tells it of every placement it commits
(:class:`~phalanx.framework.plugin.ObservesPlacements`). GPU devices are chosen by best fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from phalanx.cluster import devices
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeFacts, NodeTable
from phalanx.cluster.workloads import PodInfo, PodStatus
from phalanx.framework.plugin import BuildContext, Scores

if TYPE_CHECKING:
    from phalanx.framework.session import Session

MAX_SPEC_GPU = 8000
QUARTER = 25
#: Pods whose class counts on their node.
HOLDING = frozenset({PodStatus.ALLOCATED, PodStatus.RESERVED, PodStatus.BOUND, PodStatus.RELEASING})


def task_class(milli: int) -> str | None:
    """``share``, ``k-gpu`` or None (no GPU) for a request in milli-GPU."""
    count, each = devices.shape(milli)
    if count == 0:
        return None
    return "share" if each < devices.WHOLE else f"{count}-gpu"


class GpuClustering:
    name = "gpuclustering"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight
        self._facts: NodeFacts | None = None
        self._bits = np.zeros(0, dtype=np.int64)  # per node: bit set of classes present
        self._class_bit: dict[str, int] = {}
        self._state: object = None  # the cluster state last read, and its release count
        self._freed = -1

    @classmethod
    def build(cls, context: BuildContext) -> GpuClustering:
        context.no_resource_weights(cls.name)
        return cls(context.weight)

    def open_session(self, session: Session) -> None:
        """Read the classes on each node from the pods holding it, unless only placements
        this plugin observed happened since it last did."""
        state, table = session.state, session.table
        if state is self._state and state.freed == self._freed and table.facts is self._facts:
            return
        self._state, self._freed = state, state.freed
        self._facts = table.facts
        self._bits = np.zeros(len(table), dtype=np.int64)
        for pod in state.pods.values():
            if pod.node >= 0 and pod.status in HOLDING:
                self.observe(table, pod, pod.node)

    def _bits_for(self, table: NodeTable) -> np.ndarray:
        if self._facts is not table.facts or self._bits.shape[0] != len(table):
            self._facts = table.facts
            self._bits = np.zeros(len(table), dtype=np.int64)
        return self._bits

    def _bit(self, name: str) -> int:
        bit = self._class_bit.get(name)
        if bit is None:
            bit = self._class_bit[name] = 1 << len(self._class_bit)
        return bit

    def observe(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """``pod`` was placed on ``node``: its class is now present there."""
        name = task_class(int(pod.request[table.gpu_col]))
        if name is not None:
            self._bits_for(table)[node] |= self._bit(name)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        name = task_class(int(pod.request[table.gpu_col]))
        if name is None:
            return np.zeros(len(table), dtype=np.float64)
        bits = self._bits_for(table)
        bit = self._bit(name)
        gpu = table.gpu_col
        free = table.allocatable[:, gpu] - table.requested[:, gpu]
        used = MAX_SPEC_GPU - free
        fill = np.sign(used) * ((QUARTER * np.abs(used)) // MAX_SPEC_GPU)
        has = (bits & bit) != 0
        tier = np.where(has, np.where(bits == bit, 3, 2), np.where(bits == 0, 1, 0))
        return np.asarray(fill + QUARTER * tier, dtype=np.float64)
