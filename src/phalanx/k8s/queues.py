"""Queue objects of every peer → :class:`~phalanx.api.queues.QueueSpec` (one model).

Design: one public reader per kind, each naming its object in every error. The mapping
(docs/manifests.md, "Queues"):

- Volcano ``Queue`` (``scheduling.volcano.sh/v1beta1``, cluster-scoped): ``weight`` (default
  1), ``capability``, ``deserved``, ``guarantee.resource``, ``parent`` (``root`` = top level),
  ``reclaimable`` (default true), ``priority``; ``status.state`` other than ``Open`` (or
  absent) closes it.
- KAI ``Queue`` (``scheduling.run.ai/v2``, cluster-scoped): ``resources.{cpu,memory,gpu}``
  each with ``quota`` → deserved, ``limit`` → capability, ``overQuotaWeight`` → weight (the
  GPU's, else the first given); ``-1`` means unlimited/none. Units as KAI's: cpu in
  millicores, memory in megabytes (10^6 bytes), gpu in GPUs (fractions allowed). ``parentQueue``
  and ``priority`` carry over. KAI queues are not reclaimable below their quota only; over
  quota is reclaimable (as here).
- Kueue ``ClusterQueue`` (``kueue.x-k8s.io/v1beta1`` or ``v1beta2``): ``resourceGroups``
  → ``groups`` (per flavor, in order: ``nominalQuota``, ``borrowingLimit``,
  ``lendingLimit``; admission checks these per flavor, :mod:`phalanx.cluster.flavors`); for
  the queue as a whole, every flavor's ``nominalQuota`` summed per resource → deserved;
  ``nominalQuota + borrowingLimit`` → capability (no borrowingLimit: unlimited within its
  cohort); ``nominalQuota − lendingLimit`` → guarantee; ``cohort`` (or ``cohortName``) →
  parent; ``fairSharing.weight`` → weight (a quantity; rounded, at least 1). What Kueue's
  webhook refuses is refused here with its field: a flavor listed twice, a resource covered
  by two groups, a flavor whose resources are not its group's ``coveredResources`` in order.
  A ``Cohort``
  (``kueue.x-k8s.io/v1alpha1``) becomes a parent queue (its ``parentName``/``parent`` and
  quotas likewise); a cohort only named by ClusterQueues is an implicit unlimited parent.
  ``LocalQueue`` → a :class:`QueueBindingSpec` from ``namespace/name`` to its ClusterQueue.
- scheduler-plugins ``ElasticQuota`` (``scheduling.x-k8s.io`` or ``scheduling.sigs.k8s.io``
  ``/v1alpha1``, namespaced): a queue named ``NAMESPACE`` with ``min`` → deserved and guarantee
  (ElasticQuota never reclaims below min), ``max`` → capability, and a binding of the whole
  namespace to it (``namespaces``).
- Kueue ``ResourceFlavor`` → :class:`ResourceFlavorSpec` (``nodeLabels``, ``nodeTaints``,
  ``tolerations``).
- ``policy/v1 PodDisruptionBudget`` → :class:`BudgetSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from phalanx.api.quantity import to_units
from phalanx.api.queues import (
    BudgetSpec,
    FlavorQuota,
    QueueBindingSpec,
    QueueSpec,
    ResourceGroup,
)
from phalanx.api.specs import Requirement, ResourceFlavorSpec, Resources
from phalanx.api.workload import Spec
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    as_str,
    check_int,
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
    require_str,
)
from phalanx.k8s.meta import describing, name_of, namespace_of, object_label, root
from phalanx.k8s.placement import _requirement, taints, tolerations

VOLCANO = "scheduling.volcano.sh"
KAI = "scheduling.run.ai"
KUEUE = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")
ELASTIC = "scheduling.x-k8s.io"
#: KAI resource names → Kubernetes resource names, and the unit of one KAI number in ours.
_KAI_RESOURCES = {"cpu": ("cpu", 1), "memory": ("memory", 1_000_000), "gpu": ("nvidia.com/gpu", 0)}


def volcano_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "Queue", namespaced=False)):
        queue = root(obj)
        spec = get_mapping(queue, "spec", "")
        status = get_mapping(queue, "status", "")
        parent = get_str(spec, "parent", "spec") or None
        state = get_str(status, "state", "status") or "Open"
        guarantee = get_mapping(spec, "guarantee", "spec")
        return QueueSpec(
            name=name_of(queue),
            parent=None if parent == "root" else parent,
            deserved=get_resources(spec, "deserved", "spec"),
            guarantee=get_resources(guarantee, "resource", "spec.guarantee"),
            capability=get_resources(spec, "capability", "spec"),
            weight=_weight(spec, "weight", "spec"),
            priority=get_int(spec, "priority", "spec") or 0,
            reclaimable=get_bool(spec, "reclaimable", "spec", default=True),
            open=state == "Open",
            api=VOLCANO,
        )


def kai_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "Queue", namespaced=False)):
        queue = root(obj)
        spec = get_mapping(queue, "spec", "")
        resources = get_mapping(spec, "resources", "spec")
        deserved: Resources = {}
        capability: Resources = {}
        weights: list[int] = []
        for kai_name, raw in resources.items():
            path = child("spec.resources", kai_name)
            if kai_name not in _KAI_RESOURCES:
                fail(path, f"unknown KAI resource {kai_name!r} (one of cpu, memory, gpu)")
            name, unit = _KAI_RESOURCES[kai_name]
            entry = as_mapping(raw, path)
            quota = _kai_amount(entry.get("quota"), name, unit, child(path, "quota"))
            limit = _kai_amount(entry.get("limit"), name, unit, child(path, "limit"))
            if quota is not None:
                deserved[name] = quota
            if limit is not None:
                capability[name] = limit
            if entry.get("overQuotaWeight") is not None:
                weight = _number(entry["overQuotaWeight"], child(path, "overQuotaWeight"))
                weights.insert(0 if kai_name == "gpu" else len(weights), max(0, round(weight)))
        return QueueSpec(
            name=name_of(queue),
            parent=get_str(spec, "parentQueue", "spec") or None,
            deserved=deserved,
            capability=capability,
            weight=weights[0] if weights else 1,
            priority=get_int(spec, "priority", "spec") or 0,
            api=KAI,
        )


def kueue_cluster_queue_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    """A ClusterQueue, or (kind ``Cohort``) a cohort, read alike."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    label = kind if isinstance(kind, str) and kind else "ClusterQueue"
    with describing(object_label(obj, label, namespaced=False)):
        queue = root(obj)
        spec = get_mapping(queue, "spec", "")
        parent = (
            get_str(spec, "cohort", "spec")
            or get_str(spec, "cohortName", "spec")
            or get_str(spec, "parent", "spec")
            or get_str(spec, "parentName", "spec")
        )
        groups = _resource_groups(spec)
        nominal: Resources = {}
        borrow: Resources = {}
        lend: Resources = {}
        unlimited: set[str] = set()
        for group in groups:
            for flavor in group.flavors:
                for name, amount in flavor.nominal.items():
                    nominal[name] = nominal.get(name, 0) + amount
                    if name not in flavor.borrowing:
                        unlimited.add(name)
                    else:
                        borrow[name] = borrow.get(name, 0) + flavor.borrowing[name]
                    if name in flavor.lending:
                        lend[name] = lend.get(name, 0) + flavor.lending[name]
        fair = get_mapping(spec, "fairSharing", "spec")
        weight = 1
        if fair.get("weight") is not None:
            weight = max(1, round(to_units("cpu", str(fair["weight"])) / 1000))
        capability = {
            name: amount + borrow.get(name, 0)
            for name, amount in nominal.items()
            if name not in unlimited or not parent
        }
        return QueueSpec(
            name=name_of(queue),
            parent=parent or None,
            deserved=nominal,
            guarantee={
                name: nominal[name] - lent for name, lent in lend.items() if name in nominal
            },
            capability=capability,
            weight=weight,
            api=KUEUE,
            groups=groups,
            borrow_last=_borrow_last(spec),
        )


#: ``flavorFungibility.whenCanBorrow`` values: take a flavor that fits by borrowing (the
#: default, ``Borrow`` before v1beta2), or try the next flavors for one that needs none.
_WHEN_CAN_BORROW = ("MayStopSearch", "Borrow", "TryNextFlavor")
_WHEN_CAN_PREEMPT = ("TryNextFlavor", "MayStopSearch", "Preempt")


def _borrow_last(spec: Obj) -> bool:
    """Does ``flavorFungibility.whenCanBorrow: TryNextFlavor`` prefer flavors that fit
    without borrowing? (``whenCanPreempt`` is validated; flavors are never preempted for.)"""
    fungibility = get_mapping(spec, "flavorFungibility", "spec")
    path = "spec.flavorFungibility"
    for key, allowed in (
        ("whenCanBorrow", _WHEN_CAN_BORROW),
        ("whenCanPreempt", _WHEN_CAN_PREEMPT),
    ):
        value = get_str(fungibility, key, path)
        if value and value not in allowed:
            fail(child(path, key), f"unknown value {value!r} (one of {', '.join(allowed)})")
    return get_str(fungibility, "whenCanBorrow", path) == "TryNextFlavor"


def _resource_groups(spec: Obj) -> tuple[ResourceGroup, ...]:
    """``spec.resourceGroups``, checked as Kueue's admission webhook checks them: a flavor
    appears once in a ClusterQueue, a resource is covered by one group, and each flavor of a
    group lists exactly its ``coveredResources``, in that order."""
    groups: list[ResourceGroup] = []
    flavor_at: dict[str, str] = {}
    covered_at: dict[str, str] = {}
    for i, raw_group in enumerate(get_list(spec, "resourceGroups", "spec")):
        gpath = child("spec.resourceGroups", i)
        group = as_mapping(raw_group, gpath)
        covered = _covered(group, gpath, covered_at)
        flavors: list[FlavorQuota] = []
        for j, raw_flavor in enumerate(get_list(group, "flavors", gpath)):
            fpath = child(child(gpath, "flavors"), j)
            flavor = as_mapping(raw_flavor, fpath)
            name = require_str(flavor, "name", fpath)
            _once(flavor_at, name, child(fpath, "name"), "flavor")
            flavors.append(_flavor_quota(name, flavor, fpath, covered))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def _once(seen: dict[str, str], name: str, path: str, what: str) -> None:
    """Record ``name`` at ``path``; fail if it was seen before."""
    if name in seen:
        fail(path, f"{what} {name!r} is listed twice (also at {seen[name]})")
    seen[name] = path


def _covered(group: Obj, gpath: str, covered_at: dict[str, str]) -> tuple[str, ...]:
    """A group's ``coveredResources`` (empty when absent: then taken from its flavors, as
    manifests written before the field existed did)."""
    names: list[str] = []
    for k, raw in enumerate(get_list(group, "coveredResources", gpath)):
        path = child(child(gpath, "coveredResources"), k)
        name = as_str(raw, path)
        _once(covered_at, name, path, "covered resource")
        names.append(name)
    return tuple(names)


def _flavor_quota(name: str, flavor: Obj, fpath: str, covered: tuple[str, ...]) -> FlavorQuota:
    nominal: Resources = {}
    borrowing: Resources = {}
    lending: Resources = {}
    listed: dict[str, str] = {}
    for k, res in enumerate(get_list(flavor, "resources", fpath)):
        rpath = child(child(fpath, "resources"), k)
        entry = as_mapping(res, rpath)
        resource = require_str(entry, "name", rpath)
        _once(listed, resource, child(rpath, "name"), "resource")
        if entry.get("nominalQuota") is None:
            fail(child(rpath, "nominalQuota"), "is required")
        nominal[resource] = _quantity(resource, entry["nominalQuota"], child(rpath, "nominalQuota"))
        for key, into in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
            if entry.get(key) is not None:
                into[resource] = _quantity(resource, entry[key], child(rpath, key))
    if covered and tuple(listed) != covered:
        fail(
            child(fpath, "resources"),
            f"flavor {name!r} lists {', '.join(listed) or 'no resource'}; it must list the "
            f"group's coveredResources ({', '.join(covered)}), in that order",
        )
    return FlavorQuota(name, nominal, borrowing, lending)


def resource_flavor_from_dict(obj: Mapping[str, Any]) -> ResourceFlavorSpec:
    """A Kueue ResourceFlavor: its node labels, node taints and tolerations."""
    with describing(object_label(obj, "ResourceFlavor", namespaced=False)):
        flavor = root(obj)
        spec = get_mapping(flavor, "spec", "")
        return ResourceFlavorSpec(
            name_of(flavor),
            get_string_map(spec, "nodeLabels", "spec"),
            node_taints=taints(spec, "spec", "nodeTaints"),
            tolerations=tolerations(spec, "spec"),
        )


def local_queue_from_dict(obj: Mapping[str, Any]) -> QueueBindingSpec:
    with describing(object_label(obj, "LocalQueue", namespaced=True)):
        queue = root(obj)
        spec = get_mapping(queue, "spec", "")
        return QueueBindingSpec(
            namespace=namespace_of(queue),
            name=name_of(queue),
            queue=require_str(spec, "clusterQueue", "spec"),
        )


def elastic_quota_from_dict(obj: Mapping[str, Any]) -> QueueSpec:
    with describing(object_label(obj, "ElasticQuota", namespaced=True)):
        quota = root(obj)
        name_of(quota)
        namespace = namespace_of(quota)
        spec = get_mapping(quota, "spec", "")
        minimum = get_resources(spec, "min", "spec")
        maximum = get_resources(spec, "max", "spec")
        for resource, amount in minimum.items():
            if resource in maximum and amount > maximum[resource]:
                fail(child("spec.min", resource), "must not exceed spec.max")
        return QueueSpec(
            name=namespace,
            deserved=minimum,
            guarantee=dict(minimum),
            capability=maximum,
            api=ELASTIC,
            namespaces=(namespace,),
        )


def budget_from_dict(obj: Mapping[str, Any]) -> BudgetSpec:
    with describing(object_label(obj, "PodDisruptionBudget", namespaced=True)):
        pdb = root(obj)
        spec = get_mapping(pdb, "spec", "")
        selector = get_mapping(spec, "selector", "spec")
        labels_path = "spec.selector.matchLabels"
        labels = as_mapping(selector.get("matchLabels"), labels_path)
        exprs: list[Requirement] = [
            _requirement(raw, child("spec.selector.matchExpressions", i))
            for i, raw in enumerate(get_list(selector, "matchExpressions", "spec.selector"))
        ]
        minimum = _int_or_percent(spec.get("minAvailable"), "spec.minAvailable")
        maximum = _int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable")
        if minimum is not None and maximum is not None:
            fail("spec", "minAvailable and maxUnavailable are mutually exclusive")
        return BudgetSpec(
            namespace=namespace_of(pdb),
            name=name_of(pdb),
            match_labels=tuple(
                sorted((k, as_str(v, child(labels_path, k))) for k, v in labels.items())
            ),
            match_expressions=tuple(exprs),
            min_available=minimum,
            max_unavailable=maximum if minimum is not None or maximum is not None else None,
        )


def _weight(spec: Obj, key: str, path: str) -> int:
    value = get_int(spec, key, path, minimum=1)
    return 1 if value is None else value


def _quantity(name: str, value: object, path: str) -> int:
    try:
        return to_units(name, value)
    except ValueError as exc:
        fail(path, str(exc))


def _number(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(path, f"must be a number, not {describe(value)}")
    return float(value)


def _kai_amount(value: object, name: str, unit: int, path: str) -> int | None:
    """A KAI quota/limit in our units; ``None`` for absent or ``-1`` (unlimited / none)."""
    if value is None:
        return None
    number = _number(value, path)
    if number == -1:
        return None
    if number < 0:
        fail(path, f"must be -1 (unlimited) or at least 0, not {value!r}")
    if unit == 0:  # GPUs: milli-GPU
        return round(number * 1000)
    return round(number * unit)


def _int_or_percent(value: object, path: str) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%") or not text[:-1].isdigit():
            fail(path, f"must be an integer or a percentage such as '50%', not {value!r}")
        return text
    return check_int(value, path, minimum=0)


#: (apiVersion, kind) → (namespaced, reader), for the loader's table of kinds.
QUEUE_KINDS: dict[tuple[str, str], tuple[bool, Callable[[Mapping[str, Any]], Spec]]] = {
    ("scheduling.volcano.sh/v1beta1", "Queue"): (False, volcano_queue_from_dict),
    ("scheduling.run.ai/v2", "Queue"): (False, kai_queue_from_dict),
    **{(v, "ClusterQueue"): (False, kueue_cluster_queue_from_dict) for v in KUEUE_VERSIONS},
    **{(v, "ResourceFlavor"): (False, resource_flavor_from_dict) for v in KUEUE_VERSIONS},
    **{(v, "LocalQueue"): (True, local_queue_from_dict) for v in KUEUE_VERSIONS},
    ("kueue.x-k8s.io/v1alpha1", "Cohort"): (False, kueue_cluster_queue_from_dict),
    ("scheduling.x-k8s.io/v1alpha1", "ElasticQuota"): (True, elastic_quota_from_dict),
    ("scheduling.sigs.k8s.io/v1alpha1", "ElasticQuota"): (True, elastic_quota_from_dict),
    ("policy/v1", "PodDisruptionBudget"): (True, budget_from_dict),
}
