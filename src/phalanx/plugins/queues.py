"""Queues: fair-share order, capability admission, and room held for preemptors.

At the start of a cycle (``open_session``) the plugin refreshes the state's
:class:`~phalanx.cluster.queues.QueueBook` (usage, demand, deserved shares) and gives every
waiting gang a **queue key**: inside its queue, gangs are taken by priority then age; each
gang's key is its queue's dominant-resource ratio ``(usage + the asks of the gangs before it
and its own) / deserved``, so sorting by it interleaves queues from the furthest below its
deserved share upwards (start-time fair queueing over the cycle), queue priority breaking ties.
A gang holding room from a preemption goes first.

Validity (``unit_valid``): a gang whose queue is closed waits (``QueueClosed``); so does one
whose queue does not exist while other queues are declared (``QueueMissing``: a typo in a
Kueue ``queue-name`` label or a PodGroup's ``queue``; Volcano, KAI and Kueue all leave such a
job pending rather than run it without limits), until a queue object changes; a gang whose
pending members would take its queue or any ancestor past ``capability`` waits
(``QueueCapability``) — counting what this cycle already committed. An elastic gang is
judged on its minimum and places no more pods than keep its queues within capability
(``unit_limit``), as Volcano grows a job and Kueue admits one partially. An elastic gang grows
after every gang waiting for its minimum (growth is ordered last); a rule that
deferred growth while any such gang waited starved elastic gangs behind gangs that could not
fit anyway (found by the live chaos test), so room a waiting gang cannot use yet is not held
back (keeping it is the reservation issue's).

Kueue resource flavors (:mod:`phalanx.cluster.flavors`): a gang of a ClusterQueue that has
flavors is offered its flavors (``flavors``, the session tries its placement inside each in
turn), first the ones in listed order whose quota has room for it, skipping those whose node
taints its pods do not tolerate or whose nodes their selector excludes; when no flavor has
quota room it waits (``QueueCapability``, naming each flavor and why). A gang with members
running keeps its flavor. A ClusterQueue naming a ResourceFlavor that does not exist admits
nothing (``QueueInactive``). Usage per flavor is counted once per cycle from the running
gangs, plus what the cycle commits. Flavor fungibility: a flavor that fits by borrowing is
taken (``whenCanBorrow: MayStopSearch``, Kueue's default) unless the ClusterQueue says
``TryNextFlavor`` (flavors that need no borrowing are tried first); one whose quota is full
is passed over for the next (flavors are never preempted for).

Filter: room held for a preemptor (``QueueBook.holds``) is not offered to any other gang, and
the preemptor's pods go to the nodes its plan chose while these still fit them (a greedy
placement could otherwise split the room so that its last pod no longer fits).
Queues change nothing when no queue object was declared and no gang names a queue other
than ``default``: every gang is then in ``default``, keys only follow priority and age.

What ``open_session`` changes in the state is housekeeping, not a decision of the cycle: the
book's usage, demand and shares are recomputed from the state's pods (a cache; the usage
history is sampled at each refresh), holds whose gang went, is placed or held longer than
``HOLD_SECONDS`` are dropped (any later cycle drops them the same way), and when queues
become active every parked gang is woken (more attempts, never a different placement). A
cycle whose result is dropped therefore leaves no decision behind (tests/property/
test_cycle_purity.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from phalanx.api.queues import DEFAULT_QUEUE, QueueSpec
from phalanx.cluster.fairshare import Floats
from phalanx.cluster.flavors import (
    FlavorUsage,
    assignments,
    borrows,
    flavor_mask,
    held_flavors,
    shortfall,
    untolerated,
)
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.queues import QueueBook
from phalanx.cluster.resources import Vector
from phalanx.cluster.workloads import HOLDING, GangInfo, PodInfo
from phalanx.framework.plugin import Flavors
from phalanx.framework.unit import Unit

if TYPE_CHECKING:
    from phalanx.framework.session import Session


class Queues:
    name = "queues"

    def __init__(self) -> None:
        self.keys: dict[str, float] = {}
        self.session: Session | None = None
        self.book = QueueBook()
        self.committed: dict[str, Floats] = {}
        self.seen = 0
        self.held_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.was_active = False
        self.named: dict[str, GangInfo] = {}  # waiting or parked gangs naming a queue
        self._named_at = -1  # the book's generation ``named`` was built at
        #: per queue and flavor, what its gangs hold (None: no queue has flavors)
        self.flavor_usage: FlavorUsage | None = None
        self.flavor_seen = 0  # binds of this cycle already in ``flavor_usage``
        self._masks: tuple[object, dict[tuple[str, ...], Mask]] = (None, {})

    # -- a cycle begins --------------------------------------------------------------------
    def open_session(self, session: Session) -> None:
        state = session.state
        book = state.queues
        self.session, self.book = session, book
        self.committed, self.seen = {}, 0
        book.expire_holds(state.gangs, session.now)
        book.active = bool(book.declared or book.holds or self._named_queues(session))
        self.keys = {}
        if book.active:
            waiting = [*state.waiting_gangs(), *state.blocked.values()]
            book.track(waiting)
            total = state.table.total_allocatable().astype(np.float64)
            book.refresh(waiting, state.index, total, session.now)
            self.keys = self._keys(waiting)
        self._holds(len(state.index))
        self.flavor_usage, self.flavor_seen = None, 0
        if book.active and book.flavored():
            self.flavor_usage = self._held_by_flavor()
        if book.active and not self.was_active:
            state.room_changed()  # order keys start to move: every parked gang is retried
        self.was_active = book.active
        session.static_order = all(getattr(p, "static_order", False) for p in session.orders)

    def _named_queues(self, session: Session) -> bool:
        """Does a waiting or parked gang name a queue other than ``default``? Only the gangs
        not parked are looked at (a parked gang was looked at while it waited, and is woken
        when its spec changes), unless the queue objects changed; so a long queue of parked
        gangs costs nothing here."""
        state, book = session.state, session.state.queues
        if book.generation != self._named_at:
            self._named_at, self.named = book.generation, {}
            scan = [*state.waiting.values(), *state.blocked.values()]
        else:
            scan = list(state.waiting.values())
        for gang in scan:
            if book.queue_of(gang) != DEFAULT_QUEUE:
                self.named[gang.ident] = gang
        for ident, gang in list(self.named.items()):
            gone = ident not in state.waiting and ident not in state.blocked
            if gone or book.queue_of(gang) == DEFAULT_QUEUE:
                del self.named[ident]
        return bool(self.named)

    @property
    def static_order(self) -> bool:
        """Keys stay put while no queue is active (all follow priority and age only); shares
        move them otherwise, so parked gangs are then woken by any release."""
        return not self.book.active

    def _keys(self, waiting: list[GangInfo]) -> dict[str, float]:
        """Each waiting gang's queue key (see the module docstring)."""
        book, width = self.book, len(self.session.state.index) if self.session else 0
        keys: dict[str, float] = {}
        for queue, gangs in self._by_queue(waiting).items():
            gangs.sort(key=lambda g: (-g.priority, g.created, g.ident))
            # the asks in order, after the queue's remembered use: a running sum (cumsum
            # adds in this order, as a loop would) read at each gang's last pod
            first = np.zeros(width)
            remembered = book.remembered(queue)
            if remembered is not None:
                first[: remembered.size] += remembered[:width]
            asks: list[Floats | Vector] = [first]
            ends: list[int] = []
            for gang in gangs:
                asks += [_padded(pod.request, width) for pod in gang.placeable()]
                ends.append(len(asks) - 1)
            running = np.cumsum(np.array(asks, dtype=np.float64), axis=0)
            ratios = book.ratios(queue, running[ends])
            for gang, ratio in zip(gangs, ratios, strict=True):
                keys[gang.ident] = -1.0 if gang.ident in book.holds else ratio
        return keys

    def _by_queue(self, gangs: list[GangInfo]) -> dict[str, list[GangInfo]]:
        by_queue: dict[str, list[GangInfo]] = {}
        for gang in gangs:
            by_queue.setdefault(self.book.queue_of(gang), []).append(gang)
        return by_queue

    def _holds(self, width: int) -> None:
        """Per holder: the rows held by *other* gangs and the amounts, for the filter."""
        self.held_rows = {}
        holds = self.book.holds
        if not holds:
            return
        for ident in [*holds, ""]:
            rows: dict[int, Floats] = {}
            for other, hold in holds.items():
                if other == ident:
                    continue
                for row, amount in hold.rows.items():
                    total = rows.setdefault(row, np.zeros(width))
                    total[: min(amount.size, width)] += amount[:width]  # resources grow
            if rows:
                keys = np.array(sorted(rows), dtype=np.int64)
                self.held_rows[ident] = (keys, np.array([rows[r] for r in keys]))

    # -- order -----------------------------------------------------------------------------
    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        gang = unit.gang
        growing = 1.0 if gang.ready() and not gang.implicit else 0.0  # elastic growth goes last
        key = self.keys.get(gang.ident, 0.0)
        return (growing, key, -float(self.book.spec(self.book.queue_of(gang)).priority))

    # -- admission -------------------------------------------------------------------------
    def unit_valid(self, unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        gang, book = unit.gang, self.book
        queue = book.queue_of(gang)
        if book.closed(queue):
            return ("QueueClosed", f"queue {queue!r} is closed")
        if book.missing(queue):
            return ("QueueMissing", _missing(queue, gang.namespace, book.named(gang)))
        return self.flavor_verdict(unit, queue) or self.over_capability(queue, unit.pods)

    def unit_limit(self, unit: Unit) -> int | None:
        """How many of an elastic unit's pods, in order, fit under its queue's and every
        ancestor's ``capability`` (Volcano admits such a job on its minimum and grows it
        while the queue has room; Kueue's partial admission likewise)."""
        most = len(unit.pods)
        totals: np.ndarray | None = None
        for _, cap, used in self._capped(self.book.queue_of(unit.gang)):
            if totals is None:
                totals = np.cumsum(_asks(unit.pods, cap.size), axis=0)
            within = np.all(used + totals <= cap, axis=1)
            if not within.all():
                most = min(most, int(np.argmin(within)))
        return most

    def over_capability(self, queue: str, pods: list[PodInfo]) -> tuple[str, str] | None:
        need: np.ndarray | None = None
        for name, cap, used in self._capped(queue):
            if need is None:
                need = _asks(pods, cap.size).sum(axis=0)
            over = np.flatnonzero(used + need > cap)
            if over.size:
                assert self.session is not None
                at, resource = int(over[0]), self.session.state.index.names[int(over[0])]
                if need[at] > cap[at]:  # even an idle queue could not hold it
                    message = (
                        f"queue {name!r} has a capability of {int(cap[at])} {resource}, below "
                        f"the {int(need[at])} it needs: it cannot run in this queue"
                    )
                else:
                    message = (
                        f"queue {name!r} would use {int(used[at] + need[at])} of its "
                        f"capability {int(cap[at])} {resource}"
                    )
                return ("QueueCapability", message)
        return None

    def out_of_reach(self, unit: Unit) -> str | None:
        """Does the unit need more than its queue's (or an ancestor's) capability, even with
        nothing else of it running? (Kueue calls such a workload inadmissible.)"""
        queue = self.book.queue_of(unit.gang)
        if self.book.missing(queue):
            return f"its queue {queue!r} does not exist"
        need: np.ndarray | None = None
        for name, cap, _ in self._capped(queue):
            if need is None:
                need = _asks(unit.pods, cap.size).sum(axis=0)
            if (need > cap).any():
                return f"its minimum is beyond queue {name!r}'s capability"
        return None

    def _capped(self, queue: str) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        """``queue`` and its ancestors that have a capability: (name, capability, what it
        uses with this cycle's commitments), per resource of the state's index."""
        book = self.book
        index = self.session.state.index if self.session is not None else None
        if index is None or not book.specs:
            return
        if not any(book.spec(name).capability for name in book.ancestry(queue)):
            return  # no capability in its tree: nothing to count
        self._catch_up()
        width = len(index)
        for name in book.ancestry(queue):
            cap = book.capability(name, index)
            if np.isfinite(cap).any():
                used = book.use(name, width).usage + self.committed.get(name, np.zeros(width))
                yield name, cap, used

    def _catch_up(self) -> None:
        """Add what this cycle committed since the last look to each queue and its ancestors."""
        session = self.session
        if session is None:
            return
        binds = session.result.binds
        width = len(session.state.index)
        for pod, _ in binds[self.seen :]:
            self._commit(pod.gang, _padded(pod.request, width))
        self.seen = len(binds)

    def _commit(self, gang: GangInfo, need: Vector | Floats) -> None:
        """Count ``need`` as used this cycle by ``gang``'s queue and its ancestors."""
        for name in self.book.ancestry(self.book.queue_of(gang)):
            total = self.committed.setdefault(name, np.zeros(need.size))
            total += need

    # -- flavors ---------------------------------------------------------------------------
    def flavor_verdict(self, unit: Unit, queue: str) -> tuple[str, str] | None:
        """Why ``unit`` may not be admitted in any flavor of ``queue`` for quota (or the
        queue is inactive); None: it may be tried (in the flavors ``flavors`` gives)."""
        book = self.book
        if not book.flavors and not book.specs.get(queue, _NO_GROUPS).groups:
            return None
        inactive = book.inactive(queue)
        if inactive is not None:
            return ("QueueInactive", inactive)
        if self.session is None or queue not in book.flavored():
            return None
        offered = self.flavors(unit, self.session)
        if offered is not None and not offered.choices and offered.quota_only:
            return ("QueueCapability", "; ".join(offered.skipped))
        return None

    def flavors(self, unit: Unit, session: Session, *, later: bool = False) -> Flavors | None:
        """The flavors ``unit`` may be admitted in, in order (see the module docstring);
        ``later``: whatever their quota holds now (a reservation waits for its queue's room:
        :mod:`phalanx.actions.queueroom`)."""
        book, usage = self.book, self.flavor_usage
        if usage is None or not unit.pods:
            return None
        gang = unit.gang
        queue = book.queue_of(gang)
        if queue not in book.flavored():
            return None
        inactive = book.inactive(queue)
        if inactive is not None:
            return Flavors(skipped=[inactive])
        spec = book.specs[queue]
        self._catch_up_flavors()
        index = session.state.index
        held = session.result.flavors.get(gang.ident) or (
            held_flavors(gang, spec, self._flavor_masks()) if gang.placed else ()
        )
        # Kueue admits a workload whole: a gang placed a pod at a time chooses its flavor
        # for all its pending pods, and keeps it for the rest
        asking = unit.pods if held or session.config.gang_units else gang.placeable()
        need: dict[str, int] = {}
        for pod in asking:
            for at in np.flatnonzero(pod.request):
                name = index.names[int(at)]
                need[name] = need.get(name, 0) + int(pod.request[at])
        placement = unit.pods[0].spec.placement
        usable = session.table.facts.usable(placement)
        offered = Flavors()
        quota_skips = 0
        borrowing: list[bool] = []
        for assignment in assignments(spec, need):
            if held and assignment.names != held:
                continue
            declared = [book.flavors[name] for name in assignment.names]
            taint = untolerated(declared, placement.tolerations)
            if taint:
                offered.skipped.append(
                    f"{assignment.label}: the pods do not tolerate its node taint {taint}"
                )
                continue
            nodes = self._mask(assignment.names)
            if not (nodes & usable).any():
                why = (
                    "the pods' node selector, affinity or tolerations exclude its nodes"
                    if nodes.any()
                    else "no node has its node labels"
                )
                offered.skipped.append(f"{assignment.label}: {why}")
                continue
            charged = later or (held and self._charged(gang))  # (charged when admitted)
            short = (
                None
                if charged
                else shortfall(book.specs, queue, book.parent(queue), assignment, need, usage)
            )
            if short is not None:
                offered.skipped.append(short)
                quota_skips += 1
                continue
            offered.choices.append((assignment.label, assignment.names, nodes))
            if spec.borrow_last:
                borrowing.append(borrows(queue, assignment, need, usage))
        if spec.borrow_last:  # whenCanBorrow: TryNextFlavor: no borrowing first (stable)
            ranked = sorted(zip(borrowing, offered.choices, strict=True), key=lambda b: b[0])
            offered.choices = [choice for _, choice in ranked]
        offered.quota_only = quota_skips > 0
        return offered

    def _held_by_flavor(self) -> FlavorUsage:
        """What the gangs of queues with flavors hold, per flavor (before this cycle)."""
        book, usage = self.book, FlavorUsage()
        flavored = book.flavored()
        index = self.session.state.index if self.session is not None else None
        if index is None:
            return usage
        masks = self._flavor_masks()
        for gang in book.tracked.values():
            queue = book.queue_of(gang)
            if queue not in flavored or not gang.placed:
                continue
            spec = book.specs[queue]
            names = held_flavors(gang, spec, masks)
            for pod in gang.members:
                if names and pod.status in HOLDING:
                    usage.charge(queue, spec, names, pod.request, index)
        return usage

    def _charged(self, gang: GangInfo) -> bool:
        """Are all of ``gang``'s pods charged to its flavor already (see :class:`Quota`)?"""
        return False

    def _catch_up_flavors(self) -> None:
        """Charge this cycle's binds since the last look to their flavors."""
        session, usage = self.session, self.flavor_usage
        if session is None or usage is None:
            return
        binds = session.result.binds
        flavored = self.book.flavored()
        for pod, _ in binds[self.flavor_seen :]:
            gang = pod.gang
            queue = self.book.queue_of(gang)
            if queue not in flavored:
                continue
            spec = self.book.specs[queue]
            usage.charge(queue, spec, self._flavor_of(gang, spec), pod.request, session.state.index)
        self.flavor_seen = len(binds)

    def _flavor_of(self, gang: GangInfo, spec: QueueSpec) -> tuple[str, ...]:
        """The flavors ``gang`` was admitted in: this cycle's commit, else its nodes'."""
        assert self.session is not None
        return self.session.result.flavors.get(gang.ident) or held_flavors(
            gang, spec, self._flavor_masks()
        )

    def _flavor_masks(self) -> dict[str, Mask]:
        """Each declared flavor's nodes, by name."""
        return {name: self._mask((name,)) for name in self.book.flavors}

    def _mask(self, names: tuple[str, ...]) -> Mask:
        """The nodes of the flavors ``names`` (kept per node facts and book generation)."""
        assert self.session is not None
        facts = self.session.table.facts
        stamp = (id(facts), self.book.generation)
        if self._masks[0] != stamp:
            self._masks = (stamp, {})
        cache = self._masks[1]
        mask = cache.get(names)
        if mask is None:
            mask = cache[names] = flavor_mask(facts, [self.book.flavors[n] for n in names])
        return mask

    # -- held room -------------------------------------------------------------------------
    def table_only(self) -> bool:
        """With no room held, every node passes whatever the pod (see ``framework.explain``)."""
        return not self.book.holds

    def passes_all(self, pod: PodInfo) -> bool:
        """With no room held, every node passes whatever the pod."""
        return not self.book.holds

    def filter(self, table: NodeTable, pod: PodInfo) -> Mask:
        mask = np.ones(len(table), dtype=bool)
        if not self.book.holds:
            return mask
        hold = self.book.holds.get(pod.gang.ident)
        planned = None if hold is None else hold.pods.get(pod.key)
        if planned is not None and planned < len(table) and table.fits(pod.request)[planned]:
            mask[:] = False  # the preemptor's pod goes where its plan put it
            mask[planned] = True
            return mask
        held = self.held_rows.get(pod.gang.ident if hold is not None else "")
        if held is None:
            return mask
        rows, amounts = held
        free = table.allocatable[rows] - table.requested[rows] - amounts
        mask[rows] = np.all(free >= pod.request, axis=1)
        return mask

    def rejections(self, table: NodeTable, pod: PodInfo) -> list[tuple[str, Mask]]:
        rejected = ~self.filter(table, pod)
        return [("room held for a preempting gang", rejected)] if rejected.any() else []


def _padded(request: Vector, width: int) -> Vector:
    """``request`` as a vector of ``width`` (a resource seen after it was made: zero)."""
    if request.size == width:
        return request
    out = np.zeros(width, dtype=np.int64)
    out[: request.size] += request[:width]
    return out


class Quota(Queues):
    """Quota-only admission in the manner of Kueue: a workload (a gang, or a lone pod) is
    admitted whole while its queue stays within capability, and its pods are then placed one
    at a time; no fair-share order, no held room, no growth rule.

    Kueue reserves a Workload's quota for all its pods at admission, before any is placed,
    so two Jobs can never each hold part of one queue's quota. Here a gang counts as admitted
    once one of its pods is placed: its first pod is let in only if the whole gang's pending
    pods fit its queue's (and ancestors') capability, and from then on its pending pods count
    as used, so no other gang takes the quota they were admitted with. (A gang whose quota
    fits but whose first pod finds no node is not yet admitted here, where Kueue would
    already hold its quota; the two differ only while no node has room for it.) Where a unit
    is a whole gang (``gang_units``: the ``fifo-reserve`` baseline's QOS-like limits) the
    gang is admitted with its unit, as the ``queues`` plugin does."""

    name = "quota"

    def __init__(self) -> None:
        super().__init__()
        self.admitted: set[str] = set()  # gangs admitted by the start of this cycle or in it
        self.flavor_admitted: set[str] = set()  # gangs whose pods are all charged to a flavor

    def _held_by_flavor(self) -> FlavorUsage:
        """Pod at a time, an admitted gang holds its flavor's quota for its pending pods too."""
        usage = super()._held_by_flavor()
        self.flavor_admitted = set()
        if self._gang_units() or self.session is None:
            return usage
        book, index, masks = self.book, self.session.state.index, self._flavor_masks()
        for gang in book.tracked.values():
            queue = book.queue_of(gang)
            if queue in book.flavored() and gang.placed:
                self.flavor_admitted.add(gang.ident)
                spec = book.specs[queue]
                names = held_flavors(gang, spec, masks)
                for pod in gang.pending() if names else ():
                    usage.charge(queue, spec, names, pod.request, index)
        return usage

    def _charged(self, gang: GangInfo) -> bool:
        return not self._gang_units() and gang.ident in self.flavor_admitted

    def _catch_up_flavors(self) -> None:
        """Pod at a time, a gang's first bind charges all its pods to its flavor (it is
        admitted whole); its later binds are inside that charge."""
        session, usage = self.session, self.flavor_usage
        if session is None or usage is None or session.config.gang_units:
            super()._catch_up_flavors()
            return
        book, binds = self.book, session.result.binds
        for pod, _ in binds[self.flavor_seen :]:
            gang = pod.gang
            queue = book.queue_of(gang)
            if gang.ident in self.flavor_admitted or queue not in book.flavored():
                continue
            self.flavor_admitted.add(gang.ident)
            spec = book.specs[queue]
            names = self._flavor_of(gang, spec)
            for member in [pod, *gang.pending()]:
                usage.charge(queue, spec, names, member.request, session.state.index)
        self.flavor_seen = len(binds)

    def open_session(self, session: Session) -> None:
        super().open_session(session)
        self.admitted = set()
        if not self.book.active or session.config.gang_units:
            return
        state, width = session.state, len(session.state.index)
        for gang in [*state.waiting.values(), *state.blocked.values()]:
            if gang.placed > 0:
                self.admitted.add(gang.ident)
                self._reserve(gang.pending(), gang, width)

    @property
    def static_order(self) -> bool:
        """Always: its order key is empty (no fair shares), so the order is the other
        plugins' (priority, age) and a refused gang may stay parked until what refused it
        moves, queues declared or not."""
        return True

    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        return ()

    def unit_valid(self, unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        gang = unit.gang
        queue = self.book.queue_of(gang)
        if self.book.missing(queue):
            return ("QueueMissing", _missing(queue, gang.namespace, self.book.named(gang)))
        if self._gang_units():
            return self.flavor_verdict(unit, queue) or self.over_capability(queue, unit.pods)
        self._catch_up()
        if gang.ident in self.admitted:
            return None  # its quota (and flavor) were held when it was admitted
        return self.flavor_verdict(unit, queue) or self.over_capability(queue, gang.pending())

    def _gang_units(self) -> bool:
        return self.session is not None and self.session.config.gang_units

    def _catch_up(self) -> None:
        """A bind admits its gang: the quota of all its pending pods is reserved at once (its
        later binds are inside that reservation)."""
        session = self.session
        if session is None or session.config.gang_units:
            super()._catch_up()
            return
        binds, width = session.result.binds, len(session.state.index)
        for pod, _ in binds[self.seen :]:
            gang = pod.gang
            if gang.ident not in self.admitted:
                self.admitted.add(gang.ident)
                self._reserve([pod, *gang.pending()], gang, width)
        self.seen = len(binds)

    def _reserve(self, pods: list[PodInfo], gang: GangInfo, width: int) -> None:
        """Count ``pods`` as used by ``gang``'s queue and its ancestors for this cycle."""
        if pods:
            self._commit(gang, _asks(pods, width).sum(axis=0))


_NO_GROUPS = QueueSpec("")


def _missing(queue: str, namespace: str, named: str) -> str:
    """Why a gang of ``queue`` (``named`` by it: a LocalQueue when they differ) waits."""
    if named != queue:
        return (
            f"LocalQueue {namespace}/{named} points to ClusterQueue {queue!r}, which does not "
            "exist (Kueue leaves such a job pending)"
        )
    return (
        f"queue {queue!r} does not exist: no Queue or ClusterQueue of that name, nor a "
        f"LocalQueue {namespace}/{queue} (Volcano, KAI and Kueue leave such a job pending)"
    )


def _asks(pods: list[PodInfo], width: int) -> np.ndarray:
    """One row per pod: its requests over the first ``width`` resources."""
    return np.array([_padded(pod.request, width) for pod in pods], dtype=np.float64)
