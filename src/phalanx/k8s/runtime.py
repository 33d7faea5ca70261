"""What an object says about how long it will run and when it must be done.

Runtime hints, in the order the estimator trusts them (first wins, see
:mod:`phalanx.plugins.estimates`):

- ``phalanx.dev/runtime-estimate`` (annotation, a duration such as ``2h``): the author's estimate;
- ``spec.activeDeadlineSeconds`` of a pod (or of a Job, copied to its pods): an upper bound, the
  kubelet kills the pod past it;
- ``kueue.x-k8s.io/max-exec-time-seconds`` (label, as Kueue reads it, or annotation): Kueue's
  maximum execution time, also an upper bound.

``phalanx.dev/duration`` is *not* a hint: it is the simulated truth and the scheduler never
reads it. ``phalanx.dev/deadline`` is a duration after submission (``6h``) or an absolute
RFC 3339 time (``2026-11-24T06:00:00Z``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TypedDict

from phalanx.api.specs import Deadline, RuntimeHints
from phalanx.k8s.fields import Obj, check_int, child, fail
from phalanx.k8s.meta import (
    DURATION,
    annotation_path,
    annotations_of,
    duration_annotation,
    labels_of,
    max_member_annotation,
)

RUNTIME_ESTIMATE = "phalanx.dev/runtime-estimate"
MAX_EXEC_TIME = "kueue.x-k8s.io/max-exec-time-seconds"
DEADLINE = "phalanx.dev/deadline"

#: Source names, as the estimator reports them.
ANNOTATION = "runtime-estimate"
ACTIVE_DEADLINE = "activeDeadlineSeconds"
KUEUE = "max-exec-time"


class GroupAnnotations(TypedDict, total=False):
    """phalanx's own annotations on a gang object, as :class:`~phalanx.api.specs.GangSpec`
    fields."""

    duration: float | None
    runtime_hints: RuntimeHints
    deadline: Deadline | None
    max_member: int | None


def group_annotations(obj: Obj, min_member: int | None = None) -> GroupAnnotations:
    """What a PodGroup of any API (or a Workload, for each of its gangs) says in phalanx's own
    annotations: the simulated duration, the runtime hints and the deadline, and with
    ``min_member`` the elastic maximum (``phalanx.dev/max-member``)."""
    annotations = annotations_of(obj)
    fields = GroupAnnotations(
        duration=duration_annotation(annotations, DURATION),
        runtime_hints=runtime_hints(annotations, labels_of(obj)),
        deadline=deadline_of(annotations),
    )
    if min_member is not None:
        fields["max_member"] = max_member_annotation(annotations, min_member)
    return fields


def runtime_hints(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    spec: Obj | None = None,
    path: str = "spec",
) -> RuntimeHints:
    """Every runtime hint the object carries, best first."""
    hints: list[tuple[str, float]] = []
    estimate = duration_annotation(annotations, RUNTIME_ESTIMATE)
    if estimate is not None:
        hints.append((ANNOTATION, estimate))
    if spec is not None and spec.get("activeDeadlineSeconds") is not None:
        field = child(path, "activeDeadlineSeconds")
        seconds = check_int(spec["activeDeadlineSeconds"], field, minimum=1, maximum=2**53)
        hints.append((ACTIVE_DEADLINE, float(seconds)))
    text = labels.get(MAX_EXEC_TIME, annotations.get(MAX_EXEC_TIME))
    if text is not None:
        where = f"metadata.labels[{MAX_EXEC_TIME}]"
        if not text.isdigit() or int(text) < 1:
            fail(where, f"{text!r} is not a positive number of seconds")
        hints.append((KUEUE, float(text)))
    return tuple(hints)


def merged(first: RuntimeHints, second: RuntimeHints) -> RuntimeHints:
    """``first``'s hints, then those of ``second`` from sources ``first`` lacks."""
    have = {source for source, _ in first}
    return first + tuple(hint for hint in second if hint[0] not in have)


def deadline_of(annotations: Mapping[str, str]) -> Deadline | None:
    text = annotations.get(DEADLINE)
    if text is None:
        return None
    if "T" in text:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            fail(annotation_path(DEADLINE), f"{text!r} is neither a duration nor an RFC 3339 time")
        if moment.tzinfo is None:
            fail(annotation_path(DEADLINE), f"{text!r} has no time zone (add Z or +00:00)")
        return Deadline(at=moment.timestamp())
    return Deadline(after=duration_annotation(annotations, DEADLINE))
