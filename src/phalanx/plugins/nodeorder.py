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

import numpy as np

from phalanx.api.quantity import is_gpu
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import BuildContext, Scores

DEFAULT_BINPACK_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1, "nvidia.com/gpu": 10}
DEFAULT_SPREAD_WEIGHTS: Mapping[str, int] = {"cpu": 1, "memory": 1}


def _weights(
    table: NodeTable, pod: PodInfo, weights: Mapping[str, int], gpu_weight: int
) -> tuple[np.ndarray, np.ndarray]:
    """The columns the pod requests that carry a weight, and those weights; a GPU resource
    not named in ``weights`` (e.g. ``amd.com/gpu``) weighs ``gpu_weight``."""
    names = table.index.names

    def weight(col: int) -> int:
        name = names[col]
        return weights.get(name, gpu_weight if is_gpu(name) else 0)

    cols = [int(c) for c in np.flatnonzero(pod.request) if weight(int(c)) > 0]
    w = [weight(c) for c in cols]
    return np.array(cols, dtype=np.intp), np.array(w, dtype=np.float64)


def _utilisation(table: NodeTable, pod: PodInfo, cols: np.ndarray) -> np.ndarray:
    """(requested + request) / allocatable per node and column; 1 where nothing is allocatable."""
    alloc = table.allocatable[:, cols]
    used = table.requested[:, cols] + pod.request[cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(alloc > 0, used / np.maximum(alloc, 1), 1.0)
    return np.asarray(np.clip(frac, 0.0, 1.0), dtype=np.float64)


class Binpack:
    name = "binpack"

    def __init__(self, weight: int = 1, weights: Mapping[str, int] | None = None) -> None:
        self.weight = weight
        self.weights = dict(DEFAULT_BINPACK_WEIGHTS if weights is None else weights)

    @classmethod
    def build(cls, context: BuildContext) -> Binpack:
        return cls(context.weight, context.resources)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        cols, w = _weights(table, pod, self.weights, gpu_weight=10)
        if cols.size == 0:
            return np.zeros(len(table), dtype=np.float64)
        return np.asarray(100.0 * (_utilisation(table, pod, cols) @ w) / w.sum(), np.float64)


class Spread:
    name = "spread"

    def __init__(self, weight: int = 1, weights: Mapping[str, int] | None = None) -> None:
        self.weight = weight
        self.weights = dict(DEFAULT_SPREAD_WEIGHTS if weights is None else weights)

    @classmethod
    def build(cls, context: BuildContext) -> Spread:
        return cls(context.weight, context.resources)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        cols, w = _weights(table, pod, self.weights, gpu_weight=0)
        if cols.size == 0:
            cols = np.flatnonzero(pod.request[: len(table.index)])
            cols = np.array([c for c in cols if table.index.names[c] != "pods"], dtype=np.intp)
            w = np.ones(cols.size, dtype=np.float64)
        if cols.size == 0:
            return np.zeros(len(table), dtype=np.float64)
        return np.asarray(
            100.0 * ((1.0 - _utilisation(table, pod, cols)) @ w) / w.sum(), np.float64
        )
