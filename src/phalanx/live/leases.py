"""``coordination.k8s.io/v1`` Leases: the storage of leader election.

Design: a Lease is read, changed locally and written back with PUT carrying the
``resourceVersion`` it was read at; a concurrent writer makes the PUT fail with 409, which is
how two replicas of ``phalanx serve`` learn that only one may lead. This module gives the
primitives (get / create / update and :func:`acquire`'s pure computation of the next Lease);
the election loop (renew every ``retryPeriod``, give up after ``renewDeadline``) belongs to the
``serve`` runner. Times are ``MicroTime`` strings, as client-go writes them.
"""

from __future__ import annotations

import copy
from datetime import datetime

from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import ApiError
from phalanx.live.resources import LEASES
from phalanx.live.writes import micro_time


def lease(
    namespace: str,
    name: str,
    holder: str,
    duration_seconds: int,
    *,
    now: datetime | None = None,
) -> Obj:
    """A new Lease held by ``holder`` from ``now``."""
    stamp = micro_time(now)
    return {
        "apiVersion": LEASES.api_version,
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration_seconds,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 0,
        },
    }


def acquire(
    current: Obj, holder: str, duration_seconds: int, *, now: datetime | None = None
) -> Obj:
    """``current`` renewed (same holder) or taken over (new holder: transitions + 1).

    Keeps ``metadata.resourceVersion``, so :func:`update` is conditional on what was read.
    """
    updated = copy.deepcopy(current)
    spec = updated.setdefault("spec", {})
    stamp = micro_time(now)
    if spec.get("holderIdentity") != holder:
        spec["holderIdentity"] = holder
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    spec["leaseDurationSeconds"] = duration_seconds
    spec["renewTime"] = stamp
    return updated


async def get(client: KubeClient, namespace: str, name: str) -> Obj | None:
    """The Lease, or None when it does not exist."""
    try:
        return await client.get(LEASES, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def create(client: KubeClient, body: Obj) -> Obj:
    """Create; ApiError 409 (AlreadyExists) when another replica was first."""
    return await client.create(LEASES, body)


async def update(client: KubeClient, body: Obj) -> Obj:
    """PUT; ApiError 409 (Conflict) when the Lease changed since ``body`` was read."""
    return await client.replace(LEASES, body)
