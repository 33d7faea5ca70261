"""Victim planning for preemption and reclaim: whole gangs or elastic surplus, planned first.

A preemptor's minimum is planned in a Statement **with** its victims: victims are evicted in
the statement (their room becomes *future free*), then the preemptor's pods are pipelined
onto future-free room. Evictions are committed only if every pod of the minimum found a node;
otherwise everything is discarded — nothing is ever freed that the preemptor cannot use.

Victims come in *chunks*: first the surplus members of elastic gangs (members above the gang's
minimum, newest first — a gang is never left below its minimum by them), then whole gangs.
Chunks are tried least disruptive first: surplus before gangs, then lowest priority, fewest
GPUs, most recently started. After the first set that fits, each chosen chunk is dropped again
if the preemptor still fits without it (newest choice first), so the set is minimal and the
victims left are those on the nodes the preemptor uses.

A chunk is refused when it would break a PodDisruptionBudget (the budget's allowed
disruptions are counted over all chunks of one plan), when its gang has run less than its
``phalanx.dev/min-runtime``, or when the action's rule refuses it (the ``allows`` callback).
Reservations (issue 12) are honoured around the planner: a gang protected by the reservation
it started on is offered by its surplus only (``spare``), and a plan that would delay a
reservation is refused by ``accept`` (both from :mod:`phalanx.actions.guard`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from phalanx.api.durations import parse_duration
from phalanx.api.queues import BudgetSpec
from phalanx.cluster import devices
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.queues import MIN_RUNTIME, QueueBook
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
from phalanx.framework.session import Session
from phalanx.plugins.predicates import Predicates

#: At most this many chunks are considered per preemptor (the least disruptive ones).
MAX_CHUNKS = 48


@dataclass(eq=False, slots=True)
class Chunk:
    gang: GangInfo
    pods: list[PodInfo]
    surplus: bool

    def gpus(self, col: int) -> int:
        return sum(int(p.request[col]) for p in self.pods)


@dataclass(slots=True)
class Plan:
    victims: list[Chunk]
    placement: list[tuple[PodInfo, int]]
    rows: dict[int, np.ndarray] = field(default_factory=dict)
    gpus: dict[str, tuple[int, ...]] = field(default_factory=dict)  # pod key → devices planned

    def cost(self, gpu_col: int) -> tuple[int, int, int]:
        """How disruptive: GPUs evicted, victim chunks, the highest victim priority."""
        gpus = sum(c.gpus(gpu_col) for c in self.victims)
        return (gpus, len(self.victims), max(c.gang.priority for c in self.victims))


#: Node masks a preemptor may be planned in, and whether it must stay inside one.
Domains = tuple[list[Mask], bool]


def running_pods(gang: GangInfo) -> list[PodInfo]:
    return [p for p in gang.members if p.status is PodStatus.BOUND]


def chunks(
    gangs: Sequence[GangInfo],
    gpu_col: int,
    now: float,
    *,
    whole: bool = True,
    spare: Callable[[GangInfo], bool] | None = None,
) -> list[Chunk]:
    """The candidate chunks of ``gangs``, least disruptive first (see the module docstring);
    ``whole=False`` offers surplus only (a job is never taken below its minimum, as Volcano's
    gang plugin allows); gangs ``spare`` names are offered by their surplus only."""
    surplus: list[Chunk] = []
    full: list[Chunk] = []
    for gang in gangs:
        pods = running_pods(gang)
        if not pods or _too_young(gang, now):
            continue
        if any(p.status in (PodStatus.ALLOCATED, PodStatus.PIPELINED) for p in gang.members):
            continue  # placed in this very cycle: never a victim of it (no partial gang)
        extra = len(pods) - gang.min_member
        newest = sorted(pods, key=lambda p: (-(p.bound_at or 0.0), -p.seq))
        for pod in newest[: max(extra, 0)] if not gang.role_minimums else []:
            surplus.append(Chunk(gang, [pod], True))
        if (whole or gang.min_member <= 1) and (spare is None or not spare(gang)):
            full.append(Chunk(gang, pods, False))
    surplus.sort(key=lambda c: (c.gang.priority, -(c.pods[0].bound_at or 0.0)))
    full.sort(key=lambda c: (c.gang.priority, c.gpus(gpu_col), -(c.gang.started or 0.0)))
    return [*surplus, *full][:MAX_CHUNKS]


def eligible_at(gang: GangInfo) -> float | None:
    """When ``gang`` has run its ``phalanx.dev/min-runtime`` (None: no minimum, or not
    started)."""
    text = gang.members[0].spec.annotations.get(MIN_RUNTIME) if gang.members else None
    if text is None or gang.started is None:
        return None
    try:
        return gang.started + parse_duration(text)
    except ValueError:
        return None


def _too_young(gang: GangInfo, now: float) -> bool:
    at = eligible_at(gang)
    return at is not None and now < at


def could_fit(
    pods: Sequence[PodInfo],
    candidates: Sequence[Chunk],
    table: NodeTable,
    predicates: Predicates,
    within: Mask | None = None,
) -> bool:
    """A necessary condition for any plan: do ``pods`` fit, counted per shape, in the room
    that would be free if every candidate were evicted (future free room plus the victims'
    requests on their nodes)? False means no subset of the candidates can make room, so the
    planner need not run (vectorised over nodes; GPU devices are not counted, which only
    makes the bound looser); ``within``: on those nodes only."""
    if any(pod.invalid for pod in pods):
        return False
    room = table.allocatable - table.requested + table.releasing - table.pipelined
    victims = [pod for chunk in candidates for pod in chunk.pods if pod.node >= 0]
    if victims:
        width = room.shape[1]
        nodes = np.fromiter((pod.node for pod in victims), np.int64, len(victims))
        asks = np.zeros((len(victims), width), np.int64)
        for i, pod in enumerate(victims):
            asks[i, : min(width, pod.request.size)] = pod.request[:width]
        np.add.at(room, nodes, asks)
    shapes: dict[tuple[bytes, object], tuple[PodInfo, int]] = {}
    for pod in pods:
        key = (pod.request.tobytes(), pod.spec.placement)
        first, count = shapes.get(key, (pod, 0))
        shapes[key] = (first, count + 1)
    bound = 0
    for pod, count in shapes.values():
        mask = predicates.static(table.facts, pod.spec.placement)
        if within is not None:
            mask = mask & within
        request = pod.request[: room.shape[1]]
        cols = np.flatnonzero(request)
        if cols.size == 0:
            bound += count if mask.any() else 0
            continue
        rows = room[np.ix_(np.flatnonzero(mask), cols)]
        per_node = np.maximum(rows, 0) // request[cols]
        bound += min(count, int(per_node.min(axis=1, initial=1 << 40).sum()))
    return bound >= len(pods)


class Planner:
    """Plans one preemptor against candidate chunks in ``session``."""

    def __init__(self, session: Session, predicates: Predicates) -> None:
        self.session = session
        self.predicates = predicates
        self.book: QueueBook = session.state.queues
        self._allowed_by: dict[str, int] = {}  # budget → allowed disruptions (one plan)
        self.within: Mask | None = None  # the domain being planned in, if any
        self._picked: dict[str, tuple[int, ...]] = {}  # devices of the last placement tried
        #: a plan found the pods fit with no victim (no plan: nothing to take). Not a failure
        #: for want of room: room taken since may make victims needed, and a plan possible
        self.unneeded = False

    def plan(
        self,
        pods: Sequence[PodInfo],
        candidates: Sequence[Chunk],
        allows: Callable[[list[Chunk], Chunk], bool],
        *,
        minimal: bool = True,
        domains: Domains | None = None,
        accept: Callable[[Plan], bool] = lambda plan: True,
    ) -> Plan | None:
        """The victims and placement of ``pods``, or None; the session is left unchanged.
        With ``domains`` (node masks, and whether the preemptor must stay inside one), the
        plan is made inside each domain with the victims there, and the least disruptive
        one is kept; a preemptor that only prefers a domain is planned anywhere if none
        does. A plan ``accept`` refuses (it would delay a reservation) is no plan."""
        if domains is None:
            return _accepted(self._plan(pods, candidates, allows, minimal), accept)
        masks, required = domains
        table, best = self.session.table, None
        for mask in masks:
            inside = [c for c in candidates if any(mask[p.node] for p in c.pods)]
            if not inside or not could_fit(pods, inside, table, self.predicates, mask):
                continue
            self.within = mask
            try:
                plan = _accepted(self._plan(pods, inside, allows, minimal), accept)
            finally:
                self.within = None
            if plan is not None and (
                best is None or plan.cost(table.gpu_col) < best.cost(table.gpu_col)
            ):
                best = plan
        if best is not None or required:
            return best
        return _accepted(self._plan(pods, candidates, allows, minimal), accept)

    def _plan(
        self,
        pods: Sequence[PodInfo],
        candidates: Sequence[Chunk],
        allows: Callable[[list[Chunk], Chunk], bool],
        minimal: bool,
    ) -> Plan | None:
        chosen: list[Chunk] = []
        placement = self._fits(pods, chosen)
        for chunk in candidates:
            if placement is not None:
                break
            if any(c.gang is chunk.gang for c in chosen if not c.surplus):
                continue
            if chunk.surplus is False:  # a whole gang replaces its surplus chunks
                trial = [c for c in chosen if c.gang is not chunk.gang]
            else:
                trial = list(chosen)
            if not allows(trial, chunk) or not self._budgets_allow([*trial, chunk]):
                continue
            chosen = [*trial, chunk]
            placement = self._fits(pods, chosen)
        if placement is not None and not chosen:
            self.unneeded = True
        if placement is None or not chosen:
            return None
        if minimal:
            for chunk in reversed(list(chosen)):
                fewer = [c for c in chosen if c is not chunk]
                if fewer and self._fits(pods, fewer) is not None:
                    chosen = fewer
            placement = self._fits(pods, chosen)
            assert placement is not None
        return Plan(chosen, placement, gpus=dict(self._picked))

    def _fits(
        self, pods: Sequence[PodInfo], victims: Sequence[Chunk]
    ) -> list[tuple[PodInfo, int]] | None:
        """Pipeline ``pods`` with ``victims`` evicted, then undo both; the placement or None.
        GPU devices count too: a victim's devices are free again, a pipelined pod takes its
        best-fit devices (so a whole GPU is never planned on two half-free ones)."""
        stmt = self.session.statement()
        table = self.session.table
        col = table.gpu_col
        free_devices = table.gpu_free.copy()
        self._picked = {}
        try:
            for chunk in victims:
                for pod in chunk.pods:
                    stmt.evict(pod)
                    share = devices.per_device(int(pod.request[col]))
                    for device in pod.gpus:
                        free_devices[pod.node, device] += share
            placement: list[tuple[PodInfo, int]] = []
            for pod in pods:
                gpu = int(pod.request[col])
                rows = np.flatnonzero(self._feasible(pod) & devices.fits(free_devices, gpu))
                if rows.size == 0:
                    return None
                future = (
                    table.allocatable[rows, col]
                    - table.requested[rows, col]
                    + table.releasing[rows, col]
                    - table.pipelined[rows, col]
                )
                row = int(rows[int(np.argmin(future))])  # binpack on GPUs
                picked = devices.pick(free_devices[row], gpu)
                for device in picked:
                    free_devices[row, device] -= devices.per_device(gpu)
                self._picked[pod.key] = picked
                stmt.pipeline(pod, row)
                placement.append((pod, row))
            return placement
        finally:
            stmt.discard()

    def _feasible(self, pod: PodInfo) -> Mask:
        table = self.session.table
        if pod.invalid:
            return np.zeros(len(table), dtype=bool)
        mask = self.predicates.static(table.facts, pod.spec.placement)
        if self.within is not None:
            mask = mask & self.within
        return mask & table.fits(pod.request, future=True)

    def _budgets_allow(self, victims: Sequence[Chunk]) -> bool:
        budgets = self.book.budgets
        if not budgets:
            return True
        pods = [p for chunk in victims for p in chunk.pods]
        for name, budget in budgets.items():
            hit = [p for p in pods if _matches(budget, p)]
            if not hit:
                continue
            allowed = self._allowed_by.get(name)
            if allowed is None:  # pod statuses do not change while one plan is made
                allowed = self._allowed_by[name] = self._allowed(budget)
            if len(hit) > allowed:
                return False
        return True

    def _allowed(self, budget: BudgetSpec) -> int:
        matching = [
            p
            for p in self.session.state.pods.values()
            if p.status not in (PodStatus.SUCCEEDED, PodStatus.DELETED) and _matches(budget, p)
        ]
        healthy = sum(p.status is PodStatus.BOUND for p in matching)
        expected = len(matching)
        if budget.min_available is not None:
            need = _absolute(budget.min_available, expected, up=True)
            return max(0, healthy - need)
        if budget.max_unavailable is not None:
            allowed = _absolute(budget.max_unavailable, expected, up=False)
            return max(0, allowed - (expected - healthy))
        return expected


def _accepted(plan: Plan | None, accept: Callable[[Plan], bool]) -> Plan | None:
    return plan if plan is not None and accept(plan) else None


def _absolute(value: int | str, total: int, *, up: bool) -> int:
    if isinstance(value, int):
        return value
    percent = int(value[:-1])
    scaled = percent * total
    return -(-scaled // 100) if up else scaled // 100


def _matches(budget: BudgetSpec, pod: PodInfo) -> bool:
    if pod.spec.namespace != budget.namespace:
        return False
    labels = pod.spec.labels
    if any(labels.get(k) != v for k, v in budget.match_labels):
        return False
    for req in budget.match_expressions:
        value = labels.get(req.key)
        if req.operator == "In" and value not in req.values:
            return False
        if req.operator == "NotIn" and value in req.values:
            return False
        if req.operator == "Exists" and value is None:
            return False
        if req.operator == "DoesNotExist" and value is not None:
            return False
    return True  # policy/v1: an empty selector matches every pod of the namespace
