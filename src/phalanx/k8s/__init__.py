"""The one translation layer from Kubernetes objects (plain dicts from YAML) to :mod:`phalanx.api`.

Every malformed input becomes an :class:`~phalanx.api.errors.InputError` naming the file, the
object (``Kind namespace/name``) and the field (``spec.containers[0].resources.requests.cpu``).
The per-object ``*_from_dict`` functions are shared by the simulator and the live scheduler;
:func:`load_files` / :func:`load_documents` add the checks that span objects.
"""

from phalanx.k8s.load import (
    SUPPORTED_KINDS,
    load_documents,
    load_files,
    read_documents,
    spec_from_dict,
)
from phalanx.k8s.meta import timing_from_dict
from phalanx.k8s.objects import (
    gang_from_dict,
    job_from_dict,
    namespace_from_dict,
    node_from_dict,
    quota_from_dict,
)
from phalanx.k8s.pods import pod_from_dict
from phalanx.k8s.priority import PriorityTable, priority_class_from_dict
from phalanx.k8s.workloads import (
    WORKLOAD_GROUP,
    WorkloadRef,
    WorkloadSpec,
    workload_from_dict,
    workload_gang_name,
    workload_ref,
)

__all__ = [
    "SUPPORTED_KINDS",
    "WORKLOAD_GROUP",
    "PriorityTable",
    "WorkloadRef",
    "WorkloadSpec",
    "gang_from_dict",
    "job_from_dict",
    "load_documents",
    "load_files",
    "namespace_from_dict",
    "node_from_dict",
    "pod_from_dict",
    "priority_class_from_dict",
    "quota_from_dict",
    "read_documents",
    "spec_from_dict",
    "timing_from_dict",
    "workload_from_dict",
    "workload_gang_name",
    "workload_ref",
]
