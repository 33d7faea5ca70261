"""The ``pods/eviction`` subresource (``policy/v1`` Eviction), honouring PodDisruptionBudgets.

What the real server does (``pkg/registry/core/pod/storage/eviction.go``), emulated:

- the body must be an ``Eviction`` (``policy/v1``, or ``policy/v1beta1``) whose
  ``metadata.name``, when given, is the pod's (400 otherwise); ``deleteOptions.preconditions``
  (``uid``, ``resourceVersion``) are checked as on a DELETE (409);
- a pod that is ``Pending``, ``Succeeded`` or ``Failed``, or already being deleted, is deleted
  without looking at budgets;
- otherwise the PodDisruptionBudgets of its namespace whose selector matches it are found:
  none → deleted; more than one → 500 ("more than one PodDisruptionBudget");
- with one, its status is computed as the disruption controller would (below) and written; a
  pod that is not Ready is deleted without spending the budget when its
  ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default)
  while the budget is healthy (``currentHealthy >= desiredHealthy > 0``); else when
  ``disruptionsAllowed`` is 0 the answer is **429** ``TooManyRequests`` "Cannot evict pod as it
  would violate the pod's disruption budget." with a ``DisruptionBudget`` cause; else
  ``disruptionsAllowed`` goes down by one, the pod is recorded in ``disruptedPods``, and the pod
  is deleted. Success is a ``Status`` with code 201.

The disruption controller, as far as a scheduler's tests need it: the budget's pods are those
of its namespace matching its selector (policy/v1: an empty selector matches every pod, a
missing one none) that are not being deleted; ``expectedPods`` is their number plus the pods
evicted in the last two minutes and gone since (``disruptedPods``; the real controller reads
the scale of the pods' owners, which still counts a pod its controller has not re-created
yet); ``currentHealthy`` counts those ``Running`` with condition ``Ready=True`` and not in
``disruptedPods``; ``desiredHealthy`` is ``minAvailable`` (a percentage of ``expectedPods``,
rounded up) or ``expectedPods - maxUnavailable`` (rounded up too);
``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``.
"""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from .registry import PDBS, PODS
from .selectors import Requirement, labels_match
from .store import ApiFailure, Obj, Store, bad_request, now

_IGNORE_BUDGETS = ("Pending", "Succeeded", "Failed")
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")
#: How long an evicted pod stays in ``disruptedPods`` (the controller's ``DeletionTimeout``).
DISRUPTION_TIMEOUT = timedelta(minutes=2)


def _selector(pdb: Obj) -> tuple[Requirement, ...] | None:
    """The budget's label selector as requirements (None: it selects nothing)."""
    selector = (pdb.get("spec") or {}).get("selector")
    if not isinstance(selector, dict):
        return None
    found = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op = _OPERATORS.get(str(expr.get("operator")))
        if op is None:
            return None
        found.append(Requirement(str(expr.get("key")), op, tuple(expr.get("values") or ())))
    return tuple(found)


def _ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _recent(stamp: Any) -> bool:
    """An entry of ``disruptedPods`` younger than the controller's two-minute timeout."""
    try:
        at = datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return False
    return datetime.now(UTC) - at < DISRUPTION_TIMEOUT


def _scaled(value: Any, total: int) -> int:
    """An IntOrString: an integer, or ``"N%"`` of ``total`` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def budget_status(store: Store, pdb: Obj) -> Obj:
    """What the disruption controller would write in ``pdb``'s status now."""
    namespace = pdb["metadata"].get("namespace")
    selector = _selector(pdb)
    pods = [
        p
        for p in store.objects[PODS.key].values()
        if selector is not None
        and p["metadata"].get("namespace") == namespace
        and not p["metadata"].get("deletionTimestamp")
        and labels_match(selector, p)
    ]
    previous = pdb.get("status") or {}
    disrupted = {
        name: at for name, at in (previous.get("disruptedPods") or {}).items() if _recent(at)
    }
    names = {p["metadata"]["name"] for p in pods}
    expected = len(pods) + sum(name not in names for name in disrupted)
    healthy = sum(_ready(p) and p["metadata"]["name"] not in disrupted for p in pods)
    spec = pdb.get("spec") or {}
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = expected
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptedPods": disrupted,
        "disruptionsAllowed": max(0, healthy - desired),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }


def _write_status(store: Store, pdb: Obj, status: Obj) -> None:
    new = copy.deepcopy(pdb)
    new["status"] = status
    store._commit(PDBS, "MODIFIED", new, pdb)


def _check_body(name: str, body: Any) -> Obj:
    if not isinstance(body, dict) or body.get("kind") != "Eviction":
        raise bad_request("the request body must be an Eviction object")
    if body.get("apiVersion") not in EVICTION_VERSIONS:
        raise bad_request(f"unsupported Eviction apiVersion {body.get('apiVersion')!r}")
    body_name = (body.get("metadata") or {}).get("name")
    if body_name and body_name != name:
        raise bad_request("name in URL does not match name in Eviction object")
    return body


def _too_many(pdb: Obj, status: Obj) -> ApiFailure:
    cause = (
        f"The disruption budget {pdb['metadata']['name']} needs {status['desiredHealthy']} "
        f"healthy pods and has {status['currentHealthy']} currently"
    )
    return ApiFailure(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
        {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
    )


def evict(store: Store, namespace: str, name: str, body: Any) -> Obj:
    """POST ``pods/NAME/eviction``: the pod is deleted, or a budget refuses (429)."""
    options = _check_body(name, body).get("deleteOptions")
    pod = store.get(PODS, namespace, name)
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase not in _IGNORE_BUDGETS and not pod["metadata"].get("deletionTimestamp"):
        _spend_budget(store, pod, namespace)
    store.delete(PODS, namespace, name, options)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _spend_budget(store: Store, pod: Obj, namespace: str) -> None:
    budgets = [
        pdb
        for pdb in store.objects[PDBS.key].values()
        if pdb["metadata"].get("namespace") == namespace
        and (selector := _selector(pdb)) is not None
        and labels_match(selector, pod)
    ]
    if not budgets:
        return
    if len(budgets) > 1:
        raise ApiFailure(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    (pdb,) = budgets
    status = budget_status(store, pdb)
    if not _ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        healthy_budget = status["currentHealthy"] >= status["desiredHealthy"] > 0
        if policy == "AlwaysAllow" or healthy_budget:
            _write_status(store, pdb, status)
            return
    if status["disruptionsAllowed"] <= 0:
        _write_status(store, pdb, status)
        raise _too_many(pdb, status)
    status["disruptionsAllowed"] -= 1
    status["disruptedPods"][pod["metadata"]["name"]] = now()
    _write_status(store, pdb, status)
