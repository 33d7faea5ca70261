"""YuniKorn's gang scheduling: task groups declared in pod annotations.

An application (label ``applicationId``, or ``yunikorn.apache.org/app-id`` as label or
annotation) is one gang. Annotation ``yunikorn.apache.org/task-groups`` — a JSON list of
``{name, minMember, minResource, ...}`` — on the originator pod (usually on every pod) declares
its task groups: the gang needs ``minMember`` of each (roles), ``sum(minMember)`` in all. A pod
names its group with ``yunikorn.apache.org/task-group-name``. In
``yunikorn.apache.org/schedulingPolicyParameters`` (``key=value`` separated by spaces),
``placeholderTimeoutInSeconds`` becomes the gang's timeout and ``gangSchedulingStyle`` (``Soft``
or ``Hard``) is validated; phalanx has no placeholders, so a ``Soft`` gang does not fall back to
pod-by-pod placement after the timeout. ``minResource``, ``nodeSelector``, ``tolerations`` and
``affinity`` of a task group size YuniKorn's placeholders and are validated, not used (the real
pods' own requests are placed). Label ``queue`` / ``yunikorn.apache.org/queue`` is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from phalanx.api.specs import GangRef, GangSpec
from phalanx.k8s.declaration import Declaration
from phalanx.k8s.fields import as_resources, fail
from phalanx.k8s.meta import annotation_path

API = "yunikorn.apache.org"
TASK_GROUPS = f"{API}/task-groups"
TASK_GROUP_NAME = f"{API}/task-group-name"
PARAMETERS = f"{API}/schedulingPolicyParameters"
APP_ID_KEYS = ("applicationId", f"{API}/app-id")
QUEUE_KEYS = ("queue", f"{API}/queue")


def _app_id(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    for key in APP_ID_KEYS:
        value = labels.get(key) or annotations.get(key)
        if value:
            return value
    return ""


def _task_groups(text: str, path: str) -> dict[str, int]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        fail(path, f"not valid JSON: {exc}")
    if not isinstance(parsed, list) or not parsed:
        fail(path, 'must be a non-empty JSON list such as [{"name": "workers", "minMember": 4}]')
    groups: dict[str, int] = {}
    for i, group in enumerate(parsed):
        if not isinstance(group, dict):
            fail(path, f"task group {i} must be a JSON object")
        name = group.get("name")
        if not isinstance(name, str) or not name:
            fail(path, f"task group {i} needs a name")
        if name in groups:
            fail(path, f"task group {name!r} is declared twice")
        count = group.get("minMember")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            fail(path, f"minMember of task group {name!r} must be a whole number ≥ 0")
        as_resources(group.get("minResource"), f"{path}[{i}].minResource")
        groups[name] = count
    return groups


def _timeout(text: str, path: str) -> float | None:
    timeout = None
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep:
            fail(path, f"{part!r} is not key=value")
        if key == "placeholderTimeoutInSeconds":
            try:
                timeout = float(int(value))
            except ValueError:
                fail(path, f"placeholderTimeoutInSeconds must be whole seconds, not {value!r}")
        elif key == "gangSchedulingStyle" and value not in ("Soft", "Hard"):
            fail(path, f"gangSchedulingStyle must be Soft or Hard, not {value!r}")
    return timeout


def declaration(
    labels: Mapping[str, str], annotations: Mapping[str, str], namespace: str, prefix: str = ""
) -> Declaration | None:
    queue = next((labels[k] for k in QUEUE_KEYS if labels.get(k)), "")
    group = annotations.get(TASK_GROUP_NAME, "")
    declared = annotations.get(TASK_GROUPS)
    if not group and declared is None:
        return Declaration("label queue", "metadata.labels", queue=queue) if queue else None
    app = _app_id(labels, annotations)
    key = TASK_GROUP_NAME if group else TASK_GROUPS
    path = annotation_path(key, prefix)
    if not app:
        fail(path, "needs the application's label applicationId (or yunikorn.apache.org/app-id)")
    gang = None
    if declared is not None:
        groups = _task_groups(declared, annotation_path(TASK_GROUPS, prefix))
        if group and group not in groups:
            fail(annotation_path(TASK_GROUP_NAME, prefix), f"task group {group!r} is not declared")
        params = annotations.get(PARAMETERS, "")
        timeout = _timeout(params, annotation_path(PARAMETERS, prefix))
        gang = GangSpec(
            namespace,
            app,
            max(1, sum(groups.values())),
            API,
            role_minimums={g: n for g, n in groups.items() if n},
            queue=queue or "default",
            timeout_seconds=timeout,
        )
    return Declaration(
        f"application {app} (annotation {key})", path, GangRef(app, API), gang, group, queue
    )
