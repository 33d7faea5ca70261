"""Which version of an API the server serves, read from its discovery endpoints.

Design: the Workload API (``scheduling.k8s.io``) changed shape between releases — ``v1alpha1``
Workloads (1.35), ``v1alpha2`` and ``v1beta1`` Workloads with standalone PodGroups (1.36/1.37)
— and a cluster serves only the versions its feature gates and runtime config enable. So the
live scheduler does not assume a version: it reads ``/apis/<group>`` (the group's served
versions), then ``/apis/<group>/<version>`` for each candidate (the resources that version
serves: ``scheduling.k8s.io/v1`` serves PriorityClasses but no Workloads), and watches the
newest candidate that is served. A group the server does not serve is a 404: no version.
Errors other than 404 (the server unreachable at start-up) are raised: the caller retries.
"""

from __future__ import annotations

from collections.abc import Sequence

from phalanx.live.client import KubeClient
from phalanx.live.errors import ApiError
from phalanx.live.resources import Resource


async def served_versions(client: KubeClient, group: str) -> list[str]:
    """The versions of ``group`` the server lists (empty when the group is not served)."""
    try:
        listing = await client.request("GET", f"/apis/{group}")
    except ApiError as exc:
        if exc.not_found:
            return []
        raise
    versions = listing.get("versions") or []
    return [str(v.get("version")) for v in versions if isinstance(v, dict) and v.get("version")]


async def newest_served(client: KubeClient, candidates: Sequence[Resource]) -> Resource | None:
    """The first of ``candidates`` (one group, newest version first) the server serves."""
    if not candidates:
        return None
    versions = set(await served_versions(client, candidates[0].group))
    for resource in candidates:
        if resource.version in versions and await client.served(resource):
            return resource
    return None
