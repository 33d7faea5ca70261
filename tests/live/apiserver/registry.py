"""What the fake API server serves: one :class:`ResourceInfo` per (group, version, plural).

The built-in table mirrors the real kube-apiserver for the kinds a scheduler touches. Custom
resources are *registered* by a test (``FakeApiServer(crds=...)`` or
:meth:`FakeApiServer.register`); a group/version nobody registered answers ``404 page not
found`` (plain text, as the real server's not-found handler does), so a client can treat it as
"not installed".

This table is the server's own truth, deliberately not shared with :mod:`phalanx.live.resources`:
a wrong path or scope in the client must fail against it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
#: Field selectors every resource supports.
COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class ResourceInfo:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    #: Served by a CustomResourceDefinition: no strategic-merge patch (415), status dropped on
    #: create when a status subresource exists, list items keep ``apiVersion``/``kind``.
    custom: bool = False
    short_names: tuple[str, ...] = ()
    field_labels: frozenset[str] = field(default=frozenset())
    verbs: tuple[str, ...] = VERBS

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> tuple[str, str]:
        return (self.group, self.version)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def selectable_fields(self) -> frozenset[str]:
        return COMMON_FIELDS | self.field_labels

    def discovery(self) -> list[dict[str, Any]]:
        """The APIResource entries of this resource and its subresources."""
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        entries = [main]
        for sub in self.subresources:
            kind = _SUBRESOURCE_KINDS.get(sub, self.kind)
            verbs = ["create"] if sub in _SUBRESOURCE_KINDS else ["get", "patch", "update"]
            entry = {
                "name": f"{self.plural}/{sub}",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": kind,
                "verbs": verbs,
            }
            if sub == "eviction":
                entry |= {"group": "policy", "version": "v1"}
            entries.append(entry)
        return entries


#: Create-only subresources and the kind they take (``pods/eviction`` is a policy/v1 kind).
_SUBRESOURCE_KINDS = {"binding": "Binding", "eviction": "Eviction"}


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)

NAMESPACES = ResourceInfo(
    "",
    "v1",
    "namespaces",
    "Namespace",
    namespaced=False,
    subresources=("status",),
    short_names=("ns",),
    field_labels=frozenset({"status.phase"}),
)
NODES = ResourceInfo(
    "",
    "v1",
    "nodes",
    "Node",
    namespaced=False,
    subresources=("status",),
    short_names=("no",),
    field_labels=frozenset({"spec.unschedulable"}),
)
PODS = ResourceInfo(
    "",
    "v1",
    "pods",
    "Pod",
    namespaced=True,
    subresources=("binding", "eviction", "status"),
    short_names=("po",),
    field_labels=_POD_FIELDS,
)
BINDINGS = ResourceInfo("", "v1", "bindings", "Binding", namespaced=True, verbs=("create",))
EVENTS = ResourceInfo(
    "", "v1", "events", "Event", namespaced=True, short_names=("ev",), field_labels=_EVENT_FIELDS
)
EVENTS_V1 = ResourceInfo(
    "events.k8s.io",
    "v1",
    "events",
    "Event",
    namespaced=True,
    short_names=("ev",),
    field_labels=_EVENT_FIELDS,
)
PRIORITY_CLASSES = ResourceInfo(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
LEASES = ResourceInfo("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
PDBS = ResourceInfo(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    namespaced=True,
    subresources=("status",),
    short_names=("pdb",),
)

BUILTIN: tuple[ResourceInfo, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    BINDINGS,
    EVENTS,
    EVENTS_V1,
    PRIORITY_CLASSES,
    LEASES,
    PDBS,
)

# Registrable resources (CRDs, and the alpha Workload API, which a cluster may not serve).
PODGROUPS_X = ResourceInfo(
    "scheduling.x-k8s.io",
    "v1alpha1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    subresources=("status",),
    custom=True,
    short_names=("pg", "pgs"),
)
PODGROUPS_SIGS = ResourceInfo(
    "scheduling.sigs.k8s.io",
    "v1alpha1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    subresources=("status",),
    custom=True,
    short_names=("pg", "pgs"),
)
VOLCANO_PODGROUPS = ResourceInfo(
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    "PodGroup",
    namespaced=True,
    subresources=("status",),
    custom=True,
    short_names=("pg", "podgroup-v1beta1"),
)
VOLCANO_QUEUES = ResourceInfo(
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    "Queue",
    namespaced=False,
    subresources=("status",),
    custom=True,
    short_names=("q", "queue-v1beta1"),
)
#: Built into kube-apiserver 1.35 behind the GenericWorkload gate; registrable here because a
#: cluster without the gate does not serve it.
WORKLOADS = ResourceInfo(
    "scheduling.k8s.io",
    "v1alpha1",
    "workloads",
    "Workload",
    namespaced=True,
    subresources=("status",),
)

KAI_PODGROUPS = ResourceInfo(
    "scheduling.run.ai",
    "v2alpha2",
    "podgroups",
    "PodGroup",
    namespaced=True,
    subresources=("status",),
    custom=True,
    short_names=("pg",),
)


def _workload_api(version: str, plural: str, kind: str) -> ResourceInfo:
    """A resource of the built-in Workload API in ``version`` (served when its gates are on)."""
    return ResourceInfo("scheduling.k8s.io", version, plural, kind, True, ("status",))


#: Kubernetes 1.36 (``v1alpha2``) and 1.37 (``v1beta1``): Workloads with ``podGroupTemplates``
#: and standalone PodGroups. Each version is its own store here (no conversion between them):
#: a test registers the versions one cluster would serve.
WORKLOADS_V1ALPHA2 = _workload_api("v1alpha2", "workloads", "Workload")
PODGROUPS_V1ALPHA2 = _workload_api("v1alpha2", "podgroups", "PodGroup")
WORKLOADS_V1BETA1 = _workload_api("v1beta1", "workloads", "Workload")
PODGROUPS_V1BETA1 = _workload_api("v1beta1", "podgroups", "PodGroup")
WORKLOAD_API_V1ALPHA2 = (WORKLOADS_V1ALPHA2, PODGROUPS_V1ALPHA2)
WORKLOAD_API_V1BETA1 = (WORKLOADS_V1BETA1, PODGROUPS_V1BETA1)


def _queue_crd(group: str, version: str, plural: str, kind: str, namespaced: bool) -> ResourceInfo:
    """A queue object's CRD (its status is its own controller's)."""
    return ResourceInfo(group, version, plural, kind, namespaced, ("status",), custom=True)


#: KAI-Scheduler's Queue and scheduler-plugins' ElasticQuota (in both groups).
KAI_QUEUES = _queue_crd("scheduling.run.ai", "v2", "queues", "Queue", False)
ELASTIC_QUOTAS = _queue_crd(
    "scheduling.x-k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", True
)
ELASTIC_QUOTAS_SIGS = _queue_crd(
    "scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", True
)
#: Kueue's ClusterQueue, LocalQueue and ResourceFlavor by version (each version its own store
#: here).
KUEUE_V1BETA1 = tuple(
    _queue_crd("kueue.x-k8s.io", "v1beta1", plural, kind, namespaced)
    for plural, kind, namespaced in (
        ("clusterqueues", "ClusterQueue", False),
        ("localqueues", "LocalQueue", True),
        ("resourceflavors", "ResourceFlavor", False),
    )
)
KUEUE_V1BETA2 = tuple(dataclasses.replace(info, version="v1beta2") for info in KUEUE_V1BETA1)
KUEUE_COHORTS = _queue_crd("kueue.x-k8s.io", "v1alpha1", "cohorts", "Cohort", False)
#: The queue CRDs of KAI, Kueue (v1beta1, Cohorts v1alpha1) and scheduler-plugins, with KAI's
#: PodGroup.
QUEUE_CRDS = (KAI_PODGROUPS, KAI_QUEUES, *KUEUE_V1BETA1, KUEUE_COHORTS, ELASTIC_QUOTAS)

ALL_CRDS: tuple[ResourceInfo, ...] = (
    PODGROUPS_X,
    PODGROUPS_SIGS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
)
