"""The Backend contract, and the one applier that carries a cycle's decisions out.

A cycle (:class:`~phalanx.framework.session.Session`) decides; it changes nothing outside its
snapshot (its Statements, committed ones included, are undone on the shared pods and gangs
when it closes). :func:`apply` takes the :class:`CycleResult` and applies **every** field,
first to the long-lived :class:`~phalanx.cluster.state.ClusterState` (so the next cycle sees
the decisions at once), then through the runner's :class:`Backend`:

============== ========================================== ===================================
field          state                                      backend
============== ========================================== ===================================
unreserved     ``unreserve`` (pod pending, node freed)    ``release``
reservations   ``reserve`` (held, not bound)              ``reserve``
binds          ``assume`` (holds its node at once)        ``bind`` (once per gang, in order)
gpus           the devices binds and reservations take    —
evictions      ``evict`` (releasing, still holds)         ``evict``
disruptions    the pod's ``evicted_for`` (reason, by)     (read by ``evict``)
holds          ``queues.holds`` (room kept for a gang)    —
placed         condition Scheduled, backoff cleared       —
domains        named in the placed gang's condition       —
waiting        the gang's condition                       ``write_status``
timeouts       ``timed_out``                              ``timed_out``
retry_at       backoff end (``failures``: how many more)  ``wake_at``
deferred       —                                          ``wake_at``
wake_at        —                                          ``wake_at``
recheck_at     —                                          ``recheck_at`` (not progress)
expected       ``expected_start``/``expected_reason``     ``expected``
late           —                                          ``deadline_miss``
unblocked      ``unblock`` (a parked gang wakes)          —
blocked        ``block`` (queueing hint), after unblocked —
attempts       —                                          ``attempts``
tried          the gang's ``attempted`` (state version)   —
retries        the pod's failures, backoff, blocked mark  —
permits        ``permit_deadline``, ``permits``           —
============== ========================================== ===================================

The simulator's backend confirms binds at once, moves its virtual clock and writes events; the
live backend binds through the API (``pods/binding``), evicts through the Eviction API (so
PodDisruptionBudgets are honoured) and writes statuses. A runner that cannot carry a field out
must refuse the policy that produces it, never drop it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import Condition, GangInfo, PodInfo
from phalanx.framework.session import CycleResult


class Backend(Protocol):
    def now(self) -> float:
        """The runner's clock (virtual or wall)."""

    def bind(self, gang: GangInfo, binds: Sequence[tuple[PodInfo, int]]) -> None:
        """Bind a gang's committed pods (the state already holds them, assumed)."""

    def evict(self, pod: PodInfo, gang: GangInfo) -> None:
        """Evict ``pod`` (the state counts it as releasing until it is gone)."""

    def reserve(self, pod: PodInfo, node: int) -> None:
        """``pod`` holds ``node`` without being bound (coscheduling's Permit)."""

    def release(self, pod: PodInfo, node: int) -> None:
        """A reservation was given back."""

    def write_status(self, gang: GangInfo, condition: Condition) -> None:
        """Why ``gang`` waits (its PodGroup status, events, explanations)."""

    def timed_out(self, gang: GangInfo) -> None:
        """``gang`` passed its ``scheduleTimeoutSeconds`` without being placed."""

    def wake_at(self, at: float) -> None:
        """A cycle is needed again at ``at`` (a backoff ends, a Permit wait expires)."""

    def recheck_at(self, at: float) -> None:
        """Plans (reservations, aging) want a re-check at ``at`` if anything still runs."""

    def expected(self, gang: GangInfo, at: float | None, why: str) -> None:
        """``gang`` is expected to start at ``at`` (None: unknown), for the reason ``why``."""

    def deadline_miss(self, gang: GangInfo, late: float, why: str) -> None:
        """``gang`` is expected to miss its deadline by ``late`` seconds."""

    def attempts(self, count: int) -> None:
        """The cycle made ``count`` placement attempts (for metrics)."""


def apply(result: CycleResult, state: ClusterState, backend: Backend) -> None:
    """Carry out every decision of ``result``: on ``state`` first, then through ``backend``."""
    now = backend.now()
    for pod, node, gpus in result.unreserved:
        state.unreserve(pod, node, gpus)
        backend.release(pod, node)
    for pod, node in result.reservations:
        state.reserve(pod, node, result.gpus.get(id(pod)) or None)
        backend.reserve(pod, node)
    for gang, binds in _by_gang(result.binds):
        for pod, node in binds:
            state.assume(pod, node, now, result.gpus.get(id(pod)) or None)
        backend.bind(gang, binds)
    for hold in result.holds:
        state.queues.holds[hold.gang] = hold
    for pod in result.evictions:
        pod.evicted_for = result.disruptions.get(pod.key)
        state.evict(pod)
        backend.evict(pod, pod.gang)
    for ident, flavors in result.flavors.items():
        admitted = state.gangs.get(ident)
        if admitted is not None:
            admitted.flavors = flavors
    for gang in result.placed:
        where = result.domains.get(gang.ident)
        message = "all required members placed" + (f" in {where}" if where else "")
        gang.condition = Condition("Scheduled", "Scheduled", message, now)
        gang.failures = 0
        gang.backoff_until = 0.0
    for ident, condition in result.waiting.items():
        waiting = state.gangs.get(ident)
        if waiting is not None:
            waiting.condition = condition
            backend.write_status(waiting, condition)
    for gang in result.timeouts:
        gang.timed_out = True
        backend.timed_out(gang)
    for ident, at in result.retry_at.items():
        backing_off = state.gangs.get(ident)
        if backing_off is not None:
            backing_off.failures += result.failures[ident]
            backing_off.backoff_until = at
        backend.wake_at(at)
    for at in result.deferred.values():
        backend.wake_at(at)
    for at in result.wake_at:
        backend.wake_at(at)
    for at in result.recheck_at:
        backend.recheck_at(at)
    for ident, (expected, why) in result.expected.items():
        expecting = state.gangs.get(ident)
        if expecting is not None:
            expecting.expected_start, expecting.expected_reason = expected, why
            backend.expected(expecting, expected, why)
    for ident, (late, why) in result.late.items():
        missing = state.gangs.get(ident)
        if missing is not None:
            backend.deadline_miss(missing, late, why)
    for gang in result.unblocked:  # first: a gang woken in the cycle may be parked again
        state.unblock(gang)
    for gang in result.blocked:
        state.block(gang, result.freed, *result.hints.get(gang.ident, (None, ())))
    for gang, version in result.tried:
        gang.attempted = version
    for pod, retry in result.retries.values():
        pod.failures, pod.backoff_until = retry.failures, retry.backoff_until
        pod.blocked_at = retry.blocked_at
    for gang, deadline in result.permits.values():
        gang.permit_deadline = deadline
        state.permits.pop(gang.ident, None)  # a gang waiting anew goes last
        if deadline is not None:
            state.permits[gang.ident] = gang
    backend.attempts(result.attempts)


def _by_gang(
    binds: Sequence[tuple[PodInfo, int]],
) -> list[tuple[GangInfo, list[tuple[PodInfo, int]]]]:
    """Binds grouped by gang, gangs in the order of their first bind."""
    groups: dict[str, tuple[GangInfo, list[tuple[PodInfo, int]]]] = {}
    for pod, node in binds:
        groups.setdefault(pod.gang.ident, (pod.gang, []))[1].append((pod, node))
    return list(groups.values())


class MemoryBackend:
    """A backend with no cluster behind it: binds are confirmed at once, everything else is
    recorded. For the engine benchmarks, tests, and dry runs (``phalanx explain``)."""

    def __init__(self, state: ClusterState, now: float = 0.0) -> None:
        self.state = state
        self.clock = now
        self.bound: list[tuple[PodInfo, int]] = []
        self.evicted: list[PodInfo] = []
        self.statuses: dict[str, Condition] = {}
        self.timeouts: list[GangInfo] = []
        self.wakeups: list[float] = []
        self.expectations: dict[str, tuple[float | None, str]] = {}
        self.late: dict[str, float] = {}
        self.attempted = 0

    def now(self) -> float:
        return self.clock

    def bind(self, gang: GangInfo, binds: Sequence[tuple[PodInfo, int]]) -> None:
        for pod, node in binds:
            self.state.confirm(pod.key)
            self.bound.append((pod, node))

    def evict(self, pod: PodInfo, gang: GangInfo) -> None:
        self.evicted.append(pod)

    def reserve(self, pod: PodInfo, node: int) -> None:
        """Nothing to do: the state holds the reservation."""

    def release(self, pod: PodInfo, node: int) -> None:
        """Nothing to do: the state freed the reservation."""

    def write_status(self, gang: GangInfo, condition: Condition) -> None:
        self.statuses[gang.ident] = condition

    def timed_out(self, gang: GangInfo) -> None:
        self.timeouts.append(gang)

    def wake_at(self, at: float) -> None:
        self.wakeups.append(at)

    def recheck_at(self, at: float) -> None:
        self.wakeups.append(at)

    def expected(self, gang: GangInfo, at: float | None, why: str) -> None:
        self.expectations[gang.ident] = (at, why)

    def deadline_miss(self, gang: GangInfo, late: float, why: str) -> None:
        self.late[gang.ident] = late

    def attempts(self, count: int) -> None:
        self.attempted += count


def run_cycle(scheduler: _Cycles, state: ClusterState, now: float) -> CycleResult:
    """One cycle applied to ``state`` with a :class:`MemoryBackend` (tests, benchmarks)."""
    result = scheduler.cycle(state, now)
    apply(result, state, MemoryBackend(state, now))
    return result


class _Cycles(Protocol):
    def cycle(self, state: ClusterState, now: float) -> CycleResult: ...
