"""A cluster's present state as manifests: what ``phalanx simulate --from-cluster`` starts from.

It lists, through the live client, what ``kubectl get nodes,pods,priorityclasses,podgroups,...
-A -o yaml`` would print: nodes, pods, priority classes, and every gang and queue API the
server serves (discovered, not assumed; of an API served in several versions, the newest
listed here), ResourceQuotas, PodDisruptionBudgets, the topology objects (Kueue and KAI
Topologies, Volcano HyperNodes), and Kubeflow Trainer's training runtimes, which the TrainJobs
of the files added to the snapshot name. The loader then reads it like any snapshot file:
running pods stay on their nodes at t=0, pending pods are queued, finished pods are ignored.
Workload controllers (Deployments, Volcano Jobs, ...) are not listed: their pods are.
"""

from __future__ import annotations

from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import ApiError
from phalanx.live.resources import (
    CLUSTER_QUEUE_VERSIONS,
    ELASTIC_QUOTAS,
    ELASTIC_QUOTAS_SIGS,
    KAI_PODGROUPS,
    KAI_QUEUES,
    KUEUE_COHORTS,
    LOCAL_QUEUE_VERSIONS,
    NODES,
    PDBS,
    POD_GROUP_VERSIONS,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_QUOTAS,
    TOPOLOGY_RESOURCES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_VERSIONS,
    Resource,
)

SOURCE = "--from-cluster"


def _crd(group: str, version: str, plural: str, kind: str, namespaced: bool = True) -> Resource:
    return Resource(group, version, plural, kind, namespaced=namespaced, custom=True)


#: Resources listed when served, by API: each tuple lists versions newest first.
OPTIONAL: tuple[tuple[Resource, ...], ...] = (
    (PODGROUPS,),
    (PODGROUPS_SIGS,),
    (VOLCANO_PODGROUPS,),
    (VOLCANO_QUEUES,),
    (KAI_PODGROUPS,),
    (KAI_QUEUES,),
    WORKLOAD_VERSIONS,
    POD_GROUP_VERSIONS,
    tuple(
        _crd("kueue.x-k8s.io", v, "resourceflavors", "ResourceFlavor", namespaced=False)
        for v in ("v1beta2", "v1beta1")
    ),
    CLUSTER_QUEUE_VERSIONS,
    LOCAL_QUEUE_VERSIONS,
    (KUEUE_COHORTS,),
    (ELASTIC_QUOTAS,),
    (ELASTIC_QUOTAS_SIGS,),
    (RESOURCE_QUOTAS,),  # what new pods of the added files are admitted against
    (PDBS,),  # what preemption and reclaim may evict
    *((topology,) for topology in TOPOLOGY_RESOURCES),  # Kueue, KAI, Volcano topologies
    # Kubeflow Trainer's runtimes: the blueprints the TrainJobs of the added files name
    *(
        (_crd("trainer.kubeflow.org", "v1alpha1", plural, kind, namespaced),)
        for plural, kind, namespaced in (
            ("clustertrainingruntimes", "ClusterTrainingRuntime", False),
            ("trainingruntimes", "TrainingRuntime", True),
        )
    ),
)


async def take_snapshot(client: KubeClient) -> list[tuple[str, object]]:
    """``(source, object)`` documents of the cluster's present state, for the loader. An
    optional resource the credentials may not list (RBAC) is left out, as one not served."""
    optional = []
    for versions in OPTIONAL:
        for resource in versions:
            if await client.served(resource):
                optional.append(resource)
                break
    docs: list[tuple[str, object]] = []
    for resource in [NODES, PRIORITY_CLASSES, *optional, PODS]:
        try:
            listing = await client.list(resource)
        except ApiError as exc:
            if exc.forbidden and resource in optional:
                continue
            raise
        docs.extend((f"{SOURCE} {resource}", _clean(item)) for item in listing.items)
    return docs


def _clean(obj: Obj) -> Obj:
    """Drop what only the server keeps (it is never read and bloats error context)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj
