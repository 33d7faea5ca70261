"""Queue objects in the live cache: every peer's queue API into the state's one queue book.

Design: the simulator reads Volcano ``Queue``, KAI ``Queue`` (``scheduling.run.ai/v2``),
Kueue ``ClusterQueue``, ``LocalQueue``, ``Cohort`` and ``ResourceFlavor``, and
scheduler-plugins ``ElasticQuota`` with the readers of :mod:`phalanx.k8s.queues` into
:class:`~phalanx.api.queues.QueueSpec` and :class:`~phalanx.api.queues.QueueBindingSpec`;
:class:`QueueObjects` feeds the live :class:`~phalanx.cluster.queues.QueueBook` from the same
readers (no second converter), one watch event at a time, so the same objects make the same
queues, bindings and decisions live as in simulation. Which queue a gang or pod is in is the
book's rule, shared by both (:meth:`QueueBook.queue_of`): a PodGroup's queue; a pod's
``kueue.x-k8s.io/queue-name`` label through its namespace's LocalQueue to a ClusterQueue;
``kai.scheduler/queue``; the namespace's ElasticQuota for a gang that names none. A
ResourceFlavor goes into the book by its name (``QueueBook.add_flavor``); a ClusterQueue
naming one that is missing, or rejected, is inactive, as Kueue leaves it.

Several objects may declare the same queue name (a Volcano and a KAI queue ``team-a``, two
ElasticQuotas in one namespace): each is kept, and the book holds the first by API (Volcano,
KAI, Kueue ClusterQueue, Kueue Cohort, ElasticQuota of ``scheduling.x-k8s.io``, then of
``scheduling.sigs.k8s.io``), then by object key; when it goes, the next takes its place. An
event that changes nothing the book holds (a status write by the queue's own controller)
changes nothing: :meth:`QueueObjects.apply` says whether the book changed, so the cache wakes
parked gangs only then.

A malformed object is rejected with one line naming its kind, name and field (a warning once,
an ``Invalid`` Event on it) and counts as deleted — its queue is undeclared (no limits), as
for a Volcano Queue — until an update makes it valid; the other queues are unaffected.
Conversions are memoised (per uid and spec), except Volcano's: its ``status.state`` matters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from phalanx.api.errors import InputError
from phalanx.api.queues import QueueBindingSpec, QueueSpec
from phalanx.api.specs import ResourceFlavorSpec
from phalanx.cluster.queues import QueueBook
from phalanx.k8s.queues import (
    elastic_quota_from_dict,
    kai_queue_from_dict,
    kueue_cluster_queue_from_dict,
    local_queue_from_dict,
    resource_flavor_from_dict,
    volcano_queue_from_dict,
)
from phalanx.live.convert import Conversions, Obj, Rejections, key_of
from phalanx.live.resources import (
    ELASTIC_QUOTAS,
    ELASTIC_QUOTAS_SIGS,
    KAI_QUEUES,
    VOLCANO_QUEUES,
    Resource,
)

DELETED = "DELETED"
T = TypeVar("T")
Read = QueueSpec | QueueBindingSpec | ResourceFlavorSpec
Reader = Callable[[Mapping[str, Any]], Read]

#: (group, plural) → (rank when names collide, the label rejections use, the reader).
READERS: dict[tuple[str, str], tuple[int, str, Reader]] = {
    (VOLCANO_QUEUES.group, "queues"): (0, "Queue", volcano_queue_from_dict),
    (KAI_QUEUES.group, "queues"): (1, "Queue.scheduling.run.ai", kai_queue_from_dict),
    ("kueue.x-k8s.io", "clusterqueues"): (2, "ClusterQueue", kueue_cluster_queue_from_dict),
    ("kueue.x-k8s.io", "localqueues"): (2, "LocalQueue", local_queue_from_dict),
    ("kueue.x-k8s.io", "cohorts"): (3, "Cohort", kueue_cluster_queue_from_dict),
    ("kueue.x-k8s.io", "resourceflavors"): (2, "ResourceFlavor", resource_flavor_from_dict),
    (ELASTIC_QUOTAS.group, "elasticquotas"): (4, "ElasticQuota", elastic_quota_from_dict),
    (ELASTIC_QUOTAS_SIGS.group, "elasticquotas"): (
        5,
        "ElasticQuota.scheduling.sigs.k8s.io",
        elastic_quota_from_dict,
    ),
}

Marker = tuple[str, str, str]  # (group, plural, object key)


class QueueObjects:
    """The queue objects seen, and which of them the book holds (see the module doc)."""

    def __init__(self, conversions: Conversions, rejections: Rejections) -> None:
        self.conversions = conversions
        self.rejections = rejections
        #: queue name → (rank, object key) → the spec that object declares
        self._declared: dict[str, dict[tuple[int, str], QueueSpec]] = {}
        self._names: dict[Marker, str] = {}  # object → the queue name it declares
        self._bindings: dict[Marker, QueueBindingSpec] = {}  # LocalQueue → its binding
        self._flavors: dict[Marker, ResourceFlavorSpec] = {}  # ResourceFlavor → its spec

    def apply(self, resource: Resource, kind: str, obj: Obj, book: QueueBook) -> bool:
        """One event about a queue object of ``resource``; True when the book changed."""
        rank, label, reader = READERS[(resource.group, resource.plural)]
        key = key_of(obj)
        marker = (resource.group, resource.plural, key)
        spec: Read | None = None
        if kind == DELETED:
            self.rejections.accept(label, key)
            self.conversions.drop(label, key)
        else:
            spec = self._read(label, obj, reader, memo=resource != VOLCANO_QUEUES)
        if isinstance(spec, ResourceFlavorSpec) or marker in self._flavors:
            return self._flavor(
                marker, spec if isinstance(spec, ResourceFlavorSpec) else None, book
            )
        if isinstance(spec, QueueBindingSpec) or marker in self._bindings:
            return self._bind(marker, spec if isinstance(spec, QueueBindingSpec) else None, book)
        names: set[str] = set()
        before = self._names.pop(marker, None)
        if before is not None:
            self._declared[before].pop((rank, key), None)
            names.add(before)
        if isinstance(spec, QueueSpec):
            self._declared.setdefault(spec.name, {})[(rank, key)] = spec
            self._names[marker] = spec.name
            names.add(spec.name)
        changed = False
        for name in sorted(names):
            changed |= self._install(name, book)
        return changed

    def _read(self, label: str, obj: Obj, reader: Reader, memo: bool) -> Read | None:
        """``reader(obj)`` (memoised under ``label`` with ``memo``), or None when rejected."""
        try:
            spec = self.conversions.convert(label, obj, reader) if memo else reader(obj)
        except InputError as exc:
            self.rejections.reject(label, obj, exc)
            return None
        except Exception as exc:  # one object's bug must not stop the others
            error = InputError(f"cannot be read: {type(exc).__name__}: {exc}")
            self.rejections.reject(label, obj, error.located(obj=f"{label} {key_of(obj)}"))
            return None
        self.rejections.accept(label, key_of(obj))
        return spec

    def _install(self, name: str, book: QueueBook) -> bool:
        """Put the winning declaration of queue ``name`` into the book (if it changed)."""
        declared = self._declared.get(name) or {}
        winner = declared[min(declared)] if declared else None
        if not declared:
            self._declared.pop(name, None)
        current = book.specs.get(name)
        return _swap(current, winner, lambda _: book.remove_queue(name), book.add_queue)

    def _flavor(self, marker: Marker, spec: ResourceFlavorSpec | None, book: QueueBook) -> bool:
        before = self._flavors.pop(marker, None)
        if spec is not None:
            self._flavors[marker] = spec
        return _swap(before, spec, lambda old: book.remove_flavor(old.name), book.add_flavor)

    def _bind(self, marker: Marker, spec: QueueBindingSpec | None, book: QueueBook) -> bool:
        before = self._bindings.pop(marker, None)
        if spec is not None:
            self._bindings[marker] = spec
        return _swap(before, spec, book.remove_binding, book.add_binding)


def _swap(
    before: T | None, after: T | None, remove: Callable[[T], None], add: Callable[[T], None]
) -> bool:
    """Replace ``before`` by ``after`` (either may be None); False when they are equal."""
    if before == after:
        return False
    if before is not None:
        remove(before)
    if after is not None:
        add(after)
    return True
