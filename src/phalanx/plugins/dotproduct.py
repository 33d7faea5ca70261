"""DotProduct (Tetris-style alignment) node scores for CPU + GPU tasks.

Source: Grandl et al., "Multi-resource packing for cluster schedulers" (Tetris, SIGCOMM'14),
as the FGD artifact configures it for its baseline "DotProd" (Weng et al., USENIX ATC'23;
hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641, ``dot_product_score.go`` with
``-dimext merge -norm max``). Re-implemented here from the description.

Rule: the node's free vector and the pod's request vector over (CPU, total GPU), each resource
divided by the largest node spec (128 CPUs, 8 GPUs)::

    dot(n) = (cpu_free/128000)·(cpu_req/128000) + (gpu_free/8000)·(gpu_req/8000)
    score(n) = ⌊100 · (1 − dot(n) / 2)⌋

A smaller alignment scores higher: the pod goes where what is left is small in the directions
it asks for. GPU devices are chosen by best fit (the table's default).
"""

from __future__ import annotations

import numpy as np

from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import BuildContext, Scores

#: The largest node of the artifact's cluster (normalisation of both dimensions).
MAX_SPEC_CPU = 128000.0
MAX_SPEC_GPU = 8000.0


class DotProduct:
    name = "dotproduct"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    @classmethod
    def build(cls, context: BuildContext) -> DotProduct:
        context.no_resource_weights(cls.name)
        return cls(context.weight)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        cpu, gpu = table.index.position["cpu"], table.gpu_col
        free_cpu = (table.allocatable[:, cpu] - table.requested[:, cpu]) / MAX_SPEC_CPU
        free_gpu = (table.allocatable[:, gpu] - table.requested[:, gpu]) / MAX_SPEC_GPU
        want_cpu = float(pod.request[cpu]) / MAX_SPEC_CPU
        want_gpu = float(pod.request[gpu]) / MAX_SPEC_GPU
        dot = free_cpu * want_cpu + free_gpu * want_gpu
        return np.asarray(np.trunc(100.0 * (1.0 - dot / 2.0)), dtype=np.float64)
