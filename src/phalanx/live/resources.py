"""The API resources the live scheduler reads and writes, and how their URLs are built.

Design: a :class:`Resource` is the (group, version, plural) triple plus the facts a client needs
without discovery: its kind, whether it is namespaced, whether it has a ``status`` subresource,
and whether it is a custom resource (CRDs accept JSON merge patch but not strategic merge
patch). The constants below are the fixed set phalanx uses; optional APIs (PodGroup CRDs of
scheduler-plugins in both groups, Volcano's PodGroup and Queue, the alpha Workload API) may be
absent from a cluster — the informer finds out from a 404 on its first list.
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
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)

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
#: Kubernetes 1.35 alpha Workload (pods join via ``spec.workloadRef``); built in, not a CRD.
WORKLOADS = Resource(
    "scheduling.k8s.io",
    "v1alpha1",
    "workloads",
    "Workload",
    namespaced=True,
    status_subresource=True,
)

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

#: Every gang API phalanx understands; any of them may be missing from a cluster.
GANG_RESOURCES = (PODGROUPS, PODGROUPS_SIGS, VOLCANO_PODGROUPS, WORKLOADS)
#: API group → its PodGroup resource (the gang APIs with a PodGroup object and status).
PODGROUP_RESOURCES = {r.group: r for r in (PODGROUPS, PODGROUPS_SIGS, VOLCANO_PODGROUPS)}
