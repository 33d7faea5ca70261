"""openb: Alibaba's 2023 GPU-sharing cluster trace (FGD, ATC'23) as nodes and lone pods.

Design (columns and units: ``openb/README.md`` of the shared traces):

- **Nodes** come from ``node_yaml/openb_node_list_gpu_node.yaml`` (the FGD simulator's input,
  1213 GPU nodes, 6212 GPUs), converted with :func:`phalanx.k8s.node_from_dict`; Alibaba's
  ``alibabacloud.com/gpu-milli`` (or ``gpu-count`` × 1000) becomes ``nvidia.com/gpu`` in
  milli-GPU and both Alibaba keys are dropped. Or from a node CSV (``sn, cpu_milli, memory_mib,
  gpu, model``): ``openb_node_list_gpu_node.csv`` gives the same 1213 nodes,
  ``openb_node_list_all_node.csv`` 1523 nodes with 310 CPU-only ones (numbered differently).
  CSV nodes get ``pods: 1001`` like the YAML. The GPU model stays the node label
  ``alibabacloud.com/gpu-card-model``.
- **Pods**: one :class:`PodSpec` per row, namespace ``default``, no gang. Requests are
  ``cpu`` = ``cpu_milli``, ``memory`` = ``memory_mib`` MiB in bytes, ``pods`` 1 and
  ``nvidia.com/gpu`` = ``gpu_milli`` for a GPU-sharing pod (``num_gpu`` 1, ``gpu_milli`` < 1000),
  else ``num_gpu`` × 1000 (absent for CPU-only pods). ``gpu_milli`` must be 1..1000 with one
  GPU and 1000 with several. Without GPUs (``num_gpu`` 0) the row is a CPU-only pod whatever
  ``gpu_milli`` and ``gpu_spec`` say. This is how the FGD simulator reads a row (a pod's GPU
  demand is ``num_gpu × gpu_milli``), and the packing reproduction (:mod:`phalanx.packing`)
  reads its pod lists here: refusing such a row would refuse a list the artifact replays. (The
  published lists have no such row, so no figure depends on the choice.) ``gpu_spec``
  (``V100M16|V100M32``) becomes a required node affinity
  ``alibabacloud.com/gpu-card-model In (V100M16, V100M32)`` (duplicates removed, one shared
  Placement per distinct spec); :class:`OpenbRow` keeps it as written, because FGD's task
  types compare the written string. ``duration`` is
  ``deletion_time − creation_time`` where both are present. ``qos``, ``pod_phase`` and
  ``scheduled_time`` are validated as present-or-absent columns but not used.
- The ``multigpu*`` lists have only the first five columns: no durations, no constraints, no
  arrival times.
- **Workload** (:func:`openb_workload`): nodes (Timing 0), then the pods in file order. By
  default it is FGD's arrival-only packing setup: every pod is submitted at 0 and has no
  duration (pods never leave). ``timed=True`` replays the trace instead: ``submit_after`` =
  ``creation_time`` and the duration above; lists without ``creation_time`` are an error then.
  FGD's resampling to 1.3 × capacity with shuffle seeds is an experiment, not part of loading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec, Placement, PodSpec, Requirement, Resources, SelectorTerm
from phalanx.api.workload import Item, Timing, Workload
from phalanx.k8s import node_from_dict, read_documents
from phalanx.traces._gangs import GPU, HOSTNAME_LABEL, MIB, MILLI_PER_GPU, node_items
from phalanx.traces._table import Table, read_table

GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"
ALIBABA_GPU_MILLI = "alibabacloud.com/gpu-milli"
ALIBABA_GPU_COUNT = "alibabacloud.com/gpu-count"
#: ``allocatable.pods`` of the openb Node YAML, used for CSV nodes too.
OPENB_MAX_PODS = 1001

#: Every pod list ``csv/openb_pod_list_VARIANT.csv``.
OPENB_VARIANTS = (
    "default",
    *(f"cpu{n}" for n in ("0", "037", "050", "072", "100", "200", "235", "250", "300")),
    *(f"gpushare{n}" for n in (20, 40, 60, 80, 100)),
    *(f"gpuspec{n}" for n in ("05", "10", "20", "25", "33")),
    *(f"multigpu{n}" for n in (20, 30, 40, 50)),
)
#: Node sources of :func:`openb_workload`: relative paths in the openb folder.
OPENB_NODE_FILES = {
    "yaml": "node_yaml/openb_node_list_gpu_node.yaml",
    "gpu": "csv/openb_node_list_gpu_node.csv",
    "all": "csv/openb_node_list_all_node.csv",
}

_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_POD_OPTIONAL = (
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)


class OpenbPod(NamedTuple):
    """A pod of a pod list and its ``creation_time`` (None when the list has none)."""

    spec: PodSpec
    created: float | None


def pod_list_path(folder: str | os.PathLike[str], variant: str) -> Path:
    """``FOLDER/csv/openb_pod_list_VARIANT.csv``; an unknown variant is an InputError."""
    if variant not in OPENB_VARIANTS:
        raise InputError(
            f"unknown openb variant {variant!r} (valid: {', '.join(OPENB_VARIANTS)})",
            field="variant",
        )
    return Path(folder) / "csv" / f"openb_pod_list_{variant}.csv"


# --- nodes -------------------------------------------------------------------------------


def openb_nodes(path: str | os.PathLike[str]) -> list[NodeSpec]:
    """Nodes of an openb Node YAML (``.yaml``/``.yml``) or node CSV (anything else)."""
    if Path(path).suffix in (".yaml", ".yml"):
        return _yaml_nodes(path)
    return _csv_nodes(path)


def _yaml_nodes(path: str | os.PathLike[str]) -> list[NodeSpec]:
    nodes: list[NodeSpec] = []
    for source, doc in read_documents(path):
        if doc is None:
            continue
        if not isinstance(doc, dict) or doc.get("kind") != "Node":
            kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise InputError(f"expected only kind Node, found {kind!r}", source=source)
        try:
            node = node_from_dict(doc)
        except InputError as exc:
            raise exc.located(source=source) from None
        nodes.append(_nvidia_gpus(node, source))
    if not nodes:
        raise InputError("no Node documents (truncated file?)", source=os.fspath(path))
    return nodes


def _nvidia_gpus(node: NodeSpec, source: str) -> NodeSpec:
    """Alibaba's GPU resources → ``nvidia.com/gpu`` in milli-GPU."""
    allocatable = dict(node.allocatable)
    milli = allocatable.pop(ALIBABA_GPU_MILLI, None)
    count = allocatable.pop(ALIBABA_GPU_COUNT, None)
    if milli is not None and count is not None and milli != count * MILLI_PER_GPU:
        raise InputError(
            f"{ALIBABA_GPU_MILLI} {milli} is not {ALIBABA_GPU_COUNT} {count} × 1000",
            source=source,
            obj=f"Node {node.name}",
            field=f"status.allocatable[{ALIBABA_GPU_MILLI}]",
        )
    gpus = milli if milli is not None else None if count is None else count * MILLI_PER_GPU
    if gpus:
        allocatable[GPU] = gpus
    return NodeSpec(
        name=node.name,
        allocatable=allocatable,
        labels=node.labels,
        taints=node.taints,
        unschedulable=node.unschedulable,
    )


def _csv_nodes(path: str | os.PathLike[str]) -> list[NodeSpec]:
    table = read_table(path, _NODE_COLUMNS)
    c = table.columns
    name_i, cpu_i, mem_i, gpu_i, model_i = (c[k] for k in _NODE_COLUMNS)
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for number, fields in enumerate(table.rows, start=1):
        name = fields[name_i]
        try:
            cpu, memory, gpus = int(fields[cpu_i]), int(fields[mem_i]), int(fields[gpu_i])
        except ValueError:
            cpu = memory = gpus = -1
        if min(cpu, memory, gpus) < 0 or max(cpu, gpus) > 2**53 or memory > 2**43:
            for column in ("cpu_milli", "memory_mib", "gpu"):
                cap = 2**43 if column == "memory_mib" else 2**53
                table.integer(number, fields, column, minimum=0, maximum=cap)
        if not name:
            raise table.error(number, "sn", "empty node name")
        if name in seen:
            raise table.error(number, "sn", f"duplicate node {name!r}")
        seen.add(name)
        allocatable: Resources = {"cpu": cpu, "memory": memory * MIB, "pods": OPENB_MAX_PODS}
        if gpus:
            allocatable[GPU] = gpus * MILLI_PER_GPU
        labels = {HOSTNAME_LABEL: name}
        if fields[model_i]:
            labels[GPU_MODEL_LABEL] = fields[model_i]
        nodes.append(NodeSpec(name=name, allocatable=allocatable, labels=labels))
    return nodes


# --- pods --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenbRow:
    """One row of a pod list, as the FGD simulator sees a pod (the one openb pod reader: the
    packing experiment and the trace loader both read rows with :func:`read_openb_rows`)."""

    name: str
    cpu: int  # milli-CPU
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; 0 without GPUs
    gpu_spec: str = ""  # allowed models as written ("|"-separated), "" = any; "" without GPUs
    created: int | None = None  # creation_time
    deleted: int | None = None  # deletion_time

    @property
    def gpu_request(self) -> int:
        """``nvidia.com/gpu`` in milli-GPU: the share, or whole GPUs × 1000."""
        return self.num_gpu * self.gpu_milli

    @property
    def models(self) -> tuple[str, ...]:
        """The allowed GPU models as written (duplicates kept: FGD's task types are the
        artifact's, which compares the written string)."""
        return tuple(self.gpu_spec.split("|")) if self.gpu_spec else ()

    @property
    def duration(self) -> float | None:
        if self.created is None or self.deleted is None:
            return None
        return float(self.deleted - self.created)

    def spec(self, name: str | None = None, *, duration: float | None = None) -> PodSpec:
        """The pod (namespace ``default``), named ``name`` or the row's own name."""
        requests: Resources = {"pods": 1, "cpu": self.cpu, "memory": self.memory_mib * MIB}
        if self.gpu_request:
            requests[GPU] = self.gpu_request
        return PodSpec(
            namespace="default",
            name=name or self.name,
            requests=requests,
            placement=_gpu_spec_placement(self.gpu_spec),
            duration=duration,
        )


def openb_pods(path: str | os.PathLike[str]) -> list[PodSpec]:
    """Every pod of an openb pod list (any variant), with durations where the list has them."""
    return [pod.spec for pod in read_openb_pods(path)]


def read_openb_pods(
    path: str | os.PathLike[str], *, durations: bool = True, require_times: bool = False
) -> list[OpenbPod]:
    """Pods with their creation times; ``durations=False`` leaves every duration None;
    ``require_times`` makes a list without ``creation_time`` an error."""
    pods: list[OpenbPod] = []
    for row in read_openb_rows(path, require_times=require_times):
        spec = row.spec(duration=row.duration if durations else None)
        pods.append(OpenbPod(spec, None if row.created is None else float(row.created)))
    return pods


def read_openb_rows(path: str | os.PathLike[str], *, require_times: bool = False) -> list[OpenbRow]:
    """The rows of a pod list, in file order, checked (see the module docstring)."""
    table = read_table(path, _POD_REQUIRED, _POD_OPTIONAL)
    if require_times and not table.has("creation_time"):
        raise InputError(
            "timed replay needs column 'creation_time', which this pod list lacks",
            source=table.source,
            field="creation_time",
        )
    seen: set[str] = set()
    rows: list[OpenbRow] = []
    timed = table.has("creation_time")
    for number, fields in enumerate(table.rows, start=1):
        name = table.text(fields, "name")
        if not name:
            raise table.error(number, "name", "empty pod name")
        if name in seen:
            raise table.error(number, "name", f"duplicate pod {name!r}")
        seen.add(name)
        cpu = table.integer(number, fields, "cpu_milli", minimum=0)
        memory = table.integer(number, fields, "memory_mib", minimum=0, maximum=2**43)
        gpus, milli = _gpus(table, number, fields)
        gpu_spec = table.text(fields, "gpu_spec") if gpus else ""
        if not all(gpu_spec.split("|")) and gpu_spec:
            raise table.error(number, "gpu_spec", f"{gpu_spec!r} has an empty GPU model")
        start = end = None
        if timed:
            start = table.optional_integer(number, fields, "creation_time", minimum=0)
            end = table.optional_integer(number, fields, "deletion_time", minimum=0)
            table.optional_integer(number, fields, "scheduled_time", minimum=0)
            if start is not None and end is not None and end < start:
                raise table.error(number, "deletion_time", f"{end} is before creation_time {start}")
        rows.append(OpenbRow(name, cpu, memory, gpus, milli, gpu_spec, start, end))
    return rows


def _gpus(table: Table, number: int, fields: list[str]) -> tuple[int, int]:
    """``(num_gpu, gpu_milli)``; ``gpu_milli`` is ignored (0) without GPUs, as the FGD
    simulator reads it."""
    gpus = table.integer(number, fields, "num_gpu", minimum=0)
    milli = table.integer(number, fields, "gpu_milli", minimum=0)
    if gpus == 0:
        return 0, 0
    if gpus == 1 and not 0 < milli <= MILLI_PER_GPU:
        raise table.error(number, "gpu_milli", f"{milli} is not in 1..1000 for one GPU")
    if gpus > 1 and milli != MILLI_PER_GPU:
        raise table.error(
            number, "gpu_milli", f"{milli}: a pod of {gpus} GPUs must take whole GPUs (1000)"
        )
    return gpus, milli


@cache
def _gpu_spec_placement(gpu_spec: str) -> Placement:
    """One shared Placement per distinct ``gpu_spec`` (models sorted, duplicates removed)."""
    if not gpu_spec:
        return Placement()
    requirement = Requirement(GPU_MODEL_LABEL, "In", tuple(sorted(set(gpu_spec.split("|")))))
    return Placement(affinity_terms=(SelectorTerm(expressions=(requirement,)),))


# --- workload ----------------------------------------------------------------------------


def openb_workload(
    folder: str | os.PathLike[str],
    variant: str = "default",
    *,
    timed: bool = False,
    nodes: str = "yaml",
    pods: int | None = None,
) -> Workload:
    """The openb cluster and one pod list (see the module docstring).

    ``nodes``: ``yaml`` (default) or ``gpu`` (the 1213 GPU nodes), ``all`` (1523 nodes).
    ``pods``: keep only the first N pods of the list.
    """
    base = Path(folder)
    pod_path = pod_list_path(base, variant)
    if nodes not in OPENB_NODE_FILES:
        raise InputError(
            f"unknown node list {nodes!r} (valid: {', '.join(OPENB_NODE_FILES)})", field="nodes"
        )
    node_path = base / OPENB_NODE_FILES[nodes]
    listed = read_openb_pods(pod_path, durations=timed, require_times=timed)
    node_specs = openb_nodes(node_path)
    if pods is not None:
        listed = listed[:pods]
    items = node_items(node_specs, os.fspath(node_path))
    source = os.fspath(pod_path)
    untimed = Timing()
    for pod in listed:
        timing = untimed
        if timed and pod.created is not None:
            timing = Timing(submit_after=pod.created)
        items.append(Item(pod.spec, timing, source))
    return Workload(items=items)
