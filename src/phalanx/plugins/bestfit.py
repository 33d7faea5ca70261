"""BestFit node scores: the node left with the least free CPU and GPU after placement wins.

Source: the baseline "BestFit" of Weng et al., USENIX ATC'23 (FGD), after Alibaba's
production packing heuristic; semantics from the authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641, ``best_fit_score.go``). Re-implemented
here from the description.

Rule, over (CPU, total GPU) with weights ½ and the largest node spec (128 CPUs, 8 GPUs)::

    waste(n) = ½ · (cpu_free − cpu_req) / 128000 + ½ · (gpu_free − gpu_req) / 8000
    score(n) = ⌊100 · (1 − waste(n))⌋

GPU devices are chosen by best fit (the fullest device with room; the table's default).
"""

from __future__ import annotations

import numpy as np

from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import BuildContext, Scores

MAX_SPEC_CPU = 128000.0
MAX_SPEC_GPU = 8000.0
CPU_WEIGHT = 0.5
GPU_WEIGHT = 0.5


class BestFit:
    name = "bestfit"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    @classmethod
    def build(cls, context: BuildContext) -> BestFit:
        context.no_resource_weights(cls.name)
        return cls(context.weight)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        cpu, gpu = table.index.position["cpu"], table.gpu_col
        free_cpu = table.allocatable[:, cpu] - table.requested[:, cpu] - pod.request[cpu]
        free_gpu = table.allocatable[:, gpu] - table.requested[:, gpu] - pod.request[gpu]
        waste = free_cpu / MAX_SPEC_CPU * CPU_WEIGHT + free_gpu / MAX_SPEC_GPU * GPU_WEIGHT
        return np.asarray(np.trunc((1.0 - waste) * 100.0), dtype=np.float64)
