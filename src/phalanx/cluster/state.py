"""ClusterState: the authoritative nodes, pods and gangs that each cycle snapshots.

``version`` counts changes (objects added, pods bound, reserved or released): a unit that
failed at the current version would fail again, so nobody needs to retry it before the
version moves.

``blocked`` holds gangs that failed for lack of room (or of members) — the queueing hint of
kube-scheduler's unschedulable queue: arrivals and binds only take room away, so such a gang
is not worth another attempt until resources are freed (``freed`` moves) or it gains a
member. Long queues then cost a cycle nothing.

Backends (the simulator, later the Kubernetes watch) are the only writers: they add and remove
objects and apply committed binds. ``waiting`` keeps, in arrival order, the gangs that have at
least one pending member, so a cycle never scans finished work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.cluster import devices
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus


class ClusterState:
    def __init__(self, nodes: Sequence[NodeSpec], index: ResourceIndex) -> None:
        self.index = index
        self.table = NodeTable.build(nodes, index)
        self.pods: dict[str, PodInfo] = {}
        self.gangs: dict[str, GangInfo] = {}
        self.waiting: dict[str, GangInfo] = {}
        self.orphans: dict[str, list[PodInfo]] = {}  # pods whose PodGroup has not appeared
        self._seq = 0
        self.version = 0
        self.freed = 0  # counts releases of resources
        self.blocked: dict[str, GangInfo] = {}

    # -- objects appear ------------------------------------------------------------------
    def add_gang(self, spec: GangSpec, now: float) -> GangInfo:
        gang = GangInfo(
            key=spec.key,
            spec=spec,
            min_member=spec.min_member,
            role_minimums=dict(spec.role_minimums),
            created=now,
        )
        self.gangs[spec.key] = gang
        self.version += 1
        for pod in self.orphans.pop(spec.key, []):
            pod.gang = gang
            self._join(pod)
        return gang

    def add_pod(self, spec: PodSpec, now: float) -> PodInfo:
        """Add a pending pod. One that requests a resource no node knows is kept but marked
        invalid, so it waits with that reason and never stops the others."""
        unknown = self.index.unknown(spec.requests)
        known = {k: v for k, v in spec.requests.items() if k in self.index}
        request = self.index.vector(known)
        gang_key = spec.gang_key
        if gang_key is None:
            gang = GangInfo(key=spec.key, spec=None, min_member=1, role_minimums={}, created=now)
            self.gangs[gang.ident] = gang
        else:
            gang = self.gangs.get(gang_key) or _placeholder(gang_key, now)
        self._seq += 1
        self.version += 1
        pod = PodInfo(spec=spec, request=request, created=now, seq=self._seq, gang=gang)
        if unknown:
            pod.invalid = f"requests {', '.join(unknown)}, which no node offers"
        pod.invalid = pod.invalid or devices.invalid(int(request[self.table.gpu_col]))
        self.pods[spec.key] = pod
        if gang_key is not None and gang_key not in self.gangs:
            self.orphans.setdefault(gang_key, []).append(pod)
        else:
            self._join(pod)
        return pod

    def _join(self, pod: PodInfo) -> None:
        pod.gang.add(pod)
        self.unblock(pod.gang)
        if pod.status is PodStatus.PENDING:
            self.waiting[pod.gang.ident] = pod.gang

    # -- the backend applies decisions -----------------------------------------------------
    def bind(self, pod: PodInfo, node: int, now: float) -> None:
        """Record a committed bind: the pod holds ``node``'s resources from now on."""
        if pod.status is PodStatus.RESERVED:
            if node != pod.node:
                raise ValueError(f"{pod.key} is reserved on another node")
        else:
            self._take(pod, node, "bind")
        self.version += 1
        pod.node = node
        pod.bound_at = now
        pod.gang.move(pod, PodStatus.BOUND)
        self._refresh_waiting(pod.gang)

    def reserve(self, pod: PodInfo, node: int) -> None:
        """Hold ``node``'s resources for ``pod`` without binding it (coscheduling's Permit)."""
        self._take(pod, node, "reserve")
        self.version += 1
        pod.node = node
        pod.gang.move(pod, PodStatus.RESERVED)
        self._refresh_waiting(pod.gang)

    def unreserve(self, pod: PodInfo, node: int, gpus: tuple[int, ...]) -> None:
        """Give back what a rejected reservation held on ``node``; the session has already
        made the pod pending again."""
        if pod.status is not PodStatus.PENDING:
            raise ValueError(f"cannot unreserve {pod.key} in status {pod.status.value}")
        self.table.remove(node, pod.request, gpus)
        self.version += 1
        self._freed()
        self._refresh_waiting(pod.gang)

    def _take(self, pod: PodInfo, node: int, verb: str) -> None:
        if pod.status not in (PodStatus.ALLOCATED, PodStatus.PENDING):
            raise ValueError(f"cannot {verb} {pod.key} in status {pod.status.value}")
        if pod.status is PodStatus.PENDING or not pod.gpus:
            pod.gpus = self.table.pick_gpus(node, pod.request)
        self.table.add(node, pod.request, pod.gpus)

    def release(self, pod: PodInfo, status: PodStatus = PodStatus.SUCCEEDED) -> None:
        """A pod finished or went away: return its resources."""
        holding = (PodStatus.BOUND, PodStatus.RELEASING, PodStatus.RESERVED)
        if pod.node >= 0 and pod.status in holding:
            self.table.remove(pod.node, pod.request, pod.gpus)
            pod.gpus = ()
            self._freed()
        self.version += 1
        pod.gang.move(pod, status)
        self._refresh_waiting(pod.gang)

    def _refresh_waiting(self, gang: GangInfo) -> None:
        if gang.ident in self.blocked:
            return
        if any(p.status is PodStatus.PENDING for p in gang.members):
            self.waiting.setdefault(gang.ident, gang)
        else:
            self.waiting.pop(gang.ident, None)

    # -- queueing hints ------------------------------------------------------------------------
    def block(self, gang: GangInfo, freed: int) -> None:
        """Park ``gang`` until resources are freed; ``freed`` is the count it failed at (a
        release since then means it may fit now, so it stays waiting)."""
        if freed == self.freed and gang.ident in self.waiting:
            self.blocked[gang.ident] = self.waiting.pop(gang.ident)

    def unblock(self, gang: GangInfo) -> None:
        if self.blocked.pop(gang.ident, None) is not None:
            self._refresh_waiting(gang)

    def _freed(self) -> None:
        self.freed += 1
        if self.blocked:
            parked, self.blocked = self.blocked, {}
            for gang in parked.values():
                self._refresh_waiting(gang)

    def waiting_gangs(self) -> Iterable[GangInfo]:
        return list(self.waiting.values())

    def pod_of(self, key: str) -> PodInfo | None:
        return self.pods.get(key)


def _placeholder(key: str, now: float) -> GangInfo:
    """Where a pod waits while its PodGroup has not appeared yet; never scheduled."""
    return GangInfo(
        key=key,
        spec=None,
        min_member=1,
        role_minimums={},
        created=now,
        invalid="its PodGroup does not exist yet",
    )
