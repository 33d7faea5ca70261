"""Queue objects: accepted, validated and recorded; their quotas are not enforced yet.

- Volcano ``scheduling.volcano.sh/v1beta1 Queue`` (cluster-scoped): ``spec.weight`` (≥ 1),
  ``spec.capability``, ``spec.deserved``, ``spec.guarantee.resource`` (resource lists),
  ``spec.reclaimable``, ``spec.parent``.
- KAI ``scheduling.run.ai/v2 Queue`` (cluster-scoped): ``spec.parentQueue``,
  ``spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight}`` (numbers; -1 = unlimited).
- Kueue ``kueue.x-k8s.io`` (``v1beta1``, ``v1beta2``): ``ResourceFlavor`` (cluster-scoped,
  ``spec.nodeLabels``), ``ClusterQueue`` (cluster-scoped, ``spec.cohort``,
  ``spec.resourceGroups[].flavors[].resources[].{name,nominalQuota,borrowingLimit,
  lendingLimit}``), ``LocalQueue`` (``spec.clusterQueue``, required).
- scheduler-plugins ``ElasticQuota`` (``scheduling.x-k8s.io`` / ``scheduling.sigs.k8s.io``
  ``v1alpha1``): ``spec.min``, ``spec.max``.

Everything else in these objects (``namespaceSelector``, ``preemption``, fair-sharing knobs,
``admissionChecks``) is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import QueueSpec, Resources
from phalanx.k8s.fields import (
    Obj,
    as_list,
    as_mapping,
    child,
    describe,
    fail,
    get_bool,
    get_int,
    get_list,
    get_mapping,
    get_resources,
    get_str,
    get_string_map,
    quantity,
)
from phalanx.k8s.meta import describing, name_of, namespace_of, object_label, root

KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")


def _queue(obj: Mapping[str, Any], kind: str, namespaced: bool) -> tuple[Obj, str, str, Obj]:
    queue = root(obj)
    name = name_of(queue)
    namespace = namespace_of(queue) if namespaced else ""
    return queue, name, namespace, get_mapping(queue, "spec", "")


def volcano_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "Queue", namespaced=False)):
        _, name, _, spec = _queue(obj, "Queue", False)
        get_int(spec, "weight", "spec", minimum=1)
        get_bool(spec, "reclaimable", "spec", default=True)
        capability = get_resources(spec, "capability", "spec")
        get_resources(spec, "deserved", "spec")
        get_resources(get_mapping(spec, "guarantee", "spec"), "resource", "spec.guarantee")
        parent = get_str(spec, "parent", "spec")
        return QueueSpec("Queue.scheduling.volcano.sh", "", name, parent, capability)


def _number(value: object, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(path, f"must be a number, not {describe(value)}")
    if value < -1:
        fail(path, f"must be -1 (unlimited) or more, not {value}")


def kai_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "Queue", namespaced=False)):
        _, name, _, spec = _queue(obj, "Queue", False)
        resources = get_mapping(spec, "resources", "spec")
        for resource, raw in resources.items():
            path = child("spec.resources", resource)
            for key, value in as_mapping(raw, path).items():
                if value is not None:
                    _number(value, child(path, key))
        parent = get_str(spec, "parentQueue", "spec")
        return QueueSpec("Queue.scheduling.run.ai", "", name, parent)


def resource_flavor_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "ResourceFlavor", namespaced=False)):
        _, name, _, spec = _queue(obj, "ResourceFlavor", False)
        get_string_map(spec, "nodeLabels", "spec")
        return QueueSpec("ResourceFlavor", "", name)


def cluster_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "ClusterQueue", namespaced=False)):
        _, name, _, spec = _queue(obj, "ClusterQueue", False)
        nominal: Resources = {}
        groups_path = "spec.resourceGroups"
        for i, raw in enumerate(get_list(spec, "resourceGroups", "spec")):
            group_path = child(groups_path, i)
            group = as_mapping(raw, group_path)
            for j, flavor_raw in enumerate(get_list(group, "flavors", group_path)):
                flavor_path = child(child(group_path, "flavors"), j)
                flavor = as_mapping(flavor_raw, flavor_path)
                for k, res_raw in enumerate(as_list(flavor.get("resources"), flavor_path)):
                    res_path = child(child(flavor_path, "resources"), k)
                    _kueue_resource(as_mapping(res_raw, res_path), res_path, nominal)
        cohort = get_str(spec, "cohort", "spec")
        return QueueSpec("ClusterQueue", "", name, cohort, nominal)


def _kueue_resource(res: Obj, path: str, nominal: Resources) -> None:
    resource = get_str(res, "name", path)
    if not resource:
        fail(child(path, "name"), "is required")
    if res.get("nominalQuota") is None:
        fail(child(path, "nominalQuota"), "is required")
    amount = quantity(resource, res["nominalQuota"], child(path, "nominalQuota"))
    nominal[resource] = nominal.get(resource, 0) + amount
    for key in ("borrowingLimit", "lendingLimit"):
        if res.get(key) is not None:
            quantity(resource, res[key], child(path, key))


def local_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "LocalQueue", namespaced=True)):
        _, name, namespace, spec = _queue(obj, "LocalQueue", True)
        cluster_queue = get_str(spec, "clusterQueue", "spec")
        if not cluster_queue:
            fail("spec.clusterQueue", "is required")
        return QueueSpec("LocalQueue", namespace, name, cluster_queue)


def elastic_quota_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "ElasticQuota", namespaced=True)):
        _, name, namespace, spec = _queue(obj, "ElasticQuota", True)
        minimum = get_resources(spec, "min", "spec")
        maximum = get_resources(spec, "max", "spec")
        for resource, amount in minimum.items():
            if resource in maximum and amount > maximum[resource]:
                fail(child("spec.min", resource), "must not exceed spec.max")
        return QueueSpec("ElasticQuota", namespace, name, "", maximum)
