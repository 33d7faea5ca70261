"""QueueBook: the queue tree, what each queue uses and asks, and what it deserves.

The book lives on :class:`~phalanx.cluster.state.ClusterState` (``state.queues``) as long as
the state. Runners add queue specs, bindings and budgets as they appear. A gang's queue is
resolved (:meth:`queue_of`) from its PodGroup's queue name: a Kueue LocalQueue of that name in
its namespace maps to its ClusterQueue; ``default`` (no queue named) becomes the namespace's
default queue when one is bound (ElasticQuota), else ``default``. A pod without a PodGroup
names its queue by what its declaration says (``PodSpec.queue``), else the label
``kueue.x-k8s.io/queue-name`` (a LocalQueue) or ``kai.scheduler/queue``. A name that no object
declares is a queue of its own with no limits and weight 1 (Volcano's ``default`` queue exists
without being declared).

:meth:`refresh` computes, once per cycle and only over gangs that hold or wait (a tracked set,
so finished work costs nothing): per queue ``usage`` (requests of pods holding a node),
``demand`` (usage plus waiting members' requests, capped by capability, summed up the tree),
and ``deserved`` (:mod:`phalanx.cluster.fairshare`). The per-gang figures are kept by a
:class:`~phalanx.cluster.queuetally.QueueTally` and recomputed only for gangs that changed;
the shares only when the sums, the cluster's total or the queue objects moved. Vectors are
floats over the resource index; ``pods`` never counts in shares.

**Usage with memory** (``half_life`` seconds, off by default): ``history`` is each queue's
usage averaged with exponential decay (weight halves every ``half_life``). For *ordering*, a
queue's usage counts what it used beyond its deserved share in that recent past
(``usage + max(0, history − deserved)``), so a team that used much yesterday yields today, as
KAI's time-based fair share and Slurm's ``PriorityDecayHalfLife`` do. Reclaim and admission
use current usage only (so the no-cycle rule holds).

Kueue ResourceFlavors (``flavors``, by name) are kept beside the queues: a ClusterQueue
naming one that does not exist is inactive (:meth:`inactive`); which queues choose between
flavors is :meth:`flavored` (see :mod:`phalanx.cluster.flavors`).

``holds`` records room held for a preemptor until its victims are gone: gang ident →
:class:`Hold` (node rows and the amount per row); the ``held`` filter keeps every other pod off
that room. A hold ends when its gang is placed or gone, or after ``HOLD_SECONDS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from phalanx.api.queues import DEFAULT_QUEUE, BudgetSpec, QueueBindingSpec, QueueSpec
from phalanx.api.specs import ResourceFlavorSpec
from phalanx.cluster.fairshare import Claim, Floats, dominant_ratio, dominant_ratios, water_fill
from phalanx.cluster.flavors import flavored, missing_flavor
from phalanx.cluster.queuetally import QueueTally
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.workloads import GangInfo, PodStatus

KUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KAI_LABEL = "kai.scheduler/queue"
#: A running gang is not a preemption victim before it ran this long (annotation).
MIN_RUNTIME = "phalanx.dev/min-runtime"
#: How long room stays held for a preemptor whose victims have not gone (seconds).
HOLD_SECONDS = 300.0


@dataclass(slots=True)
class Hold:
    gang: str
    rows: dict[int, Floats]  # node row → amount held
    since: float
    victims: tuple[str, ...] = ()
    pods: dict[str, int] = field(default_factory=dict)  # pod key → its planned node row


@dataclass(slots=True)
class QueueUse:
    usage: Floats
    demand: Floats
    deserved: Floats = field(default_factory=lambda: np.zeros(0))
    waiting: int = 0  # gangs waiting in it


class QueueBook:
    def __init__(self) -> None:
        self.specs: dict[str, QueueSpec] = {}
        self.bindings: dict[tuple[str, str], str] = {}  # (namespace, name or "") → queue
        self.budgets: dict[str, BudgetSpec] = {}
        self.flavors: dict[str, ResourceFlavorSpec] = {}  # Kueue ResourceFlavors by name
        self._flavored: tuple[int, frozenset[str]] = (-1, frozenset())
        self.holds: dict[str, Hold] = {}
        self.uses: dict[str, QueueUse] = {}
        self.tracked: dict[str, GangInfo] = {}
        #: tracked gang → its arrival order (its first pod's), the order ``running`` keeps
        self._rank: dict[str, int] = {}
        self._live: dict[str, GangInfo] = {}  # tracked gangs that may have a member bound
        self.binds = 0  # counts binds (and looks at placed gangs): ``running`` may change
        #: the lowest priority of any gang that ever had a member bound (preemption victims
        #: are running gangs: a waiting gang no higher than this has none)
        self.lowest_priority: int | None = None
        self.min_runtime: dict[str, GangInfo] = {}  # gangs bound with a min-runtime
        self.declared = False  # any queue object at all (else queues change nothing)
        #: shares are computed this cycle (queues declared or named, or room held)
        self.active = False
        self.mask: Floats = np.zeros(0)
        self.half_life: float | None = None
        self.history: dict[str, Floats] = {}
        self.refreshed_at: float | None = None
        #: bumped when a queue, binding or budget appears or goes (preemption memos expire)
        self.generation = 0
        self._undeclared: dict[str, QueueSpec] = {}
        self.tally = QueueTally()  # the tracked gangs' figures, kept as they change
        #: the tally's sums, total, generation and width → the figures computed from them
        self._shared: tuple[tuple[object, ...], dict[str, QueueUse]] | None = None

    # -- objects ---------------------------------------------------------------------------
    def add_queue(self, spec: QueueSpec) -> None:
        self.specs[spec.name] = spec
        self.declared = True
        self.generation += 1
        for namespace in spec.namespaces:
            self.bindings[(namespace, "")] = spec.name

    def remove_queue(self, name: str) -> None:
        spec = self.specs.pop(name, None)
        self.generation += 1
        if spec is not None:
            for namespace in spec.namespaces:
                self.bindings.pop((namespace, ""), None)

    def add_binding(self, spec: QueueBindingSpec) -> None:
        self.bindings[(spec.namespace, spec.name)] = spec.queue
        self.declared = True
        self.generation += 1

    def closed(self, name: str) -> bool:
        """Is queue ``name`` declared closed (Volcano's ``state: Closed``): it admits nothing?"""
        spec = self.specs.get(name)
        return spec is not None and not spec.open

    def missing(self, name: str) -> bool:
        """Does a gang resolved to queue ``name`` name a queue that does not exist? Only
        while queue objects are declared (none at all: every name is a queue of its own), and
        never ``default`` (Volcano's, which always exists)."""
        return (
            name != DEFAULT_QUEUE and name not in self.specs and bool(self.specs or self.bindings)
        )

    def remove_binding(self, spec: QueueBindingSpec) -> None:
        """The binding ``spec`` is gone (a LocalQueue deleted): its gangs name a queue again."""
        if self.bindings.get((spec.namespace, spec.name)) == spec.queue:
            del self.bindings[(spec.namespace, spec.name)]
            self.generation += 1

    def add_flavor(self, spec: ResourceFlavorSpec) -> None:
        self.flavors[spec.name] = spec
        self.generation += 1

    def remove_flavor(self, name: str) -> None:
        if self.flavors.pop(name, None) is not None:
            self.generation += 1

    def inactive(self, name: str) -> str | None:
        """Why queue ``name`` admits nothing (a ClusterQueue naming a ResourceFlavor that
        does not exist, as Kueue leaves it inactive); None: it is active."""
        spec = self.specs.get(name)
        flavor = None if spec is None else missing_flavor(spec, self.flavors)
        if flavor is None:
            return None
        return (
            f"ClusterQueue {name!r} is inactive: its ResourceFlavor {flavor!r} does not exist "
            "(Kueue admits nothing through it until it does)"
        )

    def flavored(self) -> frozenset[str]:
        """The queues whose admission chooses a flavor or restricts nodes (kept per
        generation: asked for every gang)."""
        generation, names = self._flavored
        if generation != self.generation:
            names = frozenset(n for n, s in self.specs.items() if flavored(s, self.flavors))
            self._flavored = (self.generation, names)
        return names

    def add_budget(self, spec: BudgetSpec) -> None:
        self.budgets[f"{spec.namespace}/{spec.name}"] = spec
        self.generation += 1

    # -- the tree --------------------------------------------------------------------------
    def spec(self, name: str) -> QueueSpec:
        """The queue ``name``; undeclared: no limits, weight 1."""
        spec = self.specs.get(name)
        if spec is None:  # one shared (frozen) spec per undeclared name
            spec = self._undeclared.get(name) or self._undeclared.setdefault(name, QueueSpec(name))
        return spec

    def queue_of(self, gang: GangInfo) -> str:
        """The queue ``gang`` is in (kept on the gang while its spec, or its first member's,
        and the bindings are unchanged: asked several times per gang and cycle)."""
        token = (
            gang.spec if gang.spec is not None else gang.members[0].spec if gang.members else None
        )
        known = gang.queue_memo
        if (
            known is not None
            and known[0] is self
            and known[1] is token
            and known[2] == self.generation
        ):
            return known[3]
        queue = self._resolve(gang)
        gang.queue_memo = (self, token, self.generation, queue)
        return queue

    def named(self, gang: GangInfo) -> str:
        """The queue ``gang`` names (its spec's, else its first member's queue or label),
        before a LocalQueue or namespace maps it (:meth:`queue_of`)."""
        if gang.spec is not None:
            return gang.spec.queue or DEFAULT_QUEUE
        first = gang.members[0].spec if gang.members else None
        labels = first.labels if first is not None else {}
        return (
            (first.queue if first is not None else "")
            or labels.get(KUEUE_LABEL)
            or labels.get(KAI_LABEL)
            or DEFAULT_QUEUE
        )

    def _resolve(self, gang: GangInfo) -> str:
        named = self.named(gang)
        alias = self.bindings.get((gang.namespace, named))
        if alias is not None:
            return alias
        if named == DEFAULT_QUEUE:
            return self.bindings.get((gang.namespace, ""), DEFAULT_QUEUE)
        return named

    def children_of(self, name: str) -> list[str]:
        return [n for n in self.uses if n != name and self.parent(n) == name]

    def parent(self, name: str) -> str | None:
        parent = self.spec(name).parent
        return parent if parent and parent != name else None

    def ancestry(self, name: str) -> list[str]:
        """``name`` and its ancestors, nearest first (a loop in ``parent`` is cut)."""
        chain = [name]
        parent = self.parent(name)
        while parent is not None and parent not in chain:
            chain.append(parent)
            parent = self.parent(parent)
        return chain

    def capability(self, name: str, index: ResourceIndex) -> Floats:
        cap = np.full(len(index), np.inf)
        for resource, amount in self.spec(name).capability.items():
            if resource in index:
                cap[index.position[resource]] = amount
        return cap

    def _vector(self, resources: dict[str, int], index: ResourceIndex) -> Floats:
        out = np.zeros(len(index))
        for resource, amount in resources.items():
            if resource in index:
                out[index.position[resource]] = amount
        return out

    # -- usage, demand, deserved -----------------------------------------------------------
    def track(self, gangs: Iterable[GangInfo]) -> None:
        for gang in gangs:
            ident = gang.ident
            if ident not in self.tracked:
                self.tracked[ident] = gang
                gang.watcher = self.tally.dirty  # it tells the tally when it changes
                self.tally.dirty.add(ident)
                self._rank[ident] = min((p.seq for p in gang.members), default=0)
            if gang.placed:  # may have a member bound (tracked on every bind)
                self._live[ident] = gang
                self.binds += 1  # the running gangs may have changed
                priority = gang.priority
                if self.lowest_priority is None or priority < self.lowest_priority:
                    self.lowest_priority = priority
                if gang.members and MIN_RUNTIME in gang.members[0].spec.annotations:
                    self.min_runtime[ident] = gang

    def running(self) -> list[GangInfo]:
        """Tracked gangs with a member bound, in arrival order (gangs that neither hold nor
        wait are dropped). Only gangs seen with a member placed are looked
        at, so a long queue costs nothing here."""
        out = []
        for ident, gang in list(self._live.items()):
            if any(p.status is PodStatus.BOUND for p in gang.members):
                out.append(gang)
                continue
            del self._live[ident]
            if not gang.holding() and not gang.pending():
                self._untrack(ident)
        out.sort(key=lambda g: self._rank.get(g.ident, 0))
        return out

    def forget(self, ident: str) -> None:
        """``ident`` is gone (its PodGroup was deleted): it no longer counts."""
        self._untrack(ident)

    def _untrack(self, ident: str) -> None:
        gang = self.tracked.pop(ident, None)
        if gang is not None and gang.watcher is self.tally.dirty:
            gang.watcher = None
        self.tally.drop(ident)
        self.tally.dirty.discard(ident)
        self._rank.pop(ident, None)
        self._live.pop(ident, None)

    def refresh(
        self,
        gangs: Iterable[GangInfo],
        index: ResourceIndex,
        total: Floats,
        now: float | None = None,
    ) -> None:
        """Recompute usage, demand and deserved (``gangs``: those waiting now). Only the
        gangs that changed since the last refresh are looked at (:mod:`queuetally`), and the
        shares are computed again only when the sums, the cluster or the queues moved."""
        self.track(gangs)
        width = len(index)
        tally = self.tally
        if tally.stale(width, self.generation):
            tally.reset(width, self.generation)
            tally.dirty.update(self.tracked)
        for ident in list(tally.dirty):
            gang = self.tracked.get(ident)
            if gang is not None and not tally.update(gang, self.queue_of):
                self._untrack(ident)
        tally.dirty.clear()
        key = (tally.key(), total.tobytes(), self.generation, width)
        if self._shared is None or self._shared[0] != key:
            self._shared = (key, self._figures(index, total))
        uses = {  # copies: an action may move a queue's usage during its cycle
            name: replace(
                use, usage=use.usage.copy(), demand=use.demand.copy(), deserved=use.deserved.copy()
            )
            for name, use in self._shared[1].items()
        }
        if now is not None:
            self._remember(now, uses)
        self.uses = uses
        self.mask = _mask(index)

    def _figures(self, index: ResourceIndex, total: Floats) -> dict[str, QueueUse]:
        """Usage, demand and deserved per queue from the tally's sums."""
        width = len(index)
        uses = {
            name: QueueUse(sums.usage.copy(), sums.demand.copy(), waiting=sums.waiting)
            for name, sums in self.tally.sums.items()
        }
        for name in list(uses):
            for ancestor in self.ancestry(name)[1:]:
                uses.setdefault(ancestor, QueueUse(np.zeros(width), np.zeros(width)))
        for name in self.specs:
            uses.setdefault(name, QueueUse(np.zeros(width), np.zeros(width)))
        self._roll_up(uses, index)
        self._share(uses, index, total, _mask(index))
        return uses

    def _remember(self, now: float, uses: dict[str, QueueUse]) -> None:
        """Decay ``history`` to ``now`` and fold in the usage since the last refresh, taken as
        the larger of what the queue held at the last refresh and now (refreshes see usage
        before a cycle's binds and after its finishes, so either end alone misses work)."""
        if self.half_life is None or self.half_life <= 0:
            return
        last = self.refreshed_at if self.refreshed_at is not None else now
        keep = 0.5 ** ((now - last) / self.half_life)
        for name, use in uses.items():
            past = self.history.get(name, np.zeros_like(use.usage))
            before = self.uses.get(name)
            held = use.usage
            if before is not None and before.usage.size == held.size:
                held = np.maximum(held, before.usage)
            if past.size != held.size:
                past = np.zeros_like(held)
            self.history[name] = past * keep + held * (1.0 - keep)
        self.refreshed_at = now

    def remembered(self, name: str) -> Floats | None:
        """What ``name`` used beyond its deserved share in the recent past (None: off)."""
        past = self.history.get(name)
        use = self.uses.get(name)
        if past is None or use is None or past.size != use.deserved.size:
            return None
        return np.maximum(past - use.deserved, 0.0)

    def _roll_up(self, uses: dict[str, QueueUse], index: ResourceIndex) -> None:
        """Parents' usage and demand are their children's sums (plus their own gangs)."""
        leaves_first = sorted(uses, key=lambda n: -len(self.ancestry(n)))
        for name in leaves_first:
            use = uses[name]
            use.demand = np.minimum(use.demand, self.capability(name, index))
            parent = self.parent(name)
            if parent is not None and parent in uses:
                uses[parent].usage = uses[parent].usage + use.usage
                uses[parent].demand = uses[parent].demand + use.demand

    def _share(
        self, uses: dict[str, QueueUse], index: ResourceIndex, total: Floats, mask: Floats
    ) -> None:
        children: dict[str | None, list[str]] = {}
        for name in uses:
            parent = self.parent(name)
            children.setdefault(parent if parent in uses else None, []).append(name)
        pending: list[tuple[str | None, Floats]] = [(None, total.astype(np.float64))]
        while pending:
            parent, available = pending.pop()
            names = sorted(children.get(parent, []))
            claims = [
                Claim(
                    demand=uses[n].demand,
                    entitlement=np.maximum(
                        self._vector(self.spec(n).deserved, index),
                        self._vector(self.spec(n).guarantee, index),
                    ),
                    weight=float(self.spec(n).weight),
                    priority=self.spec(n).priority,
                )
                for n in names
            ]
            for name, deserved in zip(names, water_fill(available, claims, mask), strict=True):
                uses[name].deserved = deserved
                pending.append((name, deserved))

    def use(self, name: str, width: int) -> QueueUse:
        found = self.uses.get(name)
        if found is None:
            zero = np.zeros(width)
            return QueueUse(zero, zero, zero)
        return found

    def ratio(self, name: str, extra: Floats | None = None) -> float:
        """Usage (plus ``extra``) over deserved on the dominant resource."""
        use = self.uses.get(name)
        if use is None or not self.active:
            return 0.0
        usage = use.usage if extra is None else use.usage + extra
        return dominant_ratio(usage, use.deserved, self.mask)

    def ratios(self, name: str, extras: Floats) -> list[float]:
        """``ratio`` with each row of ``extras`` (one vector operation)."""
        use = self.uses.get(name)
        if use is None or not self.active:
            return [0.0] * len(extras)
        return dominant_ratios(use.usage + extras, use.deserved, self.mask)

    def guarantee(self, name: str, index: ResourceIndex) -> Floats:
        return self._vector(self.spec(name).guarantee, index)

    # -- holds -----------------------------------------------------------------------------
    def expire_holds(self, gangs: dict[str, GangInfo], now: float) -> None:
        for ident, hold in list(self.holds.items()):
            gang = gangs.get(ident)
            if gang is None or gang.ready() or now - hold.since > HOLD_SECONDS:
                del self.holds[ident]


def _mask(index: ResourceIndex) -> Floats:
    """1 for the resources that count in dominant shares (all but ``pods``)."""
    mask = np.ones(len(index))
    if "pods" in index:
        mask[index.position["pods"]] = 0.0
    return mask
