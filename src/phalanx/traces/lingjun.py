"""Alibaba Lingjun's Clos network (Crux, SIGCOMM'24) as a topology-labelled GPU cluster.

Design (data: ``lingjun-topology/README.md`` of the shared traces): ``topo.csv`` places each of
847 hosts under a ToR switch (``ASW``), an aggregation switch (``PSW``) and a core switch
(``DSW``, one for the whole file). phalanx maps it to nodes and one Kueue-style topology:

- a host → a node of ``gpus_per_node`` GPUs (default 8: the file has no GPU counts, so this
  is an assumption, with the assumed SKU of :mod:`phalanx.traces._gangs`);
- ``PSW`` → label :data:`BLOCK_LABEL` (3 blocks), ``ASW`` → label :data:`RACK_LABEL` (119
  racks). ToR ids repeat across PSWs (``S1`` is under P8, P10 and P12), and the rack label keeps
  the raw id on purpose: a Kueue domain is named by its value and every value above it, so
  ``P8/S1`` and ``P10/S1`` are different racks, as in the data;
- the topology levels, top first: block, rack, ``kubernetes.io/hostname`` (a
  :class:`~phalanx.api.topology.TopologySpec` named ``lingjun``). Volcano would call the
  ToR tier 1 and the PSW tier 2 (``tier:1`` / ``tier:2`` resolve to them);
- node names ``lingjun-PSW-ASW-K`` (lower case, ``K`` from 0 in the file's order of hosts
  within the ToR); the hashed IPs are not needed.

:func:`on_lingjun` moves any trace workload onto this cluster: its nodes are replaced, every
gang gets a topology constraint at one level (``preferred`` or ``required``), and gangs under
``min_gpus`` GPUs can be dropped (the topology figures use gangs of 8–128 GPUs).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, NodeSpec, PodSpec, TopologyConstraint
from phalanx.api.topology import HOSTNAME_LABEL, TopologySpec
from phalanx.api.workload import Item, Workload
from phalanx.traces._gangs import (
    CPU_PER_GPU,
    GPU,
    MEMORY_PER_GPU,
    MILLI_PER_GPU,
    gpu_node,
    node_items,
)
from phalanx.traces._table import read_table

TOPO_FILE = "topo.csv"
BLOCK_LABEL = "topology.phalanx.dev/block"
RACK_LABEL = "topology.phalanx.dev/rack"
LEVELS = {"block": BLOCK_LABEL, "rack": RACK_LABEL}
MODES = ("none", "preferred", "required")
_COLUMNS = ("ip", "DSW", "PSW", "ASW")


def lingjun_nodes(folder: str | os.PathLike[str], gpus_per_node: int = 8) -> list[NodeSpec]:
    """One node per host of ``topo.csv``, labelled with its block (PSW) and rack (ASW)."""
    table = read_table(Path(folder) / TOPO_FILE, _COLUMNS)
    racks: dict[tuple[str, str], int] = {}
    nodes: list[NodeSpec] = []
    for row, fields in enumerate(table.rows, start=1):
        psw, asw = table.text(fields, "PSW"), table.text(fields, "ASW")
        for column, value in (("PSW", psw), ("ASW", asw)):
            if not value:
                raise table.error(row, column, "is empty")
        index = racks.get((psw, asw), 0)
        racks[(psw, asw)] = index + 1
        nodes.append(
            gpu_node(
                f"lingjun-{psw}-{asw}-{index}".lower(),
                gpus_per_node,
                cpu=CPU_PER_GPU * gpus_per_node,
                memory=MEMORY_PER_GPU * gpus_per_node,
                labels={BLOCK_LABEL: psw, RACK_LABEL: asw},
            )
        )
    return nodes


def lingjun_topology() -> TopologySpec:
    return TopologySpec("lingjun", (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL), "Kueue Topology")


def on_lingjun(
    workload: Workload,
    folder: str | os.PathLike[str],
    *,
    mode: str = "none",
    level: str = "rack",
    min_gpus: int = 0,
    max_gpus: int | None = None,
) -> Workload:
    """``workload`` on the Lingjun cluster (see the module docstring)."""
    source = os.fspath(Path(folder) / TOPO_FILE)
    if mode not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}, not {mode!r}", field="topology")
    if level not in LEVELS:
        raise InputError(f"must be one of {', '.join(LEVELS)}, not {level!r}", field="level")
    constraint = None
    if mode == "preferred":
        constraint = TopologyConstraint(preferred=LEVELS[level])
    elif mode == "required":
        constraint = TopologyConstraint(required=LEVELS[level])
    gpus = _gang_gpus(workload)
    top = None if max_gpus is None else max_gpus * MILLI_PER_GPU
    small = {
        key
        for key, total in gpus.items()
        if total < min_gpus * MILLI_PER_GPU or (top is not None and total > top)
    }
    items = node_items(lingjun_nodes(folder), source)
    items.append(Item(lingjun_topology(), source=source))
    for item in workload.items:
        spec = item.spec
        if isinstance(spec, NodeSpec):
            continue
        if isinstance(spec, GangSpec):
            if spec.key in small:
                continue
            if constraint is not None:
                item = dataclasses.replace(
                    item, spec=dataclasses.replace(spec, topology=constraint)
                )
        elif isinstance(spec, PodSpec) and _dropped(spec, small, min_gpus):
            continue
        items.append(item)
    return Workload(items=items)


def _gang_gpus(workload: Workload) -> Counter[str]:
    totals: Counter[str] = Counter()
    for pod in workload.of(PodSpec):
        if pod.gang_key is not None:
            totals[pod.gang_key] += pod.requests.get(GPU, 0)
    return totals


def _dropped(pod: PodSpec, small: set[str], min_gpus: int) -> bool:
    """A member of a dropped gang, or a lone pod under ``min_gpus``."""
    if pod.gang_key is not None:
        return pod.gang_key in small
    return pod.requests.get(GPU, 0) < min_gpus * MILLI_PER_GPU
