"""Philly (Microsoft, 2017): 82,247 rigid multi-GPU jobs with real durations, as gangs.

Design (columns and units: ``philly/README.md`` of the shared traces):

- ``philly.csv`` columns ``timestamp`` (local-time ``YYYY-MM-DD HH:MM:SS``, read as naive time:
  differences are taken as written), ``duration`` (s), ``num_gpus``, ``cluster`` (the virtual
  cluster, VC) and ``gpu_time`` (optional, unused). Rows are not sorted by time; jobs are sorted
  by ``(timestamp, row)`` before anything else.
- A job of ``G`` GPUs is a gang on 8-GPU nodes: ``G // 8`` pods of 8 GPUs plus one pod of
  ``G % 8`` GPUs when that is not zero (20 → 8, 8, 4), all required (``min_member`` = pods).
  Gang ``job-RRRRR`` (``R`` = the row number, so names are stable under filtering) in namespace
  = the VC id; pods ``job-RRRRR-0``…; gang and pods submitted at the job's arrival with the
  job's duration. See :mod:`phalanx.traces._gangs` for the requests.
- Nodes: 8 GPUs each with the assumed SKU of :mod:`phalanx.traces._gangs` (48 vCPU, 512 GiB;
  the trace has no CPU or memory), and pods request 6 vCPU and 64 GiB per GPU. Node counts come
  from ``philly_vc_nodes_heliosartifact.csv`` (``vc``, ``node num``; 11 VCs, 352 nodes).
- ``queues``: every VC is a queue (its jobs' namespace is bound to it) deserving GPUs in
  proportion to its node count.
- Options: ``vc`` keeps one VC on that VC's node count; ``nodes`` overrides the node count;
  ``jobs`` keeps the first N jobs by submit time (after the VC filter); ``scale`` multiplies
  arrival times (``scale=0.5`` halves the gaps: twice the offered load). Arrival 0 is the first
  kept job. Without ``vc`` the whole file runs on the sum of all VC nodes (nodes labelled
  ``phalanx.dev/vc`` with the VC they come from, though every job may use every node).
- Jobs wider than the whole cluster (possible only with a small ``nodes``) could never run and
  are dropped, since the simulator would reject the workload.
- Speed: the whole file loads in about a second: one pass of :mod:`csv`, a whole row converted
  inside one ``try`` (the field parsers of :mod:`phalanx.traces._table` only run to name a bad
  field), cached per-size requests, one Timing per job, the garbage collector paused.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec
from phalanx.api.workload import Workload
from phalanx.traces._gangs import GangMaker, homogeneous_nodes, node_items, paused_gc
from phalanx.traces._table import Table, read_table
from phalanx.traces.tenants import namespace_queues

PHILLY_FILE = "philly.csv"
VC_NODES_FILE = "philly_vc_nodes_heliosartifact.csv"
GPUS_PER_NODE = 8
VC_LABEL = "phalanx.dev/vc"
NODE_PREFIX = "philly-node"

_REQUIRED = ("timestamp", "duration", "num_gpus", "cluster")
_OPTIONAL = ("gpu_time",)
_VC_COLUMNS = ("vc", "node num")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_EPOCH = datetime(1970, 1, 1)
_INF = float("inf")


class PhillyJob(NamedTuple):
    row: int  # data row number in philly.csv, from 1
    submit: float  # seconds since 1970 of the naive timestamp
    duration: float
    gpus: int
    vc: str


def philly_jobs(path: str | os.PathLike[str]) -> list[PhillyJob]:
    """Every job of ``philly.csv``, sorted by submit time (then row)."""
    table = read_table(path, _REQUIRED, _OPTIONAL)
    c = table.columns
    ts_i, dur_i, gpu_i, vc_i = (c[k] for k in _REQUIRED)
    fromiso = datetime.fromisoformat
    epoch = _EPOCH
    jobs: list[PhillyJob] = []
    valid_vcs: set[str] = set()
    append = jobs.append
    for number, fields in enumerate(table.rows, start=1):
        try:
            submit = (fromiso(fields[ts_i]) - epoch).total_seconds()
            duration = float(fields[dur_i])
            gpus = int(fields[gpu_i])
        except (ValueError, TypeError):  # TypeError: a timestamp with a time zone
            raise _bad_row(table, number, fields) from None
        if not (0 <= duration < _INF) or gpus < 1:
            raise _bad_row(table, number, fields)
        vc = fields[vc_i]
        if vc not in valid_vcs:
            _check_vc(table, number, vc)
            valid_vcs.add(vc)
        append(PhillyJob(number, submit, duration, gpus, vc))
    jobs.sort(key=_by_submit)
    return jobs


def _by_submit(job: PhillyJob) -> tuple[float, int]:
    return job.submit, job.row


def _bad_row(table: Table, number: int, fields: list[str]) -> InputError:
    """The error of the first bad field of a row that failed the fast conversion."""
    text = table.text(fields, "timestamp")
    try:
        parsed: datetime | None = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is not None:
        return table.error(
            number, "timestamp", f"{text!r} is not a time such as 2017-10-09 07:01:55"
        )
    try:
        table.number(number, fields, "duration", minimum=0)
        table.integer(number, fields, "num_gpus", minimum=1)
    except InputError as exc:
        return exc
    return InputError("malformed row", source=table.source, obj=f"row {number}")


def _check_vc(table: Table, number: int, vc: str) -> None:
    if not _NAMESPACE.fullmatch(vc):
        raise table.error(
            number, "cluster", f"{vc!r} is not a VC id usable as a namespace (e.g. 6214e9)"
        )


def philly_vc_nodes(path: str | os.PathLike[str]) -> dict[str, int]:
    """Nodes per VC (``vc``, ``node num``) in file order."""
    table = read_table(path, _VC_COLUMNS)
    counts: dict[str, int] = {}
    for number, fields in enumerate(table.rows, start=1):
        vc = table.text(fields, "vc")
        if not vc:
            raise table.error(number, "vc", "empty VC id")
        if vc in counts:
            raise table.error(number, "vc", f"duplicate VC {vc!r}")
        counts[vc] = table.integer(number, fields, "node num", minimum=1)
    return counts


def philly_workload(
    folder: str | os.PathLike[str],
    *,
    vc: str | None = None,
    nodes: int | None = None,
    jobs: int | None = None,
    scale: float = 1.0,
    queues: bool = False,
) -> Workload:
    """Philly jobs as gangs on 8-GPU nodes (see the module docstring)."""
    base = Path(folder)
    jobs_path = base / PHILLY_FILE
    vc_path = base / VC_NODES_FILE
    with paused_gc():
        all_jobs = philly_jobs(jobs_path)
    vc_nodes = philly_vc_nodes(vc_path)
    source = os.fspath(jobs_path)
    selected = all_jobs
    if vc is not None:
        selected = [job for job in all_jobs if job.vc == vc]
        if not selected:
            known = sorted({job.vc for job in all_jobs})
            raise InputError(
                f"no job of VC {vc!r} in {PHILLY_FILE} (VCs: {', '.join(known)})",
                source=source,
                field="vc",
            )
    node_specs = _nodes(vc_nodes, vc, nodes, os.fspath(vc_path))
    if jobs is not None:
        selected = selected[:jobs]
    capacity = len(node_specs) * GPUS_PER_NODE
    items = node_items(node_specs, os.fspath(vc_path))
    if queues:
        items += namespace_queues(_vc_deserved(vc_nodes, vc, capacity), os.fspath(vc_path))
    maker = GangMaker(GPUS_PER_NODE, source)
    start = selected[0].submit if selected else 0.0
    add = maker.add
    with paused_gc():
        for job in selected:
            if job.gpus > capacity:
                continue
            submit = (job.submit - start) * scale
            add(items, job.vc, f"job-{job.row:05d}", job.gpus, job.duration, submit)
    return Workload(items=items)


def _vc_deserved(vc_nodes: dict[str, int], vc: str | None, capacity: int) -> dict[str, int]:
    """milli-GPU per VC in proportion to its node count (of the cluster simulated)."""
    counts = {vc: 1} if vc is not None else vc_nodes
    total = sum(counts.values())
    return {name: capacity * 1000 * count // total for name, count in counts.items()}


def _nodes(
    vc_nodes: dict[str, int], vc: str | None, nodes: int | None, source: str
) -> list[NodeSpec]:
    if nodes is not None:
        labels = None if vc is None else {VC_LABEL: vc}
        return homogeneous_nodes(NODE_PREFIX, nodes, GPUS_PER_NODE, labels=labels)
    if vc is not None:
        if vc not in vc_nodes:
            raise InputError(
                f"VC {vc!r} has no node count (VCs with one: {', '.join(vc_nodes)}); give nodes=N",
                source=source,
                field="vc",
            )
        return homogeneous_nodes(NODE_PREFIX, vc_nodes[vc], GPUS_PER_NODE, labels={VC_LABEL: vc})
    specs: list[NodeSpec] = []
    for name, count in vc_nodes.items():
        specs += homogeneous_nodes(
            NODE_PREFIX, count, GPUS_PER_NODE, start=len(specs), labels={VC_LABEL: name}
        )
    return specs
