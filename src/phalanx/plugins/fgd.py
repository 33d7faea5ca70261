"""FGD: Fragmentation Gradient Descent scoring.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23, §3–4; semantics checked against the authors'
simulator (hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641:
``pkg/simulator/plugin/fgd_score.go``). Re-implemented here from the description, vectorised.
The measure it descends — task types, the target workload ``M`` and the fragmentation
``F_n(M)`` — is :mod:`phalanx.cluster.fragmentation`.

**FGD score** (fgd_score.go): place task t where the expected fragmentation grows least::

    score(n) = ⌊100 · sigmoid((F_n(M) − F_{n⊕t}(M)) / 1000)⌋

truncated to an integer as kube-scheduler scores are. A GPU-sharing task tries every device
with room and keeps the best (the lowest device index among equal scores); a whole-GPU task
takes the first fully free devices; a CPU task changes only the node's free CPU.
:meth:`FGD.choose_gpus` returns that device choice; the session's Statement uses it
(:class:`~phalanx.framework.plugin.ChoosesGpus`), so a pod lands on the device it was scored
for in every runner.

**Target workload.** Built from :class:`~phalanx.framework.plugin.BuildContext`: ``target`` when
the runner knows the expected pod shapes (``simulate``/``compare``: the run's own pods and Job
templates, as the fragmentation meter uses; ``packing``: the pod list). Without one (``serve``)
the plugin learns it when a session opens: the shapes of every pod of the cluster that is
pending or holds a node, counted per pod, the 95 % most popular kept; it is learned at the first
session with pods and refreshed every :data:`REFRESH_SECONDS` of the scheduler's clock, so a
changing mix is followed without recounting a large cluster every cycle.

The artifact sums ``p_m · F_n(m)`` in float64, so where a placement's fragmentation change
cancels exactly its score can fall one point either side of the truncation; phalanx sums in
exact integers, which alone separates the two on some seeds of CPU-heavy workloads (by up to
0.17 points of allocation), never on ``default``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from phalanx.cluster import devices
from phalanx.cluster.fragmentation import (
    DEFAULT_MILLI_CPU,
    GPU_MODEL_LABEL,
    Floats,
    Fragmentation,
    FragModel,
    Ints,
    TargetWorkload,
    TaskType,
    target_workload,
    task_type,
    task_type_of,
    task_types_of,
)
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo, PodStatus
from phalanx.framework.plugin import BuildContext, Scores

if TYPE_CHECKING:
    from phalanx.framework.session import Session

__all__ = [
    "FGD",
    "GPU_MODEL_LABEL",
    "REFRESH_SECONDS",
    "Fragmentation",
    "TargetWorkload",
    "TaskType",
    "target_workload",
    "task_type",
    "task_type_of",
]

#: The score scale of the sigmoid, in milli-GPU (fgd_score.go divides by 1000).
SIGMOID_SCALE = 1000.0
#: How often a learned target workload is recounted (seconds of the scheduler's clock).
REFRESH_SECONDS = 300.0
#: Pods whose shapes make a learned target workload: pending, or holding a node.
LIVE = frozenset(
    {
        PodStatus.PENDING,
        PodStatus.ALLOCATED,
        PodStatus.PIPELINED,
        PodStatus.RESERVED,
        PodStatus.BOUND,
        PodStatus.RELEASING,
    }
)


def _sigmoid_score(delta_scaled: Floats, weight_total: float) -> Floats:
    x = delta_scaled / weight_total / SIGMOID_SCALE
    return np.asarray(np.trunc(1.0 / (1.0 + np.exp(-x)) * 100.0), dtype=np.float64)


class FGD:
    """Score: fragmentation gradient descent over a target workload (see module doc)."""

    name = "fgd"

    def __init__(
        self,
        workload: TargetWorkload | None,
        weight: int = 1,
        model_label: str = GPU_MODEL_LABEL,
    ) -> None:
        """``workload`` None: learn it from the cluster's pods when sessions open."""
        self.weight = weight
        self.model_label = model_label
        self.learns = workload is None
        self.learned_at: float | None = None
        self.fragmentation = None if workload is None else Fragmentation(workload, model_label)

    @classmethod
    def build(cls, context: BuildContext) -> FGD:
        context.no_resource_weights(cls.name)
        return cls(context.target, context.weight)

    def open_session(self, session: Session) -> None:
        """Learn (or refresh) the target workload from the cluster's pods (only without a
        given one)."""
        if not self.learns:
            return
        if self.learned_at is not None and session.now - self.learned_at < REFRESH_SECONDS:
            return
        specs = [pod.spec for pod in session.state.pods.values() if pod.status in LIVE]
        if not specs:
            return
        workload = target_workload(task_types_of(specs, self.model_label))
        self.learned_at = session.now
        current = self.fragmentation
        if current is None or current.workload != workload:
            self.fragmentation = Fragmentation(workload, self.model_label)

    def _pod(self, table: NodeTable, pod: PodInfo) -> tuple[int, int, int]:
        cpu = int(pod.request[table.index.position["cpu"]])
        count, each = devices.shape(int(pod.request[table.gpu_col]))
        return (cpu if cpu > 0 else DEFAULT_MILLI_CPU), count, each

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        out = np.zeros(len(table), dtype=np.float64)
        nodes = np.flatnonzero(feasible)
        if nodes.size == 0:
            return out
        frag = self.fragmentation
        if frag is None:  # nothing learned yet: no pod shapes to weigh
            return out
        model = frag.refresh(table)
        cpu, count, each = self._pod(table, pod)
        cpu_left = frag.cpu_left[nodes] - cpu
        if count == 0 or each >= devices.WHOLE:
            taken = float(count * devices.WHOLE) if count else 0.0
            after = model.scaled(
                nodes,
                cpu_left,
                frag.s[nodes] - taken,
                frag.c[nodes] - count,
                frag.tot[nodes] - taken,
            )
            out[nodes] = _sigmoid_score(frag.frag[nodes] - after, model.weight_total)
            return out
        best, _ = self._share(table, model, nodes, cpu_left, each)
        out[nodes] = best
        return out

    def _share(
        self,
        table: NodeTable,
        model: FragModel,
        nodes: npt.NDArray[np.intp],
        cpu_left: Ints,
        each: int,
    ) -> tuple[Floats, Ints]:
        """Best score and device per node for a share of ``each`` milli-GPU, trying every
        device with room (devices with equal free milli are tried once)."""
        frag = self.fragmentation
        assert frag is not None
        free = table.gpu_free[nodes]
        width = free.shape[1]
        # devices with equal free milli on a node give equal outcomes: try the first of each
        same = free[:, :, None] == free[:, None, :]
        first = same.argmax(axis=2)  # per device, the first device of its value
        cand = (first == np.arange(width)[None, :]) & (free >= each)
        rows, cols = np.nonzero(cand)
        left = free[rows, cols]
        after_left = left - each
        d = model.thresholds[None, :]
        was = left[:, None] >= d
        now = after_left[:, None] >= d
        at = nodes[rows]
        s = frag.s[at] - np.where(was, left[:, None], 0) + np.where(now, after_left[:, None], 0)
        c = frag.c[at] - was.astype(np.int64) + now.astype(np.int64)
        after = model.scaled(at, cpu_left[rows], s, c, frag.tot[at] - each)
        by_device = np.full(free.shape, -1.0)
        by_device[rows, cols] = _sigmoid_score(frag.frag[at] - after, model.weight_total)
        dev_score = np.take_along_axis(by_device, first, axis=1)
        dev_score[free < each] = -1.0
        device = np.argmax(dev_score, axis=1)  # the lowest index among the best
        best = dev_score[np.arange(free.shape[0]), device]
        return np.maximum(best, 0.0), np.asarray(device, dtype=np.int64)

    def choose_gpus(self, table: NodeTable, pod: PodInfo, node: int) -> tuple[int, ...]:
        """The devices FGD places ``pod`` on: for a share, the device whose use leaves the
        least expected fragmentation (lowest index among equal scores); else the first fully
        free devices."""
        cpu, count, each = self._pod(table, pod)
        frag = self.fragmentation
        if count == 0 or each >= devices.WHOLE or frag is None:
            return devices.pick(table.gpu_free[node], int(pod.request[table.gpu_col]))
        model = frag.refresh(table)
        nodes = np.array([node], dtype=np.intp)
        cpu_left = frag.cpu_left[nodes] - cpu
        _, device = self._share(table, model, nodes, cpu_left, each)
        if table.gpu_free[node, int(device[0])] < each:
            return ()
        return (int(device[0]),)
