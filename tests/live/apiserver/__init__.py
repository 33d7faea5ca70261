"""A fake Kubernetes API server for the live-path tests: real HTTP on 127.0.0.1, all in memory.

Why our own aiohttp server rather than ``kmock`` 0.8: kmock would need a subclass that replaces
most of what matters for a scheduler's tests — uid/resourceVersion/generation stamping, label
and field selectors, PUT with optimistic concurrency, ``pods/binding``, status subresources,
resourceVersion-aware watch resume, bookmarks, ``timeoutSeconds``, 410 Gone — and it would lean
on kmock's private attributes (``_requests``, ``_buses``, ``_lock``) of a young release, plus a
per-request O(n) request history to trim. The emulation is the bulk either way; written
directly it is ~1,900 lines with no private API to track, and faults are first-class.

Layout: :mod:`.registry` (what is served; CRDs by registration), :mod:`.store` (objects,
resourceVersions, event log, watch fan-out, verbs), :mod:`.selectors`, :mod:`.patches`,
:mod:`.eviction` (``pods/eviction`` with PodDisruptionBudgets; ``eviction=False`` turns it off),
:mod:`.server` (HTTP, watch streaming, fault injection). Start it as an async context manager::

    async with FakeApiServer(crds=ALL_CRDS, bookmark_interval=0.05) as server:
        client = KubeClient(config_for_server(server.url))
        server.fail("POST", r"/binding$", 500)      # next bind fails with 500
        server.force_gone()                         # next watch gets ERROR 410
        server.drop_watches()                       # every open watch ends
        server.add_latency(0.05, "GET")             # slow reads

Inspection: ``server.requests`` (method, path, query, Authorization of every request) and
``server.count(method, path_regex, watch=...)``; ``server.put/get/remove/objects`` reach the
store directly (no HTTP, no admission) to set up or check state.
"""

from .registry import (
    ALL_CRDS,
    BUILTIN,
    ELASTIC_QUOTAS,
    ELASTIC_QUOTAS_SIGS,
    KAI_PODGROUPS,
    KAI_QUEUES,
    KUEUE_V1BETA1,
    KUEUE_V1BETA2,
    PODGROUPS_SIGS,
    PODGROUPS_X,
    QUEUE_CRDS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_API_V1ALPHA2,
    WORKLOAD_API_V1BETA1,
    WORKLOADS,
    ResourceInfo,
)
from .server import FakeApiServer, FaultRule, RecordedRequest
from .store import ApiFailure, Store

__all__ = [
    "ALL_CRDS",
    "BUILTIN",
    "ELASTIC_QUOTAS",
    "ELASTIC_QUOTAS_SIGS",
    "KAI_PODGROUPS",
    "KAI_QUEUES",
    "KUEUE_V1BETA1",
    "KUEUE_V1BETA2",
    "PODGROUPS_SIGS",
    "PODGROUPS_X",
    "QUEUE_CRDS",
    "VOLCANO_PODGROUPS",
    "VOLCANO_QUEUES",
    "WORKLOADS",
    "WORKLOAD_API_V1ALPHA2",
    "WORKLOAD_API_V1BETA1",
    "ApiFailure",
    "FakeApiServer",
    "FaultRule",
    "RecordedRequest",
    "ResourceInfo",
    "Store",
]
