"""Named scheduling policies: which plugins and actions a cycle runs.

Policies are a literal table over the names of :mod:`phalanx.policies.registry`; each
policy documents the source semantics it follows and lists its actions in order.

- ``phalanx``: the engine's own policy — fair-share queues (:mod:`phalanx.plugins.queues`),
  reservations and backfill so that big gangs do not starve (the ``reserve`` action, see
  :mod:`phalanx.actions.reserve`: EASY backfill, the head of each queue reserved when it is
  more than 32 GPUs, and the two oldest gangs of each queue that have waited max(1 h, 3 × their
  estimate); learned estimates are the median of the shape's runtimes (of the queue's until
  three of the shape have finished); ``allocate`` backfills only what delays no reservation,
  or a reservation resting on learned estimates, not a big head's, by at most a quarter of
  the time until it),
  gang-aware ``preempt`` and ``reclaim``
  (:mod:`phalanx.actions.preempt`, :mod:`phalanx.actions.reclaim`), gang units placed
  all-or-nothing through a Statement, priority then FIFO order, kube-scheduler's filters,
  binpack scoring, ``scheduleTimeoutSeconds`` with backoff, best-fit network domains. Nothing
  is ever held partially. The reservation rule was chosen from measurements
  (benchmarks/README.md, "Reservations and backfill").
- ``phalanx-reserve``: ``phalanx`` with textbook EASY backfill instead (the head of each queue
  always reserved, whatever its size, no aging): the design issue 12 warns about (reserved room
  sits idle, mean JCT suffers), kept to show that trade-off.
- ``volcano``: Volcano's default gang scheduling — the same Statement commit/discard, job
  order priority → gang (not-ready first) → DRF (smaller dominant share first), binpack; no
  reservation and no time-based backfill, so big gangs can starve; no gang timeout (Volcano
  PodGroups have none). Queues as Volcano's ``proportion`` plugin (weights, capability), and
  Volcano's ``preempt``/``reclaim`` with its gang plugin's rule (a job is never taken below
  ``minAvailable``). The ``enqueue`` admission step is not modelled (every PodGroup is
  Inqueue), as with Volcano PodGroups that set no ``minResources``.
- ``fifo-reserve``: the strict baseline Slurm users know without backfill — gangs in priority
  then FIFO order, the first that cannot start gets a reservation (the earliest time it fits
  on the running gangs' estimated ends) and nothing behind it starts before it does. Queue
  capabilities are limits, as Slurm's QOS and association limits (``GrpTRES``): a gang whose
  queue has no room for it now is passed over, blocking nobody, and no fair share orders the
  queues.
- ``kueue``: a quota-only admission baseline in the manner of Kueue — a workload (gang) is
  admitted whole while its queue stays within ``capability`` (nominal quota plus borrowing
  limit) and holds that quota for all its pods, which are then placed one at a time as
  ``kube-default`` does; no fair-share order and no preemption.
- ``coscheduling``: the scheduler-plugins Coscheduling plugin inside kube-scheduler — pods
  one at a time, assumed at Permit while holding resources until the group reaches
  ``minMember`` or times out (see :mod:`phalanx.actions.coscheduling`); default scoring
  (spread).
- ``tas-greedy``: the ``phalanx`` policy with a greedy first-fit choice of network domain in
  the manner of Kueue's original Topology-Aware Scheduling (most free domain of the
  constraint's level first, no best fit, no level above): the baseline for topology figures.
  ``phalanx`` chooses domains by best fit (:mod:`phalanx.plugins.topology`); ``volcano`` here
  has no topology (Volcano's network-topology plugin is off in its default configuration).
- ``kube-default``: the default Kubernetes scheduler — every pod placed on its own, in
  priority-then-FIFO order, spread (LeastAllocated) scoring, no idea that pods belong
  together: the behaviour that deadlocks two gangs and leaves seven of eight GPUs idle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from phalanx.api.errors import InputError
from phalanx.cluster.fragmentation import TargetWorkload
from phalanx.cluster.state import ClusterState
from phalanx.framework.plugin import Action, BuildContext, Hooks
from phalanx.framework.session import CycleResult, Session, SessionConfig
from phalanx.plugins.predicates import Predicates
from phalanx.policies.registry import (
    ACTIONS,
    ORDERINGS,
    PLACEMENTS,
    SCORINGS,
    build_actions,
    build_scoring,
)

__all__ = [
    "ACTIONS",
    "COMPARED",
    "ORDERINGS",
    "PLACEMENTS",
    "POLICIES",
    "SCORINGS",
    "BuildContext",
    "Policy",
    "Scheduler",
    "Scorer",
    "get_policy",
]


@dataclass(frozen=True)
class Scorer:
    """A node-scoring plugin with its weight in the score sum and, optionally, the weight of
    each resource inside it (default: the plugin's own, GPUs first)."""

    name: str
    weight: int = 1
    resources: Mapping[str, int] | None = None

    def build(self, context: BuildContext | None = None) -> object:
        """The plugin, built with the run's ``context`` and this scorer's weights."""
        run = BuildContext() if context is None else context
        weights = replace(run, weight=self.weight, resources=self.resources)
        return build_scoring(self.name, weights)


@dataclass(frozen=True)
class Policy:
    name: str
    summary: str
    orderings: tuple[str, ...]  # plugins that order and vote, in tier order
    default_scoring: str
    actions: tuple[str, ...]  # names in the registry's ACTIONS, run in this order
    config: SessionConfig
    placement: str = ""  # a name in the registry's PLACEMENTS, or none

    def plugins(
        self,
        scoring: str | None = None,
        scorers: Sequence[Scorer] | None = None,
        context: BuildContext | None = None,
        orderings: Sequence[str] | None = None,
    ) -> list[object]:
        """The policy's plugins; ``scorers`` (weights included; weight 0 leaves a plugin out)
        replace its scoring plugin, ``scoring`` names one scoring plugin of weight 1;
        ``orderings`` (names in the registry's ORDERINGS) replace its ordering plugins.
        Scoring plugins are built with ``context`` (the run's seed and target workload)."""
        names = self.orderings if orderings is None else tuple(orderings)
        for name in names:
            if name not in ORDERINGS:
                known = ", ".join(ORDERINGS)
                message = f"unknown ordering {name!r} (choose from {known})"
                raise InputError(message, field="--orderings")
        ordering = [ORDERINGS[name]() for name in names]
        if self.placement:
            ordering.append(PLACEMENTS[self.placement]())
        if scorers is None:
            chosen = scoring or self.default_scoring
            plugin = build_scoring(chosen, context or BuildContext(), "--scoring")
            return [*ordering, Predicates(), plugin]
        built = (s.build(context) for s in scorers if s.weight > 0)
        return [*ordering, Predicates(), *built]

    @property
    def gang_aware(self) -> bool:
        return self.config.gang_units


POLICIES: dict[str, Policy] = {
    "kube-default": Policy(
        "kube-default",
        "pod at a time, priority then FIFO, spread; no gangs",
        ("priority",),
        "spread",
        ("allocate",),
        SessionConfig(gang_units=False),
    ),
    "coscheduling": Policy(
        "coscheduling",
        "scheduler-plugins: pod at a time, held at Permit until minMember or timeout",
        ("priority",),
        "spread",
        ("coscheduling",),
        SessionConfig(gang_units=False, timeouts=False),
    ),
    "volcano": Policy(
        "volcano",
        "gang Statement, proportion → priority → gang → DRF order, binpack; gang-preempt and "
        "reclaim; no reservation or backfill",
        ("queues", "priority", "gang", "drf"),
        "binpack",
        ("allocate", "volcano-preempt", "volcano-reclaim"),
        SessionConfig(gang_units=True, timeouts=False),
    ),
    "fifo-reserve": Policy(
        "fifo-reserve",
        "Slurm-like strict baseline: priority then FIFO, the head reserved, no backfill; "
        "queue capabilities as QOS limits",
        ("quota", "priority", "gang"),
        "binpack",
        ("reserve-strict", "allocate"),
        SessionConfig(gang_units=True, timeouts=False),
    ),
    "phalanx": Policy(
        "phalanx",
        "gang all-or-nothing, fair-share queues, priority then FIFO, binpack, timeouts with "
        "backoff, topology; reservations for big and aged gangs with EASY backfill, expected "
        "starts; gang-aware preempt and reclaim",
        ("queues", "priority", "gang"),
        "binpack",
        ("reserve", "allocate", "preempt", "reclaim"),
        SessionConfig(gang_units=True),
        placement="topology",
    ),
    "phalanx-reserve": Policy(
        "phalanx-reserve",
        "phalanx with textbook EASY backfill: the head of each queue always reserved",
        ("queues", "priority", "gang"),
        "binpack",
        ("reserve-easy", "allocate", "preempt", "reclaim"),
        SessionConfig(gang_units=True),
        placement="topology",
    ),
    "tas-greedy": Policy(
        "tas-greedy",
        "phalanx with a greedy first-fit network domain (Kueue TAS's original), no best fit",
        ("priority", "gang"),
        "binpack",
        ("allocate",),
        SessionConfig(gang_units=True),
        placement="topology-greedy",
    ),
    "kueue": Policy(
        "kueue",
        "quota-only admission of whole workloads (within queue capability), then pod at a "
        "time like kube-default",
        ("quota", "priority"),
        "spread",
        ("allocate",),
        SessionConfig(gang_units=False),
    ),
}


#: What ``phalanx compare`` runs by default (``tas-greedy`` is for topology figures only).
COMPARED = ("kube-default", "coscheduling", "volcano", "fifo-reserve", "phalanx", "phalanx-reserve")


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        known = ", ".join(POLICIES)
        message = f"unknown policy {name!r} (choose from {known})"
        raise InputError(message, field="--policy") from None


class Scheduler:
    """The engine: one session per cycle with a policy's plugins and actions, seeded."""

    def __init__(
        self,
        policy: Policy,
        *,
        seed: int = 0,
        scoring: str | None = None,
        scorers: Sequence[Scorer] | None = None,
        actions: Sequence[str] | None = None,
        target: TargetWorkload | None = None,
        orderings: Sequence[str] | None = None,
    ) -> None:
        """``actions`` replaces the policy's list of actions (names in the registry);
        ``target`` is the pod shapes the cluster expects (FGD's target workload; None: the
        plugin learns them from the cluster's pods)."""
        self.policy = policy
        context = BuildContext(seed=seed, target=target)
        self.plugins: Sequence[object] = policy.plugins(scoring, scorers, context, orderings)
        self.hooks = Hooks(self.plugins)
        names = policy.actions if actions is None else tuple(actions)
        self.actions: list[Action] = build_actions(names)
        self.config = policy.config
        self.rng = np.random.default_rng(seed)

    def cycle(self, state: ClusterState, now: float) -> CycleResult:
        session = Session(state, self.hooks, now=now, rng=self.rng, config=self.config)
        for action in self.actions:
            action.execute(session)
        return session.close()
