"""Queues and disruption budgets: the multi-tenant part of the model, as pure data.

One :class:`QueueSpec` model carries every peer's queue object (Volcano ``Queue``, KAI
``Queue``, Kueue ``ClusterQueue`` and ``Cohort``, scheduler-plugins ``ElasticQuota``); the
readers in :mod:`phalanx.k8s.queues` map each into it (docs/manifests.md, "Queues"). Per queue
and per resource (integer units, as every other resource):

- ``deserved``: the entitlement a queue gets first when it has demand (KAI ``quota``, Kueue
  ``nominalQuota``, ElasticQuota ``min``, Volcano ``deserved``); empty = none, the queue's share
  comes from its ``weight`` only (Volcano's ``proportion``);
- ``guarantee``: never reclaimed below (Volcano ``guarantee.resource``; Kueue's nominal quota
  minus ``lendingLimit``);
- ``capability``: a hard limit per resource; a resource not named is unlimited;
- ``weight``: how the rest is shared among siblings with demand (Volcano ``weight``, KAI
  ``overQuotaWeight``, Kueue ``fairSharing.weight``);
- ``priority``: siblings of higher priority are served first (Volcano, KAI);
- ``reclaimable``: may others take back what it borrowed beyond its deserved share.

:class:`QueueBindingSpec` points a namespace (all its gangs) or a namespaced queue name (a Kueue
``LocalQueue``) at a queue. :class:`BudgetSpec` is a ``policy/v1 PodDisruptionBudget``.

Kueue resource flavors: a ClusterQueue's ``resourceGroups`` are kept as ``groups`` (each a
:class:`ResourceGroup`: the resources it covers and its :class:`FlavorQuota` per flavor, in the
order listed). ``deserved``/``guarantee``/``capability`` stay the sums over flavors (the queue
as a whole, for fair shares, preemption and reclaim); the per-flavor quotas are what admission
checks when the queue has flavors to choose from (:mod:`phalanx.cluster.flavors`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from phalanx.api.specs import Requirement, Resources

#: The queue of a gang that names none (Volcano creates it at install).
DEFAULT_QUEUE = "default"


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    """One flavor's quotas in a ClusterQueue, per resource: ``nominal``; ``borrowing`` limit
    (a resource not named borrows without limit inside its cohort); ``lending`` limit (not
    named: all its unused nominal quota may be lent)."""

    name: str
    nominal: Resources = field(default_factory=dict)
    borrowing: Resources = field(default_factory=dict)
    lending: Resources = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """A ClusterQueue's ``resourceGroups[]``: the resources it covers and their flavors, in
    the order Kueue tries them."""

    covered: tuple[str, ...]
    flavors: tuple[FlavorQuota, ...]


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    parent: str | None = None
    deserved: Resources = field(default_factory=dict)
    guarantee: Resources = field(default_factory=dict)
    capability: Resources = field(default_factory=dict)
    weight: int = 1
    priority: int = 0
    reclaimable: bool = True
    open: bool = True  # Volcano ``status.state`` Open (Closed/Closing queues admit nothing)
    api: str = ""  # the API group it was read from ("" for an implicit queue)
    namespaces: tuple[str, ...] = ()  # gangs of these namespaces default to it (ElasticQuota)
    groups: tuple[ResourceGroup, ...] = ()  # Kueue resource groups (flavor quotas), in order
    #: Kueue ``flavorFungibility.whenCanBorrow: TryNextFlavor``: flavors that fit without
    #: borrowing are taken before those that need to borrow
    borrow_last: bool = False


@dataclass(frozen=True, slots=True)
class QueueBindingSpec:
    """Gangs of ``namespace`` use ``queue``: for all of them (``name`` empty: a namespace
    default, as an ElasticQuota), or for those naming ``name`` (a Kueue LocalQueue)."""

    namespace: str
    name: str
    queue: str


@dataclass(frozen=True, slots=True)
class BudgetSpec:
    """``policy/v1 PodDisruptionBudget``: pods matching ``selector`` in ``namespace``. Exactly
    one of ``min_available``/``max_unavailable`` is set; a percentage is kept as ``"N%"``."""

    namespace: str
    name: str
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
