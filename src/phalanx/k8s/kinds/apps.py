"""``apps/v1`` Deployment, ReplicaSet and StatefulSet → their pods.

``spec.replicas`` (default 1) copies of ``spec.template``. Names follow the controllers: a
ReplicaSet's pods are ``RS-xxxxx``, a Deployment's ``DEPLOYMENT-HASH-xxxxx`` (its ReplicaSet's
name plus a generated suffix; the simulator derives the suffixes from the seed), a
StatefulSet's ``NAME-0``, ``NAME-1``, … Their pods serve until stopped: without a duration they
run to the end of the simulation (``--default-duration`` does not apply). No gang unless the
template declares one. ``selector``, ``strategy``, ``updateStrategy``, ``serviceName``,
``podManagementPolicy`` and volume claim templates are not modelled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from phalanx.api.specs import ControllerSpec, PodSet
from phalanx.k8s.apis.owner import in_owner_queue
from phalanx.k8s.fields import get_int, get_mapping
from phalanx.k8s.kinds.common import template_pod
from phalanx.k8s.meta import describing, labels_of, name_of, namespace_of, object_label, root
from phalanx.k8s.priority import PriorityTable

_NAMING = {"Deployment": "generated", "ReplicaSet": "generated", "StatefulSet": "index"}


def _template_hash(namespace: str, name: str) -> str:
    """A stable stand-in for ``pod-template-hash`` (10 characters, like the controller's)."""
    digest = hashlib.blake2b(f"{namespace}/{name}".encode(), digest_size=8).hexdigest()
    return digest[:10]


def apps_from_dict(kind: str, obj: Mapping[str, Any], priorities: PriorityTable) -> ControllerSpec:
    with describing(object_label(obj, kind, namespaced=True)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top)
        spec = get_mapping(top, "spec", "")
        replicas = get_int(spec, "replicas", "spec", minimum=0)
        prefix = f"{name}-{_template_hash(namespace, name)}" if kind == "Deployment" else name
        owner = f"{kind}/{name}"
        pod = template_pod(spec, "spec", priorities, namespace=namespace, name=prefix, owner=owner)
        pod = in_owner_queue(pod, labels_of(top))
        pod_set = PodSet(pod, 1 if replicas is None else replicas, _NAMING[kind])
        return ControllerSpec(kind, namespace, name, (pod_set,), service=True)
