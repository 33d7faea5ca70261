"""Queueing hints: which informer events can make a waiting gang placeable, and so wake the loop.

Design: like kube-scheduler's queueing hints, a cheap yes/no per event, so that the loop runs a
cycle when something changed that matters and not when the cluster merely echoes our own
writes. Whatever the hints skip is still seen by the next periodic cycle (``period``): a wrong
"no" costs latency, never correctness.

- Pods (:func:`pod_event_wakes`): a deleted or finished pod frees room; a pending pod of ours
  may complete a gang. A bound pod that is added or changes without finishing frees nothing (a
  terminating pod keeps its resources until it is deleted) — most of these are our own binds
  coming back — and another scheduler's pending pod holds nothing.
- Gang objects (PodGroups of every API, Workloads) and the queue objects of every API but
  Volcano's: a status-only update, i.e. the same ``metadata.generation`` (e.g. our own status
  writes, or a queue controller's), cannot change a placement.
- Nodes, Volcano Queues and PriorityClasses always wake: what matters about nodes and queues
  is in their status (allocatable, taints via spec, queue state), and they change rarely.
"""

from __future__ import annotations

from typing import Any

from phalanx.live.resources import (
    POD_GROUP_VERSIONS,
    PODS,
    VOLCANO_QUEUES,
    WORKLOAD_VERSIONS,
    Resource,
    object_key,
)

#: Built-in gang objects (the Workload API): their generation tells spec from status changes.
BUILT_IN_GANG_OBJECTS = frozenset((*WORKLOAD_VERSIONS, *POD_GROUP_VERSIONS))

Obj = dict[str, Any]


def pod_event_wakes(kind: str, obj: Obj, scheduler_name: str) -> bool:
    """Can this Pod event make a waiting gang of ``scheduler_name`` placeable?"""
    if kind == "DELETED":
        return True
    if ((obj.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
        return True
    spec = obj.get("spec") or {}
    return not spec.get("nodeName") and spec.get("schedulerName") == scheduler_name


class WakeHints:
    """The hints of one scheduler; remembers the gang objects' generations it has seen."""

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        #: (API group, plural, key) → metadata.generation last seen (the plural: an
        #: ElasticQuota and a PodGroup of one group may share a key).
        self._generations: dict[tuple[str, str, str], object] = {}

    def wakes(self, resource: Resource, kind: str, obj: Obj) -> bool:
        if resource is PODS:
            return pod_event_wakes(kind, obj, self.scheduler_name)
        if resource is VOLCANO_QUEUES or not (resource.custom or resource in BUILT_IN_GANG_OBJECTS):
            return True
        return self._spec_changed(resource, kind, obj)

    def _spec_changed(self, resource: Resource, kind: str, obj: Obj) -> bool:
        marker = (resource.group, resource.plural, object_key(obj))
        if kind == "DELETED":
            self._generations.pop(marker, None)
            return True
        generation = (obj.get("metadata") or {}).get("generation")
        before = self._generations.get(marker)
        self._generations[marker] = generation
        return kind != "MODIFIED" or generation is None or generation != before
