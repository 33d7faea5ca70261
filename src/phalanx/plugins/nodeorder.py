"""Node scores: binpack (MostAllocated) and spread (LeastAllocated), vectorised.

Binpack, as Volcano's binpack plugin and kube-scheduler's MostAllocated::

    score(n) = 100 · Σ_r w_r · (requested_r(n) + request_r) / allocatable_r(n) / Σ_r w_r

over the resources the pod requests that have a weight. GPUs weigh most by default (10 vs 1
for CPU and memory) so a gang fills partly used GPU nodes before it opens an empty one:
that keeps whole nodes free for the next 8-GPU pod. Spread is the mirror image,
``100 · Σ w_r · (free_r − request_r) / allocatable_r / Σ w_r``, as the default scheduler's
LeastAllocated scores: over CPU and memory only, or, for a pod that requests neither (a
GPU-only pod), over whatever it requests with weight 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from phalanx.api.quantity import is_gpu
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable, Rows
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import BuildContext, Scores

DEFAULT_BINPACK_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1, "nvidia.com/gpu": 10}
DEFAULT_SPREAD_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1}


@dataclass(slots=True)
class _Weights:
    """A request's weighted columns: as arrays (whole-table scores), as Python pairs (one
    row's score), and a memo of one row's utilisation → its weighted score."""

    cols: np.ndarray  # intp
    w: np.ndarray  # float64
    pairs: tuple[tuple[int, int], ...]  # (column, the pod's request there)
    memo: dict[tuple[float, ...], float] = field(default_factory=dict)


def _weights(
    table: NodeTable,
    pod: PodInfo,
    weights: Mapping[str, int],
    gpu_weight: int,
    cache: dict[bytes, _Weights],
    *,
    fallback: bool = False,
) -> _Weights:
    """The columns the pod requests that carry a weight, and those weights; a GPU resource
    not named in ``weights`` (e.g. ``amd.com/gpu``) weighs ``gpu_weight``. With
    ``fallback``, a pod requesting none of them gets every resource it requests but pods, each
    of weight 1. Cached per request (columns keep their names while the index grows)."""
    key = pod.request.tobytes()
    found = cache.get(key)
    if found is not None:
        return found
    if len(cache) > 4096:
        cache.clear()
    requested = np.flatnonzero(pod.request).tolist()
    names = table.index.names

    def weight(col: int) -> int:
        name = names[col]
        return weights.get(name, gpu_weight if is_gpu(name) else 0)

    cols = [c for c in requested if weight(c) > 0]
    w = [float(weight(c)) for c in cols]
    if fallback and not cols:
        cols = [c for c in np.flatnonzero(pod.request[: len(names)]).tolist() if names[c] != "pods"]
        w = [1.0] * len(cols)
    amounts = pod.request.tolist()
    found = cache[key] = _Weights(
        np.array(cols, dtype=np.intp),
        np.array(w, dtype=np.float64),
        tuple((c, amounts[c]) for c in cols),
    )
    return found


def _utilisation(
    table: NodeTable, pod: PodInfo, cols: np.ndarray, rows: Rows | None = None
) -> np.ndarray:
    """(requested + request) / allocatable per node and column; 1 where nothing is allocatable.

    Built one contiguous column at a time from the table's maintained free matrix (the same
    integers and the same float operations as ``(requested + request) / max(alloc, 1)``), for
    every node, or for the nodes ``rows`` in one go (element by element the same numbers)."""
    free = table.free_columns()
    if rows is not None:
        where = rows[:, None], cols
        alloc = table.allocatable[where]
        frac = (alloc - free[where] + pod.request[cols]) / np.maximum(alloc, 1)
        return np.asarray(np.clip(np.where(alloc > 0, frac, 1.0), 0.0, 1.0), np.float64)
    out = np.empty((len(table), cols.size), dtype=np.float64)
    for j, col in enumerate(cols.tolist()):
        alloc, divisor, positive, everywhere = table.alloc_column(col)
        used = alloc - free[:, col]
        used += pod.request[col]
        frac = used / divisor
        out[:, j] = frac if everywhere else np.where(positive, frac, 1.0)
    return np.asarray(np.clip(out, 0.0, 1.0, out=out), dtype=np.float64)


def _weighted(utilisation: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``100 · (utilisation @ w) / Σ w``. A one-row product is done on two copies of the row:
    numpy computes a single row as a dot product, whose rounding differs from the matrix
    product's in the last bit, and a row's score must not depend on how many rows are
    scored with it (see ``score_rows``)."""
    if utilisation.shape[0] == 1:
        product = (np.repeat(utilisation, 2, axis=0) @ w)[:1]
    else:
        product = utilisation @ w
    return np.asarray(100.0 * product / w.sum(), np.float64)


_LOW, _HIGH = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def _row_score(table: NodeTable, weights: _Weights, row: int, *, spare: bool) -> float:
    """One node's weighted score in Python floats, the same to the last bit as the vector
    hooks': utilisation ``(requested + request) / allocatable`` per column (int64 arithmetic,
    then one float division, clipped to [0, 1]; 1 where nothing is allocatable), ``1 - u``
    with ``spare`` (spread); the weighted sum is the vector hooks' own, kept per utilisation
    (a cluster has few distinct usage levels)."""
    alloc = table.allocatable[row].tolist()
    free = table.free_columns()[row].tolist()
    values = []
    for col, amount in weights.pairs:
        total = alloc[col]
        if total > 0:
            used = total - free[col] + amount
            if not _LOW <= used <= _HIGH:  # as int64 arithmetic wraps around
                used = (used - _LOW) % (1 << 64) + _LOW
            frac = min(max(float(used) / float(total), 0.0), 1.0)
        else:
            frac = 1.0
        values.append(1.0 - frac if spare else frac)
    key = tuple(values)
    score = weights.memo.get(key)
    if score is None:
        if len(weights.memo) > 65536:
            weights.memo.clear()
        row_matrix = np.array([key], dtype=np.float64)
        score = weights.memo[key] = float(_weighted(row_matrix, weights.w)[0])
    return score


class Binpack:
    name = "binpack"

    def __init__(self, weight: int = 1, weights: Mapping[str, int] | None = None) -> None:
        self.weight = weight
        self.weights = dict(DEFAULT_BINPACK_WEIGHTS if weights is None else weights)
        self._cache: dict[bytes, _Weights] = {}

    @classmethod
    def build(cls, context: BuildContext) -> Binpack:
        return cls(context.weight, context.resources)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        found = _weights(table, pod, self.weights, 10, self._cache)
        if found.cols.size == 0:
            return np.zeros(len(table), dtype=np.float64)
        return _weighted(_utilisation(table, pod, found.cols), found.w)

    def score_rows(self, table: NodeTable, pod: PodInfo, rows: Rows) -> Scores:
        """:meth:`score` of the nodes ``rows`` only, to the last bit."""
        found = _weights(table, pod, self.weights, 10, self._cache)
        if found.cols.size == 0:
            return np.zeros(rows.size, dtype=np.float64)
        return _weighted(_utilisation(table, pod, found.cols, rows), found.w)

    def score_row(self, table: NodeTable, pod: PodInfo, row: int) -> float:
        """:meth:`score` of node ``row`` alone, to the last bit."""
        found = _weights(table, pod, self.weights, 10, self._cache)
        return _row_score(table, found, row, spare=False) if found.pairs else 0.0


class Spread:
    name = "spread"

    def __init__(self, weight: int = 1, weights: Mapping[str, int] | None = None) -> None:
        self.weight = weight
        self.weights = dict(DEFAULT_SPREAD_WEIGHTS if weights is None else weights)
        self._cache: dict[bytes, _Weights] = {}

    @classmethod
    def build(cls, context: BuildContext) -> Spread:
        return cls(context.weight, context.resources)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        return self._score(table, pod, None)

    def score_rows(self, table: NodeTable, pod: PodInfo, rows: Rows) -> Scores:
        """:meth:`score` of the nodes ``rows`` only, to the last bit."""
        return self._score(table, pod, rows)

    def score_row(self, table: NodeTable, pod: PodInfo, row: int) -> float:
        """:meth:`score` of node ``row`` alone, to the last bit."""
        found = _weights(table, pod, self.weights, 0, self._cache, fallback=True)
        return _row_score(table, found, row, spare=True) if found.pairs else 0.0

    def _score(self, table: NodeTable, pod: PodInfo, rows: Rows | None) -> Scores:
        found = _weights(table, pod, self.weights, 0, self._cache, fallback=True)
        size = len(table) if rows is None else rows.size
        if found.cols.size == 0:
            return np.zeros(size, dtype=np.float64)
        return _weighted(1.0 - _utilisation(table, pod, found.cols, rows), found.w)
