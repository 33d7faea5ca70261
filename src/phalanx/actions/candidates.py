"""Waiting gangs as a reservation sees them, kept from cycle to cycle.

A gang needs ``min_member`` placed members, role minimums first; a ready gang with extra
pending members (elastic growth) is not waiting. A :class:`Candidate` holds what it needs
(pods, where they may go), its estimate and, while it is planned, its rank: with ``big_first``
the big gangs EASY reserves for (below) first, then gangs past their aging threshold, then the
others, each in the session's own order (queues' fair shares, priority, then FIFO). Without
``big_first`` a big gang's reservation binds only the gangs behind it in that order, so an older
backlog of small gangs may take its room and move it later at every re-plan.

:class:`Waiters` keeps the candidates incrementally (cost follows change): new gangs are found
at the end of the state's gang table (new gangs are appended there), a gang short of members
is looked at again when its members change, and a gang leaves when it starts or is found gone.
For planning it offers, per queue, the aged gangs (oldest first, at most ``max_aged``) and the
gangs of at least ``min_gpus`` GPUs that have waited ``head_wait`` (priority, then FIFO): the
only gangs EASY reserves for. A gang ages when it has waited
``max(aging, min(aging_factor × its estimate, aging_cap))``.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from phalanx.api.durations import format_duration
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import Vector
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit
from phalanx.plugins.estimates import Estimate, Estimates

Rank = tuple[float, ...]
#: Clock values above this are wall-clock seconds (live); below, simulated seconds.
WALL_CLOCK = 1e9
#: Gangs of a queue offered for head reservations beyond ``depth`` (some may fit now).
SPARE = 4


@dataclass(frozen=True, slots=True)
class Settings:
    mode: str = "easy"  # easy | conservative | strict
    depth: int = 1  # reservations per queue (easy, strict)
    aging: float | None = None  # seconds of waiting after which every gang is reserved
    min_gpus: float = 0.0  # easy: head reservations only for gangs at least this big
    #: easy: ... or for gangs of more than this share of the cluster's schedulable GPUs (0: off)
    min_share: float = 0.0
    aging_factor: float = 0.0  # a gang ages after max(aging, aging_factor × its estimate)
    max_aged: int | None = None  # aged gangs reserved per queue (None: all)
    aging_cap: float | None = None  # the relative part of aging at most this (None: no cap)
    head_wait: float = 0.0  # easy: a big gang is reserved for once it has waited this long
    quantile: float = 0.8  # learned estimates: this quantile of a shape's observed runtimes
    big_first: bool = False  # easy: the big gangs (``min_gpus``) rank before the aged ones
    #: relaxed backfill: a backfill may make a reservation whose start rests on learned
    #: estimates (not a big head's, ``big_first``) start later by this share of the time
    #: until its reserved start
    slack: float = 0.0
    #: learned estimates: a shape too few of which have finished gets the ``quantile`` of the
    #: runtimes of its queue (all shapes)
    pooled: bool = False


@dataclass(frozen=True, slots=True)
class Needs:
    """What a waiting gang needs, unchanged while its members, placed count and the node table's
    shape (nodes, resources) are."""

    version: tuple[int, ...]
    requests: list[Vector]
    masks: list[Mask]
    gpus: float
    shape: bytes
    pending: list[PodInfo]
    pods: list[PodInfo]
    #: where the reservation must lie, best first (topology: each holds all the pods; None:
    #: anywhere); empty: anywhere
    domains: list[Mask | None]


@dataclass(frozen=True, slots=True)
class Arrival:
    """How a gang made later than it arrived (a simulated Job's unborn pods, see
    ``phalanx.sim.unborn``) was taken in when it arrived, as the equal gang made before it
    was: it is taken in so, not as a new arrival."""

    seq: int
    estimate: Estimate | None
    estimated: tuple[int, int, int]  # what the estimate was made from (Candidate.estimated)
    told: tuple[float | None, str] | None
    due: float | None  # when its expected start is to be told again (None: never)


@dataclass(eq=False, slots=True)
class Candidate:
    gang: GangInfo
    needs: Needs
    estimate: Estimate | None
    seq: int  # arrival order among candidates
    ages_at: float  # when it ages (∞: never)
    aged: bool = False
    big: bool = False  # listed for a head reservation, ranked first (``big_first``)
    gone: bool = False
    rank: Rank = ()
    told: tuple[float | None, str] | None = None  # the expected start last given, and why
    #: what ``estimate`` was made from: the estimator's version, the gang's spec and members
    estimated: tuple[int, int, int] = (-1, 0, 0)
    late: bool = False  # told it will miss its deadline
    stale: bool = False  # its expected start passed and was not told again (``Teller.lazy``)
    arrival: Arrival | None = None  # taken in later than it arrived (see Arrival)

    @property
    def duration(self) -> float:
        return math.inf if self.estimate is None else self.estimate.seconds

    @property
    def queue(self) -> str:
        return self.gang.spec.queue if self.gang.spec is not None else ""

    @property
    def requests(self) -> list[Vector]:
        return self.needs.requests

    @property
    def masks(self) -> list[Mask]:
        return self.needs.masks

    @property
    def pods(self) -> list[PodInfo]:
        return self.needs.pods

    @property
    def gpus(self) -> float:
        return self.needs.gpus

    @property
    def shape(self) -> bytes:
        return self.needs.shape

    @property
    def domains(self) -> list[Mask | None]:
        return self.needs.domains

    def static_key(self) -> tuple[float, ...]:
        return (-self.gang.priority, self.gang.created, self.seq)

    @property
    def tier(self) -> float:
        """Its tier among reservations: a big gang with ``big_first`` first, then the aged
        gangs, then the others."""
        return BIG if self.big else AGED if self.aged else OTHER

    def rank_in(self, session: Session) -> Rank:
        return rank_of(session, Unit.of_gang(self.gang, self.needs.pending), self.tier)


class Waiters:
    def __init__(self, settings: Settings, estimates: Estimates) -> None:
        self.settings = settings
        self.estimates = estimates
        self.by_ident: dict[str, Candidate] = {}
        self.new: list[Candidate] = []  # arrived since the last cycle closed
        self._seen: dict[str, GangInfo] = {}
        #: gangs made later than they arrived (a runner's): how each is to be taken in, and
        #: all of them (in the gang table they stand, as it were, right after the equal gang
        #: they arrived with); per gang, how many such gangs arrived right after it (their
        #: arrival numbers come before its own: arrivals are taken in newest first) and the
        #: number before them
        self.arrivals: dict[str, Arrival] = {}
        self.late: set[str] = set()
        self.gaps: dict[str, int] = {}
        self.gap_base: dict[str, int] = {}
        #: gangs held back or short of members → (generation, waiting) when last looked at
        self._short: dict[str, tuple[GangInfo, tuple[int, bool]]] = {}
        self._big: dict[str, list[tuple[tuple[float, ...], Candidate]]] = {}
        self._aged: dict[str, list[tuple[tuple[float, ...], Candidate]]] = {}
        self._aging: list[tuple[float, int, str]] = []
        self._heading: list[tuple[float, int, Candidate]] = []  # big gangs not yet listed
        self._seq = 0

    # -- keeping up ------------------------------------------------------------------------
    def sync(self, session: Session) -> bool:
        """Take in arrivals, members that came, and gangs that aged; True if the plan of
        reservations may change (a gang it would pick arrived or aged)."""
        gangs = session.state.gangs
        moved, arrived = False, []  # new candidates a plan may pick
        for ident in reversed(gangs):
            gang = gangs[ident]
            if self._seen.get(ident) is gang:
                if ident in self.late:
                    continue
                break
            self._seen[ident] = gang
            gap = self.gaps.pop(ident, 0)
            if gap:
                self.gap_base[ident], self._seq = self._seq, self._seq + gap
            if self.consider(session, gang):
                arrived.append(ident)
            if gap and ident not in self.by_ident:  # not a candidate: nor were they
                self._seq = self.gap_base.pop(ident)
        for ident, (gang, generation) in list(self._short.items()):
            if gangs.get(ident) is not gang or gang.ready():
                del self._short[ident]
            elif (gang.generation, waiting(gang)) != generation:
                del self._short[ident]
                if self.consider(session, gang):
                    arrived.append(ident)
        if arrived:  # only one the plan would pick now moves it (not one far down a queue)
            picked = {who.gang.ident for who in self.picks(session)}
            moved = any(ident in picked for ident in arrived)
        while self._aging and self._aging[0][0] <= session.now:
            _, _, ident = heapq.heappop(self._aging)
            who = self.by_ident.get(ident)
            if who is not None and not who.gone:
                who.aged = True
                listed = self._aged.setdefault(who.queue, [])
                bisect.insort(listed, ((who.gang.created, who.seq), who), key=_first)
                moved |= self._among_picks(session, listed, who, self.settings.max_aged)
        while self._heading and self._heading[0][0] <= session.now:
            who = heapq.heappop(self._heading)[2]
            if not who.gone:
                self._list_big(who)
                moved = True
        return moved

    def _among_picks(
        self,
        session: Session,
        listed: list[tuple[tuple[float, ...], Candidate]],
        who: Candidate,
        limit: int | None,
    ) -> bool:
        """Would a plan take ``who`` among the first ``limit`` of ``listed`` that still wait
        (as ``_take`` does)? A gang aging behind ``limit`` older aged gangs changes no plan."""
        taken = 0
        for _, other in listed:
            if limit is not None and taken >= limit:
                return False
            if other is who:
                return True
            if not other.gone and session.state.gangs.get(other.gang.ident) is other.gang:
                taken += self.fresh(session, other)
        return False

    def consider(self, session: Session, gang: GangInfo, since: float | None = None) -> bool:
        """``gang`` is new, or was not a candidate and changed: a candidate if it waits
        (since its creation, or ``since``)."""
        if gang.ident in self.by_ident or gang.ready():
            return False
        needs = needs_of(session, gang) if waiting(gang) else None
        if needs is None:  # held back or short of members: looked at again when that changes
            self._short[gang.ident] = (gang, (gang.generation, waiting(gang)))
            return False
        arrival = self.arrivals.pop(gang.ident, None)
        estimate = self.estimates.estimate(gang) if arrival is None else arrival.estimate
        settings = self.settings
        ages_at = math.inf
        begun = gang.created if since is None else since
        if settings.aging is not None:
            relative = 0.0 if estimate is None else settings.aging_factor * estimate.seconds
            if settings.aging_cap is not None:
                relative = min(relative, settings.aging_cap)
            ages_at = begun + max(settings.aging, relative)
        if arrival is None:
            self._seq += 1
        seq = self._seq if arrival is None else arrival.seq
        who = Candidate(gang, needs, estimate, seq, ages_at, arrival=arrival)
        who.estimated = _made(self.estimates, gang) if arrival is None else arrival.estimated
        if arrival is not None:
            who.told = arrival.told
        who.rank = who.rank_in(session)  # kept up to date while it is planned
        self.by_ident[gang.ident] = who
        self.new.append(who)
        if not math.isinf(ages_at):
            heapq.heappush(self._aging, (ages_at, who.seq, gang.ident))
        if settings.mode != "conservative":
            if who.gpus < settings.min_gpus and not self._large_share(session, who):
                return False
            if begun + settings.head_wait > session.now:  # listed when it has waited enough
                heapq.heappush(self._heading, (begun + settings.head_wait, who.seq, who))
                return False
        return self._list_big(who)

    def _large_share(self, session: Session, who: Candidate) -> bool:
        """Does ``who`` need more than ``min_share`` of the cluster's schedulable GPUs?"""
        share = self.settings.min_share
        if share <= 0.0:
            return False
        table = session.table
        return who.gpus * 1000.0 > share * float(table.total_allocatable()[table.gpu_col])

    def _list_big(self, who: Candidate) -> bool:
        who.big = self.settings.big_first and self.settings.mode == "easy"
        listed = self._big.setdefault(who.queue, [])
        bisect.insort(listed, (who.static_key(), who), key=_first)
        return True

    def drop(self, ident: str) -> None:
        """``ident`` started or went away."""
        who = self.by_ident.pop(ident, None)
        if who is not None:
            who.gone = True

    def again(self, session: Session, gang: GangInfo) -> None:
        """A gang that ran waits again (its members were evicted and re-created): it ages
        from now, not from its creation."""
        self.drop(gang.ident)
        self.consider(session, gang, since=session.now)

    # -- what a plan looks at -------------------------------------------------------------
    def picks(self, session: Session) -> list[Candidate]:
        """The gangs a plan may reserve for, in rank order."""
        chosen: dict[int, Candidate] = {}
        for listed, limit in self._lists():
            self._take(session, listed, limit, chosen)
        for who in chosen.values():
            who.rank = who.rank_in(session)
        return sorted(chosen.values(), key=lambda c: c.rank)

    def leading(self) -> list[str]:
        """The gangs a plan may pick, and a few more (a superset, found without changing
        anything: the first waiting gangs of each list it takes from)."""
        out = []
        for listed, limit in self._lists():
            taken = 0
            for _, who in listed:
                if limit is not None and taken >= limit + SPARE:
                    break
                if not who.gone and waiting(who.gang):
                    out.append(who.gang.ident)
                    taken += 1
        return out

    def _lists(self) -> Iterator[tuple[list[tuple[tuple[float, ...], Candidate]], int | None]]:
        """Each list a plan takes from, with how many of it (None: all): the aged gangs of
        each queue, then its big gangs."""
        settings = self.settings
        every = settings.mode == "conservative"
        for lists, limit in (
            (self._aged, settings.max_aged),
            (self._big, None if every else settings.depth + SPARE),
        ):
            for listed in lists.values():
                yield listed, limit

    def _take(
        self,
        session: Session,
        listed: list[tuple[tuple[float, ...], Candidate]],
        limit: int | None,
        chosen: dict[int, Candidate],
    ) -> None:
        """Add to ``chosen`` the first ``limit`` listed candidates not chosen yet that still
        wait, their needs and estimates brought up to date; the gone are dropped on the way.
        Only that prefix of the list is looked at: a plan costs what it picks, not the length
        of the queue."""
        taken = gone = 0
        for _, who in listed:
            if limit is not None and taken >= limit:
                break
            if who.gone or session.state.gangs.get(who.gang.ident) is not who.gang:
                who.gone = True
                gone += 1
            elif who.seq not in chosen and self.fresh(session, who):
                self.re_estimate(who)
                chosen[who.seq] = who
                taken += 1
        if gone:
            listed[:] = [entry for entry in listed if not entry[1].gone]

    def fresh(self, session: Session, who: Candidate) -> bool:
        """Is ``who`` still waiting? Its needs brought up to date (members or nodes changed)."""
        if not waiting(who.gang):
            return False
        if who.needs.version != version(session, who.gang):
            needs = needs_of(session, who.gang)
            if needs is None:
                return False
            who.needs = needs
        return True

    def re_estimate(self, who: Candidate) -> None:
        """Bring ``who``'s estimate up to date (learned ones move; a spec may change)."""
        made = _made(self.estimates, who.gang)
        if who.estimated != made:
            who.estimate, who.estimated = self.estimates.estimate(who.gang), made

    def next_aging(self) -> float | None:
        """When the next gang ages or becomes a big gang to reserve for (None: none will)."""
        times = [heap[0][0] for heap in (self._aging, self._heading) if heap]
        return min(times) if times else None


def _made(estimates: Estimates, gang: GangInfo) -> tuple[int, int, int]:
    return (estimates.version(gang), id(gang.spec), len(gang.members))


#: Tiers of the rank (see ``rank_of``)
BIG, AGED, OTHER, GROWTH = -1.0, 0.0, 1.0, 2.0


def rank_of(session: Session, unit: Unit, tier: float) -> Rank:
    """A unit's rank among reservations: the session's order, where ``tier`` goes after the
    queues' fair-share order, before priority: a big gang with ``big_first`` (``BIG``) before a
    gang past its aging threshold (``AGED``) before the others of its queue (``OTHER``); elastic
    growth of a ready gang (``GROWTH``) after every waiting gang of its queue."""
    table = session.table
    parts = [plugin.order_key(unit, table) for plugin in session.orders]
    head: tuple[float, ...] = ()
    if session.orders and getattr(session.orders[0], "name", "") in QUEUE_ORDERS:
        head = parts.pop(0)
    return (*head, tier, *(x for part in parts for x in part), unit.seq)


#: Ordering plugins that order queues (fair share) before anything else.
QUEUE_ORDERS = ("queues", "quota")


def _first(entry: tuple[tuple[float, ...], Candidate]) -> tuple[float, ...]:
    return entry[0]


def needed(gang: GangInfo, pending: list[PodInfo]) -> list[PodInfo]:
    """The pending pods that would make ``gang`` ready: role shortfalls first, then any."""
    missing = max(gang.min_member - gang.placed, 1 if gang.implicit else 0)
    if not gang.role_minimums:
        return pending[:missing]
    chosen: list[PodInfo] = []
    for role, need in gang.role_minimums.items():
        short = need - gang.placed_by_role[role]
        chosen += [pod for pod in pending if pod.spec.role == role][: max(short, 0)]
    rest = [pod for pod in pending if pod not in chosen]
    return chosen + rest[: max(missing - len(chosen), 0)]


def needs_of(session: Session, gang: GangInfo) -> Needs | None:
    names = session.config.scheduler_names
    pending = [pod for pod in gang.placeable() if pod.spec.scheduler_name in names]
    pods = needed(gang, pending)
    short = gang.min_member - gang.placed > len(pods)  # members missing: not waiting for room
    if not pods or short or any(pod.invalid for pod in pods):
        return None
    if session.reach and session.out_of_reach(Unit.of_gang(gang, pods)):
        return None  # it can never run here: nothing to reserve for
    facts = session.table.facts
    masks = [facts.usable(p.spec.placement) for p in pods]
    requests = [pod.request for pod in pods]
    domains = session.reservation_domains(Unit.of_gang(gang, pods))  # topology
    known = _LONE.get((id(requests[0]), id(masks[0]))) if len(pods) == 1 and not domains else None
    if known is not None and known[0] is requests[0] and known[1] is masks[0]:
        gpus, shape = known[2], known[3]  # a lone pod of a template seen before
    else:
        gpus = sum(int(r[session.table.gpu_col]) for r in requests) / 1000
        shape = b"".join(r.tobytes() for r in requests) + b"".join(m.tobytes() for m in masks)
        shape += b"".join(b"*" if d is None else d.tobytes() for d in domains)
        if len(pods) == 1 and not domains and not requests[0].flags.writeable:
            if len(_LONE) > 4096:
                _LONE.clear()
            _LONE[(id(requests[0]), id(masks[0]))] = (requests[0], masks[0], gpus, shape)
    return Needs(version(session, gang), requests, masks, gpus, shape, pending, pods, domains)


#: (id(request), id(mask)) → (request, mask, GPUs, shape) of one read-only request vector (the
#: pods of one template share it) on one cached mask: a Job's lone pods compute it once
_LONE: dict[tuple[int, int], tuple[Vector, Mask, float, bytes]] = {}


def version(session: Session, gang: GangInfo) -> tuple[int, ...]:
    table = session.table
    return (len(gang.members), gang.placed, *table.allocatable.shape, id(table.facts))


def waiting(gang: GangInfo) -> bool:
    """Is ``gang`` waiting for room (not ready, valid, not held back)?"""
    return not (gang.ready() or gang.invalid or gang.hold is not None)


def clock(t: float, now: float) -> str:
    """A time for people: ``14:20 UTC`` live, ``t=1h30m`` in a simulation (no countdown: a
    condition message must not change while nothing else does)."""
    if t >= WALL_CLOCK:
        moment = datetime.fromtimestamp(t, UTC)
        today = datetime.fromtimestamp(now, UTC).date() == moment.date()
        return moment.strftime("%H:%M UTC" if today else "%Y-%m-%d %H:%M UTC")
    return f"t={format_duration(t)}"


def nodes_text(table: NodeTable, nodes: list[int]) -> str:
    names = [table.names[n] for n in sorted(set(nodes))]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}..{names[-1]} ({len(names)} nodes)"
