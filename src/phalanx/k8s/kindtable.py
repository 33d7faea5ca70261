"""The table of every supported ``(apiVersion, kind)``: its scope and its converter.

A converter returns an :mod:`phalanx.api` spec, or a Workload API object (a
:class:`~phalanx.k8s.workloads.WorkloadSpec` or a ``basic``
:class:`~phalanx.k8s.workloads.BasicGroup`) that the loader resolves against the pods, or a
Kubeflow training runtime (a blueprint the loader gives the TrainJobs that name it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from phalanx.api.workload import Spec
from phalanx.k8s import queues
from phalanx.k8s.apis import kai
from phalanx.k8s.kinds.apps import apps_from_dict
from phalanx.k8s.kinds.jobset import jobset_from_dict
from phalanx.k8s.kinds.kubeflow import kubeflow_job_from_dict
from phalanx.k8s.kinds.lws import lws_from_dict
from phalanx.k8s.kinds.ray import raycluster_from_dict, rayjob_from_dict
from phalanx.k8s.kinds.trainer import trainjob_from_dict
from phalanx.k8s.kinds.trainer_runtime import (
    CLUSTER_KIND,
    NAMESPACED_KIND,
    VERSION,
    TrainingRuntime,
    runtime_from_dict,
)
from phalanx.k8s.kinds.volcano import volcano_job_from_dict
from phalanx.k8s.objects import (
    gang_from_dict,
    job_from_dict,
    namespace_from_dict,
    node_from_dict,
    quota_from_dict,
)
from phalanx.k8s.pods import pod_from_dict
from phalanx.k8s.priority import PriorityTable, priority_class_from_dict
from phalanx.k8s.topology import (
    HYPERNODE_VERSIONS,
    KAI_TOPOLOGY_VERSIONS,
    KUEUE_TOPOLOGY_VERSIONS,
    hypernode_from_dict,
    topology_from_dict,
)
from phalanx.k8s.workloads import (
    POD_GROUP_API_VERSIONS,
    WORKLOAD_API_VERSIONS,
    BasicGroup,
    WorkloadSpec,
    pod_group_from_dict,
    workload_from_dict,
)

Converted = Spec | WorkloadSpec | BasicGroup | TrainingRuntime
Converter = Callable[[Mapping[str, Any], PriorityTable], Converted]


@dataclass(frozen=True, slots=True)
class Kind:
    namespaced: bool
    convert: Converter


def _plain(convert: Callable[[Mapping[str, Any]], Converted]) -> Converter:
    return lambda obj, _: convert(obj)


KINDS: dict[tuple[str, str], Kind] = {
    ("v1", "Node"): Kind(False, _plain(node_from_dict)),
    ("v1", "Pod"): Kind(True, lambda obj, table: pod_from_dict(obj, table)),
    ("batch/v1", "Job"): Kind(True, job_from_dict),
    ("scheduling.k8s.io/v1", "PriorityClass"): Kind(False, _plain(priority_class_from_dict)),
    ("v1", "ResourceQuota"): Kind(True, _plain(quota_from_dict)),
    ("v1", "Namespace"): Kind(False, _plain(namespace_from_dict)),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): Kind(True, gang_from_dict),
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"): Kind(True, gang_from_dict),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): Kind(True, gang_from_dict),
    ("scheduling.run.ai/v2alpha2", "PodGroup"): Kind(True, kai.pod_group_from_dict),
    **{(v, "Workload"): Kind(True, _plain(workload_from_dict)) for v in WORKLOAD_API_VERSIONS},
    **{(v, "PodGroup"): Kind(True, _plain(pod_group_from_dict)) for v in POD_GROUP_API_VERSIONS},
    ("apps/v1", "Deployment"): Kind(True, partial(apps_from_dict, "Deployment")),
    ("apps/v1", "ReplicaSet"): Kind(True, partial(apps_from_dict, "ReplicaSet")),
    ("apps/v1", "StatefulSet"): Kind(True, partial(apps_from_dict, "StatefulSet")),
    ("batch.volcano.sh/v1alpha1", "Job"): Kind(True, volcano_job_from_dict),
    ("kubeflow.org/v1", "PyTorchJob"): Kind(True, partial(kubeflow_job_from_dict, "PyTorchJob")),
    ("kubeflow.org/v1", "MPIJob"): Kind(True, partial(kubeflow_job_from_dict, "MPIJob")),
    ("kubeflow.org/v2beta1", "MPIJob"): Kind(True, partial(kubeflow_job_from_dict, "MPIJob")),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): Kind(True, jobset_from_dict),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): Kind(True, lws_from_dict),
    ("ray.io/v1", "RayCluster"): Kind(True, raycluster_from_dict),
    ("ray.io/v1", "RayJob"): Kind(True, rayjob_from_dict),
    # the loader gives a TrainJob the runtimes of its input (alone, it has none)
    (VERSION, "TrainJob"): Kind(True, lambda obj, table: trainjob_from_dict(obj, table, {})),
    (VERSION, CLUSTER_KIND): Kind(False, partial(runtime_from_dict, CLUSTER_KIND)),
    (VERSION, NAMESPACED_KIND): Kind(True, partial(runtime_from_dict, NAMESPACED_KIND)),
    **{
        key: Kind(namespaced, _plain(read))
        for key, (namespaced, read) in queues.QUEUE_KINDS.items()
    },
    **{
        (v, "Topology"): Kind(False, _plain(topology_from_dict))
        for v in (*KUEUE_TOPOLOGY_VERSIONS, *KAI_TOPOLOGY_VERSIONS)
    },
    **{(v, "HyperNode"): Kind(False, _plain(hypernode_from_dict)) for v in HYPERNODE_VERSIONS},
}

#: Kinds that are namespaced (cluster-scoped) in every API version that serves them.
_NAMESPACED = frozenset(k for (_, k), kind in KINDS.items() if kind.namespaced)
_CLUSTER = frozenset(k for (_, k), kind in KINDS.items() if not kind.namespaced)
NAMESPACED = _NAMESPACED - _CLUSTER
CLUSTER_SCOPED = _CLUSTER - _NAMESPACED
