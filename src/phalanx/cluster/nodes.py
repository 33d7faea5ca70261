"""NodeTable: nodes as numpy columns.

``allocatable``, ``requested``, ``releasing`` and ``pipelined`` are int64 matrices ``[N, R]``
over a :class:`ResourceIndex`. Static node facts (labels, taints, ``spec.unschedulable``) sit
in :class:`NodeFacts`, shared by every copy of the table, with a cache of per-placement masks:
pods of one gang share a template, so their static mask is computed once.

GPU devices are tracked too: ``gpu_free[N, G]`` (see :mod:`phalanx.cluster.devices`), so a
whole-GPU pod needs whole free GPUs and a GPU share needs one GPU with room, not just enough
GPU in total on the node.

``free = allocatable - requested`` is what a pod may take now (kept column-major and updated
row by row in :meth:`NodeTable.add`/``remove``, with each node's count of fully free GPUs, so
a fit test reads a few contiguous vectors instead of recomputing ``[N, R]`` temporaries);
``future_free = free + releasing - pipelined`` is what it may claim once evicted pods are gone
(Volcano's FutureIdle).

**Change.** The table lives as long as its :class:`~phalanx.cluster.state.ClusterState`. Nodes
are added (a row appended), updated (their row and facts replaced) and removed (the row
becomes a *tombstone*: nothing allocatable, unschedulable, no name; rows are never reused or
compacted, so a node's index stays valid for every pod and every open cycle). A resource name
first seen at run time adds a zero column (:meth:`NodeTable.add_columns`). Any change to the
static facts builds a new :class:`NodeFacts`, so caches keyed on the facts' identity (plugins'
masks) are dropped without a notification protocol.

**Snapshots are copy-on-write.** :meth:`NodeTable.copy` shares the usage matrices; the first
write through :meth:`add`, :meth:`remove`, :meth:`pipeline` or :meth:`mark_releasing` copies
them. A cycle that places nothing copies nothing. Writers must use those methods, never write
the matrices in place.

**Generations.** Every write gives the table a new ``generation``, unique over all tables of the
process; a copy keeps its source's. Two tables with the same generation hold the same usage, so
what is computed from a table's contents alone (a fragmentation measure, a failure message) can
be kept until the generation moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

import numpy as np
import numpy.typing as npt

from phalanx.api.specs import NodeSpec, Placement
from phalanx.cluster import devices
from phalanx.cluster.labels import LabelIndex, Mask, TaintIndex
from phalanx.cluster.resources import ResourceIndex, Vector, saturating_sum

Matrix = npt.NDArray[np.int64]
Rows = npt.NDArray[np.intp]  # node indices
#: One allocatable column: values, divisor max(alloc, 1), alloc > 0, and whether all are > 0.
AllocColumn = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Mask, bool]


#: Table generations (see the module's docstring): one counter for the process.
_GENERATIONS = count(1)

#: Up to this many nodes a fit test compares ``[nodes × columns]`` at once (fewer numpy calls).
SMALL_TABLE = 256

#: Where a removed node's row stays: no name, nothing allocatable, never schedulable.
TOMBSTONE = NodeSpec("", {}, unschedulable=True)


class NodeFacts:
    """What does not change while pods come and go: names, labels, taints, cordons. Immutable:
    a node change makes a new one (:meth:`NodeTable.set_node`)."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        self.specs = list(nodes)
        self.names = [node.name for node in nodes]
        self.position = {name: i for i, name in enumerate(self.names) if name}
        self.live = np.array([bool(name) for name in self.names], dtype=bool)
        self.labels = LabelIndex(self.names, [node.labels for node in nodes])
        self.taints = TaintIndex([node.taints for node in nodes])
        self.unschedulable = np.array([node.unschedulable for node in nodes], dtype=bool)
        self._selector: dict[Placement, Mask] = {}
        self._tolerated: dict[Placement, Mask] = {}
        self._usable: dict[Placement, Mask] = {}

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

    def usable(self, placement: Placement) -> Mask:
        """Nodes a pod with ``placement`` may use at all: selector and affinity match, taints
        tolerated, not cordoned (cached; read only)."""
        mask = self._usable.get(placement)
        if mask is None:
            mask = self.selector_mask(placement) & self.toleration_mask(placement)
            mask = self._usable[placement] = mask & ~self.unschedulable
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
        self._shared = False  # the usage matrices belong to another table until a write
        # Kept up to date by add/remove (built on first use): allocatable - requested in
        # column-major order, so one resource of every node is one contiguous vector, and
        # each node's count of fully free GPUs.
        self._free: Matrix | None = None
        self._whole: npt.NDArray[np.int64] | None = None
        self._columns: dict[int, AllocColumn] = {}  # static: shared by every copy
        #: rows written since :meth:`track` (a session's snapshot only), and a count of
        #: changes to nodes or columns, which make every row-wise cache stale
        self.written: list[int] | None = None
        self.epoch = 0
        self.generation = next(_GENERATIONS)

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
        """A snapshot: shares everything until its first write (copy-on-write)."""
        table = NodeTable(
            self.facts,
            self.index,
            self.allocatable,
            self.requested,
            self.releasing,
            self.pipelined,
            self.gpu_free,
        )
        table._total = self._total
        table._shared = True
        table._columns = self._columns
        table._free, table._whole = self._free, self._whole  # copied on the first write
        table.generation = self.generation
        return table

    def track(self) -> None:
        """Log the row of every later write in ``written`` (for per-row caches)."""
        self.written = []

    def _own(self) -> None:
        """Before every write: a new generation, and the usage matrices made this table's."""
        self.generation = next(_GENERATIONS)
        if self._shared:
            self.requested = self.requested.copy()
            self.releasing = self.releasing.copy()
            self.pipelined = self.pipelined.copy()
            self.gpu_free = self.gpu_free.copy()
            if self._free is not None:
                self._free = self._free.copy(order="F")
            if self._whole is not None:
                self._whole = self._whole.copy()
            self._shared = False

    def _drop_derived(self) -> None:
        """Nodes or columns changed: the maintained free matrices are built again."""
        self.epoch += 1
        self._total = None
        self._free = self._whole = None
        self._columns = {}

    def live_count(self) -> int:
        """Nodes that exist (tombstones of removed nodes left out)."""
        return int(self.facts.live.sum())

    def free(self) -> Matrix:
        return self.allocatable - self.requested

    def free_columns(self) -> Matrix:
        """``allocatable - requested``, column-major, maintained incrementally."""
        if self._free is None:
            self._free = np.asfortranarray(self.allocatable - self.requested)
        return self._free

    def alloc_column(self, col: int) -> AllocColumn:
        """Column ``col`` of allocatable (contiguous), its divisor ``max(alloc, 1)`` and
        whether every node has some of it (cached: allocatable is static)."""
        column = self._columns.get(col)
        if column is None:
            alloc = np.ascontiguousarray(self.allocatable[:, col])
            column = (alloc, np.maximum(alloc, 1), alloc > 0, bool((alloc > 0).all()))
            self._columns[col] = column
        return column

    def whole_free(self) -> npt.NDArray[np.int64]:
        """Per node, how many of its GPUs are entirely free (maintained incrementally)."""
        if self._whole is None:
            self._whole = np.asarray((self.gpu_free == devices.WHOLE).sum(axis=1), np.int64)
        return self._whole

    def fits(self, request: Vector, *, future: bool = False) -> Mask:
        """Nodes where ``request`` fits on every resource it asks for."""
        cols = request.nonzero()[0]
        if future:
            free = self.allocatable[:, cols] - self.requested[:, cols]
            free = free + self.releasing[:, cols] - self.pipelined[:, cols]
            return np.asarray(np.all(free >= request[cols], axis=1), dtype=bool)
        table = self.free_columns()
        if len(self) <= SMALL_TABLE:  # one comparison beats a numpy call per column
            mask = np.asarray((table[:, cols] >= request[cols]).all(axis=1), dtype=bool)
        else:  # column by column: no [nodes × columns] temporaries
            mask = np.ones(len(self), dtype=bool)
            column = np.empty(len(self), dtype=bool)
            for col in cols.tolist():
                np.greater_equal(table[:, col], request[col], out=column)
                mask &= column
        gpu = int(request[self.gpu_col])
        if gpu:
            count, each = devices.shape(gpu)
            if each == devices.WHOLE:
                mask &= self.whole_free() >= count
            else:
                mask &= devices.fits(self.gpu_free, gpu)
        return mask

    def fits_rows(self, request: Vector, rows: Rows) -> Mask:
        """:meth:`fits` for the nodes ``rows`` only (the same integer comparisons)."""
        cols = request.nonzero()[0]
        free = self.free_columns()[rows[:, None], cols]
        mask = np.asarray((free >= request[cols]).all(axis=1), dtype=bool)
        gpu = int(request[self.gpu_col])
        if gpu:
            count, each = devices.shape(gpu)
            if each == devices.WHOLE:
                mask &= self.whole_free()[rows] >= count
            else:
                mask &= devices.fits(self.gpu_free[rows], gpu)
        return mask

    def fits_row(self, request: Vector, row: int) -> bool:
        """:meth:`fits` for node ``row`` alone, in Python integers (no array is built: the
        common refresh after a placement, see :mod:`phalanx.framework.selection`)."""
        needs = _needs(request, self.gpu_col)
        free = self.free_columns()[row].tolist()
        for col, amount in needs.amounts:
            if free[col] < amount:
                return False
        if not needs.devices:
            return True
        if needs.each == devices.WHOLE:
            return int(self.whole_free()[row]) >= needs.devices
        return any(left >= needs.each for left in self.gpu_free[row].tolist())

    def capacity_for(self, request: Vector, mask: Mask) -> int:
        """How many pods of shape ``request`` fit, in total, on the nodes of ``mask``."""
        return int(self.capacity_per_node(request, mask).sum())

    def capacity_per_node(self, request: Vector, mask: Mask) -> Matrix:
        """How many pods of shape ``request`` fit on each node of ``mask`` (0 elsewhere)."""
        cols = request.nonzero()[0]
        if not cols.size:
            return np.zeros(len(self), dtype=np.int64)
        room = np.maximum(self.free_columns()[:, cols], 0) // request[cols]
        inside: Matrix = room.min(axis=1)
        gpu = int(request[self.gpu_col])
        if gpu:
            count, each = devices.shape(gpu)
            if each == devices.WHOLE:
                np.minimum(inside, self.whole_free() // count, out=inside)
            else:
                np.minimum(inside, devices.capacity(self.gpu_free, gpu), out=inside)
        inside[~mask] = 0
        return inside

    def pick_gpus(self, node: int, request: Vector) -> tuple[int, ...]:
        """The devices a pod with ``request`` would take on ``node`` (best fit)."""
        return devices.pick(self.gpu_free[node], int(request[self.gpu_col]))

    def add(self, node: int, request: Vector, gpus: tuple[int, ...] = ()) -> None:
        self._own()
        if self.written is not None:
            self.written.append(node)
        self.requested[node] += request
        if self._free is not None:
            self._free[node] -= request
        if gpus:
            self._take(node, gpus, -devices.per_device(int(request[self.gpu_col])))

    def remove(self, node: int, request: Vector, gpus: tuple[int, ...] = ()) -> None:
        self._own()
        if self.written is not None:
            self.written.append(node)
        self.requested[node] -= request
        if self._free is not None:
            self._free[node] += request
        if gpus:
            self._take(node, gpus, devices.per_device(int(request[self.gpu_col])))

    def _take(self, node: int, gpus: tuple[int, ...], change: int) -> None:
        """Change the free milli-GPU of ``node``'s devices ``gpus`` (distinct) by ``change``;
        element by element (a fancy-indexed update costs far more for a few devices), and
        the node's count of fully free GPUs by the devices that became or ceased to be so."""
        row = self.gpu_free[node]
        whole = 0
        for device in gpus:
            before = int(row[device])
            row[device] = before + change
            whole += (before + change == devices.WHOLE) - (before == devices.WHOLE)
        if whole and self._whole is not None:
            self._whole[node] += whole

    def pipeline(self, node: int, request: Vector, sign: int = 1) -> None:
        """Claim (``sign=1``) or give back (``-1``) ``node``'s future free resources."""
        self._own()
        if self.written is not None:
            self.written.append(node)
        self.pipelined[node] += sign * request

    def mark_releasing(self, node: int, request: Vector, sign: int = 1) -> None:
        """Count ``request`` on ``node`` as being released (an eviction), or undo that."""
        self._own()
        if self.written is not None:
            self.written.append(node)
        self.releasing[node] += sign * request

    # -- nodes and resources come and go (the owning state's table only) ----------------------
    def set_node(self, row: int, spec: NodeSpec) -> None:
        """Add (``row == len(self)``), update or tombstone (``spec`` is TOMBSTONE) a node. What
        pods hold on an updated node stays held; its devices keep their usage."""
        self._own()
        specs = list(self.facts.specs)
        vector = self.index.vector(spec.allocatable)
        if row == len(specs):
            specs.append(spec)
            zero = np.zeros((1, len(self.index)), dtype=np.int64)
            self.allocatable = np.vstack([self.allocatable, vector[None, :]])
            self.requested = np.vstack([self.requested, zero])
            self.releasing = np.vstack([self.releasing, zero])
            self.pipelined = np.vstack([self.pipelined, zero])
            self.gpu_free = _pad(self.gpu_free, len(specs), self.gpu_free.shape[1])
            used = np.zeros(self.gpu_free.shape[1], dtype=np.int64)
        else:
            specs[row] = spec
            self.allocatable = self.allocatable.copy()
            self.allocatable[row] = vector
            used = _device_usage(self.gpu_free[row], self._device_capacity(row))
        fresh = devices.build(vector[self.gpu_col : self.gpu_col + 1])[0]
        width = max(self.gpu_free.shape[1], fresh.size, used.size)
        self.gpu_free = _pad(self.gpu_free, len(specs), width)
        row_free = np.zeros(width, dtype=np.int64)
        row_free[: fresh.size] = fresh
        row_free[: used.size] -= used
        self.gpu_free[row] = np.maximum(row_free, 0)
        self.facts = NodeFacts(specs)
        self._drop_derived()

    def _device_capacity(self, row: int) -> npt.NDArray[np.int64]:
        """The devices node ``row`` was built with (before an update)."""
        old = self.facts.specs[row]
        milli = old.allocatable.get(devices.GPU, 0) if old.name else 0
        return np.asarray(devices.build(np.array([milli], dtype=np.int64))[0], dtype=np.int64)

    def add_columns(self, count: int) -> None:
        """The index grew by ``count`` resource names: zero columns at the end."""
        self._own()

        def grow(matrix: Matrix) -> Matrix:
            return np.hstack([matrix, np.zeros((matrix.shape[0], count), dtype=np.int64)])

        self.allocatable = grow(self.allocatable)
        self.requested = grow(self.requested)
        self.releasing = grow(self.releasing)
        self.pipelined = grow(self.pipelined)
        self._drop_derived()

    def total_allocatable(self) -> Vector:
        """Allocatable summed over schedulable nodes (cached: both are static)."""
        if self._total is None:
            schedulable = ~self.facts.unschedulable
            self._total = saturating_sum(self.allocatable[schedulable])
        return self._total


@dataclass(frozen=True, slots=True)
class _Needs:
    """What a request asks of one node, as Python integers: ``(column, amount)`` of every
    resource it requests, and its GPU devices (how many, milli-GPU each)."""

    amounts: tuple[tuple[int, int], ...]
    devices: int
    each: int


_NEEDS: dict[tuple[bytes, int], _Needs] = {}


def _needs(request: Vector, gpu_col: int) -> _Needs:
    """The request's :class:`_Needs` (cached by its bytes: pods of a gang share a request)."""
    key = (request.tobytes(), gpu_col)
    needs = _NEEDS.get(key)
    if needs is None:
        if len(_NEEDS) > 4096:
            _NEEDS.clear()
        values = request.tolist()
        amounts = tuple((col, values[col]) for col in np.flatnonzero(request).tolist())
        number, each = devices.shape(values[gpu_col])
        needs = _NEEDS[key] = _Needs(amounts, number, each)
    return needs


def _pad(matrix: Matrix, rows: int, cols: int) -> Matrix:
    """``matrix`` grown with zeros to at least ``rows × cols``."""
    if matrix.shape[0] >= rows and matrix.shape[1] >= cols:
        return matrix
    out = np.zeros((max(rows, matrix.shape[0]), max(cols, matrix.shape[1])), dtype=np.int64)
    out[: matrix.shape[0], : matrix.shape[1]] = matrix
    return out


def _device_usage(free: Matrix, capacity: Matrix) -> Matrix:
    """Milli-GPU used per device: what the device had minus what it has free."""
    width = max(free.size, capacity.size)
    cap = np.zeros(width, dtype=np.int64)
    cap[: capacity.size] = capacity
    now = np.zeros(width, dtype=np.int64)
    now[: free.size] = free
    return np.asarray(np.maximum(cap - now, 0), dtype=np.int64)
