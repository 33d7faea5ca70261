"""Install manifests for ``phalanx serve``: ``phalanx manifests | kubectl apply -f -``.

:func:`install_manifests` returns plain dicts in apply order (CRD, Namespace, ServiceAccount,
RBAC, Service, Deployment); the CLI dumps them with ``yaml.safe_dump_all``.

Design:

- **PodGroup CRD** (``podgroups.scheduling.x-k8s.io``, scheduler-plugins' current group): the
  OpenAPI v3 schema is written here from the field list (spec ``minMember`` ≥ 1,
  ``minResources``, ``scheduleTimeoutSeconds``; status ``phase``, ``occupiedBy``, pod counts,
  ``scheduleStartTime``), not copied from upstream. ``minMember`` is optional, as upstream, so
  PodGroups written for scheduler-plugins stay valid. The old ``scheduling.sigs.k8s.io`` group,
  Volcano, KAI (``scheduling.run.ai``) and the Workload API (``scheduling.k8s.io`` Workloads
  and PodGroups) are only read, and their PodGroup status written, if a cluster serves them.
- **RBAC, least privilege**: one ClusterRole with exactly the verbs the scheduler uses (no
  wildcards, no ``update`` where ``patch`` is enough); the leader-election Lease is granted by
  a Role in the scheduler's own namespace instead of cluster-wide.
- **Deployment**: one replica with ``--leader-elect``. A second replica would only be a warm
  standby; with one, a restart costs the informers' initial list, and the Lease still guards
  the overlap during a rolling update. Non-root (65532), read-only root filesystem, no
  capabilities, RuntimeDefault seccomp; ``/healthz`` and ``/readyz`` probes on the metrics
  port, which the Service exposes for scraping.
"""

from __future__ import annotations

import re
from typing import Any

from phalanx.api.errors import InputError
from phalanx.live.resources import DEFAULT_SCHEDULER_NAME

Manifest = dict[str, Any]

DEFAULT_NAMESPACE = "phalanx-system"
DEFAULT_IMAGE = "ghcr.io/phalanx-sched/phalanx:0.1.0"
METRICS_PORT = 8080
RUN_AS = 65532

_PODGROUP_GROUPS = (
    "scheduling.x-k8s.io",
    "scheduling.sigs.k8s.io",
    "scheduling.volcano.sh",
    "scheduling.run.ai",
    "scheduling.k8s.io",
)


def _rule(groups: tuple[str, ...], resources: tuple[str, ...], verbs: tuple[str, ...]) -> Manifest:
    # Fresh lists every time: yaml.safe_dump writes a shared object as an anchor and alias.
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def cluster_rules() -> list[Manifest]:
    """Cluster-wide rules: exactly the verbs ``phalanx serve`` uses (``pods/eviction``
    ``create`` and PodDisruptionBudget reads: the default policy preempts and reclaims through
    the Eviction API, as ``recovery.undo: evict`` does; Volcano Queues' ``/status`` ``patch``:
    :mod:`phalanx.live.queue_status` writes their counts)."""
    read = ("get", "list", "watch")
    return [
        _rule(("",), ("pods/eviction",), ("create",)),
        _rule(("policy",), ("poddisruptionbudgets",), read),
        _rule(("",), ("pods",), (*read, "delete")),
        _rule(("",), ("pods/binding",), ("create",)),
        _rule(("",), ("pods/status",), ("patch",)),
        _rule(("",), ("nodes",), read),
        _rule(("", "events.k8s.io"), ("events",), ("create",)),
        _rule(("scheduling.k8s.io",), ("priorityclasses", "workloads"), read),
        _rule(_PODGROUP_GROUPS, ("podgroups",), read),
        _rule(_PODGROUP_GROUPS, ("podgroups/status",), ("patch",)),
        _rule(("scheduling.volcano.sh", "scheduling.run.ai"), ("queues",), read),
        _rule(("scheduling.volcano.sh",), ("queues/status",), ("patch",)),
        _rule(
            ("kueue.x-k8s.io",),
            ("clusterqueues", "localqueues", "cohorts", "resourceflavors"),
            read,
        ),
        _rule(("scheduling.x-k8s.io", "scheduling.sigs.k8s.io"), ("elasticquotas",), read),
        _rule(("kueue.x-k8s.io", "kai.scheduler"), ("topologies",), read),
        _rule(("topology.volcano.sh",), ("hypernodes",), read),
    ]


def lease_rules() -> list[Manifest]:
    """Rules in the scheduler's own namespace: the leader-election Lease."""
    return [_rule(("coordination.k8s.io",), ("leases",), ("get", "create", "update"))]


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def _int32(**extra: Any) -> Manifest:
    return {"type": "integer", "format": "int32", **extra}


def podgroup_crd() -> Manifest:
    """``podgroups.scheduling.x-k8s.io``: namespaced, ``status`` subresource, short names."""
    quantity = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": (
            r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
            r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
        ),
        "x-kubernetes-int-or-string": True,
    }
    spec = {
        "type": "object",
        "description": "The gang: how many pods must be placed together, and when to give up.",
        "properties": {
            "minMember": _int32(
                minimum=1,
                description="Pods that must be schedulable together before any is bound.",
            ),
            "minResources": {
                "type": "object",
                "description": "Resources the whole gang needs (a ResourceList).",
                "additionalProperties": quantity,
            },
            "scheduleTimeoutSeconds": _int32(
                description="How long placed pods wait for the rest of the gang."
            ),
        },
    }
    status = {
        "type": "object",
        "properties": {
            "phase": {
                "type": "string",
                "description": "Pending, Scheduling, Running, Unknown, Finished or Failed.",
            },
            "occupiedBy": {"type": "string", "description": "UID of the owner of the pods."},
            "running": _int32(description="Pods of the group in phase Running."),
            "succeeded": _int32(description="Pods of the group in phase Succeeded."),
            "failed": _int32(description="Pods of the group in phase Failed."),
            "scheduleStartTime": {"type": "string", "format": "date-time"},
        },
    }
    column = {"type": "integer"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
        "spec": {
            "group": "scheduling.x-k8s.io",
            "names": {
                "kind": "PodGroup",
                "listKind": "PodGroupList",
                "plural": "podgroups",
                "singular": "podgroup",
                "shortNames": ["pg", "pgs"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "MinMember", **column, "jsonPath": ".spec.minMember"},
                        {"name": "Running", **column, "jsonPath": ".status.running"},
                        {"name": "Succeeded", **column, "jsonPath": ".status.succeeded"},
                        {"name": "Failed", **column, "jsonPath": ".status.failed"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A group of pods scheduled all together or not at all.",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def _check(value: str, pattern: re.Pattern[str], option: str, what: str) -> None:
    if not pattern.match(value):
        raise InputError(f"{value!r} is not {what}", field=option)


def install_manifests(
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
) -> list[Manifest]:
    """Everything ``phalanx serve`` needs in a cluster, in apply order."""
    _check(namespace, _DNS_LABEL, "--namespace", "a DNS-1123 label")
    _check(scheduler_name, _DNS_SUBDOMAIN, "--scheduler-name", "a DNS-1123 subdomain")
    if not image or any(c.isspace() for c in image):
        raise InputError(f"{image!r} is not an image reference", field="--image")

    name = scheduler_name
    labels = {
        "app.kubernetes.io/name": "phalanx",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": "scheduler",
    }

    def meta(obj_name: str, *, namespaced: bool = True) -> Manifest:
        out: Manifest = {"name": obj_name, "labels": dict(labels)}
        if namespaced:
            out["namespace"] = namespace
        return out

    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    container = {
        "name": "scheduler",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "serve",
            "--leader-elect",
            "--metrics-port",
            str(METRICS_PORT),
            "--scheduler-name",
            name,
        ],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        ],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "metrics"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "metrics"},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return [
        podgroup_crd(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(namespace, namespaced=False)},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(name),
            "automountServiceAccountToken": True,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta(f"{name}-scheduler", namespaced=False),
            "rules": cluster_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(f"{name}-scheduler", namespaced=False),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{name}-scheduler",
            },
            "subjects": [dict(subject)],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(f"{name}-leader-election"),
            "rules": lease_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(f"{name}-leader-election"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{name}-leader-election",
            },
            "subjects": [dict(subject)],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(f"{name}-metrics"),
            "spec": {
                "selector": dict(labels),
                "ports": [
                    {
                        "name": "metrics",
                        "port": METRICS_PORT,
                        "targetPort": "metrics",
                        "protocol": "TCP",
                    }
                ],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(name),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": dict(labels)},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "serviceAccountName": name,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": RUN_AS,
                            "runAsGroup": RUN_AS,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                    },
                },
            },
        },
    ]
