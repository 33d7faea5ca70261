"""Unborn pods: the pods of a big Job that the simulator makes only when they could matter.

A ``batch/v1`` Job of a million lone pods on a cluster that holds eleven thousand of them: the
Job controller wants every pod at once, and all but eleven thousand wait — each a pod, a gang
of one, a queue entry, a reservation candidate, a condition and a parked entry, made and
looked at although none of them can be placed before the pods ahead of them are.

The pods of one Job are equal (one template; only the name differs), they arrive together and
their order keys differ only by arrival number, so they wait in index order. The simulator
therefore *makes* only a window of them: ``W = (pods of the template the whole cluster holds
with every node empty) + MARGIN``. The others are wanted, counted by the Job controller as
active, and described by :class:`Span` s (first index, count, creation time, arrival numbers
set aside with ``ClusterState.take_seqs``); before every cycle the window is filled up again
from the front (:meth:`Unborn.top_up`), so at least ``W`` pods of the Job wait, made, ahead of
every unborn one.

Why nothing changes. In a cycle at most ``cap`` pods of the shape can be placed (or
pipelined) on the whole cluster, so of the ``W`` made pods waiting ahead at least ``MARGIN``
fail; pods behind a failed equal pod fail alike and leave no trace (allocate shares the
failure of a signature, preemption and reclaim of a failure class; a queueing hint wakes at
most the room's count, first in order). The reservation action keeps, per waiting gang, what
it took in at arrival (an arrival number — arrivals of one cycle are numbered newest first —,
an estimate, the expected start told and when it is due again): an unborn pod is registered
with the numbers it would have had (``Waiters.gaps`` sets them aside when its last made
sibling is taken in) and is made with that memory (``candidates.Arrival``) before the action
would look at it again — its retell due, its aging — so from then on the action sees what it
would have seen. Until then the action looks at none of them: they are neither aged nor big
gangs (a Job whose pods the plan would list as big gangs is not deferred). In the gang table
a pod made late stands, as it were, right after the sibling it arrived with: the action's
scan for new gangs passes over it (``Waiters.late``). A rep that fitted but was refused by a
reservation gate was refused with each of its pods, one attempt each: they are counted and
made at the next cycle, parked as it was.

Not deferred (every pod made when wanted): pod-at-a-time policies (per-pod backoff lets a
later pod go first), conservative reservations (every waiting gang reserved), reservations
listing a lone pod as a big gang (``min_gpus`` at or below its GPUs), aging from arrival
(``aging=0``), a second scheduler, queueing hints off (the reference retries every waiting
gang), queues that count (a waiting gang's queue key adds up the demand ahead of it in its
queue and equal pods are ordered by name: once a queue is declared or named, every unborn pod
is made), Jobs the run deletes (the action keeps a candidate for a deleted pending pod; an
unborn one would not be one), pods told their own name (invalid ones), pods that are
gated, bound, in a PodGroup or in a namespace with a ResourceQuota (pods count against it
from their creation), and Jobs that wait for others (a JobSet's ``dependsOn``: they are made
when released, perhaps while a cycle's result is applied).

What the run reports is kept as if every pod had been made when it was wanted: a record per
pod (submitted then, in order), its ``submit`` event, the queue length, the queues' demand,
and the annotations of the cycle it arrived in — the condition and the expected start that
its last made sibling got in that cycle are the ones every unborn pod of the same arrival
got (equal pods failing on one signature; one view of the cluster), so they are copied
(:meth:`Unborn.told` repeats the ``expect`` events in the engine's order), and a pod made
later waits with that condition, parked in its sibling's failure class since the same release
count. Anything that asks
about every pod — a quota arriving in its namespace, a queue declared, a run that placed
nothing — makes them all first (:meth:`Unborn.make_all`). The JSON and the event stream are
those of the run with every pod made: ``tests/cli/test_unborn_pods.py`` and the seeded random
workloads of ``tests/property/test_unborn_equivalence.py`` compare them.

What it buys: the first cycles of a big Job (a Job of 1,000,000 pods to its first cycle in
about 5 CPU-seconds instead of 76). With reservations, the unborn pods are made when their
expected start is due to be told again (15 minutes later when unknown) or they age, so a long
run pays the full cost from then on.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from phalanx.actions.candidates import Arrival
from phalanx.actions.expect import RETELL
from phalanx.actions.reserve import Reserve
from phalanx.api.quantity import is_gpu
from phalanx.api.queues import DEFAULT_QUEUE
from phalanx.api.specs import ControllerSpec, JobSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.cluster.hints import Gated, Hint
from phalanx.cluster.workloads import IMPLICIT_PREFIX, Condition, GangInfo, PodInfo, PodStatus
from phalanx.framework.session import CycleResult
from phalanx.sim.controller import JobRun, clones
from phalanx.sim.metrics import GangRecord
from phalanx.traces._gangs import paused_gc

if TYPE_CHECKING:
    from phalanx.sim.simulator import Simulation

#: Made pods kept waiting beyond what the cluster could place at once (≥ the reservation
#: plan's look-ahead per queue and the expected starts retold per cycle).
MARGIN = 64


@dataclass(eq=False, slots=True)
class Span:
    """Pods of a Job wanted at one instant and not made yet."""

    first: int  # index of its first unborn pod (named JOB-INDEX)
    count: int
    created: float
    seq: int  # arrival number of its first unborn pod (set aside in the state)
    rep: PodInfo  # the pod made last just before it, in the same instant
    last: int = 0  # index of its last pod
    #: how the reservation action took its pods in when they arrived: as its rep, with the
    #: arrival number before theirs
    taken: Arrival | None = None
    touch: float = math.inf  # from then on the reservation action would look at its pods
    condition: Condition | None = None  # what its pods were told in the cycle they arrived
    #: how they were parked after that cycle, as their rep was: failure class, order key and
    #: the release count since then
    parking: tuple[Hint | Gated | None, tuple[float, ...], int] | None = None
    looked: bool = False  # what the rep got in the arrival cycle has been kept
    told: bool = False  # their expected start of that cycle has been repeated


@dataclass(eq=False, slots=True)
class Tail:
    """A Job's unborn pods and its made ones that may still wait ahead of them."""

    run: JobRun
    sample: PodInfo  # its first pod made (what each of its pods requests, its queue)
    spans: deque[Span] = field(default_factory=deque)
    made: deque[PodInfo] = field(default_factory=deque)  # oldest first

    @property
    def unborn(self) -> int:
        return sum(span.count for span in self.spans)

    def waiting(self) -> int:
        """Made pods still pending (the ones placed or gone at the front are dropped)."""
        made = self.made
        while made and made[0].status is not PodStatus.PENDING:
            made.popleft()
        return sum(pod.status is PodStatus.PENDING for pod in made)


class Unborn:
    """The simulator's :class:`~phalanx.sim.controller.Deferral` for the Job controller."""

    def __init__(self, sim: Simulation, workload: Workload) -> None:
        self.sim = sim
        self.enabled = deferrable(sim)
        self.doomed = doomed_jobs(workload)
        self.reserve = _reserve(sim) if self.enabled else None
        self.named = False  # a gang in a queue other than the default one has appeared
        self.tails: dict[str, Tail] = {}  # "namespace/job" → its tail
        #: gang ident of a span's rep → its tail and the span (until the span is told)
        self.reps: dict[str, tuple[Tail, Span]] = {}

    # -- the Job controller's questions --------------------------------------------------------
    def room(self, run: JobRun, count: int) -> int:
        if not self.calm() or not self._lone(run.spec.template) or _key(run) in self.doomed:
            return count
        if run.spec.depends_on:  # made when released, perhaps while a cycle is applied
            return count
        tail = self.tails.get(_key(run))
        if tail is not None and tail.spans:
            # a few pods wanted later (replacing pods that finished or were evicted): made at
            # once, behind the unborn ones in order and so behind a full window too
            return count
        window = self.window(run.spec.template)
        waiting = 0 if tail is None else tail.waiting()
        return min(count, max(window - waiting, 1))  # one at least: the span's rep

    def defer(self, run: JobRun, first: int, count: int, made: int) -> None:
        sim = self.sim
        namespace, job = run.spec.namespace, run.spec.name
        pods = [sim.state.pods[f"{namespace}/{job}-{i}"] for i in range(first - made, first)]
        tail = self.tails.get(_key(run))
        if tail is None:
            tail = self.tails[_key(run)] = Tail(run, pods[0])  # room() made one at least
        tail.made.extend(pods)
        rep = pods[-1]  # room() made one at least
        span = Span(first, count, sim.now, sim.state.take_seqs(count), rep, first + count - 1)
        tail.spans.append(span)
        self._announce(tail, span)
        if not self.calm() or rep.invalid is not None:
            # its pods name a queue (every pod counts in its order), or are invalid (each
            # is told so by name): all made at once, right after it
            self._make(tail, count)
            return
        self.reps[rep.gang.ident] = (tail, span)
        if self.reserve is not None:
            self.reserve.waiters.gaps[rep.gang.ident] = count

    def arrived(self, gang: GangInfo) -> None:
        """A gang appeared: one in a queue other than the default one makes queues count."""
        if not self.named and self.sim.state.queues.queue_of(gang) != DEFAULT_QUEUE:
            self.named = True

    def calm(self) -> bool:
        """May pods be deferred now? Not once queues count: a waiting gang's queue key then
        adds up the demand of every gang ahead of it in its queue (made or not), and equal
        pods are ordered by name, not index. Not with queueing hints off (the reference:
        every waiting gang is tried again after any release)."""
        state = self.sim.state
        book = state.queues
        return self.enabled and state.hints and not (self.named or book.declared or book.holds)

    # -- what the run reports of them ---------------------------------------------------------
    def _announce(self, tail: Tail, span: Span) -> None:
        """Records, ``submit`` events, queue length and demand, as if the pods were made."""
        sim, sample = self.sim, tail.sample
        spec, namespace, job = tail.run.spec.template, tail.run.spec.namespace, tail.run.spec.name
        with paused_gc():
            for i in range(span.first, span.first + span.count):
                name = f"{job}-{i}"
                ident = f"{IMPLICIT_PREFIX}{namespace}/{name}"
                sim.records[ident] = GangRecord(
                    namespace, name, "Pod", 1, submit=sim.now, queue=spec.queue
                )
        sim.queued(span.count)
        sim.shares.pending_milli += span.count * sim.gpu(sample)
        if sim.sink is not None:
            requests = sim.state.index.mapping(sample.request)
            for i in range(span.first, span.first + span.count):
                key = f"{namespace}/{job}-{i}"
                sim.sink(_event(sim.now, "submit", key, requests))

    def told(self, gang: GangInfo, at: float | None, why: str) -> None:
        """``gang`` is told its expected start: if it is the last made pod before a span that
        arrived with it, that span's pods are told the same first (newest first, as the
        reservation's candidates take arrivals in)."""
        found = self.reps.pop(gang.ident, None)
        if found is None or found[1].told or found[1].created != self.sim.now:
            return
        tail, span = found
        span.told = True
        sim = self.sim
        namespace, job = tail.run.spec.namespace, tail.run.spec.name
        for i in reversed(range(span.first, span.first + span.count)):
            record = sim.records.get(f"{IMPLICIT_PREFIX}{namespace}/{job}-{i}")
            if record is None or record.start is not None:
                continue
            if record.expected_start_first is None:
                record.expected_start_first = at
            record.expected_last, record.expected_why = at, why
            if sim.sink is not None:
                event = _event(sim.now, "expect", None, None)
                event["message"] = why
                event["expected_start"] = at
                sim.sink(event)

    def after_cycle(self, result: CycleResult) -> None:
        """Spans that arrived this instant keep what their rep got in the cycle (applied):
        its condition, how it was parked, how the reservation action took it in."""
        now, blocked = self.sim.now, self.sim.state.blocked
        for tail in self.tails.values():
            for span in reversed(tail.spans):
                if span.created != now:
                    break
                if not span.looked:
                    span.looked = True
                    self._parked(span, result, span.rep.gang.ident in blocked)
                    self._taken(span)

    def _parked(self, span: Span, result: CycleResult, blocked: bool) -> None:
        rep = span.rep
        span.condition = rep.gang.condition
        hint, order = result.hints.get(rep.gang.ident, (None, ()))
        if not blocked:
            span.touch = span.created  # waits unparked: its pods are made at the next cycle
            return
        span.parking = (hint, order, result.freed)
        if isinstance(hint, Gated):
            # it fitted but a reservation gate refused it: so did the gate each of its equal
            # pods behind it, one attempt each; they are made at the next cycle, parked so
            self.sim.attempts += span.count
            span.touch = span.created

    def _taken(self, span: Span) -> None:
        """How the reservation action took the span's rep in, and so its pods; they are made
        before it would look at them again (a retell or aging due)."""
        if self.reserve is None:
            return
        waiters, ident = self.reserve.waiters, span.rep.gang.ident
        base, who = waiters.gap_base.pop(ident, None), waiters.by_ident.get(ident)
        if base is None or who is None:
            span.touch = span.created  # not taken in as expected: made at the next cycle
            return
        due = None
        if who.told is not None:
            at = who.told[0]
            due = at if at is not None and at > span.created else span.created + RETELL
        span.taken = Arrival(base, who.estimate, who.estimated, who.told, due)
        span.touch = min(span.touch, math.inf if due is None else due, who.ages_at)

    def finish_records(self) -> None:
        """The final fields of the unborn pods' records (the simulator fills the others)."""
        sim = self.sim
        for tail in self.tails.values():
            if not tail.spans:
                continue
            spec, sample = tail.run.spec, tail.sample
            priority, gpus = spec.template.priority, sim.gpu(sample) / 1000
            queue = sim.state.queues.queue_of(sample.gang)
            prefix = f"{IMPLICIT_PREFIX}{spec.namespace}/{spec.name}-"
            for span in tail.spans:
                reason = span.condition.message if span.condition else ""
                for i in range(span.first, span.first + span.count):
                    record = sim.records[f"{prefix}{i}"]
                    record.gpus, record.priority, record.reason = gpus, priority, reason
                    record.queue = queue

    # -- making them ---------------------------------------------------------------------------
    def top_up(self) -> None:
        """Before a cycle: every Job with unborn pods has ``W`` made pods waiting again (all
        of them are made, for good, once queues count)."""
        if self.tails and not self.calm():
            self.enabled = False
            self.make_all()
            return
        now = self.sim.now
        for tail in self.tails.values():
            due = [i for i, span in enumerate(tail.spans) if span.touch <= now]
            if due:  # the reservation action looks at them again: made up to the last one
                self._make(tail, sum(tail.spans[i].count for i in range(due[-1] + 1)))
            if tail.spans:
                want = self.window(tail.run.spec.template) - tail.waiting()
                if want > 0:
                    self._make(tail, want)

    def make_all(self, namespace: str | None = None, job: str | None = None) -> None:
        """Make every unborn pod (of ``namespace``, of the Job ``job`` there)."""
        for tail in self.tails.values():
            spec = tail.run.spec
            if (namespace is None or spec.namespace == namespace) and (
                job is None or spec.name == job
            ):
                self._make(tail, tail.unborn)

    def deferred(self, namespace: str, owners: set[str]) -> bool:
        """Were pods of a Job among ``owners`` (``Job/NAME``) made later than wanted?"""
        return any(
            tail.run.spec.namespace == namespace and f"Job/{tail.run.spec.name}" in owners
            for tail in self.tails.values()
        )

    def _make(self, tail: Tail, count: int) -> None:
        sim, spec = self.sim, tail.run.spec
        with paused_gc():
            while count > 0 and tail.spans:
                span = tail.spans[0]
                take = min(count, span.count)
                names = (f"{spec.name}-{i}" for i in range(span.first, span.first + take))
                for offset, pod_spec in enumerate(clones(spec.template, names)):
                    sim.quota.charge(pod_spec)
                    pod = sim.state.add_pod(pod_spec, span.created, span.seq + offset)
                    self._as_arrived(pod, span, span.first + offset)
                    tail.made.append(pod)
                span.first += take
                span.count -= take
                span.seq += take
                count -= take
                if not span.count:
                    tail.spans.popleft()
                    self.reps.pop(span.rep.gang.ident, None)

    def _as_arrived(self, pod: PodInfo, span: Span, index: int) -> None:
        """A pod made late waits as it would since the cycle it arrived in: with its rep's
        condition, parked in its rep's failure class (its own arrival number last in its
        order key), and taken in by the reservation action as its rep was (arrivals are
        taken in newest first: the last pod of the span got the first number)."""
        pod.gang.condition = span.condition
        if span.parking is not None:
            state = self.sim.state
            hint, order, since = span.parking
            own = (*order[:-1], pod.seq) if order else ()
            state.block(pod.gang, state.freed, hint, own, since)
        if span.taken is not None and self.reserve is not None:
            seq = span.taken.seq + span.last - index + 1
            waiters = self.reserve.waiters
            waiters.arrivals[pod.gang.ident] = dataclasses.replace(span.taken, seq=seq)
            waiters.late.add(pod.gang.ident)

    def window(self, template: PodSpec) -> int:
        """Pods of ``template`` the cluster holds with every node empty, plus ``MARGIN``."""
        state = self.sim.state
        index = state.index
        if any(name not in index.position for name, amount in template.requests.items() if amount):
            return MARGIN  # a resource no node offers: it never fits
        request = index.vector({k: v for k, v in template.requests.items() if v})
        cols = np.flatnonzero(request)
        if not cols.size:
            return 1 << 62  # it requests nothing: any number fits
        allocatable = np.maximum(state.table.allocatable[:, cols], 0)
        return int((allocatable // request[cols]).min(axis=1).sum()) + MARGIN

    def _lone(self, template: PodSpec) -> bool:
        """Are the template's pods lone, ungated, unbound pods outside any ResourceQuota, too
        small for the reservation action to list them as big gangs?"""
        lone = (
            template.gang_key is None
            and template.declared_gang is None
            and not template.gates
            and not template.node_name
            and not self.sim.quota.quotas.get(template.namespace)
        )
        if not lone or self.reserve is None:
            return lone
        gpus = sum(v for k, v in template.requests.items() if is_gpu(k)) / 1000
        return gpus < self.reserve.settings.min_gpus


def deferrable(sim: Simulation) -> bool:
    """May a Job's pods beyond its window be made later under this run's schedulers? One
    gang-aware scheduler (pod-at-a-time policies back off per pod: a later pod may go
    first), whose reservations, if any, are not for every waiting gang (conservative) and
    do not age a gang the moment it arrives."""
    if len(sim.schedulers) != 1 or not sim.schedulers[0].config.gang_units:
        return False
    reserve = _reserve(sim)
    if reserve is None:
        return True
    settings = reserve.settings
    return settings.mode != "conservative" and (settings.aging is None or settings.aging > 0)


def doomed_jobs(workload: Workload) -> set[str]:
    """Jobs (``namespace/name``) the run deletes (theirs or their owner's ``delete-after``):
    never deferred, since the reservation action keeps a candidate for a pending pod that
    was deleted (its needs are not looked at again) and an unborn pod would not be one."""
    doomed = set()
    for item in workload.items:
        spec = item.spec
        if item.timing.delete_after is None:
            continue
        if isinstance(spec, JobSpec):
            doomed.add(f"{spec.namespace}/{spec.name}")
        elif isinstance(spec, ControllerSpec):
            doomed.update(f"{spec.namespace}/{job.name}" for job in spec.jobs)
    return doomed


def _reserve(sim: Simulation) -> Reserve | None:
    actions = sim.schedulers[-1].actions
    return next((action for action in actions if isinstance(action, Reserve)), None)


def _key(run: JobRun) -> str:
    return f"{run.spec.namespace}/{run.spec.name}"


def _event(t: float, kind: str, pod: str | None, requests: Any) -> dict[str, Any]:
    return {"t": t, "type": kind, "pod": pod, "gang": None, "node": None, "requests": requests}
