"""Reserve: reservations and backfill (Slurm's EASY and conservative modes) for gangs.

Listed before ``allocate``. Each cycle it

1. follows the gangs it knows to be running (bound by an earlier cycle; on a new cluster state,
   every gang holding resources): one that holds nothing any more has finished, and if any
   member succeeded its observed runtime teaches the estimator (:mod:`phalanx.plugins.
   estimates`);
2. builds the timeline: the session's free resources, plus each running gang's resources back
   at its estimated end (start + estimate). A gang past its estimate (an overrun) is expected
   to end ``OVERRUN_GRACE`` of its time so far later (at least a minute), so reservations
   behind it move later at each re-check; a gang with no estimate, and pods this scheduler does not
   track, never give their room back on the timeline;
3. plans the reservations of the waiting gangs (all of them, parked or not: it does not rely on
   every waiting gang being retried) and sets the session's gate, which ``allocate`` asks before
   every commit (see :mod:`phalanx.actions.book`).

When the session closes, every waiting gang gets an expected start and a reason; a wake-up is
asked at each reserved start and when the next gang reaches the aging threshold.

The scheduler never sees a gang's true duration: only estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from phalanx.actions.book import Book, Settings
from phalanx.actions.candidates import (
    Candidate,
    Needs,
    candidate,
    needs_of,
    version,
    waiting,
)
from phalanx.actions.timeline import Slot, Timeline
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import HOLDING, GangInfo, PodStatus
from phalanx.framework.session import Session
from phalanx.plugins.estimates import Estimate, Estimates

#: An overrun gang is expected to end this share of its time run so far later (at least a
#: minute): the re-checks of a long overrun thin out geometrically.
OVERRUN_GRACE = 0.5
MIN_GRACE = 60.0


@dataclass(slots=True)
class Running:
    gang: GangInfo
    start: float


class Reserve:
    name = "reserve"

    def __init__(
        self, settings: Settings | None = None, estimates: Estimates | None = None
    ) -> None:
        self.settings = settings or Settings()
        self.estimates = estimates or Estimates()
        self.running: dict[str, Running] = {}
        self._state: ClusterState | None = None
        self._bound: list[tuple[GangInfo, float]] = []
        self._needs: dict[str, Needs] = {}  # waiting gang ident → what it needs
        self._held: frozenset[str] = frozenset()  # gangs holding a reservation

    def execute(self, session: Session) -> None:
        self._track(session.state, session.now)
        timeline, enders = self._timeline(session)
        book = Book(session, timeline, self.settings, enders, self._held)
        book.ends = {i: self.end_of(run, session.now)[0] for i, run in self.running.items()}
        book.plan(self._candidates(session))
        session.gate = book
        session.closing.append(book.finish)
        session.closing.append(lambda: self._close(session, book))

    # -- running gangs ---------------------------------------------------------------------
    def _track(self, state: ClusterState, now: float) -> None:
        if state is not self._state:  # a new state (a live rebuild): keep known starts
            known = {ident: run.start for ident, run in self.running.items()}
            self._state, self.running = state, {}
            for pod in state.pods.values():
                if pod.status in HOLDING and pod.node >= 0:
                    start = known.get(pod.gang.ident, pod.bound_at)
                    start = now if start is None else start
                    self.running.setdefault(pod.gang.ident, Running(pod.gang, start))
        for gang, at in self._bound:
            self.running.setdefault(gang.ident, Running(gang, at))
        self._bound = []
        for ident, run in list(self.running.items()):
            if run.gang.holding():
                continue
            del self.running[ident]
            if any(pod.status is PodStatus.SUCCEEDED for pod in run.gang.members):
                self.estimates.observe(run.gang, now - run.start)

    def _close(self, session: Session, book: Book) -> None:
        self._bound = [(pod.gang, session.now) for pod, _ in session.result.binds]
        self._held = book.reserved()

    def end_of(self, run: Running, now: float) -> tuple[float, Estimate | None]:
        """A running gang's estimated end (∞ without an estimate) and the estimate."""
        estimate = self.estimates.estimate(run.gang)
        if estimate is None:
            return math.inf, None
        end = run.start + estimate.seconds
        if end <= now:  # overran its estimate
            end = now + max(MIN_GRACE, OVERRUN_GRACE * (now - run.start))
        return end, estimate

    def _timeline(self, session: Session) -> tuple[Timeline, dict[float, list[str]]]:
        enders: dict[float, list[str]] = {}
        releases: list[tuple[float, Slot]] = []
        for run in self.running.values():
            end, estimate = self.end_of(run, session.now)
            source = "no estimate" if estimate is None else f"estimate: {estimate.source}"
            enders.setdefault(end, []).append(f"{run.gang.key} ({source})")
            releases += [
                (end, Slot(pod.node, pod.request, pod.gpus))
                for pod in run.gang.members
                if pod.status in HOLDING and pod.node >= 0
            ]
        return Timeline.of(session.table, session.now, releases), enders

    # -- waiting gangs ---------------------------------------------------------------------
    def _candidates(self, session: Session) -> list[Candidate]:
        state = session.state
        out = []
        cache, self._needs = self._needs, {}
        for gang in (*state.waiting.values(), *state.blocked.values()):
            if not waiting(gang):
                continue
            needs = cache.get(gang.ident)
            if needs is None or needs.version != version(session, gang):
                needs = needs_of(session, gang)
            if needs is None:
                continue
            self._needs[gang.ident] = needs
            estimate = self.estimates.estimate(gang)
            out.append(candidate(session, gang, needs, estimate, self.settings.aging))
        return out
