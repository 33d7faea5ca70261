"""Kubernetes Events about pods and gangs, in the form kube-scheduler writes them.

Design: the builders return plain dicts so a caller can batch, log or drop them; :func:`create`
posts one. :func:`event` builds the current ``events.k8s.io/v1`` form (``regarding``, ``note``,
``action``, ``reportingController``/``reportingInstance``, ``eventTime`` in microseconds);
:func:`core_event` builds the legacy ``v1`` form (``involvedObject``, ``message``, ``source``)
for servers or tools that only read core events (a real server serves both views of one store).
Names follow client-go: ``<object name>.<unix nanoseconds in hex>``. No aggregation or series
here: a caller that emits the same event repeatedly should rate-limit it.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from phalanx.live.client import KubeClient, Obj
from phalanx.live.resources import EVENTS, EVENTS_V1
from phalanx.live.writes import micro_time, rfc3339

NORMAL = "Normal"
WARNING = "Warning"
#: kube-scheduler's reasons.
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"


def reference(obj: Obj) -> Obj:
    """An ``ObjectReference`` to ``obj`` (apiVersion, kind, namespace, name, uid, rv)."""
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
    }
    for source, target in (
        ("namespace", "namespace"),
        ("uid", "uid"),
        ("resourceVersion", "resourceVersion"),
    ):
        if meta.get(source):
            ref[target] = meta[source]
    return ref


def _name_and_namespace(regarding: Obj) -> tuple[str, str]:
    ref = reference(regarding)
    return f"{ref['name']}.{time.time_ns():x}", ref.get("namespace") or "default"


def event(
    regarding: Obj,
    *,
    reason: str,
    note: str,
    type_: str = NORMAL,
    action: str = "Scheduling",
    controller: str = "phalanx",
    instance: str = "phalanx",
    related: Obj | None = None,
    now: datetime | None = None,
) -> Obj:
    """An ``events.k8s.io/v1`` Event about ``regarding`` (a pod, PodGroup, node...)."""
    name, namespace = _name_and_namespace(regarding)
    body: Obj = {
        "apiVersion": EVENTS_V1.api_version,
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "note": note[:1024],  # the API's limit on note
        "type": type_,
        "regarding": reference(regarding),
    }
    if related is not None:
        body["related"] = reference(related)
    return body


def core_event(
    regarding: Obj,
    *,
    reason: str,
    message: str,
    type_: str = NORMAL,
    component: str = "phalanx",
    instance: str = "phalanx",
    now: datetime | None = None,
) -> Obj:
    """A legacy ``v1`` Event about ``regarding``."""
    name, namespace = _name_and_namespace(regarding)
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": reference(regarding),
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": instance,
    }


async def create(client: KubeClient, body: Obj) -> Obj:
    """POST an Event built by :func:`event` or :func:`core_event`."""
    resource = EVENTS if body.get("apiVersion") == "v1" else EVENTS_V1
    return await client.create(resource, body)
