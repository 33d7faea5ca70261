"""Queues in the simulator: queue objects, preempted gangs restarting, and shares over time.

- Queue objects (``QueueSpec``, ``QueueBindingSpec``, Kueue ``ResourceFlavorSpec``) and
  PodDisruptionBudgets go into the
  state's :class:`~phalanx.cluster.queues.QueueBook` when they appear.
- An evicted pod is gone at once (no grace period). A gang that falls below its minimum while
  its work runs **restarts**: its work stops (a FINISH already planned no longer counts), the
  GPU-time since its start, or since its last checkpoint when its pods carry
  ``phalanx.dev/checkpoint-interval``, is *lost work*; with checkpoints the work done up to the
  last one is kept and the restart runs only the rest. Its evicted pods are re-created pending
  (a Job's pods by the Job controller, other pods here, as a PodGroup's controller would), so
  the gang waits in its queue again. Evicting surplus members of an elastic gang loses nothing.
- **Elastic gangs** (more pods than ``minMember``) run ``work ÷ members`` (:class:`Elastic`):
  a gang's ``phalanx.dev/duration`` is its run time with all its pods running (up to its
  ``phalanx.dev/max-member``), so its work is ``duration × pods`` member-seconds; with ``m``
  members running it progresses ``m`` per second. Growing (a ``grow`` event per member) or
  shrinking re-plans its finish. A rigid gang always runs all its pods, so its duration is
  unchanged.
- :class:`ShareMeter` integrates, per queue, the GPUs its pods hold and the GPUs it deserves
  (sampled after every cycle) over time, and the time it had demand, for the run's ``queues``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from phalanx.api.queues import DEFAULT_QUEUE, BudgetSpec, QueueBindingSpec, QueueSpec
from phalanx.api.specs import ResourceFlavorSpec
from phalanx.cluster.disruption import CHECKPOINT, checkpoint_interval, kept_seconds
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus

if TYPE_CHECKING:
    from phalanx.sim.simulator import Simulation

__all__ = ["CHECKPOINT", "Disruptions", "Elastic", "ShareMeter", "add_object", "remove_object"]


def add_object(sim: Simulation, spec: object) -> bool:
    """Put a queue object into the book; False if ``spec`` is not one."""
    book = sim.state.queues
    if isinstance(spec, QueueSpec):
        book.add_queue(spec)
    elif isinstance(spec, QueueBindingSpec):
        book.add_binding(spec)
    elif isinstance(spec, BudgetSpec):
        book.add_budget(spec)
    elif isinstance(spec, ResourceFlavorSpec):
        book.add_flavor(spec)
    else:
        return False
    return True


def remove_object(sim: Simulation, spec: object) -> None:
    book = sim.state.queues
    if isinstance(spec, QueueSpec):
        book.remove_queue(spec.name)
    elif isinstance(spec, QueueBindingSpec):
        book.remove_binding(spec)
    elif isinstance(spec, BudgetSpec):
        book.budgets.pop(f"{spec.namespace}/{spec.name}", None)
    elif isinstance(spec, ResourceFlavorSpec):
        book.remove_flavor(spec.name)


@dataclass(slots=True)
class Disruptions:
    """Counts and lost work of evictions in one run."""

    preemptions: int = 0  # gangs restarted (preempt or reclaim)
    reclaims: int = 0  # of which by reclaim
    shrinks: int = 0  # surplus members taken from elastic gangs
    lost_gpu_seconds: float = 0.0
    done: dict[str, float] = field(default_factory=dict)  # gang ident → work kept (seconds)

    def evicted(self, sim: Simulation, pod: PodInfo) -> None:
        """``pod`` was evicted (the state already counts it releasing)."""
        reason, by = pod.evicted_for or ("preempt", "")
        gang = pod.gang
        sim.emit("evict", pod=pod, extra={"reason": reason, "by": by})
        started = gang.started
        holding = (PodStatus.BOUND, PodStatus.RELEASING)
        gpus = sum(sim.gpu(p) for p in gang.members if p.status in holding) / 1000
        if pod.status is PodStatus.RELEASING:  # remove_pod meters bound pods only
            sim.meter.release(sim.gpu(pod), started=started is not None)
        sim.remove_pod(pod, PodStatus.DELETED)
        if reason == "shrink":
            self.shrinks += 1
        bound = [p for p in gang.members if p.status is PodStatus.BOUND]  # not being evicted
        if started is not None and gang.finished is None and len(bound) < gang.min_member:
            self._restart(sim, gang, started, reason, gpus)
        elif started is not None and gang.finished is None:
            sim.elastic.resize(sim, gang)
        sim.recreate(pod)

    def _restart(
        self, sim: Simulation, gang: GangInfo, started: float, reason: str, gpus: float
    ) -> None:
        record = sim.records[gang.ident]
        ran = sim.now - started
        kept = kept_seconds(ran, checkpoint_interval(gang))
        lost = gpus * (ran - kept)
        record.preempted += 1
        record.lost_gpu_hours += lost / 3600
        self.lost_gpu_seconds += lost
        self.preemptions += 1
        self.reclaims += reason == "reclaim"
        self.done[gang.ident] = self.done.get(gang.ident, 0.0) + kept
        holding = (PodStatus.BOUND, PodStatus.RELEASING)
        held = sum(sim.gpu(p) for p in gang.members if p.status in holding)
        sim.meter.started(-held)  # what it still holds is idle from now on
        gang.started = None
        sim.finish_at.pop(gang.ident, None)  # its planned FINISH no longer counts
        sim.queued(+1)

    def remaining(self, gang: GangInfo, duration: float) -> float:
        return max(duration - self.done.get(gang.ident, 0.0), 0.0)


@dataclass(slots=True)
class Elastic:
    """Remaining work of running elastic gangs (member-seconds), and how fast it goes."""

    left: dict[str, float] = field(default_factory=dict)
    members: dict[str, int] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)

    def start(self, sim: Simulation, gang: GangInfo, duration: float) -> None:
        size = min(gang.alive(), gang.max_member or gang.alive())
        running = sum(p.status is PodStatus.BOUND for p in gang.members)
        if gang.implicit or size <= gang.min_member or running <= 0:
            sim.plan_finish(gang, sim.now + duration)
            return
        self.left[gang.ident] = duration * size
        self.members[gang.ident] = running
        self.since[gang.ident] = sim.now
        sim.plan_finish(gang, sim.now + duration * size / running)

    def resize(self, sim: Simulation, gang: GangInfo, grew: list[PodInfo] | None = None) -> None:
        """Members joined (``grew``) or left a running gang: its finish moves."""
        for pod in grew or []:
            sim.emit("grow", pod=pod, node=sim.state.table.names[pod.node])
        ident = gang.ident
        if ident not in self.left:
            return
        running = sum(p.status is PodStatus.BOUND for p in gang.members)
        self.left[ident] -= self.members[ident] * (sim.now - self.since[ident])
        self.members[ident], self.since[ident] = running, sim.now
        if running > 0:
            sim.plan_finish(gang, sim.now + max(self.left[ident], 0.0) / running)


@dataclass(slots=True)
class ShareMeter:
    """Per queue: GPU-seconds held, GPU-seconds deserved, seconds with demand, and the
    integral of |held − deserved| while it had demand; plus points for plots."""

    held: dict[str, float] = field(default_factory=dict)  # milli-GPU now
    deserved: dict[str, float] = field(default_factory=dict)
    demand: dict[str, bool] = field(default_factory=dict)
    held_integral: dict[str, float] = field(default_factory=dict)
    deserved_integral: dict[str, float] = field(default_factory=dict)
    error_integral: dict[str, float] = field(default_factory=dict)
    demand_time: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    last: float = 0.0
    pending_milli: int = 0  # GPUs of pending pods (for the one-queue case)
    multi: bool = False  # a gang named a queue other than ``default``

    def advance(self, now: float) -> None:
        dt = now - self.last
        if dt <= 0:
            return
        for name in set(self.held) | set(self.deserved):
            held, deserved = self.held.get(name, 0.0), self.deserved.get(name, 0.0)
            self.held_integral[name] = self.held_integral.get(name, 0.0) + held * dt
            self.deserved_integral[name] = self.deserved_integral.get(name, 0.0) + deserved * dt
            if self.demand.get(name):
                self.demand_time[name] = self.demand_time.get(name, 0.0) + dt
                error = abs(held - deserved) * dt
                self.error_integral[name] = self.error_integral.get(name, 0.0) + error
        self.last = now

    def asked(self, sim: Simulation, pod: PodInfo, sign: int) -> None:
        """A pending pod appeared (``+1``) or stopped pending (``-1``): the one queue's
        demand, counted when no queue is in play (see :meth:`sample`)."""
        self.pending_milli += sign * sim.gpu(pod)
        if sign > 0 and not self.multi:
            self.multi = sim.state.queues.queue_of(pod.gang) != DEFAULT_QUEUE

    def sample(self, sim: Simulation) -> None:
        """After a cycle: what each queue holds and deserves from now on. With no queue in
        play (none declared, every gang in ``default``) that is O(1): the one queue holds
        what is allocated and deserves what it asks, up to the cluster; otherwise the book's
        figures, refreshed here after the cycle (the book recomputes only the gangs that
        changed since, see :mod:`phalanx.cluster.queuetally`)."""
        book = sim.state.queues
        if not (book.active or book.declared or self.multi):
            capacity = float(sim.state.table.total_allocatable()[sim.state.table.gpu_col])
            held = float(sim.meter.allocated_milli)
            deserved = min(capacity, held + self.pending_milli)
            self._set(sim, DEFAULT_QUEUE, held, deserved, held + self.pending_milli > 0)
            return
        # after the cycle: the plugins' refresh at its start does not hold what it bound
        # (without ``now`` no usage history is sampled, so no decision moves)
        active = book.active
        total = sim.state.table.total_allocatable().astype(np.float64)
        book.refresh(sim.state.waiting_gangs(), sim.state.index, total)
        book.active = active
        gpu = sim.state.table.gpu_col
        names = set(book.uses) | set(self.held)
        for name in names:
            use = book.uses.get(name)
            if book.children_of(name):
                continue  # leaves only: a parent's share is its children's
            held = float(use.usage[gpu]) if use is not None else 0.0
            deserved = float(use.deserved[gpu]) if use is not None and use.deserved.size else 0.0
            wants = use is not None and float(use.demand[gpu]) > 0
            self._set(sim, name, held, deserved, wants)

    def _set(self, sim: Simulation, name: str, held: float, deserved: float, wants: bool) -> None:
        if (held, deserved, wants) != (
            self.held.get(name),
            self.deserved.get(name),
            self.demand.get(name),
        ):
            self.series.setdefault(name, []).append((sim.now, held / 1000, deserved / 1000))
        self.held[name], self.deserved[name], self.demand[name] = held, deserved, wants

    def to_json(self, capacity_milli: float, end: float, waits: dict[str, list[float]]) -> Any:
        out: dict[str, Any] = {}
        if capacity_milli <= 0 or end <= 0:
            return out
        for name in sorted(set(self.held_integral) | set(waits)):
            demand_time = self.demand_time.get(name, 0.0)
            queue_waits = sorted(waits.get(name, []))
            out[name] = {
                "deserved_gpu_share": _pct(
                    self.deserved_integral.get(name, 0.0), capacity_milli, end
                ),
                "mean_gpu_share": _pct(self.held_integral.get(name, 0.0), capacity_milli, end),
                "share_error": (
                    _pct(self.error_integral.get(name, 0.0), capacity_milli, demand_time)
                    if demand_time > 0
                    else None
                ),
                "mean_wait": float(np.mean(queue_waits)) if queue_waits else None,
                "p99_wait": float(np.percentile(queue_waits, 99)) if queue_waits else None,
                "share": [[t, held, deserved] for t, held, deserved in self.series.get(name, [])],
            }
        return out


def _pct(integral: float, capacity_milli: float, span: float) -> float:
    return round(100.0 * integral / capacity_milli / span, 3)
