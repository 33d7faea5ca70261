"""Reserve: reservations and backfill (Slurm's EASY and conservative modes) for gangs.

Listed before ``allocate``. The action lives as long as its scheduler and keeps, from cycle to
cycle, the running gangs (start, estimated end, the room they hold), the timeline of that room
over time (:mod:`phalanx.actions.timeline`), the waiting gangs it may reserve for
(:mod:`phalanx.actions.candidates`) and the reservations (:mod:`phalanx.actions.book`). Each
cycle it brings them up to date with what changed, in time proportional to the change:

1. a release (the state's ``freed`` count moved): the running gangs whose members changed give
   back what their pods held from now to their estimated end; a gang holding nothing has
   ended, and if any member succeeded its observed runtime teaches the estimator
   (:mod:`phalanx.plugins.estimates`). Only the gangs the state's release log names since the
   last look, and those started since, are looked at (every running gang if the log no longer
   reaches back);
2. an overrun (a running gang past its estimated end): it is expected to run as long as the
   gangs of its shape that ran longer than it has did (the learned ``quantile`` of their
   observed runtimes: the longer a heavy-tailed job has run, the longer it is likely to run
   on), and at least ``OVERRUN_GRACE`` of its time so far longer (at least a minute), so
   reservations behind it move later at each re-check, which thin out geometrically;
3. the timeline's first row is checked against the cluster's free resources: anything else
   that changed them (pods of other schedulers, nodes, preemption) rebuilds it from the pods;
4. new, changed and aged waiting gangs are taken in, and the book is the session's gate, which
   ``allocate`` asks before every commit.

When the session closes, expected starts are told (:mod:`phalanx.actions.expect`). A gang with
no estimate, and pods this scheduler does not track, never give their room back on the
timeline. The scheduler never sees a gang's true duration: only estimates.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from itertools import islice

from phalanx.actions.book import Book
from phalanx.actions.candidates import Settings, Waiters
from phalanx.actions.expect import Teller
from phalanx.actions.timeline import Plan, Slot, Timeline
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import HOLDING, GangInfo, PodInfo, PodStatus
from phalanx.framework.session import Session
from phalanx.plugins.estimates import LEARNED, Estimates, Key

#: An overrun gang is expected to end this share of its time run so far later (at least a
#: minute): the re-checks of a long overrun thin out geometrically.
OVERRUN_GRACE = 0.5
MIN_GRACE = 60.0
LEARNED_SOURCE = f"estimate: {LEARNED}"


@dataclass(eq=False, slots=True)
class Running:
    gang: GangInfo
    start: float
    end: float  # estimated (∞: no estimate)
    source: str  # where the estimate comes from, for reasons
    pods: list[PodInfo] = field(default_factory=list)
    plan: list[Slot] = field(default_factory=list)  # where each of ``pods`` holds room
    generation: int = -1  # the gang's generation when its pods were last looked at
    aged: bool = False  # started on a reservation it held for having aged
    order: int = 0  # when it was listed among the running gangs (their order)

    @property
    def label(self) -> str:
        return f"{self.gang.key} ({self.source})"

    @property
    def learned(self) -> bool:
        """Does its estimated end rest on a learned estimate (not its own hint)?"""
        return self.source.startswith(LEARNED_SOURCE)


class Reserve:
    name = "reserve"

    def __init__(
        self, settings: Settings | None = None, estimates: Estimates | None = None
    ) -> None:
        self.settings = settings or Settings()
        self.estimates = estimates or Estimates(self.settings.quantile, pooled=self.settings.pooled)
        self.running: dict[str, Running] = {}
        self.base: Timeline | None = None  # the running gangs' room over time
        self.enders: dict[float, list[str]] = {}  # estimated end → who ends then
        self.learned = 0  # running gangs whose estimated end rests on a learned estimate
        self.waiters = Waiters(self.settings, self.estimates)
        self.book = Book(self, self.settings, self.waiters)
        self.teller = Teller(self)
        self._ends: list[tuple[float, str]] = []  # (estimated end, gang ident), a heap
        self._state: object | None = None
        self._freed = -1
        self._logged = 0  # the state's ``released_count`` when last looked at
        self._begun: set[str] = set()  # gangs started (or grown) since the last look
        self._listed = 0  # running gangs listed so far (``Running.order``)

    def execute(self, session: Session) -> None:
        self._sync(session)
        self.book.open(session)
        if self.waiters.sync(session):
            self.book.invalid = True
        session.gate = self.book
        session.closing.append(lambda: self.teller.tell(session))

    # -- keeping up with the running gangs -------------------------------------------------
    def _sync(self, session: Session) -> None:
        state, now = session.state, session.now
        if state is not self._state or self.base is None:
            self._state, self._freed = state, state.freed
            self._adopt(session)
            return
        if state.freed != self._freed:
            self._freed = state.freed
            self._relearn(session, self._released(session))
        self._overruns(now)
        self.base.advance(now)
        if len(self.base.times) > 2 * len(self.running) + 16:
            self.base.compact()
        if not self.base.matches(session.table):
            self._adopt(session)

    def _released(self, session: Session) -> set[Key]:
        """Give back the room of pods that stopped holding it; the shapes whose learned
        estimate changed."""
        now, relearn = session.now, set()
        for ident, run in self._changed(session.state):
            if run.gang.generation == run.generation:
                continue
            run.generation = run.gang.generation
            kept = {i for i, pod in enumerate(run.pods) if _holds(pod, run.plan[i])}
            if len(kept) == len(run.pods):
                continue
            gone = tuple(slot for i, slot in enumerate(run.plan) if i not in kept)
            self._give(now, run.end, gone)
            run.pods = [pod for i, pod in enumerate(run.pods) if i in kept]
            run.plan = [slot for i, slot in enumerate(run.plan) if i in kept]
            if run.pods:
                continue
            del self.running[ident]
            self._unlist(run)
            if any(pod.status is PodStatus.SUCCEEDED for pod in run.gang.members):
                key = self.estimates.key_of(run.gang)
                if self.estimates.observe(run.gang, now - run.start):
                    relearn.add(key)
            if run.gang.waiting_members and not run.gang.ready():
                self.waiters.again(session, run.gang)  # evicted whole, re-created pending
        return relearn

    def _changed(self, state: ClusterState) -> list[tuple[str, Running]]:
        """The running gangs the releases since the last look may have changed, and those
        started since (a dropped cycle's starts hold nothing), in the order they were listed
        (as the walk over every running gang takes them)."""
        fresh, self._logged = state.released_count - self._logged, state.released_count
        idents, self._begun = self._begun, set()
        if fresh > len(state.released):  # the log no longer reaches back: every gang
            return list(self.running.items())
        idents.update(gang.ident for gang in islice(reversed(state.released), fresh))
        changed = [(ident, self.running[ident]) for ident in idents if ident in self.running]
        return sorted(changed, key=lambda item: item[1].order)

    def _overruns(self, now: float) -> None:
        while self._ends and self._ends[0][0] <= now:
            end, ident = heapq.heappop(self._ends)
            run = self.running.get(ident)
            if run is None or run.end != end:
                continue
            self._unlist(run)
            run.end = self._overrun_end(run.gang, run.start, now)
            self._take(end, run.end, tuple(run.plan))
            self._list(run)

    def _adopt(self, session: Session) -> None:
        """Rebuild the running gangs and the timeline from the state's pods."""
        now, known = session.now, {i: run.start for i, run in self.running.items()}
        self.running, self.enders, self._ends, self.learned = {}, {}, [], 0
        self._logged, self._begun = session.state.released_count, set()
        for pod in session.state.pods.values():
            if pod.status not in HOLDING or pod.node < 0:
                continue
            run = self.running.get(pod.gang.ident)
            if run is None:
                start = known.get(pod.gang.ident, pod.bound_at)
                start = now if start is None else start
                end, source = self.end_of(pod.gang, start, now)
                run = self.running[pod.gang.ident] = self._new(pod.gang, start, end, source)
                run.generation = pod.gang.generation
                self._list(run)
            run.pods.append(pod)
            run.plan.append(Slot(pod.node, pod.request, pod.gpus))
        self._rebuild(session)

    def _relearn(self, session: Session, keys: set[Key]) -> None:
        """Learned estimates of these shapes changed: running gangs that had no estimate
        get an end (an estimate a gang started with stays its estimate, as a time limit
        does; only an overrun moves it)."""
        if not keys:
            return
        for run in self.running.values():
            if not math.isinf(run.end):
                continue
            if not self.estimates.pooled and self.estimates.key_of(run.gang) not in keys:
                continue
            end, source = self.end_of(run.gang, run.start, session.now)
            if math.isinf(end):
                continue
            self._unlist(run)
            self._give(end, run.end, tuple(run.plan))
            run.end, run.source = end, source
            self._list(run)

    def _rebuild(self, session: Session) -> None:
        releases = [(run.end, slot) for run in self.running.values() for slot in run.plan]
        self.base = Timeline.of(session.table, session.now, releases)
        self.book.view = None
        self.book.invalid = True

    def end_of(self, gang: GangInfo, start: float, now: float) -> tuple[float, str]:
        """A running gang's estimated end (∞ without an estimate) and where it comes from."""
        estimate = self.estimates.estimate(gang)
        if estimate is None:
            return math.inf, "no estimate"
        end = start + estimate.seconds
        if end <= now:  # overran its estimate
            end = self._overrun_end(gang, start, now)
        return end, f"estimate: {estimate.source}"

    def _overrun_end(self, gang: GangInfo, start: float, now: float) -> float:
        """When a gang that started at ``start`` and is past its estimated end is now expected
        to end: when the gangs of its shape that ran longer did (the learned quantile of their
        runtimes), but at least ``OVERRUN_GRACE`` of its time so far from now (at least
        ``MIN_GRACE``). Learned medians under-estimate heavy-tailed runtimes; growing the
        estimate only by half the time run at each overrun kept the reservations behind such a
        gang always imminent, and their room idle, while it ran on."""
        grace = now + max(MIN_GRACE, OVERRUN_GRACE * (now - start))
        longer = self.estimates.beyond(gang, now - start)
        return grace if longer is None else max(grace, start + longer)

    # -- starts (from the book) ------------------------------------------------------------
    def started(
        self, gang: GangInfo, pods: list[PodInfo], plan: Plan, end: float, source: str
    ) -> None:
        """``gang``'s ``pods`` were committed now as ``plan`` places them (its start, or
        elastic growth until its estimated end)."""
        now = self.book.now
        run = self.running.get(gang.ident)
        if run is None:
            run = self.running[gang.ident] = self._new(gang, now, end, source)
            self._list(run)
        run.generation = -1  # looked at again at the next release
        self._begun.add(gang.ident)
        run.pods += pods
        run.plan += plan
        self._take(now, run.end, plan)

    def _new(self, gang: GangInfo, start: float, end: float, source: str) -> Running:
        self._listed += 1
        return Running(gang, start, end, source, order=self._listed)

    # -- the timeline and its listeners ----------------------------------------------------
    def _take(self, start: float, end: float, plan: Plan) -> None:
        assert self.base is not None
        self.base.take(start, end, plan, check=False)
        self.book.took(start, end, plan)

    def _give(self, start: float, end: float, plan: Plan) -> None:
        assert self.base is not None
        if plan and end > start:
            self.base.give_back(start, end, plan)
            self.book.gave(start, end, plan)

    def _list(self, run: Running) -> None:
        self.enders.setdefault(run.end, []).append(run.label)
        self.learned += run.learned
        if not math.isinf(run.end):
            heapq.heappush(self._ends, (run.end, run.gang.ident))

    def _unlist(self, run: Running) -> None:
        labels = self.enders.get(run.end, [])
        if run.label in labels:
            labels.remove(run.label)
            self.learned -= run.learned
            if not labels:
                del self.enders[run.end]


def _holds(pod: PodInfo, slot: Slot) -> bool:
    return pod.status in HOLDING and pod.node == slot.node
