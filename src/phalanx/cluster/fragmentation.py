"""GPU fragmentation by FGD's definition: task types, the target workload, and the measure.

Source: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23, §3–4; semantics checked against the authors'
simulator (hkust-adsl/kubernetes-scheduler-simulator @ 8f3d641: ``pkg/utils/frag.go``,
``pkg/utils/frag.go: GetTypicalPods``). Re-implemented here from the description, vectorised.

This is a measure, not a plugin: the simulator's meter (:mod:`phalanx.sim.fragmentation`),
the packing experiment and the FGD score plugin (:mod:`phalanx.plugins.fgd`, which descends
it) all use this module, so no runner imports a plugin to measure.

**Target workload** ``M``: the task types of a pod list with their popularity. A type is
``(milli-CPU, milli-GPU per GPU, GPU count, allowed GPU models)``; types are ranked by count
(ties: the larger type first, comparing CPU, then per-GPU milli, count, models) and the most
popular ones are kept until they cover ``threshold`` % of the pods (the artifact's experiments
use 95 %, step 1), then renormalised. CPU-only types are included. Popularities are kept as
integer counts so the whole measure is exact integer arithmetic.

**Fragmentation of node n for task type m** (``R_g`` free milli-GPU of device g, ``d_m`` the
type's per-GPU demand, ``k_m`` its GPU count)::

    F_n(m) = Σ_g R_g                 if d_m = 0 (a CPU task: every idle GPU share is a fragment),
                                     or n's model is not allowed for m,
                                     or n lacks CPU for m, or fewer than k_m devices have R_g ≥ d_m
    F_n(m) = Σ_{g: R_g < d_m} R_g    otherwise (only the devices too small for m)

    F_n(M) = Σ_m p_m · F_n(m)        cluster fragmentation F(M) = Σ_n F_n(M)

Memory does not enter the measure (as in the artifact). With ``S_j(n) = Σ_{g: R_g ≥ D_j} R_g``
and ``C_j(n) = #{g: R_g ≥ D_j}`` over the distinct demands ``D_j`` this is
``F_n(M) = Σ_g R_g − Σ_{m: d_m>0} p_m · ok(n, m) · S_{j(m)}(n)``, evaluated for all nodes and
types at once; a placement changes ``S`` and ``C`` of one node by a known delta, so a scorer
can evaluate candidate placements with ``[candidates × thresholds]`` and
``[candidates × types]`` array operations (:meth:`FragModel.scaled`).

The measure is computed in exact integer arithmetic (popularities as counts); the artifact
sums ``p_m · F_n(m)`` in float64.

**Per domain** (:meth:`Fragmentation.by_domain`): ``F_n(M)`` and the idle GPU summed over the
nodes of each domain of a topology level (a rack, a block), so a run can say how fragmented
its racks are, not only the cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from phalanx.api.specs import Placement, PodSpec
from phalanx.cluster import devices
from phalanx.cluster.nodes import NodeFacts, NodeTable

#: Node label carrying the GPU model (Alibaba's, as in the openb trace).
GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"
#: Popularity coverage of the target workload in the artifact's experiments (percent).
DEFAULT_THRESHOLD = 95
#: kube-scheduler's default request for a pod that asks for no CPU (GetNonzeroRequests).
DEFAULT_MILLI_CPU = 100

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, order=False)
class TaskType:
    """A task shape: CPU, per-GPU share, GPU count and the GPU models it may use."""

    cpu: int  # milli-CPU
    gpu_milli: int  # per GPU: < 1000 a share of one GPU, 1000 whole GPUs, 0 no GPU
    gpu_count: int
    models: tuple[str, ...] = ()  # allowed GPU models, as listed; () = any

    @property
    def spec(self) -> str:
        return "|".join(self.models)

    @property
    def total_gpu(self) -> int:
        return self.gpu_milli * self.gpu_count

    def sort_key(self) -> tuple[int, int, int, str]:
        return (self.cpu, self.gpu_milli, self.gpu_count, self.spec)


def task_type(
    cpu: int, gpu_request: int, models: Sequence[str] = (), *, default_cpu: int = DEFAULT_MILLI_CPU
) -> TaskType:
    """The task type of a request (``gpu_request`` in milli-GPU as phalanx counts it)."""
    count, each = devices.shape(gpu_request)
    return TaskType(cpu if cpu > 0 else default_cpu, each, count, tuple(models) if count else ())


def task_type_of(spec: PodSpec, model_label: str = GPU_MODEL_LABEL) -> TaskType:
    """A pod's task type; its models come from a required node affinity ``In`` on the label
    (the first term that names the label)."""
    models: tuple[str, ...] = ()
    for term in spec.placement.affinity_terms:
        for req in term.expressions:
            if req.key == model_label and req.operator == "In":
                models = req.values
                break
        if models:
            break
    for key, value in spec.placement.node_selector:
        if key == model_label and not models:
            models = (value,)
    return task_type(spec.requests.get("cpu", 0), spec.requests.get(devices.GPU, 0), models)


def task_types_of(
    specs: Iterable[PodSpec], model_label: str = GPU_MODEL_LABEL
) -> Iterator[TaskType]:
    """The task type of each spec; specs of one template (same CPU, GPU and placement) are
    worked out once."""
    seen: dict[tuple[int, int, Placement], TaskType] = {}
    for spec in specs:
        key = (spec.requests.get("cpu", 0), spec.requests.get(devices.GPU, 0), spec.placement)
        task = seen.get(key)
        if task is None:
            task = seen[key] = task_type_of(spec, model_label)
        yield task


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Task types and their popularity counts (``p_m = counts[m] / total``)."""

    types: tuple[TaskType, ...]
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    def popularity(self) -> list[float]:
        total = self.total
        return [c / total for c in self.counts]


def target_workload(
    tasks: Iterable[TaskType], *, threshold: int = DEFAULT_THRESHOLD
) -> TargetWorkload:
    """The most popular task types covering ``threshold`` % of ``tasks`` (GetTypicalPods with
    step 1 and no GPU weighting)."""
    counted = Counter(tasks)
    if not counted:
        raise ValueError("target workload of no tasks")
    ranked = sorted(counted.items(), key=lambda kv: (kv[1], kv[0].sort_key()), reverse=True)
    total = sum(counted.values())
    expected = float(threshold) * total / 100.0
    kept: list[tuple[TaskType, int]] = []
    covered = 0
    for task, count in ranked:
        if covered >= expected:
            break
        kept.append((task, count))
        covered += count
    return TargetWorkload(tuple(t for t, _ in kept), tuple(c for _, c in kept))


class FragModel:
    """The target workload laid out against one cluster's nodes (static parts only)."""

    def __init__(self, workload: TargetWorkload, facts: NodeFacts, model_label: str) -> None:
        self.facts = facts
        self.weight_total = float(workload.total)
        gpu_types = [
            (t, c) for t, c in zip(workload.types, workload.counts, strict=True) if t.gpu_milli
        ]
        self.thresholds = np.array(sorted({t.gpu_milli for t, _ in gpu_types}), dtype=np.int64)
        position = {int(d): j for j, d in enumerate(self.thresholds)}
        self.type_threshold = np.array([position[t.gpu_milli] for t, _ in gpu_types], np.intp)
        self.type_cpu = np.array([t.cpu for t, _ in gpu_types], dtype=np.int64)
        self.type_count = np.array([t.gpu_count for t, _ in gpu_types], dtype=np.int64)
        self.type_weight = np.array([c for _, c in gpu_types], dtype=np.float64)
        access = np.ones((len(facts), len(gpu_types)), dtype=bool)
        labels = facts.labels
        for m, (t, _) in enumerate(gpu_types):
            if t.models:
                access[:, m] = labels.isin(model_label, [x for x in t.models if x])
        self.access = access

    def node_terms(self, free: Ints) -> tuple[Floats, Ints, Floats]:
        """``S[n, j]``, ``C[n, j]`` and ``Σ_g R_g`` of device rows ``free[n, G]``."""
        ge = free[:, :, None] >= self.thresholds
        s = np.where(ge, free[:, :, None], 0).sum(axis=1).astype(np.float64)  # exact integers
        c = ge.sum(axis=1, dtype=np.int64)
        return s, c, free.sum(axis=1, dtype=np.int64).astype(np.float64)

    def scaled(
        self, nodes: npt.NDArray[np.intp], cpu_left: Ints, s: Floats, c: Ints, tot: Floats
    ) -> Floats:
        """``F_n(M) · total`` (an exact integer held in a float) for each row: ``nodes`` are
        the node indices (for model access), the rest the state to measure."""
        if self.type_weight.size == 0:
            return tot * self.weight_total
        jm = self.type_threshold
        ok = self.access[nodes]
        ok = ok & (cpu_left[:, None] >= self.type_cpu[None, :])
        ok &= c[:, jm] >= self.type_count[None, :]
        held = np.where(ok, s[:, jm], 0.0)
        return np.asarray(tot * self.weight_total - held @ self.type_weight, dtype=np.float64)


#: node states whose terms are kept (the memo is cleared past it)
_ROWS_KEPT = 1 << 16


class Fragmentation:
    """FGD's fragmentation measure over a node table, kept up to date incrementally: every
    call compares the table with the last one seen and recomputes only the nodes that
    changed (nothing at all when the table's generation has not moved)."""

    def __init__(self, workload: TargetWorkload, model_label: str = GPU_MODEL_LABEL) -> None:
        self.workload = workload
        self.model_label = model_label
        self.model: FragModel | None = None
        self.free = np.zeros((0, 0), dtype=np.int64)  # the device rows last seen
        self.cpu_left = np.zeros(0, dtype=np.int64)  # free milli-CPU last seen
        self.s = np.zeros((0, 0), dtype=np.float64)
        self.c = np.zeros((0, 0), dtype=np.int64)
        self.tot = np.zeros(0, dtype=np.float64)
        self.frag = np.zeros(0, dtype=np.float64)  # F_n(M) · total
        self.seen = -1  # the generation of the table last seen
        #: (node, its free devices, its free CPU) → its terms (S row, C row, Σ R_g, F · total)
        self._rows: dict[tuple[int, bytes, int], tuple[Floats, Ints, float, float]] = {}

    def refresh(self, table: NodeTable) -> FragModel:
        model = self.model
        if model is not None and model.facts is table.facts and self.seen == table.generation:
            return model  # the same contents as last time (see NodeTable's generations)
        self.seen = table.generation
        free = table.gpu_free
        cpu_left = table.free_columns()[:, table.index.position["cpu"]].copy()
        if model is None or model.facts is not table.facts or self.free.shape != free.shape:
            model = self.model = FragModel(self.workload, table.facts, self.model_label)
            rows = np.arange(len(table), dtype=np.intp)
            self.s, self.c, self.tot = model.node_terms(free)
            self.frag = model.scaled(rows, cpu_left, self.s, self.c, self.tot)
            self._rows = {}
        else:
            changed = (free != self.free).any(axis=1) | (cpu_left != self.cpu_left)
            rows = changed.nonzero()[0]
            if rows.size:
                self._update(model, rows, free, cpu_left)
        self.free = free.copy()
        self.cpu_left = cpu_left
        return model

    def _update(
        self, model: FragModel, rows: npt.NDArray[np.intp], free: Ints, cpu_left: Ints
    ) -> None:
        """Recompute the terms of ``rows``; a node back in a state it was in before (same free
        devices and CPU) takes the terms it had then."""
        keys = [(row, free[row].tobytes(), int(cpu_left[row])) for row in rows.tolist()]
        known = [self._rows.get(key) for key in keys]
        if all(terms is not None for terms in known):
            for (row, _, _), terms in zip(keys, known, strict=True):
                assert terms is not None
                self.s[row], self.c[row], self.tot[row], self.frag[row] = terms
            return
        s, c, tot = model.node_terms(free[rows])
        self.s[rows], self.c[rows], self.tot[rows] = s, c, tot
        self.frag[rows] = model.scaled(rows, cpu_left[rows], s, c, tot)
        if len(self._rows) > _ROWS_KEPT:
            self._rows.clear()
        for i, key in enumerate(keys):
            self._rows[key] = (s[i], c[i], tot[i], self.frag[key[0]])

    def measure(self, table: NodeTable) -> tuple[float, float]:
        """``(fragmented, idle)`` milli-GPU of the whole table (FGD's cluster F(M) and the
        free GPU it is a part of)."""
        model = self.refresh(table)
        return float(self.frag.sum()) / model.weight_total, float(self.tot.sum())

    def node_fragmentation(self, table: NodeTable) -> Floats:
        """``F_n(M)`` per node, in milli-GPU."""
        model = self.refresh(table)
        return np.asarray(self.frag / model.weight_total, dtype=np.float64)

    def by_domain(self, table: NodeTable, codes: npt.NDArray[np.int32], count: int) -> Floats:
        """``[2, count]``: the fragmented and the idle milli-GPU of each domain, given each
        node's domain (``codes``, -1 for none) and the number of domains."""
        model = self.refresh(table)
        inside = codes >= 0
        frag = np.bincount(codes[inside], weights=self.frag[inside], minlength=count)
        idle = np.bincount(codes[inside], weights=self.tot[inside], minlength=count)
        return np.stack([frag / model.weight_total, idle])
