"""Kueue's pod-level keys: plain pods grouped with ``kueue.x-k8s.io/pod-group-name``.

Label ``kueue.x-k8s.io/pod-group-name: NAME`` plus annotation
``kueue.x-k8s.io/pod-group-total-count: "N"`` make the pods of ``NAME`` one group that Kueue
admits only as a whole: phalanx reads it as a gang of N members. Label
``kueue.x-k8s.io/queue-name`` (a LocalQueue) is recorded as the gang's (or the lone pod's)
queue. Kueue holds pods with the scheduling gate ``kueue.x-k8s.io/admission`` until it admits
them; phalanx honours gates as written (see :mod:`phalanx.k8s.pods`). ``kueue.x-k8s.io/
pod-group-fast-admission`` and ``retriable-in-group`` are not read.
"""

from __future__ import annotations

from collections.abc import Mapping

from phalanx.api.specs import GangRef, GangSpec
from phalanx.k8s.declaration import Declaration
from phalanx.k8s.fields import child, fail
from phalanx.k8s.meta import annotation_path

API = "kueue.x-k8s.io"
GROUP_NAME = f"{API}/pod-group-name"
TOTAL_COUNT = f"{API}/pod-group-total-count"
QUEUE_NAME = f"{API}/queue-name"


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
