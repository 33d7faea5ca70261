"""Tiresias' 60-job sample (NSDI'19 simulator): a small rigid-gang smoke test.

Design (``tiresias-60job/README.md`` of the shared traces): ``60_job.csv`` columns ``job_id``,
``num_gpu`` (1, 2, 4 or 8), ``submit_time`` (s), ``duration`` (s, on a dedicated allocation),
and the unused ``iterations``, ``model_name``, ``interval``. Job ``J`` becomes gang ``job-J``
(namespace ``default``) submitted at ``submit_time`` with its ``duration``, split over nodes of
``gpus_per_node`` GPUs like every rigid gang (:mod:`phalanx.traces._gangs`); pods carry the label
``phalanx.dev/model`` when the file names the model.

The default cluster is the README's contention setup: 16 GPUs as 4 nodes × 4 GPUs (on the
upstream 128-GPU cluster no job ever queues), so an 8-GPU job is a gang of two 4-GPU pods. Nodes
have the assumed SKU of :mod:`phalanx.traces._gangs`, pods request CPU and memory per GPU.
"""

from __future__ import annotations

import os
from pathlib import Path

from phalanx.api.workload import Item, Workload
from phalanx.traces._gangs import GangMaker, homogeneous_nodes, node_items
from phalanx.traces._table import read_table

TIRESIAS_FILE = "60_job.csv"
MODEL_LABEL = "phalanx.dev/model"

_REQUIRED = ("job_id", "num_gpu", "submit_time", "duration")
_OPTIONAL = ("iterations", "model_name", "interval")


def tiresias_workload(
    folder: str | os.PathLike[str], *, nodes: int = 4, gpus_per_node: int = 4
) -> Workload:
    """The 60 jobs as gangs on ``nodes`` × ``gpus_per_node`` GPUs (see the module docstring)."""
    path = Path(folder) / TIRESIAS_FILE
    source = os.fspath(path)
    table = read_table(path, _REQUIRED, _OPTIONAL)
    items: list[Item] = node_items(
        homogeneous_nodes("tiresias-node", nodes, gpus_per_node), "tiresias:cluster"
    )
    maker = GangMaker(gpus_per_node, source)
    seen: set[int] = set()
    for number, fields in enumerate(table.rows, start=1):
        job_id = table.integer(number, fields, "job_id", minimum=0)
        if job_id in seen:
            raise table.error(number, "job_id", f"duplicate job {job_id}")
        seen.add(job_id)
        gpus = table.integer(number, fields, "num_gpu", minimum=1)
        submit = table.number(number, fields, "submit_time", minimum=0)
        duration = table.number(number, fields, "duration", minimum=0)
        for column in ("iterations", "interval"):
            if table.text(fields, column):
                table.integer(number, fields, column, minimum=0)
        model = table.text(fields, "model_name")
        labels = {MODEL_LABEL: model} if model else None
        maker.add(items, "default", f"job-{job_id}", gpus, duration, submit, labels)
    return Workload(items=items)
