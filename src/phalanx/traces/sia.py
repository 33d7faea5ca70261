"""Sia / Pollux workloads (SOSP'23 artifact) as rigid gangs on Sia's 64-GPU cluster.

Design (columns and caveats: ``sia-workloads/README.md`` of the shared traces):

- Files ``SET/workload-K.csv`` with columns ``name``, ``time`` (s), ``application``,
  ``num_replicas``, ``batch_size`` (optional, unused). Sets: ``philly``, ``saturn``,
  ``newtrace`` and the load sweep ``rate_10`` … ``rate_50`` (``scale/rate_R``).
- A job is a gang named after its ``name`` (namespace ``default``) of ``num_replicas`` pods of
  **1 GPU each** (``nvidia.com/gpu: 1000``, ``pods: 1``, no CPU or memory request), all required,
  submitted at ``time``; pods carry the label ``phalanx.dev/application``. Sia and Pollux resize
  jobs during a run; here the starting size is the fixed gang size.
- **Durations** (the CSVs have none; Sia derives them from throughput profiles not shipped here).
  Sia's generator picked the application from the original Philly job's GPU-time bucket:
  cifar10 < 1 GPU-h ≤ deepspeech2, bert < 10 ≤ yolov3 < 100 ≤ imagenet < 1000 (its filter). We
  invert that: a job's GPU-time is drawn from a lognormal fitted to the ``philly.csv`` jobs of
  its bucket (Sia's filter applied: ``duration ≥ 60 s``, ``gpu_time < 1000 GPU-h``), clipped to
  the bucket, and its duration is GPU-time / ``num_replicas``, rounded to whole seconds (≥ 1 s).
  Draws use ``numpy.random.default_rng(seed)`` in file order: deterministic for a seed. Fits of
  ln(GPU-seconds), from the shared traces folder::

      python - <<'EOF'
      import csv, numpy as np
      rows = list(csv.DictReader(open("philly/philly.csv")))
      d = np.array([float(r["duration"]) for r in rows])
      t = np.array([float(r["gpu_time"]) for r in rows])
      keep = (d >= 60) & (t < 1000 * 3600)
      for lo, hi in ((0, 1), (1, 10), (10, 100), (100, 1000)):
          x = t[keep & (t >= lo * 3600) & (t < hi * 3600)]
          print(lo, hi, x.size, np.log(x).mean(), np.log(x).std(), np.median(x))
      EOF

      bucket (GPU-h)   applications        jobs    mu       sigma   median GPU-s
      [1/60, 1)        cifar10 (ncf)       55,508  6.2977   1.3574     782
      [1, 10)          deepspeech2, bert   13,807  8.9552   0.5875   6,118
      [10, 100)        yolov3               3,575  11.4775  0.6413  88,776
      [100, 1000)      imagenet             1,538  13.7438  0.6407 852,992

  The last column is the data's median; the model's is ``exp(mu)`` (cifar10: 543 GPU-s): the
  lognormal is a smooth stand-in, not an exact fit. (``ncf`` is in Sia's profiled set but in no
  workload; it gets cifar10's bucket.)
- **Cluster**: Sia's simulator default, 64 GPUs on 11 nodes: 6 × ``aws`` (4 × T4; g4dn.12xlarge:
  48 vCPU, 192 GiB), 2 × ``dgx-ext`` (8 × A100; DGX A100: 256 vCPU, 1 TiB), 3 × ``rtx``
  (8 × RTX 2080 Ti; 48 vCPU and 384 GiB assumed). Labels ``nvidia.com/gpu.product`` (GPU model)
  and ``phalanx.dev/node-type`` (Sia's name). Since pods request only GPUs, the CPU and memory
  figures never bind.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec
from phalanx.api.workload import Item, Workload
from phalanx.traces._gangs import GIB, GPU_PRODUCT_LABEL, GangMaker, gpu_node, node_items
from phalanx.traces._table import read_table

#: Set name → folder under ``sia-workloads``.
SIA_SETS = {
    "philly": "philly",
    "saturn": "saturn",
    "newtrace": "newtrace",
    **{f"rate_{r}": f"scale/rate_{r}" for r in (10, 20, 30, 40, 50)},
}
APPLICATION_LABEL = "phalanx.dev/application"
NODE_TYPE_LABEL = "phalanx.dev/node-type"


class GpuTimeModel(NamedTuple):
    """ln(GPU-seconds) ~ Normal(mu, sigma), clipped to [low, high) GPU-seconds."""

    mu: float
    sigma: float
    low: float
    high: float


_CIFAR = GpuTimeModel(6.2977, 1.3574, 60.0, 3600.0)
_SPEECH = GpuTimeModel(8.9552, 0.5875, 3600.0, 36_000.0)
#: Per application: the GPU-time model of its Philly bucket (see the module docstring).
GPU_TIME_MODELS: dict[str, GpuTimeModel] = {
    "cifar10": _CIFAR,
    "ncf": _CIFAR,
    "deepspeech2": _SPEECH,
    "bert": _SPEECH,
    "yolov3": GpuTimeModel(11.4775, 0.6413, 36_000.0, 360_000.0),
    "imagenet": GpuTimeModel(13.7438, 0.6407, 360_000.0, 3_600_000.0),
}

#: Sia's default cluster: (node type, count, GPUs, GPU model, vCPU, GiB).
SIA_CLUSTER = (
    ("aws", 6, 4, "T4", 48, 192),
    ("dgx-ext", 2, 8, "A100", 256, 1024),
    ("rtx", 3, 8, "RTX-2080-Ti", 48, 384),
)

_REQUIRED = ("name", "time", "application", "num_replicas")
_OPTIONAL = ("batch_size",)


class SiaJob(NamedTuple):
    name: str
    time: float
    application: str
    replicas: int


def sia_path(folder: str | os.PathLike[str], workload_set: str, workload: int) -> Path:
    """``FOLDER/SET/workload-K.csv``; an unknown set is an InputError."""
    if workload_set not in SIA_SETS:
        raise InputError(
            f"unknown sia set {workload_set!r} (valid: {', '.join(SIA_SETS)})", field="set"
        )
    return Path(folder) / SIA_SETS[workload_set] / f"workload-{workload}.csv"


def sia_nodes() -> list[NodeSpec]:
    """Sia's simulator cluster (see the module docstring)."""
    nodes: list[NodeSpec] = []
    for kind, count, gpus, model, vcpu, gib in SIA_CLUSTER:
        labels = {GPU_PRODUCT_LABEL: model, NODE_TYPE_LABEL: kind}
        nodes += [
            gpu_node(f"{kind}-{i}", gpus, cpu=vcpu * 1000, memory=gib * GIB, labels=labels)
            for i in range(count)
        ]
    return nodes


def sia_jobs(path: str | os.PathLike[str]) -> list[SiaJob]:
    """The jobs of one workload file, in file order."""
    table = read_table(path, _REQUIRED, _OPTIONAL)
    jobs: list[SiaJob] = []
    seen: set[str] = set()
    for number, fields in enumerate(table.rows, start=1):
        name = table.text(fields, "name")
        if not name:
            raise table.error(number, "name", "empty job name")
        if name in seen:
            raise table.error(number, "name", f"duplicate job {name!r}")
        seen.add(name)
        time = table.number(number, fields, "time", minimum=0)
        application = table.text(fields, "application")
        if application not in GPU_TIME_MODELS:
            raise table.error(
                number,
                "application",
                f"unknown application {application!r} (known: {', '.join(GPU_TIME_MODELS)})",
            )
        replicas = table.integer(number, fields, "num_replicas", minimum=1)
        if table.has("batch_size"):
            table.integer(number, fields, "batch_size", minimum=1)
        jobs.append(SiaJob(name, time, application, replicas))
    return jobs


def sia_durations(jobs: list[SiaJob], seed: int) -> list[float]:
    """Seconds of each job under the GPU-time model, one normal draw per job in order."""
    normals = np.random.default_rng(seed).standard_normal(len(jobs))
    durations: list[float] = []
    for job, z in zip(jobs, normals.tolist(), strict=True):
        model = GPU_TIME_MODELS[job.application]
        gpu_seconds = min(max(math.exp(model.mu + model.sigma * z), model.low), model.high)
        durations.append(float(max(1, round(gpu_seconds / job.replicas))))
    return durations


def sia_workload(
    folder: str | os.PathLike[str],
    workload_set: str = "saturn",
    *,
    workload: int = 1,
    seed: int = 0,
    jobs: int | None = None,
) -> Workload:
    """One Sia workload file on Sia's cluster (see the module docstring)."""
    path = sia_path(folder, workload_set, workload)
    source = os.fspath(path)
    listed = sia_jobs(path)
    durations = sia_durations(listed, seed)
    if jobs is not None:
        listed = listed[:jobs]
    items: list[Item] = node_items(sia_nodes(), "sia:cluster")
    maker = GangMaker(1, source, cpu_per_gpu=0, memory_per_gpu=0)
    for job, duration in zip(listed, durations, strict=False):
        labels = {APPLICATION_LABEL: job.application}
        maker.add(items, "default", job.name, job.replicas, duration, job.time, labels)
    return Workload(items=items)
