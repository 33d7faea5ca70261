"""The live path: phalanx against a real Kubernetes API server (``phalanx serve``).

Client foundation:

- :mod:`.config` — ``--kubeconfig PATH`` or in-cluster configuration (via lightkube's loader).
- :mod:`.client` — :class:`KubeClient`, async REST over plain dicts (no model
  deserialisation), paged lists, watches; why lightkube is in its docstring.
- :mod:`.informer` — :class:`Informer`: list, watch with bookmarks and ``timeoutSeconds``,
  resume from the last resourceVersion, relist on 410, back off on errors, skip (and re-check)
  a missing API.
- :mod:`.writes` — :func:`bind` (raw Status answer), pod status conditions, CRD ``/status``.
- :mod:`.events` — ``events.k8s.io/v1`` (and legacy ``v1``) Events; the background recorder.
- :mod:`.leases` — ``coordination.k8s.io/v1`` Leases for leader election.
- :mod:`.resources` — the API resources phalanx uses and their URL paths.
- :mod:`.errors` — :class:`ApiError` (status code), :class:`TransportError`,
  :class:`ConfigError`.

The scheduler on top of it:

- :mod:`.cache` — the one cluster state, built at start-up and changed by watch events
  (assume/confirm/forget, Volcano queue holds); :mod:`.convert` (memoised conversions,
  rejected objects); :mod:`.gang_events` (PodGroups, Workloads, PriorityClasses, Queues);
  :mod:`.queue_objects` (every API's queue objects into the queue book, by the simulator's
  readers).
- :mod:`.loop` — :class:`~phalanx.live.loop.LiveScheduler`: cycles; :mod:`.backend` (the
  live Backend: binds with retries, evictions, explanations, wake-ups); :mod:`.hints` (what
  wakes it), :mod:`.recovery` (undoing partial binds), :mod:`.waiting`
  (``PodScheduled=False`` explanations).
- :mod:`.status` and :mod:`.group_status` — PodGroup status in each API's vocabulary, Events.
- :mod:`.leader`, :mod:`.health`, :mod:`.settings` — leader election, ``/metrics`` and probes,
  the YAML settings; :mod:`.explain` (``phalanx explain``), :mod:`.manifests` and
  :mod:`.example` (``phalanx manifests``).

Objects are dicts straight from ``json.loads``, ready for :mod:`phalanx.k8s`'s converters
(``pod_from_dict``, ``node_from_dict``, ``gang_from_dict``, ``PriorityTable``).
"""

from phalanx.live import events, leases
from phalanx.live.client import KubeClient, ObjectList, PatchType, WatchEvent, label_selector
from phalanx.live.config import (
    ClusterConfig,
    config_for_server,
    in_cluster_config,
    kubeconfig_config,
    load_config,
)
from phalanx.live.errors import ApiError, ConfigError, LiveError, TransportError
from phalanx.live.informer import Backoff, Informer, InformerStats
from phalanx.live.resources import (
    EVENTS,
    EVENTS_V1,
    GANG_RESOURCES,
    LEASES,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    Resource,
    object_key,
)
from phalanx.live.writes import bind, binding, patch_pod_status, patch_status, pod_condition

__all__ = [
    "EVENTS",
    "EVENTS_V1",
    "GANG_RESOURCES",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODGROUPS",
    "PODGROUPS_SIGS",
    "PODS",
    "PRIORITY_CLASSES",
    "VOLCANO_PODGROUPS",
    "VOLCANO_QUEUES",
    "WORKLOADS",
    "ApiError",
    "Backoff",
    "ClusterConfig",
    "ConfigError",
    "Informer",
    "InformerStats",
    "KubeClient",
    "LiveError",
    "ObjectList",
    "PatchType",
    "Resource",
    "TransportError",
    "WatchEvent",
    "bind",
    "binding",
    "config_for_server",
    "events",
    "in_cluster_config",
    "kubeconfig_config",
    "label_selector",
    "leases",
    "load_config",
    "object_key",
    "patch_pod_status",
    "patch_status",
    "pod_condition",
]
