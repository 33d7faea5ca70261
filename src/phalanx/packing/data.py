"""The openb inputs of the FGD experiment: where they are, and what a replay reads.

Nothing is parsed here: the node CSV and the pod lists are read by the one openb reader,
:mod:`phalanx.traces.openb` (``openb_nodes``, ``read_openb_rows``). The experiment takes:

- nodes: ``openb/csv/openb_node_list_gpu_node.csv``, the same 1213 nodes in the same order as
  the FGD simulator's input ``node_yaml/openb_node_list_gpu_node.yaml`` and much faster to
  read;
- pods: the rows of ``openb/csv/openb_pod_list_VARIANT.csv`` as written
  (:class:`~phalanx.traces.openb.OpenbRow`, here ``OpenbPod``): the arrival procedure draws
  rows, and FGD's task types compare the written ``gpu_spec``.

Trace root: ``$PHALANX_TRACES`` if set; else ``../shared/traces`` from the current directory;
else the first ``shared/traces`` found walking up from this package. Missing data is an
:class:`InputError` naming the path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from phalanx import traces
from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec
from phalanx.traces.openb import GPU_MODEL_LABEL, OPENB_VARIANTS, openb_nodes, read_openb_rows
from phalanx.traces.openb import OpenbRow as OpenbPod

__all__ = [
    "GPU",
    "GPU_MODEL_LABEL",
    "VARIANTS",
    "OpenbData",
    "OpenbPod",
    "check_variant",
    "data_file",
    "load",
    "trace_root",
]

ENV_VAR = "PHALANX_TRACES"
GPU = "nvidia.com/gpu"
MILLI = 1000
NODE_FILE = "openb/csv/openb_node_list_gpu_node.csv"
POD_FILE = "openb/csv/openb_pod_list_{}.csv"
PUBLISHED_FILE = "fgd-expected-results/csv/analysis_allo_discrete.csv"
PUBLISHED_FRAG_RATIO_FILE = "fgd-expected-results/csv/analysis_frag_ratio_discrete.csv"
PUBLISHED_FRAG_FILE = "fgd-expected-results/csv/analysis_frag_discrete.csv"

#: Every pod list of the openb trace.
VARIANTS = OPENB_VARIANTS


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
    nodes = openb_nodes(data_file(base, NODE_FILE))
    pods = read_openb_rows(data_file(base, POD_FILE.format(variant)))
    if not pods:
        raise InputError("no pods", source=str(base / POD_FILE.format(variant)))
    return OpenbData(variant, nodes, pods)
