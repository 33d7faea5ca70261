"""GPU fragmentation over a run, by FGD's definition (:mod:`phalanx.cluster.fragmentation`).

The *target workload* is the run's own pod shapes (every pod and every Job's template,
weighted by ``parallelism``): fragmentation is the free GPU that those tasks, in their
proportions, could not use. The same target is what the ``fgd`` scoring plugin descends in
``simulate`` and ``compare`` (:func:`run_target`). After each instant the meter samples
``fragmented / idle`` GPU in percent (FGD's fragmentation ratio; 0 when no GPU is idle). The
measure is incremental: only nodes whose free devices or CPU changed are recomputed.
"""

from __future__ import annotations

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

    def sample(self, now: float, table: NodeTable) -> None:
        if self.measure is None:
            return
        fragmented, idle = self.measure.measure(table)
        self.ratio.set(now, round(100.0 * fragmented / idle, 4) if idle > 0 else 0.0)
