"""GPU fragmentation over a run, by FGD's definition (:mod:`phalanx.plugins.fgd`).

The *target workload* is the run's own pod shapes (every pod and every Job's template,
weighted by ``parallelism``): fragmentation is the free GPU that those tasks, in their
proportions, could not use. After each instant the meter samples ``fragmented / idle`` GPU in
percent (FGD's fragmentation ratio; 0 when no GPU is idle). The measure is incremental: only
nodes whose free devices or CPU changed are recomputed.
"""

from __future__ import annotations

from phalanx.api.specs import JobSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.cluster.nodes import NodeTable
from phalanx.plugins.fgd import Fragmentation, TaskType, target_workload, task_type_of
from phalanx.sim.metrics import StepSeries


class FragMeter:
    def __init__(self, workload: Workload) -> None:
        tasks: list[TaskType] = [task_type_of(pod) for pod in workload.of(PodSpec)]
        for job in workload.of(JobSpec):
            tasks.extend([task_type_of(job.template)] * max(job.parallelism, 1))
        gpu_tasks = any(task.gpu_count for task in tasks)
        self.measure = Fragmentation(target_workload(tasks)) if gpu_tasks else None
        self.ratio = StepSeries()

    def sample(self, now: float, table: NodeTable) -> None:
        if self.measure is None:
            return
        fragmented, idle = self.measure.measure(table)
        self.ratio.set(now, round(100.0 * fragmented / idle, 4) if idle > 0 else 0.0)
