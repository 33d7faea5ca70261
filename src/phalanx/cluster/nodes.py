"""NodeTable: nodes as numpy columns.

``allocatable``, ``requested``, ``releasing`` and ``pipelined`` are int64 matrices ``[N, R]``
over a :class:`ResourceIndex`. Static node facts (labels, taints, ``spec.unschedulable``) sit
in :class:`NodeFacts`, shared by every copy of the table, with a cache of per-placement masks:
pods of one gang share a template, so their static mask is computed once.

GPU devices are tracked too: ``gpu_free[N, G]`` (see :mod:`phalanx.cluster.devices`), so a
whole-GPU pod needs whole free GPUs and a GPU share needs one GPU with room, not just enough
GPU in total on the node.

``free = allocatable - requested`` is what a pod may take now; ``future_free = free +
releasing - pipelined`` is what it may claim once evicted pods are gone (Volcano's FutureIdle).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from phalanx.api.specs import NodeSpec, Placement
from phalanx.cluster import devices
from phalanx.cluster.labels import LabelIndex, Mask, TaintIndex
from phalanx.cluster.resources import ResourceIndex, Vector

Matrix = npt.NDArray[np.int64]


class NodeFacts:
    """What does not change while pods come and go: names, labels, taints, cordons."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        self.names = [node.name for node in nodes]
        self.position = {name: i for i, name in enumerate(self.names)}
        self.labels = LabelIndex(self.names, [node.labels for node in nodes])
        self.taints = TaintIndex([node.taints for node in nodes])
        self.unschedulable = np.array([node.unschedulable for node in nodes], dtype=bool)
        self._selector: dict[Placement, Mask] = {}
        self._tolerated: dict[Placement, Mask] = {}

    def __len__(self) -> int:
        return len(self.names)

    def selector_mask(self, placement: Placement) -> Mask:
        """Nodes matching nodeSelector and required node affinity (cached)."""
        mask = self._selector.get(placement)
        if mask is None:
            mask = self._selector[placement] = self.labels.selector(placement)
        return mask

    def toleration_mask(self, placement: Placement) -> Mask:
        """Nodes whose NoSchedule/NoExecute taints the pod tolerates (cached)."""
        mask = self._tolerated.get(placement)
        if mask is None:
            mask = self._tolerated[placement] = self.taints.tolerated(placement.tolerations)
        return mask


class NodeTable:
    def __init__(
        self,
        facts: NodeFacts,
        index: ResourceIndex,
        allocatable: Matrix,
        requested: Matrix | None = None,
        releasing: Matrix | None = None,
        pipelined: Matrix | None = None,
        gpu_free: Matrix | None = None,
    ) -> None:
        self.facts = facts
        self.index = index
        self.allocatable = allocatable
        self.gpu_col = index.position[devices.GPU]
        if gpu_free is None:
            gpu_free = devices.build(allocatable[:, self.gpu_col])
        self.gpu_free = gpu_free
        shape = allocatable.shape
        self.requested = np.zeros(shape, np.int64) if requested is None else requested
        self.releasing = np.zeros(shape, np.int64) if releasing is None else releasing
        self.pipelined = np.zeros(shape, np.int64) if pipelined is None else pipelined
        self._total: Vector | None = None

    @classmethod
    def build(cls, nodes: Sequence[NodeSpec], index: ResourceIndex) -> NodeTable:
        allocatable = np.zeros((len(nodes), len(index)), dtype=np.int64)
        for row, node in enumerate(nodes):
            allocatable[row] = index.vector(node.allocatable)
        return cls(NodeFacts(nodes), index, allocatable)

    def __len__(self) -> int:
        return len(self.facts)

    @property
    def names(self) -> list[str]:
        return self.facts.names

    def copy(self) -> NodeTable:
        """A snapshot: fresh usage matrices, shared static facts and allocatable."""
        table = NodeTable(
            self.facts,
            self.index,
            self.allocatable,
            self.requested.copy(),
            self.releasing.copy(),
            self.pipelined.copy(),
            self.gpu_free.copy(),
        )
        table._total = self._total
        return table

    def free(self) -> Matrix:
        return self.allocatable - self.requested

    def fits(self, request: Vector, *, future: bool = False) -> Mask:
        """Nodes where ``request`` fits on every resource it asks for."""
        cols = np.flatnonzero(request)
        free = self.allocatable[:, cols] - self.requested[:, cols]
        if future:
            free = free + self.releasing[:, cols] - self.pipelined[:, cols]
        mask = np.asarray(np.all(free >= request[cols], axis=1), dtype=bool)
        gpu = int(request[self.gpu_col])
        if gpu and not future:
            mask &= devices.fits(self.gpu_free, gpu)
        return mask

    def capacity_for(self, request: Vector, mask: Mask) -> int:
        """How many pods of shape ``request`` fit, in total, on the nodes of ``mask``."""
        cols = np.flatnonzero(request)
        if cols.size == 0:
            return 0
        free = self.allocatable[mask][:, cols] - self.requested[mask][:, cols]
        per_node = np.min(np.maximum(free, 0) // request[cols], axis=1)
        gpu = int(request[self.gpu_col])
        if gpu:
            per_node = np.minimum(per_node, devices.capacity(self.gpu_free[mask], gpu))
        return int(per_node.sum())

    def pick_gpus(self, node: int, request: Vector) -> tuple[int, ...]:
        """The devices a pod with ``request`` would take on ``node`` (best fit)."""
        return devices.pick(self.gpu_free[node], int(request[self.gpu_col]))

    def add(self, node: int, request: Vector, gpus: tuple[int, ...] = ()) -> None:
        self.requested[node] += request
        if gpus:
            self.gpu_free[node, list(gpus)] -= devices.per_device(int(request[self.gpu_col]))

    def remove(self, node: int, request: Vector, gpus: tuple[int, ...] = ()) -> None:
        self.requested[node] -= request
        if gpus:
            self.gpu_free[node, list(gpus)] += devices.per_device(int(request[self.gpu_col]))

    def total_allocatable(self) -> Vector:
        """Allocatable summed over schedulable nodes (cached: both are static)."""
        if self._total is None:
            schedulable = ~self.facts.unschedulable
            self._total = np.asarray(self.allocatable[schedulable].sum(axis=0), dtype=np.int64)
        return self._total
