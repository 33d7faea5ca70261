"""Random placement: a seeded uniform choice among the feasible nodes (and GPUs).

Source: the baseline "Random" of Weng et al., USENIX ATC'23 (FGD), as the authors' simulator
runs it (hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641,
``pkg/simulator/plugin/random_score.go`` and the ``random`` GPU selection of
``open_gpu_share.go``). Re-implemented here from the description.

Rule: before scoring, draw one feasible node uniformly at random; it scores 100, every other
node 0. Devices (:meth:`RandomScore.choose_gpus`): a GPU share goes to a device drawn uniformly
among those with enough free milli-GPU; whole GPUs take the first fully free devices, as in
the artifact. The generator is the plugin's own, seeded at construction, so a run is
reproducible.
"""

from __future__ import annotations

import numpy as np

from phalanx.cluster import devices
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import BuildContext, Scores


class RandomScore:
    name = "random"

    def __init__(self, seed: int = 0, weight: int = 1) -> None:
        self.weight = weight
        self.rng = np.random.default_rng(seed)

    @classmethod
    def build(cls, context: BuildContext) -> RandomScore:
        """Seeded with the run's seed (the packing experiment's: its policy seed)."""
        context.no_resource_weights(cls.name)
        return cls(context.seed, context.weight)

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        out = np.zeros(len(table), dtype=np.float64)
        nodes = np.flatnonzero(feasible)
        if nodes.size:
            out[nodes[self.rng.integers(nodes.size)]] = 100.0
        return out

    def choose_gpus(self, table: NodeTable, pod: PodInfo, node: int) -> tuple[int, ...]:
        milli = int(pod.request[table.gpu_col])
        count, each = devices.shape(milli)
        if count == 0 or each >= devices.WHOLE:
            return devices.pick(table.gpu_free[node], milli)
        room = np.flatnonzero(table.gpu_free[node] >= each)
        if room.size == 0:
            return ()
        return (int(room[self.rng.integers(room.size)]),)
