"""The API resources the live scheduler reads and writes, and how their URLs are built.

Design: a :class:`Resource` is the (group, version, plural) triple plus the facts a client needs
without discovery: its kind, whether it is namespaced, whether it has a ``status`` subresource,
and whether it is a custom resource (CRDs accept JSON merge patch but not strategic merge
patch). The constants below are the fixed set phalanx uses; optional APIs (PodGroup CRDs of
scheduler-plugins in both groups, Volcano's PodGroup and Queue, KAI's PodGroup and Queue,
ElasticQuotas) may be absent from a cluster — the informer finds out from a 404 on its first
list. The Workload API
(``scheduling.k8s.io``: Workloads, and standalone PodGroups from ``v1alpha2``) is served in
different versions by different Kubernetes releases, so its versions are listed newest first
(:data:`WORKLOAD_VERSIONS`, :data:`POD_GROUP_VERSIONS`) and the live scheduler watches the
newest one the server's discovery lists (:mod:`phalanx.live.discovery`); so are Kueue's
ClusterQueues and LocalQueues (``v1beta2``, ``v1beta1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The ``schedulerName`` phalanx answers to unless told otherwise.
DEFAULT_SCHEDULER_NAME = "phalanx"


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path; ``namespace=None`` on a namespaced resource means all namespaces."""
        parts = [self.prefix]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource is not None:
                parts.append(subresource)
        elif subresource is not None:
            raise ValueError("a subresource needs an object name")
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}" if self.group else self.plural


def object_key(obj: dict[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's store key)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


NODES = Resource("", "v1", "nodes", "Node", namespaced=False, status_subresource=True)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True, status_subresource=True)
NAMESPACES = Resource(
    "", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True
)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
#: PodDisruptionBudgets: preemption plans victims within them (the Eviction API enforces them).
PDBS = Resource(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    namespaced=True,
    status_subresource=True,
)

#: scheduler-plugins PodGroup, current group (label ``scheduling.x-k8s.io/pod-group``).
PODGROUPS = Resource(
    "scheduling.x-k8s.io",
    "v1alpha1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    status_subresource=True,
    custom=True,
)
#: scheduler-plugins PodGroup before v0.25.7 (and Koordinator's copy).
PODGROUPS_SIGS = Resource(
    "scheduling.sigs.k8s.io",
    "v1alpha1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    status_subresource=True,
    custom=True,
)
VOLCANO_PODGROUPS = Resource(
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    status_subresource=True,
    custom=True,
)
VOLCANO_QUEUES = Resource(
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    "Queue",
    namespaced=False,
    status_subresource=True,
    custom=True,
)
#: KAI-Scheduler's PodGroup (pods join by the ``pod-group-name`` annotation or label).
KAI_PODGROUPS = Resource(
    "scheduling.run.ai",
    "v2alpha2",
    "podgroups",
    "PodGroup",
    namespaced=True,
    status_subresource=True,
    custom=True,
)


def _workload_api(version: str, plural: str, kind: str) -> Resource:
    """A resource of the built-in Workload API (``scheduling.k8s.io``; not a CRD)."""
    return Resource("scheduling.k8s.io", version, plural, kind, True, status_subresource=True)


#: Kubernetes 1.35 alpha Workload (pods join via ``spec.workloadRef``).
WORKLOADS = _workload_api("v1alpha1", "workloads", "Workload")
#: 1.36/1.37 Workloads (``podGroupTemplates``) and their standalone PodGroups (pods join via
#: ``spec.schedulingGroup.podGroupName``).
WORKLOADS_V1ALPHA2 = _workload_api("v1alpha2", "workloads", "Workload")
WORKLOADS_V1BETA1 = _workload_api("v1beta1", "workloads", "Workload")
WORKLOAD_PODGROUPS_V1ALPHA2 = _workload_api("v1alpha2", "podgroups", "PodGroup")
WORKLOAD_PODGROUPS_V1BETA1 = _workload_api("v1beta1", "podgroups", "PodGroup")
#: The Workload API's versions, newest first: the newest one served is watched.
WORKLOAD_VERSIONS = (WORKLOADS_V1BETA1, WORKLOADS_V1ALPHA2, WORKLOADS)
POD_GROUP_VERSIONS = (WORKLOAD_PODGROUPS_V1BETA1, WORKLOAD_PODGROUPS_V1ALPHA2)

#: Topology objects (cluster-scoped CRDs; any of them may be missing): see docs/topology.md.
KUEUE_TOPOLOGIES = Resource(
    "kueue.x-k8s.io", "v1beta1", "topologies", "Topology", namespaced=False, custom=True
)
KAI_TOPOLOGIES = Resource(
    "kai.scheduler", "v1alpha1", "topologies", "Topology", namespaced=False, custom=True
)
VOLCANO_HYPERNODES = Resource(
    "topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", namespaced=False, custom=True
)
TOPOLOGY_RESOURCES = (KUEUE_TOPOLOGIES, KAI_TOPOLOGIES, VOLCANO_HYPERNODES)


def _queue_crd(group: str, version: str, plural: str, kind: str, namespaced: bool) -> Resource:
    """A queue object's resource (a CRD with a status its own controller writes)."""
    return Resource(group, version, plural, kind, namespaced, status_subresource=True, custom=True)


#: Queue objects of a fixed version (any may be missing from a cluster): KAI's Queue, Kueue's
#: Cohort and scheduler-plugins' ElasticQuota in both groups. See :mod:`phalanx.live.queue_objects`.
KAI_QUEUES = _queue_crd("scheduling.run.ai", "v2", "queues", "Queue", namespaced=False)
ELASTIC_QUOTAS = _queue_crd(
    "scheduling.x-k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", namespaced=True
)
ELASTIC_QUOTAS_SIGS = _queue_crd(
    "scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", namespaced=True
)
#: Kueue's Cohort (a parent queue with quotas of its own), alpha: the version the simulator reads.
KUEUE_COHORTS = _queue_crd("kueue.x-k8s.io", "v1alpha1", "cohorts", "Cohort", namespaced=False)
QUEUE_OBJECTS = (KAI_QUEUES, KUEUE_COHORTS, ELASTIC_QUOTAS, ELASTIC_QUOTAS_SIGS)
#: Kueue's ClusterQueues and LocalQueues, newest version first: the newest served is watched.
CLUSTER_QUEUE_VERSIONS = tuple(
    _queue_crd("kueue.x-k8s.io", v, "clusterqueues", "ClusterQueue", namespaced=False)
    for v in ("v1beta2", "v1beta1")
)
LOCAL_QUEUE_VERSIONS = tuple(
    _queue_crd("kueue.x-k8s.io", v, "localqueues", "LocalQueue", namespaced=True)
    for v in ("v1beta2", "v1beta1")
)
#: Kueue's ResourceFlavors (the nodes and quotas of a ClusterQueue's flavors), newest first.
RESOURCE_FLAVOR_VERSIONS = tuple(
    Resource("kueue.x-k8s.io", v, "resourceflavors", "ResourceFlavor", False, custom=True)
    for v in ("v1beta2", "v1beta1")
)
#: The queue objects of versioned APIs, one family each (discovery picks the version).
QUEUE_OBJECT_VERSIONS = (CLUSTER_QUEUE_VERSIONS, LOCAL_QUEUE_VERSIONS, RESOURCE_FLAVOR_VERSIONS)
#: Every queue-object resource the live scheduler may watch but Volcano's Queue (whose API
#: also decides the holds of Volcano's PodGroups).
QUEUE_OBJECT_RESOURCES = frozenset(
    (*QUEUE_OBJECTS, *CLUSTER_QUEUE_VERSIONS, *LOCAL_QUEUE_VERSIONS, *RESOURCE_FLAVOR_VERSIONS)
)

#: The gang APIs of a fixed version (any may be missing from a cluster); KAI's PodGroup and
#: the Workload API's versions are listed beside them.
GANG_RESOURCES = (PODGROUPS, PODGROUPS_SIGS, VOLCANO_PODGROUPS, WORKLOADS)
#: API group → its PodGroup resource (the gang APIs with a PodGroup object and status; the
#: Workload API's PodGroup joins them once discovery found the version served).
PODGROUP_RESOURCES = {
    r.group: r for r in (PODGROUPS, PODGROUPS_SIGS, VOLCANO_PODGROUPS, KAI_PODGROUPS)
}
