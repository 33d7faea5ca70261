"""GPU fragmentation over a run, by FGD's definition (:mod:`phalanx.cluster.fragmentation`).

The *target workload* is the run's own pod shapes (every pod and every Job's template,
weighted by ``parallelism``): fragmentation is the free GPU that those tasks, in their
proportions, could not use. The same target is what the ``fgd`` scoring plugin descends in
``simulate`` and ``compare`` (:func:`run_target`). After each instant the meter samples
``fragmented / idle`` GPU in percent (FGD's fragmentation ratio; 0 when no GPU is idle). The
measure is incremental: only nodes whose free devices or CPU changed are recomputed, and an
instant that wrote nothing to the node table (its generation, see
:mod:`phalanx.cluster.nodes`, did not move: an arrival that found no room, a cycle that placed
nothing) keeps the last figures without looking at the table. The recorded series are the same
as when every instant is measured: an unchanged ratio adds no point, and the per-domain
integrals still advance at every instant.

With a topology, the meter also follows each level of the first one (racks, blocks, hosts):
per domain the fragmented / idle GPU in percent, summarised per level as the mean over the
domains that have idle GPU (``mean_ratio``), the worst domain (``max_ratio``) and the percent
of the level's domains holding any fragmented GPU (``fragmented_domains``), each averaged over
the run's time (``fragmentation_by_domain`` in ``-o json``).
"""

from __future__ import annotations

import numpy as np

from phalanx.api.specs import JobSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.cluster.fragmentation import (
    Fragmentation,
    TargetWorkload,
    TaskType,
    target_workload,
    task_types_of,
)
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.topology import Topology
from phalanx.sim.metrics import StepSeries


def run_target(workload: Workload) -> TargetWorkload | None:
    """The run's own pod shapes as FGD's target workload; None when no pod asks for a GPU
    (there is nothing to fragment)."""
    tasks: list[TaskType] = list(task_types_of(workload.of(PodSpec)))
    for job in workload.of(JobSpec):
        (task,) = task_types_of([job.template])
        tasks.extend([task] * max(job.parallelism, 1))
    if not any(task.gpu_count for task in tasks):
        return None
    return target_workload(tasks)


class FragMeter:
    def __init__(self, target: TargetWorkload | None) -> None:
        """``target``: :func:`run_target` (None: nothing is measured)."""
        self.measure = None if target is None else Fragmentation(target)
        self.ratio = StepSeries()
        self.last = 0.0
        self.current: dict[str, tuple[float, float, float]] = {}  # level → its three figures
        self.integral: dict[str, list[float]] = {}
        #: what the last figures were measured on: the table, its generation, the topology
        self._seen: tuple[NodeTable, int, Topology | None] | None = None

    def sample(self, now: float, table: NodeTable, topology: Topology | None = None) -> None:
        if self.measure is None:
            return
        if self._unchanged(table, topology):  # the same figures as last time
            if topology is not None:
                self._advance(now)
            return
        self._seen = (table, table.generation, topology)
        fragmented, idle = self.measure.measure(table)
        self.ratio.set(now, round(100.0 * fragmented / idle, 4) if idle > 0 else 0.0)
        if topology is None:
            return
        self._advance(now)
        for level in topology.levels:
            frag, free = self.measure.by_domain(table, level.codes, len(level))
            has_idle = free > 0
            ratios = 100.0 * frag[has_idle] / free[has_idle]
            worst = float(ratios.max()) if ratios.size else 0.0
            mean = float(ratios.mean()) if ratios.size else 0.0
            share = 100.0 * float(np.count_nonzero(frag > 0)) / max(len(level), 1)
            self.current[level.name] = (mean, worst, share)

    def _unchanged(self, table: NodeTable, topology: Topology | None) -> bool:
        seen = self._seen
        return (
            seen is not None
            and seen[0] is table
            and seen[1] == table.generation
            and seen[2] is topology
        )

    def _advance(self, now: float) -> None:
        for name, figures in self.current.items():
            total = self.integral.setdefault(name, [0.0, 0.0, 0.0])
            for i, value in enumerate(figures):
                total[i] += value * (now - self.last)
        self.last = max(self.last, now)

    def by_domain(self, end: float) -> dict[str, dict[str, float]]:
        """Per level of the topology: the time-averaged figures over ``[0, end]``."""
        if end <= 0 or not self.current:
            return {}
        self._advance(end)
        keys = ("mean_ratio", "max_ratio", "fragmented_domains")
        return {
            name: {k: round(v / end, 4) for k, v in zip(keys, total, strict=True)}
            for name, total in self.integral.items()
        }
