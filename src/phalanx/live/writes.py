"""The scheduler's writes: bind or evict a pod, set pod conditions, write a gang's CRD status.

Design notes:

- :func:`bind` posts a ``v1 Binding`` to ``pods/NAME/binding`` and returns the raw ``Status``
  dict the server answers (never a model: kubernetes-client/python#547). Passing the pod's
  ``uid`` makes the bind conditional on that incarnation — a pod deleted and re-created under
  the same name is not bound by a stale decision (409). A pod that is already bound or being
  deleted also answers 409; every failure is an :class:`~phalanx.live.errors.ApiError` with
  the status code, so a caller can tell "retry later" (5xx, 429) from "forget this pod" (404,
  409).
- :func:`patch_pod_status` uses a strategic merge patch on ``pods/NAME/status``: the server
  merges ``status.conditions`` by ``type``, so writing ``PodScheduled`` leaves the kubelet's
  conditions alone. kube-scheduler writes ``PodScheduled=False, reason=Unschedulable`` (and
  ``status.nominatedNodeName``) this way.
- :func:`patch_status` writes a custom resource's ``/status`` with a JSON merge patch (CRDs
  refuse strategic merge with 415). A merge patch *replaces* lists, so send a gang's whole
  ``conditions`` list.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from phalanx.live.client import KubeClient, Obj, PatchType
from phalanx.live.resources import PODS, Resource


def rfc3339(moment: datetime | None = None) -> str:
    """A ``metav1.Time``: second precision, UTC, ``Z``."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime | None = None) -> str:
    """A ``metav1.MicroTime`` (events' ``eventTime``, leases' ``renewTime``)."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def binding(namespace: str, pod: str, node: str, *, uid: str | None = None) -> Obj:
    meta: dict[str, Any] = {"name": pod, "namespace": namespace}
    if uid is not None:
        meta["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def bind(
    client: KubeClient,
    namespace: str,
    pod: str,
    node: str,
    *,
    uid: str | None = None,
    answer: bool = True,
    timeout: float | None = None,
) -> Obj:
    """Bind ``namespace/pod`` to ``node``; the server's Status dict (``status: Success``;
    ``answer=False``: ``{}``, the answer not decoded); ``timeout``: seconds it may take."""
    path = PODS.path(namespace, pod, "binding")
    body = binding(namespace, pod, node, uid=uid)
    return await client.request("POST", path, body=body, answer=answer, timeout=timeout)


async def evict(client: KubeClient, namespace: str, pod: str, uid: str | None = None) -> Obj:
    """POST a ``policy/v1`` Eviction for ``namespace/pod`` (PodDisruptionBudgets are honoured:
    the server answers 429 while one forbids it); with ``uid``, only that incarnation."""
    body: Obj = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    return await client.request("POST", PODS.path(namespace, pod, "eviction"), body=body)


def pod_condition(
    type_: str,
    status: str,
    *,
    reason: str = "",
    message: str = "",
    now: datetime | None = None,
) -> Obj:
    """A ``PodCondition`` such as ``PodScheduled=False reason=Unschedulable``."""
    condition: Obj = {
        "type": type_,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(now),
    }
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


async def patch_pod_status(
    client: KubeClient,
    namespace: str,
    pod: str,
    *,
    conditions: Sequence[Obj] = (),
    nominated_node: str | None = None,
) -> Obj:
    """Merge ``conditions`` (by type) and optionally ``nominatedNodeName`` into the status.

    ``nominated_node=""`` clears the nomination.
    """
    status: Obj = {}
    if conditions:
        status["conditions"] = list(conditions)
    if nominated_node is not None:
        status["nominatedNodeName"] = nominated_node or None
    return await client.patch(
        PODS,
        pod,
        {"status": status},
        namespace,
        patch_type=PatchType.STRATEGIC,
        subresource="status",
    )


async def patch_status(
    client: KubeClient,
    resource: Resource,
    name: str,
    status: Obj,
    namespace: str | None = None,
    *,
    answer: bool = True,
) -> Obj:
    """JSON-merge ``status`` into the ``/status`` subresource of ``resource`` ``name``; the
    object written (``answer=False``: ``{}``, not decoded)."""
    path = resource.path(namespace, name, "status")
    body = {"status": status}
    return await client.request(
        "PATCH", path, body=body, content_type=PatchType.MERGE, answer=answer
    )
