"""Live preemption made visible: Events on victims and preemptors, and disruption metrics.

Design: the cycle's evictions reach :meth:`Preemptions.add` (from
:meth:`~phalanx.live.backend.LiveBackend.evict`, while the result is applied), which notes,
with the pod's ``evicted_for`` (reason ``preempt``/``reclaim``/``shrink``, the preemptor), what
the Events will say — the preemptor's planned nodes and GPUs come from the hold the same
result recorded — and, per victim gang, the GPUs it held and since when. Once the API has
answered every eviction, :meth:`Preemptions.report` writes, for the evictions it accepted:

- on each evicted pod and on its gang's PodGroup, one Event per preemptor:
  ``Preempted`` / ``Reclaimed`` / ``Shrunk`` (action ``Preempt``/``Reclaim``/``Shrink``),
  "preempted by team/urgent to place 16 GPUs on nodes node-a, node-b", ``related`` to the
  preemptor's PodGroup, as kube-scheduler's ``Preempted`` Event on a victim;
- on the preemptor's PodGroup (or, for a lone pod, on the pod), one ``Preempting`` or
  ``Reclaiming`` Event naming its victims;
- the disruption hook (:meth:`~phalanx.live.loop.LiveScheduler.on_disruption`) per victim
  gang: evicted pods, whether the gang fell below its minimum (a *preemption*, as the
  simulator counts it; of which *reclaims*), and the work lost with it
  (:mod:`phalanx.cluster.disruption`, counted from when this scheduler saw the pods bound).

A refused eviction (e.g. 429 while a PodDisruptionBudget forbids it) writes nothing: the pod
keeps its node, and the gang is not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from phalanx.cluster.disruption import lost_gpu_seconds
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import IMPLICIT_PREFIX, GangInfo, PodInfo, PodStatus
from phalanx.live.client import Obj
from phalanx.live.resources import PODS
from phalanx.live.status import StatusWriter, with_kind

#: Event reason on a victim, by disruption reason.
VICTIM_REASONS = {"preempt": "Preempted", "reclaim": "Reclaimed", "shrink": "Shrunk"}
VERBS = {"preempt": "preempted", "reclaim": "reclaimed", "shrink": "shrunk"}
PREEMPTING = "Preempting"
RECLAIMING = "Reclaiming"


@dataclass(slots=True)
class Target:
    """What a preemptor was planned to get: its GPUs (whole) and nodes, from its hold."""

    gpus: float
    pods: int
    nodes: list[str]

    def describe(self) -> str:
        what = f"{self.gpus:g} GPUs" if self.gpus else f"{self.pods} pods"
        where = f" on nodes {', '.join(self.nodes)}" if self.nodes else ""
        return f"to place {what}{where}"


@dataclass(slots=True)
class Victim:
    """A victim gang's evictions for one preemptor in this cycle."""

    gang: GangInfo
    reason: str
    by: str
    pods: list[tuple[PodInfo, Obj | None]] = field(default_factory=list)


@dataclass(slots=True)
class Held:
    """What a victim gang held when its evictions began (for its lost work)."""

    gpus: float
    since: float


def display(ident: str) -> str:
    """``team/urgent`` for a PodGroup's gang, ``team/pod-0`` for a lone pod's."""
    return ident.removeprefix(IMPLICIT_PREFIX)


class Preemptions:
    """One cycle's evictions, reported once carried out (see the module doc)."""

    def __init__(self, state: ClusterState, pods: Mapping[str, Obj]) -> None:
        self.state = state
        self.objects = pods  # the cache's pod objects (Events regard them)
        self.victims: dict[tuple[str, str], Victim] = {}
        self.targets: dict[str, Target] = {}
        self.held: dict[str, Held] = {}

    def add(self, pod: PodInfo, gang: GangInfo, now: float) -> None:
        reason, by = pod.evicted_for or ("preempt", "")
        victim = self.victims.setdefault((gang.ident, by), Victim(gang, reason, by))
        if reason != "shrink":
            victim.reason = reason  # a whole gang's reason wins over its surplus members'
        victim.pods.append((pod, self.objects.get(pod.key)))
        if gang.ident not in self.held:
            self.held[gang.ident] = self._held(gang, now)
        if by and by not in self.targets:
            self.targets[by] = self._target(by)

    def _held(self, gang: GangInfo, now: float) -> Held:
        holding = [p for p in gang.members if p.status in (PodStatus.BOUND, PodStatus.RELEASING)]
        gpus = sum(self._gpu(p) for p in holding) / 1000
        since = min((p.bound_at for p in holding if p.bound_at is not None), default=now)
        return Held(gpus, since)

    def _target(self, by: str) -> Target:
        hold = self.state.queues.holds.get(by)
        if hold is None:
            return Target(0.0, 0, [])
        table = self.state.table
        names = table.names
        gpus = sum(float(amount[table.gpu_col]) for amount in hold.rows.values()) / 1000
        nodes = sorted({names[row] for row in hold.rows})
        return Target(gpus, len(hold.pods), nodes)

    def _gpu(self, pod: PodInfo) -> int:
        return int(pod.request[self.state.table.gpu_col])

    def report(
        self,
        accepted: Iterable[str],
        now: float,
        status: StatusWriter | None,
        group_of: Callable[[str], Obj | None],
        hook: Callable[[str, int, bool, float], None],
    ) -> None:
        """Events and the disruption hook for the evictions the API ``accepted`` (pod keys)."""
        done = set(accepted)
        stopped: set[str] = set()
        by_preemptor: dict[str, list[Victim]] = {}
        for victim in self.victims.values():
            evicted = [(pod, obj) for pod, obj in victim.pods if pod.key in done]
            if not evicted:
                continue
            victim.pods = evicted
            by_preemptor.setdefault(victim.by, []).append(victim)
            gang = victim.gang
            below = self._stopped(gang) and gang.ident not in stopped
            lost = 0.0
            if below:
                stopped.add(gang.ident)
                held = self.held[gang.ident]
                lost = lost_gpu_seconds(gang, held.gpus, now - held.since) / 3600
            hook(victim.reason, len(evicted), below, lost)
            if status is not None:
                self._victim_events(status, victim, group_of)
        if status is not None:
            for by, victims in by_preemptor.items():
                self._preemptor_event(status, by, victims, group_of)

    @staticmethod
    def _stopped(gang: GangInfo) -> bool:
        bound = sum(p.status is PodStatus.BOUND for p in gang.members)
        return bound < gang.min_member

    def _victim_events(
        self, status: StatusWriter, victim: Victim, group_of: Callable[[str], Obj | None]
    ) -> None:
        target = self.targets.get(victim.by, Target(0.0, 0, []))
        note = f"{VERBS[victim.reason]} by {display(victim.by)} {target.describe()}"
        reason = VICTIM_REASONS[victim.reason]
        action = victim.reason.capitalize()
        related = self._regarding(victim.by, group_of)
        for _pod, obj in victim.pods:
            if obj is not None:
                status.notice(with_kind(obj, PODS), reason, note, action=action, related=related)
        group = group_of(victim.gang.ident)
        if group is not None:
            count = len(victim.pods)
            status.notice(group, reason, f"{count} pods {note}", action=action, related=related)

    def _preemptor_event(
        self,
        status: StatusWriter,
        by: str,
        victims: list[Victim],
        group_of: Callable[[str], Obj | None],
    ) -> None:
        regarding = self._regarding(by, group_of)
        if regarding is None:
            return
        reclaim = any(v.reason == "reclaim" for v in victims)
        names = ", ".join(
            f"{display(v.gang.ident)} ({len(v.pods)} pods, {v.reason})"
            for v in sorted(victims, key=lambda v: v.gang.ident)
        )
        target = self.targets.get(by, Target(0.0, 0, []))
        note = f"evicted {names} {target.describe()}"
        reason = RECLAIMING if reclaim else PREEMPTING
        action = "Reclaim" if reclaim else "Preempt"
        status.notice(regarding, reason, note, action=action)

    def _regarding(self, ident: str, group_of: Callable[[str], Obj | None]) -> Obj | None:
        """The preemptor's PodGroup, or its pod for a lone pod's gang."""
        if not ident:
            return None
        if ident.startswith(IMPLICIT_PREFIX):
            obj = self.objects.get(display(ident))
            return None if obj is None else with_kind(obj, PODS)
        return group_of(ident)


__all__ = ["PREEMPTING", "RECLAIMING", "VICTIM_REASONS", "Preemptions"]
