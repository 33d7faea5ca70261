"""Kueue's pod-level keys: plain pods grouped with ``kueue.x-k8s.io/pod-group-name``.

Label ``kueue.x-k8s.io/pod-group-name: NAME`` plus annotation
``kueue.x-k8s.io/pod-group-total-count: "N"`` make the pods of ``NAME`` one group that Kueue
admits only as a whole: phalanx reads it as a gang of N members. Label
``kueue.x-k8s.io/queue-name`` (a LocalQueue) is recorded as the gang's (or the lone pod's)
queue. Kueue holds pods with the scheduling gate ``kueue.x-k8s.io/admission`` until it admits
them; phalanx honours gates as written (see :mod:`phalanx.k8s.pods`). ``kueue.x-k8s.io/
pod-group-fast-admission`` and ``retriable-in-group`` are not read.

A controller object labelled ``kueue.x-k8s.io/queue-name`` (a ``batch/v1`` Job, a JobSet) is
what Kueue turns into one Workload and admits whole: its pod sets are admitted together or
not at all, and ``spec.suspend: true`` is how the Job waits for that admission. phalanx, in
Kueue's place, reads such an object as one gang in that queue (:func:`job_gang`), named after
the object: a Job's pod set counts ``parallelism`` pods (fewer when ``completions`` is
smaller), at least ``kueue.x-k8s.io/job-min-parallelism`` of them (Kueue's partial
admission) or else all. A template that declares a gang of its own keeps it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from phalanx.api.specs import GangRef, GangSpec, PodSpec
from phalanx.k8s.declaration import Declaration
from phalanx.k8s.fields import child, fail
from phalanx.k8s.meta import annotation_path
from phalanx.k8s.runtime import deadline_of

API = "kueue.x-k8s.io"
GROUP_NAME = f"{API}/pod-group-name"
TOTAL_COUNT = f"{API}/pod-group-total-count"
QUEUE_NAME = f"{API}/queue-name"
MIN_PARALLELISM = f"{API}/job-min-parallelism"


def declaration(
    labels: Mapping[str, str], annotations: Mapping[str, str], namespace: str, prefix: str = ""
) -> Declaration | None:
    queue = labels.get(QUEUE_NAME, "")
    name = labels.get(GROUP_NAME)
    label_path = child(f"{prefix}metadata.labels", GROUP_NAME)
    if not name:
        if queue:
            return Declaration(f"label {QUEUE_NAME}={queue}", label_path, queue=queue)
        return None
    text = annotations.get(TOTAL_COUNT)
    path = annotation_path(TOTAL_COUNT, prefix)
    if text is None:
        fail(path, f"is required with the label {GROUP_NAME}")
    try:
        total = int(text)
    except ValueError:
        fail(path, f"must be a whole number, not {text!r}")
    if total < 1:
        fail(path, f"must be at least 1, not {total}")
    gang = GangSpec(namespace, name, total, API, queue=queue or "default")
    return Declaration(
        f"label {GROUP_NAME}={name}", label_path, GangRef(name, API), gang, "", queue
    )


def job_gang(
    template: PodSpec,
    annotations: Mapping[str, str],
    *,
    name: str,
    count: int,
    roles: Mapping[str, int] | None = None,
    role: str = "",
    kind: str = "Job",
) -> PodSpec:
    """``template`` as a member of the gang Kueue admits whole for the object ``name`` in
    ``template.queue`` (see the module's docstring): at least ``count`` pods, or the object's
    ``job-min-parallelism`` (a Job's only), each role of ``roles`` at least its count (the
    template's pods are of ``role``). A template with a gang of its own is returned as it is."""
    if template.gang is not None or template.workload_ref is not None:
        return template
    minimum = count if roles is not None else _min_parallelism(annotations, count)
    gang = GangSpec(
        template.namespace,
        name,
        minimum,
        API,
        role_minimums=dict(roles or {}),
        queue=template.queue or "default",
        deadline=deadline_of(annotations),
        origin=(kind, _origin(minimum, count, roles)),
    )
    return dataclasses.replace(
        template, gang=GangRef(name, API), declared_gang=gang, role=role or template.role
    )


def _origin(minimum: int, count: int, roles: Mapping[str, int] | None) -> str:
    if minimum != count:
        return annotation_path(MIN_PARALLELISM)
    return "spec.replicatedJobs" if roles is not None else "spec.parallelism"


def _min_parallelism(annotations: Mapping[str, str], count: int) -> int:
    text = annotations.get(MIN_PARALLELISM)
    if text is None:
        return count
    path = annotation_path(MIN_PARALLELISM)
    if not text.isdigit() or not 1 <= int(text) <= count:
        fail(path, f"must be a whole number from 1 to the Job's {count} pods, not {text!r}")
    return int(text)
