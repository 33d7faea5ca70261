"""LeaderWorkerSet ``leaderworkerset.x-k8s.io/v1`` → groups of a leader and its workers.

``spec.replicas`` (default 1) groups of ``spec.leaderWorkerTemplate.size`` (default 1) pods: the
leader ``NAME-G`` from ``leaderTemplate`` (default: the worker template) and the workers
``NAME-G-1`` … ``NAME-G-(size-1)`` from ``workerTemplate``. A group is one gang of ``size``
pods (``NAME-G``, Volcano's PodGroup as LWS's gang-scheduling support creates it) when the
manifest asks for gang scheduling: a template names ``schedulerName: volcano``, or the
LeaderWorkerSet carries ``phalanx.dev/gang-per-group: "true"``. The leader's role is
``leader``, the workers' ``worker``. Pods serve until stopped (no default duration).
``startupPolicy``, ``rolloutStrategy``, ``subGroupPolicy`` and ``networkConfig`` are not
modelled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, PodSet, PodSpec
from phalanx.k8s.apis.owner import in_owner_queue
from phalanx.k8s.fields import child, fail, get_int, get_mapping
from phalanx.k8s.kinds.common import join, template_pod
from phalanx.k8s.meta import (
    annotations_of,
    describing,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import VOLCANO_GROUP
from phalanx.k8s.priority import PriorityTable

KIND = "LeaderWorkerSet"
GANG_PER_GROUP = "phalanx.dev/gang-per-group"
_TEMPLATE = "spec.leaderWorkerTemplate"


def lws_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> ControllerSpec:
    with describing(object_label(obj, KIND, namespaced=True)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top)
        spec = get_mapping(top, "spec", "")
        replicas = get_int(spec, "replicas", "spec", minimum=0)
        lwt = get_mapping(spec, "leaderWorkerTemplate", "spec")
        size = get_int(lwt, "size", _TEMPLATE, minimum=1) or 1
        owner = f"{KIND}/{name}"
        worker = template_pod(
            lwt,
            _TEMPLATE,
            priorities,
            namespace=namespace,
            name=name,
            owner=owner,
            key="workerTemplate",
        )
        worker = in_owner_queue(worker, labels_of(top))
        leader = worker
        if lwt.get("leaderTemplate") is not None:
            leader = template_pod(
                lwt,
                _TEMPLATE,
                priorities,
                namespace=namespace,
                name=name,
                owner=owner,
                key="leaderTemplate",
            )
            leader = in_owner_queue(leader, labels_of(top))
        flag = annotations_of(top).get(GANG_PER_GROUP, "false")
        if flag not in ("true", "false"):
            fail(child("metadata.annotations", GANG_PER_GROUP), 'must be "true" or "false"')
        gangs = flag == "true" or "volcano" in (leader.scheduler_name, worker.scheduler_name)
        pod_sets: list[PodSet] = []
        groups: list[GangSpec] = []
        for g in range(1 if replicas is None else replicas):
            group = f"{name}-{g}"
            lead, work = _named(leader, group), _named(worker, group)
            if gangs:
                gang = GangSpec(
                    namespace, group, size, VOLCANO_GROUP, queue=worker.queue or "default"
                )
                groups.append(gang)
                lead = join(lead, gang, "leader", child(_TEMPLATE, "leaderTemplate"))
                work = join(work, gang, "worker", child(_TEMPLATE, "workerTemplate"))
            pod_sets.append(PodSet(lead, 1, "fixed"))
            if size > 1:
                pod_sets.append(PodSet(work, size - 1, "index", start=1))
        return ControllerSpec(KIND, namespace, name, tuple(pod_sets), tuple(groups), service=True)


def _named(pod: PodSpec, name: str) -> PodSpec:
    return dataclasses.replace(pod, name=name)
