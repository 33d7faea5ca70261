"""The openb inputs of the FGD experiment: where they are, and a small reader for them.

This is a private, minimal reader of the two files the experiment needs (``phalanx.traces``
has the general openb loader; switching to it changes nothing here but the import):

- nodes: ``openb/csv/openb_node_list_gpu_node.csv`` (``sn, cpu_milli, memory_mib, gpu,
  model``), the same 1213 nodes in the same order as the FGD simulator's input
  ``node_yaml/openb_node_list_gpu_node.yaml`` and much faster to read. A node gets ``cpu``,
  ``memory`` (MiB × 2^20 bytes), ``pods: 1001`` and ``nvidia.com/gpu`` = GPUs × 1000, and the
  label ``alibabacloud.com/gpu-card-model``;
- pods: ``openb/csv/openb_pod_list_VARIANT.csv``. A pod requests ``cpu`` milli, ``memory``
  bytes, ``pods: 1`` and ``nvidia.com/gpu`` = ``gpu_milli`` for a share of one GPU
  (``num_gpu`` 1, ``gpu_milli`` < 1000), else ``num_gpu`` × 1000; a ``gpu_spec``
  (``V100M16|V100M32``) becomes a required node affinity ``In`` those models on the label.

Trace root: ``$PHALANX_TRACES`` if set; else ``../shared/traces`` from the current directory;
else the first ``shared/traces`` found walking up from this package. Missing data is an
:class:`InputError` naming the path.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from phalanx import traces
from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec, Placement, PodSpec, Requirement, SelectorTerm
from phalanx.plugins.fgd import GPU_MODEL_LABEL, TaskType, task_type

ENV_VAR = "PHALANX_TRACES"
GPU = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MIB = 1 << 20
MILLI = 1000
NODE_PODS = 1001
NAMESPACE = "openb"
NODE_FILE = "openb/csv/openb_node_list_gpu_node.csv"
POD_FILE = "openb/csv/openb_pod_list_{}.csv"
PUBLISHED_FILE = "fgd-expected-results/csv/analysis_allo_discrete.csv"
PUBLISHED_FRAG_RATIO_FILE = "fgd-expected-results/csv/analysis_frag_ratio_discrete.csv"
PUBLISHED_FRAG_FILE = "fgd-expected-results/csv/analysis_frag_discrete.csv"

#: Every pod list of the openb trace.
VARIANTS = (
    "default",
    *(f"cpu{n}" for n in ("0", "037", "050", "072", "100", "200", "235", "250", "300")),
    *(f"gpushare{n}" for n in (20, 40, 60, 80, 100)),
    *(f"gpuspec{n}" for n in ("05", "10", "20", "25", "33")),
    *(f"multigpu{n}" for n in (20, 30, 40, 50)),
)


def trace_root(root: Path | None = None) -> Path:
    """The shared traces folder: ``root``, else :func:`phalanx.traces.trace_root` (which reads
    ``$PHALANX_TRACES`` and looks for ``shared/traces`` beside the repository); an InputError
    naming where it looked when there is none."""
    if root is not None:
        return Path(root)
    found = traces.trace_root()
    if not found.is_dir():
        raise InputError(f"no trace folder at {found}: set {ENV_VAR}", field=ENV_VAR)
    return found


def data_file(root: Path, relative: str) -> Path:
    path = root / relative
    if not path.is_file():
        raise InputError(f"missing data file {path}", source=str(path))
    return path


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One row of a pod list, as the FGD simulator sees it."""

    name: str
    cpu: int  # milli-CPU
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU
    gpu_spec: str  # allowed models, "|"-separated, "" = any

    @property
    def gpu_request(self) -> int:
        """``nvidia.com/gpu`` in milli-GPU: the share, or whole GPUs × 1000."""
        return self.num_gpu * self.gpu_milli

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.gpu_spec.split("|")) if self.gpu_spec else ()

    def task(self) -> TaskType:
        return task_type(self.cpu, self.gpu_request, self.models)

    def spec(self, name: str | None = None) -> PodSpec:
        requests = {"cpu": self.cpu, "memory": self.memory_mib * MIB, "pods": 1}
        if self.gpu_request:
            requests[GPU] = self.gpu_request
        return PodSpec(NAMESPACE, name or self.name, requests, placement=_placement(self.gpu_spec))


_PLACEMENTS: dict[str, Placement] = {"": Placement()}


def _placement(gpu_spec: str) -> Placement:
    placement = _PLACEMENTS.get(gpu_spec)
    if placement is None:
        models = tuple(sorted({m for m in gpu_spec.split("|") if m}))
        term = SelectorTerm(expressions=(Requirement(GPU_MODEL_LABEL, "In", models),))
        placement = _PLACEMENTS[gpu_spec] = Placement(affinity_terms=(term,))
    return placement


def _rows(path: Path, columns: Sequence[str]) -> tuple[dict[str, int], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise InputError("empty file", source=str(path))
        position = {name: i for i, name in enumerate(header)}
        missing = [c for c in columns if c not in position]
        if missing:
            raise InputError(f"missing column(s) {', '.join(missing)}", source=str(path))
        return position, [row for row in reader if row]


def _int(path: Path, line: int, column: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(
            f"not an integer: {text!r}", source=f"{path}:{line}", field=column
        ) from None
    if value < 0:
        raise InputError(f"negative: {value}", source=f"{path}:{line}", field=column)
    return value


def read_nodes(path: Path) -> list[NodeSpec]:
    """The nodes of an openb node CSV."""
    position, rows = _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
    nodes: list[NodeSpec] = []
    for line, row in enumerate(rows, start=2):
        name = row[position["sn"]]
        cpu, mem, gpus = (
            _int(path, line, c, row[position[c]]) for c in ("cpu_milli", "memory_mib", "gpu")
        )
        allocatable = {"cpu": cpu, "memory": mem * MIB, "pods": NODE_PODS}
        labels = {HOSTNAME_LABEL: name}
        if gpus:
            allocatable[GPU] = gpus * MILLI
        model = row[position["model"]]
        if model:
            labels[GPU_MODEL_LABEL] = model
        nodes.append(NodeSpec(name, allocatable, labels))
    if not nodes:
        raise InputError("no nodes", source=str(path))
    return nodes


def read_pods(path: Path) -> list[OpenbPod]:
    """The rows of an openb pod list, in file order."""
    position, rows = _rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"))
    spec_col = position.get("gpu_spec")
    pods: list[OpenbPod] = []
    for line, row in enumerate(rows, start=2):
        cpu, mem, num, milli = (
            _int(path, line, c, row[position[c]])
            for c in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
        )
        if num == 0:
            milli = 0
        elif not 0 < milli <= MILLI or (num > 1 and milli != MILLI):
            raise InputError(
                f"gpu_milli {milli} with num_gpu {num}: a share must be 1..1000 of one GPU, "
                "several GPUs must be whole (1000)",
                source=f"{path}:{line}",
                field="gpu_milli",
            )
        gpu_spec = row[spec_col] if spec_col is not None and num else ""
        pods.append(OpenbPod(row[position["name"]], cpu, mem, num, milli, gpu_spec))
    if not pods:
        raise InputError("no pods", source=str(path))
    return pods


@dataclass(frozen=True)
class OpenbData:
    """The cluster and one pod list of the experiment."""

    variant: str
    nodes: list[NodeSpec]
    pods: list[OpenbPod]

    @cached_property
    def capacity_milli(self) -> int:
        return sum(node.allocatable.get(GPU, 0) for node in self.nodes)

    @cached_property
    def total_gpus(self) -> int:
        return sum(-(-node.allocatable.get(GPU, 0) // MILLI) for node in self.nodes)


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise InputError(
            f"unknown openb variant {variant!r} (choose from {', '.join(VARIANTS)})",
            field="workload",
        )
    return variant


def load(variant: str, root: Path | None = None) -> OpenbData:
    """Nodes and pods of ``openb:VARIANT`` from the trace root."""
    check_variant(variant)
    base = trace_root(root)
    nodes = read_nodes(data_file(base, NODE_FILE))
    pods = read_pods(data_file(base, POD_FILE.format(variant)))
    return OpenbData(variant, nodes, pods)
