"""Session: one scheduling cycle over a snapshot of the cluster.

The session copies the node table's usage (cheap: a few ``[N, R]`` integer arrays), finds the
plugins' hooks once, and offers actions what they need: the ordered units, node selection,
validity and readiness votes, and Statements. Committed operations become the cycle's binds
and evictions; the one applier (:func:`phalanx.framework.backend.apply`) applies them, and
every other decision of the :class:`CycleResult` (conditions, timeouts, backoffs, wake-ups,
queueing hints), to the authoritative state and the runner's backend. Pods and gangs are
shared with the state, which is safe because every change to them in the session goes through
a Statement, and every Statement's operations, committed ones included, are undone on the
shared pods and gangs when the session closes (:func:`~phalanx.framework.statement.restore`):
a closed cycle has changed nothing outside its own snapshot, and a result that is dropped
leaves the state as it was (tested on ``ClusterState.fingerprint``). Gangs' conditions,
timeouts, backoffs and attempts, pods' backoffs and Permit deadlines are not written by the
session at all, only recorded in the result; so is the Kueue flavor a gang was placed in
(``CycleResult.flavors``: the flavor of the attempt that committed, see ``placements``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from phalanx.cluster.hints import Gated, Hint
from phalanx.cluster.labels import Mask
from phalanx.cluster.queues import Hold
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import Condition, GangInfo, PodInfo
from phalanx.framework.plugin import (
    Flavors,
    Gate,
    Hooks,
    Placements,
    PodChoice,
    Scores,
    within_flavors,
)
from phalanx.framework.selection import Selector
from phalanx.framework.statement import Op, Operation, Statement, restore
from phalanx.framework.unit import Unit


@dataclass(frozen=True, slots=True)
class SessionConfig:
    gang_units: bool = True  # False: every pod is its own unit (gang-unaware baselines)
    backoff_base: float = 1.0  # seconds; doubles per failed retry after a timeout
    backoff_max: float = 10.0
    timeouts: bool = True  # honour scheduleTimeoutSeconds (Volcano has no such field)
    #: Pods whose ``schedulerName`` is one of these are ours ("" = unset, as in simulation).
    scheduler_names: frozenset[str] = frozenset({"phalanx", ""})


@dataclass(frozen=True, slots=True)
class Retry:
    """A pod's attempt record (pod-at-a-time baselines): failures so far, the end of its
    backoff, and the state's release count when it last found no node (-1: not blocked)."""

    failures: int
    backoff_until: float
    blocked_at: int


@dataclass(slots=True)
class CycleResult:
    binds: list[tuple[PodInfo, int]] = field(default_factory=list)
    evictions: list[PodInfo] = field(default_factory=list)
    reservations: list[tuple[PodInfo, int]] = field(default_factory=list)  # held, not bound
    #: id of a pod → the GPU devices its bind or reservation takes (chosen in the session)
    gpus: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: reservations given back: the pod (pending again), and the node and GPUs it held
    unreserved: list[tuple[PodInfo, int, tuple[int, ...]]] = field(default_factory=list)
    wake_at: list[float] = field(default_factory=list)  # when a cycle is needed again
    #: when a cycle should re-check plans (reservations, aging) if the run is still going on
    recheck_at: list[float] = field(default_factory=list)
    waiting: dict[str, Condition] = field(default_factory=dict)  # gang ident → why it waits
    blocked: list[GangInfo] = field(default_factory=list)  # not worth a retry until room frees
    unblocked: list[GangInfo] = field(default_factory=list)  # parked, worth a retry again
    timeouts: list[GangInfo] = field(default_factory=list)
    retry_at: dict[str, float] = field(default_factory=dict)  # gang ident → end of new backoff
    deferred: dict[str, float] = field(default_factory=dict)  # skipped in backoff → its end
    placed: list[GangInfo] = field(default_factory=list)  # gangs whose minimum was committed
    domains: dict[str, str] = field(default_factory=dict)  # placed gang ident → domain chosen
    failures: Counter[str] = field(default_factory=Counter)  # backoffs started, per gang ident
    #: gang ident → (expected start or None when unknown, why), when a reservation action runs:
    #: the expected starts that changed this cycle (the applier keeps them on the gangs)
    expected: dict[str, tuple[float | None, str]] = field(default_factory=dict)
    #: gang ident → (seconds it is expected to be late, why): gangs newly found to miss their
    #: ``phalanx.dev/deadline`` (told once, until they are expected on time again)
    late: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: evicted pod key → (reason: preempt | reclaim | shrink, the gang it was evicted for)
    disruptions: dict[str, tuple[str, str]] = field(default_factory=dict)
    holds: list[Hold] = field(default_factory=list)  # room held for preemptors
    attempts: int = 0
    #: gangs and the state's version when a placement was attempted for them (their
    #: ``attempted``: a gang in backoff is noted for a retry only if the cluster changed since)
    tried: list[tuple[GangInfo, int]] = field(default_factory=list)
    #: pod-at-a-time retries: id of the pod → the pod and its new (failures, backoff end,
    #: the state's release count when it found no node or -1)
    retries: dict[int, tuple[PodInfo, Retry]] = field(default_factory=dict)
    #: coscheduling's Permit: gang ident → the gang and when its waiting pods are rejected
    #: (None: none wait any more)
    permits: dict[str, tuple[GangInfo, float | None]] = field(default_factory=dict)
    freed: int = 0  # the state's release count when the cycle began (for ``blocked``)
    #: blocked gang ident → its failure class (None: any release wakes it) and order key
    hints: dict[str, tuple[Hint | Gated | None, tuple[float, ...]]] = field(default_factory=dict)
    #: gang ident → the Kueue flavors it was placed in (one per resource group)
    flavors: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _order(unit: Unit) -> tuple[float, ...]:
    return unit.order


class Session:
    def __init__(
        self,
        state: ClusterState,
        plugins: Sequence[object] | Hooks,
        *,
        now: float,
        rng: np.random.Generator,
        config: SessionConfig = SessionConfig(),
    ) -> None:
        self.state = state
        state.table.free_columns()  # built once in the state's table, shared by snapshots
        self.table = state.table.copy()
        self.now = now
        self.rng = rng
        self.config = config
        hooks = plugins if isinstance(plugins, Hooks) else Hooks(plugins)
        self.plugins = hooks.plugins
        self.orders = hooks.orders
        self.validators = hooks.validators
        self.limiters = hooks.limiters
        self.reach = hooks.reach
        self.readiness = hooks.readiness
        self.filters = hooks.filters
        self.scorers = hooks.scorers
        self.gpu_chooser = hooks.gpu_chooser
        self.observers = hooks.observers
        self.placers = hooks.placers
        self.reservation_placers = hooks.reservation_placers
        self.flavorers = hooks.flavorers
        self._trying: dict[str, tuple[str, ...]] = {}  # gang → the flavors being tried
        self.selector = Selector(self.table, hooks)
        #: every ordering keeps a waiting gang's key while nothing of it is placed (hints)
        self.static_order = all(getattr(p, "static_order", False) for p in self.orders)
        self.freed = state.freed
        self.result = CycleResult(freed=state.freed)
        self._open: list[Statement] = []
        self._committed: list[Operation] = []  # undone on the shared pods at close
        #: reservations every placement must respect (set by a reservation action), and what
        #: runs when the session closes
        self.gate: Gate | None = None
        self.closing: list[Callable[[], None]] = []
        for plugin in hooks.openers:
            plugin.open_session(self)

    # -- units -----------------------------------------------------------------------------
    def units(self) -> list[Unit]:
        """Pending work, best first; gangs in backoff are left out and their retry noted."""
        units: list[Unit] = []
        gate = None if self.gate is None else self.gate.stamp()
        watched = None if self.gate is None else self.gate.watched
        for gang in self.state.waiting_gangs(self.table, gate, watched):
            units.extend(self.units_of(gang))
        units.sort(key=_order)
        return units

    def units_of(self, gang: GangInfo) -> list[Unit]:
        """``gang``'s pending work as units with their order keys (none while it backs off)."""
        if gang.backoff_until > self.now:
            if gang.attempted < self.state.version:  # the cluster changed meanwhile
                self.result.deferred[gang.ident] = gang.backoff_until
            return []
        pending = [p for p in gang.placeable() if self.ours(p, gang)]
        if not pending:
            return []
        if self.config.gang_units:
            units = [Unit.of_gang(gang, pending)]
        else:
            units = [Unit.of_pod(pod) for pod in pending]
        for unit in units:
            unit.order = self.order_key(unit)
        return units

    def ours(self, pod: PodInfo, gang: GangInfo) -> bool:
        """Is ``pod`` for this scheduler? (Noted on its gang when it is not.)"""
        if pod.spec.scheduler_name in self.config.scheduler_names:
            return True
        message = f"schedulerName {pod.spec.scheduler_name!r}: another scheduler places this pod"
        self.note(gang, "OtherScheduler", message)
        return False

    def order_key(self, unit: Unit) -> tuple[float, ...]:
        key: tuple[float, ...] = ()
        for plugin in self.orders:
            key += plugin.order_key(unit, self.table)
        return (*key, unit.seq)

    def limit(self, unit: Unit) -> None:
        """Leave in an elastic ``unit`` only the pods every limit lets it place (never fewer
        than its minimum still needs: validity then says why even those may not go)."""
        gang = unit.gang
        if not self.limiters or gang.implicit or gang.role_minimums:
            return
        floor = max(gang.min_member - gang.placed, 1)
        if len(unit.pods) <= floor:
            return
        allowed = len(unit.pods)
        for plugin in self.limiters:
            most = plugin.unit_limit(unit)
            if most is not None:
                allowed = min(allowed, most)
        if allowed < len(unit.pods):
            unit.pods = unit.pods[: max(allowed, floor)]

    def invalid(self, unit: Unit) -> tuple[str, str] | None:
        for plugin in self.validators:
            verdict = plugin.unit_valid(unit, self.table)
            if verdict is not None:
                return verdict
        return None

    def ready(self, unit: Unit) -> bool:
        return all(plugin.unit_ready(unit) for plugin in self.readiness)

    def placements(self, unit: Unit) -> Placements:
        """Where ``unit`` may go: the first placement plugin's answer, else anywhere; inside
        each of its flavors in turn when a plugin gives flavors."""
        base = self._placements(unit)
        flavors = self.flavors(unit)
        if flavors is None:
            return base
        ident = unit.gang.ident

        def chosen(names: tuple[str, ...]) -> None:
            self._trying[ident] = names

        return within_flavors(base, flavors, chosen)

    def _placements(self, unit: Unit) -> Placements:
        for plugin in self.placers:
            answer = plugin.placements(unit, self)
            if answer is not None:
                return answer
        return Placements([lambda: ((pod, (None,)) for pod in unit.pods)])

    def flavors(self, unit: Unit, *, later: bool = False) -> Flavors | None:
        """The flavors ``unit`` may be admitted in (None: no plugin has an opinion); ``later``:
        once its queue has room (for a reservation, which waits for that room anyway)."""
        for plugin in self.flavorers:
            answer = plugin.flavors(unit, self, later=later)
            if answer is not None:
                return answer
        return None

    def out_of_reach(self, unit: Unit) -> str | None:
        """Why ``unit`` can never be placed whatever else runs (None: it may be)."""
        for plugin in self.reach:
            why = plugin.out_of_reach(unit)
            if why is not None:
                return why
        return None

    def reservation_domains(self, unit: Unit) -> list[Mask | None]:
        """Where a reservation of ``unit`` may lie, best first (each entry holds all of its
        pods; None: anywhere): the first placement plugin's answer, else ``[]`` (anywhere)."""
        domains: list[Mask | None] = []
        for plugin in self.reservation_placers:
            answer = plugin.reservation_domains(unit, self)
            if answer is not None:
                domains = answer
                break
        flavors = self.flavors(unit, later=True) if self.flavorers else None
        if flavors is None:
            return domains
        cut: list[Mask | None] = [
            nodes if domain is None else domain & nodes
            for _, _, nodes in flavors.choices
            for domain in domains or [None]
        ]
        if not cut:
            cut.append(np.zeros(len(self.table), dtype=bool))
        return cut

    def select_within(self, choice: PodChoice) -> int | None:
        """The best node for the pod inside the first of its masks that has one."""
        pod, masks = choice
        for mask in masks:
            node = self.select_node(pod, mask)
            if node is not None:
                return node
        return None

    # -- nodes -----------------------------------------------------------------------------
    def feasible(self, pod: PodInfo) -> Mask:
        """Nodes where ``pod`` may go now (a new array)."""
        return self.selector.feasible(pod)

    def scores(self, pod: PodInfo, feasible: Mask) -> Scores:
        """Every node's weighted score (only ``feasible`` ones are meaningful; read only)."""
        return self.selector.scores(pod, feasible)

    def select_node(self, pod: PodInfo, within: Mask | None = None) -> int | None:
        """The best feasible node for ``pod`` (among ``within``, if given); ties are broken by
        the session's seeded RNG, lowest node first among the tied."""
        if self.selector.incremental_scores and self.scorers:
            # kept scores are finite: the best of the feasible ones, kept per pod shape
            best = self.selector.best(pod, within)
            if best.size == 0:
                return None
        else:
            feasible = self.feasible(pod)
            if within is not None:
                feasible &= within
            candidates = feasible.nonzero()[0]
            if candidates.size == 0:
                return None
            if candidates.size == 1 or not self.scorers:
                return int(candidates[0])
            scores = self.scores(pod, feasible)[candidates]
            best = candidates[scores == scores.max()]
        return int(best[0] if best.size == 1 else best[self.rng.integers(best.size)])

    def choose_gpus(self, pod: PodInfo, node: int) -> tuple[int, ...]:
        """The devices ``pod`` takes on ``node``: the scoring plugin's choice, if one chooses
        (FGD, random), else the table's best fit."""
        if self.gpu_chooser is not None:
            return self.gpu_chooser.choose_gpus(self.table, pod, node)
        return self.table.pick_gpus(node, pod.request)

    # -- statements ------------------------------------------------------------------------
    def statement(self) -> Statement:
        stmt = Statement(self)
        self._open.append(stmt)
        return stmt

    def committed(self, operations: list[Operation], *, reserve: bool = False) -> None:
        placed = self.result.reservations if reserve else self.result.binds
        self._committed += operations
        for operation in operations:
            if operation.op is Op.ALLOCATE:
                placed.append((operation.pod, operation.node))
                self.result.gpus[id(operation.pod)] = operation.gpus
                for observer in self.observers:
                    observer.observe(self.table, operation.pod, operation.node)
            elif operation.op is Op.EVICT:
                self.result.evictions.append(operation.pod)
            elif operation.op is Op.UNRESERVE:
                self.result.unreserved.append((operation.pod, operation.node, operation.gpus))

    # -- outcome -----------------------------------------------------------------------------
    def note(self, gang: GangInfo, reason: str, message: str) -> Condition:
        """Record why ``gang`` waits (``since`` is kept while the reason stays the same)."""
        previous = gang.condition
        same = previous is not None and previous.reason == reason
        since = previous.since if previous is not None and same else self.now
        condition = Condition("Unschedulable", reason, message, since)
        self.result.waiting[gang.ident] = condition
        return condition

    def timed_out(self, gang: GangInfo) -> bool:
        """Has ``gang`` passed its timeout (before or during this cycle)?"""
        return gang.timed_out or any(g is gang for g in self.result.timeouts)

    def wait(self, gang: GangInfo, reason: str, message: str) -> None:
        """Record why ``gang`` waits; a gang past its timeout gets a condition and a backoff."""
        condition = self.note(gang, reason, message)
        timeout = gang.timeout
        if (
            self.config.timeouts
            and timeout is not None
            and not gang.ready()
            and self.now - gang.created >= timeout
        ):
            if not self.timed_out(gang):
                self.result.timeouts.append(gang)
            condition.reason = "Timeout"
            condition.message = (
                f"waited {self.now - gang.created:g}s > scheduleTimeoutSeconds {timeout:g}; "
                + message
            )
            failures = gang.failures + self.result.failures[gang.ident]
            delay = min(self.config.backoff_max, self.config.backoff_base * 2 ** min(failures, 16))
            self.result.failures[gang.ident] += 1
            self.result.retry_at[gang.ident] = self.now + delay

    def retry_of(self, pod: PodInfo) -> Retry:
        """``pod``'s attempt record as this cycle left it so far."""
        noted = self.result.retries.get(id(pod)) if self.result.retries else None
        if noted is not None:
            return noted[1]
        return Retry(pod.failures, pod.backoff_until, pod.blocked_at)

    def blocked_at(self, pod: PodInfo) -> int:
        """``retry_of(pod).blocked_at``, without building a record (queues scan every pod)."""
        noted = self.result.retries.get(id(pod)) if self.result.retries else None
        return pod.blocked_at if noted is None else noted[1].blocked_at

    def retry(self, pod: PodInfo, retry: Retry) -> None:
        """Record ``pod``'s new attempt record (the applier writes it on the pod)."""
        self.result.retries[id(pod)] = (pod, retry)

    def permit_deadline(self, gang: GangInfo) -> float | None:
        """When ``gang``'s pods waiting at Permit are rejected, as this cycle left it so far."""
        noted = self.result.permits.get(gang.ident)
        return gang.permit_deadline if noted is None else noted[1]

    def set_permit_deadline(self, gang: GangInfo, deadline: float | None) -> None:
        """Record when ``gang``'s waiting pods are rejected (None: none wait any more); the
        latest change goes last, as the applier keeps ``ClusterState.permits`` in order."""
        self.result.permits.pop(gang.ident, None)
        self.result.permits[gang.ident] = (gang, deadline)

    def tried(self, gang: GangInfo) -> None:
        """A placement is attempted for ``gang`` at the state's current version."""
        self.result.tried.append((gang, self.state.version))

    def placed(self, gang: GangInfo, where: str = "") -> None:
        """``gang``'s minimum was committed (the applier marks it Scheduled); ``where``: the
        domain a placement plugin chose, if any."""
        self.result.placed.append(gang)
        if where:
            self.result.domains[gang.ident] = where
        flavors = self._trying.pop(gang.ident, None)
        if flavors is not None:
            self.result.flavors[gang.ident] = flavors

    def close(self) -> CycleResult:
        """Undo statements left open (pipelined claims live for one cycle only), then put the
        shared pods and gangs back as the cycle found them: what was committed is in the
        result, for the applier."""
        for hook in self.closing:
            hook()
        for stmt in self._open:
            if not stmt.closed:
                stmt.discard()
        self._open.clear()
        restore(self._committed)
        self._committed = []
        return self.result
