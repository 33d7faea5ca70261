"""GpuPacking node scores: fill shared GPUs first, then used nodes, open an idle node last.

Source: the baseline "GpuPacking" of Weng et al., USENIX ATC'23 (FGD); tiers and caps from the
authors' simulator (hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641,
``gpu_packing_score.go``). Re-implemented here from the description, in integer arithmetic
as the artifact computes it.

Rule for a GPU task (a CPU-only task scores 0 everywhere). The devices it would use are the
ones with the least free milli-GPU that still fit it (a share: one device; k whole GPUs: k
fully free devices)::

    every GPU of n idle        score = max(33 − idle_gpus, idle_gpus)          # [0, 33]
    it needs idle GPUs         score = max(50 − idle_gpus_used, 33)            # [33, 50]
    it fits on a used GPU      score = max(100 − ⌊Σ ⌊free_milli·100/1000⌋ / 10⌋, 50)  # [50, 100]

GPU devices are chosen by best fit (the table's default), which is the device scored here.
"""

from __future__ import annotations

import numpy as np

from phalanx.cluster import devices
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import BuildContext, Scores

MAX_SCORE = 100


class GpuPacking:
    name = "gpupacking"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    @classmethod
    def build(cls, context: BuildContext) -> GpuPacking:
        context.no_resource_weights(cls.name)
        return cls(context.weight)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        count, each = devices.shape(int(pod.request[table.gpu_col]))
        if count == 0:
            return np.zeros(len(table), dtype=np.float64)
        free = table.gpu_free
        owned = -(-table.allocatable[:, table.gpu_col] // devices.WHOLE)  # devices per node
        idle = (free == devices.WHOLE).sum(axis=1)
        all_idle = np.maximum(MAX_SCORE // 3 - idle, idle)
        if each >= devices.WHOLE:
            used = np.full(len(table), max(MAX_SCORE // 2 - count, MAX_SCORE // 3))
        else:
            # the single device a share would take: the fullest one with room
            room = np.where(free >= each, free, devices.WHOLE + 1)
            tightest = room.min(axis=1)
            on_used = np.maximum(
                MAX_SCORE - (tightest * 100 // devices.WHOLE) // 10, MAX_SCORE // 2
            )
            on_idle = max(MAX_SCORE // 2 - 1, MAX_SCORE // 3)
            used = np.where(tightest == devices.WHOLE, on_idle, on_used)
        return np.asarray(np.where(idle == owned, all_idle, used), dtype=np.float64)
