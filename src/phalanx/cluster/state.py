"""ClusterState: the authoritative nodes, pods and gangs that each cycle snapshots.

The state lives as long as its runner (the simulator, or the live scheduler from start-up on)
and is changed by events, never rebuilt. Its contract follows kube-scheduler's cache
(``backend/cache/interface.go``). A pod moves through::

                add_pod                  bind / assume              confirm
    (absent) ─────────► Pending ───────────────────────► Bound ─────────► Bound (confirmed)
                          ▲  │ reserve (Permit)            │ │ forget (bind failed)
                          │  ▼                              │ └──────────► Pending
                          └─ Reserved ── unreserve          │ evict ─► Releasing
                                                            ▼
                     remove_pod / release (finished, deleted, evicted and gone) ─► (absent)

- ``add_pod``: a pending pod appears; ``add_bound_pod``: a pod appears already on a node
  (start-up, or bound by another scheduler).
- ``assume``: the engine committed a bind that the API has not confirmed yet — the pod holds
  its node at once; ``confirm``: the watch shows it bound; ``forget``: the bind failed, the pod
  is pending again and its node's resources are free.
- ``update_pod``: its spec changed (priority, labels, requests resized in place);
  ``remove_pod``: deleted, whatever its status (a bound pod's resources are freed).
- ``add_node`` / ``update_node`` / ``remove_node``; ``add_gang`` / ``update_gang`` /
  ``remove_gang``. A resource name first seen in a node or pod grows the index: every matrix
  and every pod's request vector gains a zero column.

Every change costs O(size of the object) (a node change O(nodes), for its facts), so a cycle
where nothing changed does no work proportional to the cluster. ``fingerprint`` summarises the
state so a test can check that incremental changes equal a state rebuilt from scratch.

``version`` counts changes (objects added, pods bound, reserved or released): a unit that
failed at the current version would fail again, so nobody needs to retry it before the
version moves.

``blocked`` holds gangs that failed for lack of room (or of members) — the queueing hints of
kube-scheduler's unschedulable queue: arrivals and binds only take room away, so such a gang
is not worth another attempt until resources are freed (``freed`` moves) and the freed room
could hold it, or it gains or loses a member, or nodes change. Parked gangs sit in failure
classes (:mod:`phalanx.cluster.hints`); a release wakes only the first gangs of the classes
the room could now hold. Long queues then cost a cycle nothing. A gang a reservation gate
refused waits for the gate's stamp to move (``waiting_gangs(gate=...)``); ``taken`` counts
takes of room (binds, reservations, evictions), which such a stamp covers. ``released`` keeps
the gangs of the latest releases (``released_count`` in all), so a reader that keeps up with
what ended (the reserve action) looks at those gangs, not at every running one.

Backends (the simulator, later the Kubernetes watch) are the only writers: they add and remove
objects and apply committed binds. ``waiting`` keeps, in arrival order, the gangs that have at
least one pending member, so a cycle never scans finished work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from phalanx.api.specs import GangSpec, NodeSpec, PodSpec, Resources
from phalanx.cluster import devices
from phalanx.cluster.hints import MIXED, CapacityOf, Gated, GatedClass, Hint, Parked, wake_count
from phalanx.cluster.nodes import TOMBSTONE, NodeTable
from phalanx.cluster.queues import QueueBook
from phalanx.cluster.resources import ResourceIndex, Vector
from phalanx.cluster.topology import TopologySource
from phalanx.cluster.workloads import HOLDING, GangInfo, PodInfo, PodStatus

#: How many of the latest releases ``ClusterState.released`` keeps.
RELEASED_KEPT = 4096


class ClusterState:
    def __init__(self, nodes: Sequence[NodeSpec], index: ResourceIndex) -> None:
        index.grow(name for node in nodes for name in node.allocatable)
        self.index = index
        self.table = NodeTable.build(nodes, index)
        self.pods: dict[str, PodInfo] = {}
        self.gangs: dict[str, GangInfo] = {}
        self.waiting: dict[str, GangInfo] = {}
        self.orphans: dict[str, list[PodInfo]] = {}  # pods whose PodGroup has not appeared
        self._seq = 0
        self._last_requests: tuple[Resources, Vector, Vector, list[str], str | None] | None = None
        self.version = 0
        self.freed = 0  # counts releases of resources
        #: the gangs of the latest releases (``released_count`` in all): a reader that kept
        #: up finds what changed since it last looked without walking every gang
        self.released: deque[GangInfo] = deque(maxlen=RELEASED_KEPT)
        self.released_count = 0
        self.taken = 0  # counts takes of room: binds, reservations, evictions
        self.blocked: dict[str, GangInfo] = {}  # parked gangs (queueing hints)
        self.hints = True  # False: a parked gang wakes on any release (the coarse reference)
        self._parked: dict[Hashable, Parked] = {}  # failure class → its parked gangs
        self._class_of: dict[str, Hashable] = {}
        self._parked_at: dict[str, int] = {}  # parked gang → ``freed`` when it was parked
        self._parks = 0  # counts parkings: a parked gang's number orders ``blocked``
        self._park_number: dict[str, int] = {}
        #: gangs woken beyond their class's budget because a gate watches them (see
        #: ``_wake_watched``): the room may not hold them, which allocate checks first
        self.watched_woken: set[str] = set()
        #: classes of gangs a gate refused → the gate's stamp their gangs were judged at
        self._gated: dict[GatedClass, Hashable] = {}
        #: gang → the class a wake budget took it from (see ``parked_next``)
        self.woken: dict[str, Hashable] = {}
        #: pod key → node index: binds the engine committed that the API has not confirmed
        self.assumed: dict[str, int] = {}
        #: pods invalid only because no node offers a resource they request (re-checked when
        #: nodes change)
        self._unoffered: dict[str, PodInfo] = {}
        #: queues, their bindings and disruption budgets (see :mod:`phalanx.cluster.queues`)
        self.queues = QueueBook()
        #: gangs with pods waiting at Permit (coscheduling): those with a ``permit_deadline``,
        #: kept by the applier
        self.permits: dict[str, GangInfo] = {}

    # -- nodes -------------------------------------------------------------------------------
    def node_index(self, name: str) -> int | None:
        return self.table.facts.position.get(name)

    def add_node(self, spec: NodeSpec) -> int:
        """A node appeared (or changed, if one of that name exists); its row."""
        row = self.node_index(spec.name)
        self._grow(spec.allocatable)
        self.table.set_node(len(self.table) if row is None else row, spec)
        self.version += 1
        self.room_changed()  # room may have appeared, and validity may change
        self._recheck_unoffered()
        return len(self.table) - 1 if row is None else row

    update_node = add_node

    def remove_node(self, name: str) -> None:
        """A node went away. Its row stays as a tombstone; pods still bound there keep their
        record until they are removed (the API deletes them)."""
        row = self.node_index(name)
        if row is None:
            return
        self.table.set_node(row, TOMBSTONE)
        self.version += 1

    def _grow(self, resources: dict[str, int]) -> None:
        new = [name for name, amount in resources.items() if name not in self.index]
        if not new:
            return
        added = self.index.grow(new)
        if added:
            self.table.add_columns(added)
            for pod in self.pods.values():
                pod.request = self.index.pad(pod.request)

    def _recheck_unoffered(self) -> None:
        offered = self.table.total_allocatable() > 0
        for key, pod in list(self._unoffered.items()):
            if offered[pod.request > 0].all() and not self.index.unknown(pod.spec.requests):
                del self._unoffered[key]
                pod.invalid = devices.invalid(int(pod.request[self.table.gpu_col]))
                pod.gang.touched()
                self.unblock(pod.gang)
        self.topology = TopologySource()  # set by the runner from Topology/HyperNode objects

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

    def add_pod(self, spec: PodSpec, now: float, seq: int | None = None) -> PodInfo:
        """Add a pending pod created at ``now``. One that requests a resource no node offers
        is kept but marked invalid, so it waits with that reason and never stops the others
        (until a node that offers it appears). A gang the pod itself declares (Koordinator,
        Kueue, YuniKorn) is created by its first pod, and raised to the role minimums later
        pods declare. O(1): pods of one template share their request vector and its verdicts.
        ``seq`` is its arrival number when one was taken for it earlier (``take_seqs``: a pod
        made later than it was wanted keeps its place among equals)."""
        if spec.declared_gang is not None:
            self._declare(spec.declared_gang, now)
        request, unknown, bad_gpus = self._vector_of(spec.requests)
        key = spec.key
        gang_key = spec.gang_key
        if gang_key is None:
            gang = GangInfo(key=key, spec=None, min_member=1, role_minimums={}, created=now)
            self.gangs[gang.ident] = gang
        else:
            gang = self.gangs.get(gang_key) or _placeholder(gang_key, now)
        if seq is None:
            self._seq += 1
            seq = self._seq
        self.version += 1
        pod = PodInfo(spec=spec, request=request, created=now, seq=seq, gang=gang)
        if unknown:
            pod.invalid = f"requests {', '.join(unknown)}, which no node offers"
            self._unoffered[key] = pod
        else:
            pod.invalid = bad_gpus
        self.pods[key] = pod
        if gang_key is not None and gang_key not in self.gangs:
            orphans = self.orphans.setdefault(gang_key, [])
            pod.gang = orphans[0].gang if orphans else gang  # one placeholder holds them all
            pod.gang.add(pod)  # so that removing the pod before its gang comes finds it
            orphans.append(pod)
        else:
            self._join(pod)
        return pod

    def take_seqs(self, count: int) -> int:
        """Set aside ``count`` arrival numbers for pods made later; the first of them."""
        first = self._seq + 1
        self._seq += count
        return first

    def _declare(self, declared: GangSpec, now: float) -> None:
        gang = self.gangs.get(declared.key)
        if gang is None:
            self.add_gang(declared, now)
            return
        for role, need in declared.role_minimums.items():  # a gang group learns its members'
            have = gang.role_minimums.get(role, 0)
            if need > have:
                gang.role_minimums[role] = need
                gang.min_member += need - have

    def _vector_of(self, requests: Resources) -> tuple[Vector, list[str], str | None]:
        """The request vector, the names no node offers and why its GPU request is invalid
        (None: it is not). Pods made from one template (a Job's) share one requests mapping,
        and then one read-only vector, until the index or the nodes change."""
        last = self._last_requests
        if last is not None and last[0] is requests and last[1] is self.table.total_allocatable():
            return last[2], last[3], last[4]
        self._grow({k: v for k, v in requests.items() if v})
        request = self.index.vector({k: v for k, v in requests.items() if k in self.index})
        total = self.table.total_allocatable()
        unknown = sorted(
            name
            for name, amount in requests.items()
            if amount and not total[self.index.position[name]] > 0
        )
        request.flags.writeable = False
        bad_gpus = devices.invalid(int(request[self.table.gpu_col]))
        self._last_requests = (requests, total, request, unknown, bad_gpus)
        return request, unknown, bad_gpus

    def _join(self, pod: PodInfo) -> None:
        pod.gang.add(pod)
        self.unblock(pod.gang)
        if pod.status is PodStatus.PENDING:
            self.waiting[pod.gang.ident] = pod.gang

    def add_bound_pod(
        self, spec: PodSpec, node: int, now: float, gpus: tuple[int, ...] | None = None
    ) -> PodInfo:
        """A pod that appears already bound to ``node`` (start-up, another scheduler)."""
        pod = self.add_pod(spec, now)
        self.bind(pod, node, now, gpus)
        return pod

    def update_pod(self, spec: PodSpec, now: float) -> PodInfo:
        """A pod's spec changed. A pending pod is re-added in its place in the queue; a
        bound one keeps its node and holds its new requests (an in-place resize)."""
        pod = self.pods.get(spec.key)
        if pod is None:
            return self.add_pod(spec, now)
        if pod.spec == spec:
            return pod
        if pod.status is PodStatus.PENDING or spec.gang_key != pod.spec.gang_key:
            node, gpus, status = pod.node, pod.gpus, pod.status
            created, seq = pod.created, pod.seq
            self.remove_pod(spec.key)
            fresh = self.add_pod(spec, now)
            fresh.created, fresh.seq = created, seq
            if status in (PodStatus.BOUND, PodStatus.RELEASING) and node >= 0:
                self.bind(fresh, node, now, gpus)
            return fresh
        self._grow({k: v for k, v in spec.requests.items() if v})
        request = self.index.vector({k: v for k, v in spec.requests.items() if k in self.index})
        if pod.status in HOLDING and pod.node >= 0:
            self.table.remove(pod.node, pod.request, pod.gpus)
            pod.request = request
            pod.gpus = (
                self.table.pick_gpus(pod.node, request) if request[self.table.gpu_col] else ()
            )
            self.table.add(pod.node, request, pod.gpus)
            self._freed(pod.gang)
        pod.gang.generation += 1  # its requests changed: validity is computed again
        pod.gang.touched()
        pod.request = request
        pod.spec = spec
        self.version += 1
        return pod

    def remove_pod(self, key: str) -> PodInfo | None:
        """A pod was deleted, whatever its status: it leaves the state and its gang."""
        pod = self.pods.pop(key, None)
        if pod is None:
            return None
        self.assumed.pop(key, None)
        self._unoffered.pop(key, None)
        if pod.status not in (PodStatus.SUCCEEDED, PodStatus.DELETED):
            self.release(pod, PodStatus.DELETED)
        gang = pod.gang
        gang.remove(pod)
        orphans = self.orphans.get(gang.key)
        if orphans is not None and pod in orphans:
            orphans.remove(pod)
            if not orphans:
                del self.orphans[gang.key]
        if gang.implicit or (not gang.members and gang.spec is None):
            self.gangs.pop(gang.ident, None)
            self.waiting.pop(gang.ident, None)
            self._unpark(gang.ident)
        else:
            self._refresh_waiting(gang)
        self.version += 1
        return pod

    # -- gangs -------------------------------------------------------------------------------
    def update_gang(self, spec: GangSpec, now: float) -> GangInfo:
        """A PodGroup appeared or changed: its members keep their places, its history stays."""
        gang = self.gangs.get(spec.key)
        if gang is None:
            return self.add_gang(spec, now)
        if gang.spec != spec:
            gang.spec = spec
            gang.min_member = spec.min_member
            gang.role_minimums = dict(spec.role_minimums)
            gang.invalid = None
            gang.touched()
            self.version += 1
            self.unblock(gang)
            self._refresh_waiting(gang)
        return gang

    def remove_gang(self, key: str) -> None:
        """A PodGroup was deleted: its pods stay (as in Kubernetes) and wait as orphans."""
        gang = self.gangs.pop(key, None)
        if gang is None:
            return
        self.waiting.pop(gang.ident, None)
        self._unpark(gang.ident)
        self.queues.forget(gang.ident)  # its pods are counted with the placeholder's
        holder = _placeholder(key, gang.created)
        for pod in gang.members:
            pod.gang = holder
            holder.add(pod)
        if holder.members:
            self.orphans[key] = list(holder.members)
        self.version += 1

    # -- the backend applies decisions -----------------------------------------------------
    def assume(
        self, pod: PodInfo, node: int, now: float, gpus: tuple[int, ...] | None = None
    ) -> None:
        """A committed bind the API has not confirmed yet: the pod holds ``node`` now (on
        ``gpus``, the devices the cycle chose, if given)."""
        self.bind(pod, node, now, gpus)
        self.assumed[pod.key] = node

    def confirm(self, key: str) -> None:
        """The watch shows an assumed pod bound."""
        self.assumed.pop(key, None)

    def forget(self, key: str) -> None:
        """An assumed bind failed: the pod is pending again and its resources are free."""
        if self.assumed.pop(key, None) is None:
            return
        pod = self.pods.get(key)
        if pod is None or pod.status is not PodStatus.BOUND:
            return
        self.table.remove(pod.node, pod.request, pod.gpus)
        pod.gpus, pod.node, pod.bound_at = (), -1, None
        pod.gang.move(pod, PodStatus.PENDING)
        self.version += 1
        self._freed(pod.gang)
        self._refresh_waiting(pod.gang)

    def bind(
        self, pod: PodInfo, node: int, now: float, gpus: tuple[int, ...] | None = None
    ) -> None:
        """Record a committed bind: the pod holds ``node``'s resources from now on (on
        ``gpus`` if given, else on the devices it was placed on, else the best fit)."""
        if pod.status is PodStatus.RESERVED:
            if node != pod.node:
                raise ValueError(f"{pod.key} is reserved on another node")
        else:
            if gpus is not None:
                pod.gpus = gpus
            self._take(pod, node, "bind", keep_gpus=gpus is not None)
        self.version += 1
        pod.node = node
        pod.bound_at = now
        pod.gang.move(pod, PodStatus.BOUND)
        self.queues.track((pod.gang,))  # its queue's usage counts it from now on
        self._refresh_waiting(pod.gang)

    def reserve(self, pod: PodInfo, node: int, gpus: tuple[int, ...] | None = None) -> None:
        """Hold ``node``'s resources for ``pod`` without binding it (coscheduling's Permit),
        on ``gpus`` if given."""
        if gpus is not None:
            pod.gpus = gpus
        self._take(pod, node, "reserve", keep_gpus=gpus is not None)
        self.version += 1
        pod.node = node
        pod.gang.move(pod, PodStatus.RESERVED)
        self._refresh_waiting(pod.gang)

    def unreserve(self, pod: PodInfo, node: int, gpus: tuple[int, ...]) -> None:
        """Give back what a rejected reservation held on ``node`` (on ``gpus``): the pod is
        pending again."""
        if pod.status is not PodStatus.RESERVED:
            raise ValueError(f"cannot unreserve {pod.key} in status {pod.status.value}")
        self.table.remove(node, pod.request, gpus)
        pod.node, pod.gpus = -1, ()
        pod.gang.move(pod, PodStatus.PENDING)
        self.version += 1
        self._freed(pod.gang)
        self._refresh_waiting(pod.gang)

    def _take(self, pod: PodInfo, node: int, verb: str, *, keep_gpus: bool = False) -> None:
        if pod.status not in (PodStatus.ALLOCATED, PodStatus.PENDING):
            raise ValueError(f"cannot {verb} {pod.key} in status {pod.status.value}")
        if not keep_gpus and (pod.status is PodStatus.PENDING or not pod.gpus):
            pod.gpus = self.table.pick_gpus(node, pod.request)
        self.table.add(node, pod.request, pod.gpus)
        self.taken += 1

    def evict(self, pod: PodInfo) -> None:
        """A committed eviction: the pod still holds its node until it is gone."""
        if pod.status is not PodStatus.RELEASING:
            if pod.status not in (PodStatus.BOUND, PodStatus.RESERVED):
                raise ValueError(f"cannot evict {pod.key} in status {pod.status.value}")
            pod.gang.move(pod, PodStatus.RELEASING)
        self.table.mark_releasing(pod.node, pod.request)
        self.version += 1
        self.taken += 1

    def release(self, pod: PodInfo, status: PodStatus = PodStatus.SUCCEEDED) -> None:
        """A pod finished or went away: return its resources."""
        holding = (PodStatus.BOUND, PodStatus.RELEASING, PodStatus.RESERVED)
        if pod.node >= 0 and pod.status in holding:
            if pod.status is PodStatus.RELEASING:
                self.table.mark_releasing(pod.node, pod.request, -1)
            self.table.remove(pod.node, pod.request, pod.gpus)
            pod.gpus = ()
            self._freed(pod.gang)
        self.version += 1
        pod.gang.move(pod, status)
        self.unblock(pod.gang)  # its own pending set or need changed
        self._refresh_waiting(pod.gang)

    def _refresh_waiting(self, gang: GangInfo) -> None:
        if gang.ident in self.blocked:
            if not gang.waiting_members:
                self._unpark(gang.ident)
            return
        if gang.waiting_members:
            self.waiting.setdefault(gang.ident, gang)
        else:
            self.waiting.pop(gang.ident, None)
            self.woken.pop(gang.ident, None)

    # -- queueing hints ------------------------------------------------------------------------
    def block(
        self,
        gang: GangInfo,
        freed: int,
        hint: Hint | Gated | None = None,
        order: tuple[float, ...] = (),
        since: int | None = None,
    ) -> None:
        """Park ``gang`` until an event could let it fit; ``freed`` is the count it failed at
        (a release since then means it may fit now, so it stays waiting). Its ``hint`` names
        its failure class (:mod:`phalanx.cluster.hints`); without one, or with hints off, any
        release wakes it; ``order`` is its order key (static while it is parked). A
        :class:`Gated` gang is parked in the class of its signature, looked at again when the
        gate's stamp moves (with hints off it stays waiting: the reference retries it every
        cycle). ``since``: the release count it has been parked since, when that is earlier
        (a gang made later than it arrived and failed, ``phalanx.sim.unborn``)."""
        if freed != self.freed or gang.ident not in self.waiting:
            return
        if isinstance(hint, Gated) and not self.hints:
            return
        self.woken.pop(gang.ident, None)
        self.blocked[gang.ident] = self.waiting.pop(gang.ident)
        key: Hashable
        if isinstance(hint, Gated):
            key, stamp, hint = GatedClass(hint.key), hint.stamp, None
            judged = self._gated.get(key, stamp) if key in self._parked else stamp
            self._gated[key] = stamp if judged == stamp else MIXED
        else:
            hint = hint if self.hints else None
            key = None if hint is None else hint.key
        since = self.freed if since is None else since  # earlier: made after it was parked
        parked = self._parked.get(key)
        if parked is None:
            parked = self._parked[key] = Parked(hint, since)
        parked.add(gang.ident, gang, order if key is not None else ())
        self._class_of[gang.ident] = key
        self._parked_at[gang.ident] = since
        self._parks += 1
        self._park_number[gang.ident] = self._parks

    def unblock(self, gang: GangInfo) -> None:
        if self._unpark(gang.ident):
            self._refresh_waiting(gang)

    def _unpark(self, ident: str) -> bool:
        """Take ``ident`` out of the parked gangs (whether it is waiting is not decided)."""
        if self.blocked.pop(ident, None) is None:
            return False
        key = self._class_of.pop(ident)
        del self._parked_at[ident]
        del self._park_number[ident]
        parked = self._parked[key]
        parked.remove(ident)
        if not parked:
            self._drop_class(key)
        return True

    def _drop_class(self, key: Hashable) -> None:
        del self._parked[key]
        if isinstance(key, GatedClass):
            del self._gated[key]

    def _freed(self, releasing: GangInfo) -> None:
        """``releasing``'s pods gave resources back: the coarse class wakes now, the others at
        the next look."""
        self.freed += 1
        self.released.append(releasing)
        self.released_count += 1
        coarse = self._parked.pop(None, None)
        if coarse is not None:
            for ident, gang in coarse.gangs():
                self._wake(ident, gang)

    def room_changed(self) -> None:
        """Nodes were added or changed: every parked gang is worth a new attempt."""
        self.freed += 1
        parked, self._parked = self._parked, {}
        self._gated = {}
        for group in parked.values():
            for ident, gang in group.gangs():
                self._wake(ident, gang)

    def _wake(self, ident: str, gang: object) -> None:
        assert isinstance(gang, GangInfo)
        del self.blocked[ident]
        del self._class_of[ident]
        del self._parked_at[ident]
        del self._park_number[ident]
        self._refresh_waiting(gang)

    def _wake_fitting(self, table: NodeTable) -> None:
        """Wake, in each class that saw a release since its last check, the first gangs
        that the room could hold (see hints.py)."""
        capacity: CapacityOf | None = None
        for key, parked in list(self._parked.items()):
            if parked.checked == self.freed or parked.hint is None:
                continue
            parked.checked = self.freed
            capacity = capacity or CapacityOf(table)
            count = wake_count(parked.hint, capacity)
            if count:
                for ident, gang in parked.first(count):
                    self._wake(ident, gang)
                    self.woken[ident] = key
                if not parked:
                    del self._parked[key]

    def waiting_gangs(
        self,
        table: NodeTable | None = None,
        gate: Hashable | None = None,
        watched: Callable[[], Iterable[str]] | None = None,
    ) -> list[GangInfo]:
        """Gangs worth an attempt on ``table`` (default: the state's own); with the stamp of
        the session's reservation ``gate``, gangs it refused at another stamp wake too, and
        so do the gangs it ``watched`` that are parked for room and saw a release since."""
        if self._parked:
            self._wake_fitting(self.table if table is None else table)
            if watched is not None:
                self._wake_watched(watched())
        if self._gated and gate is not None:
            self._wake_gated(gate)
        return list(self.waiting.values())

    def parked_where(
        self, worth: Callable[[Hint | None], bool], also: Iterable[str] = ()
    ) -> list[GangInfo]:
        """The parked gangs of the classes whose hint is ``worth`` a look, and those named in
        ``also``, in the order of ``blocked`` (parking order). A class is one test, so this
        costs the classes and the gangs returned, not every parked gang."""
        found: dict[str, GangInfo] = {}
        for parked in self._parked.values():
            if worth(parked.hint):
                for ident, gang in parked.gangs():
                    assert isinstance(gang, GangInfo)
                    found[ident] = gang
        for ident in also:
            gang = self.blocked.get(ident)
            if gang is not None:
                found[ident] = gang
        return sorted(found.values(), key=lambda gang: self._park_number[gang.ident])

    def _wake_watched(self, idents: Iterable[str]) -> None:
        """A reservation gate notices the failures of the gangs it may reserve for (a gang
        found unfit loses its intent, and a plan reserves it only from the next time room
        comes back), so those must fail when the reference engine (any release wakes every
        parked gang) would fail them: after a release they wake even beyond their class's
        wake budget."""
        self.watched_woken = set()
        for ident in idents:
            key = self._class_of.get(ident, _NOT_PARKED)
            if key is _NOT_PARKED or isinstance(key, GatedClass):
                continue
            if self._parked_at[ident] != self.freed:
                self.unblock(self.blocked[ident])
                self.watched_woken.add(ident)

    def parked_for_room(self, ident: str) -> bool:
        """Is ``ident`` parked after failing for room (so it cannot fit before a release or a
        node change wakes it)? A gang a gate refused is not: it fitted."""
        key = self._class_of.get(ident, _NOT_PARKED)
        return key is not _NOT_PARKED and not isinstance(key, GatedClass)

    def wake_next(
        self,
        key: Hashable,
        alike: Callable[[GangInfo], bool] | None = None,
        stamp: Hashable = None,
    ) -> GangInfo | None:
        """Wake the first gang parked in the hinted or gated class ``key`` for which
        ``alike`` (would it be refused as the gang before it was?) is false; None if there is
        none. The gangs of a gated class passed over were judged at the gate's ``stamp``.

        A wake budget assumes that every woken gang that fits takes room; one that a
        reservation gate refused takes none, so the next gang of its class is worth the
        attempt the reference (every parked gang woken) would make; so is the next gang of a
        gated class after one was placed (see hints.py). Like every wake, it is queue
        bookkeeping: the applier parks the gang again if it fails."""
        parked = self._parked.get(key)
        if parked is None or (parked.hint is None and not isinstance(key, GatedClass)):
            return None
        test = alike or (lambda gang: False)
        walked = stamp if alike is not None else None  # a refusal's stamp: a walk goes on
        found = parked.first_unlike(lambda gang: test(gang), walked)  # type: ignore[arg-type]
        if not parked:
            self._drop_class(key)
        elif isinstance(key, GatedClass) and alike is not None:
            self._gated[key] = stamp  # the rest: judged as the gang before was
        if found is None:
            return None
        ident, gang = found
        assert isinstance(gang, GangInfo)
        self._wake(ident, gang)
        self.woken[ident] = key
        return gang

    def wake_class(self, key: Hashable) -> list[GangInfo]:
        """Wake every gang of a gated class (its gangs no longer fit: they wait for room)."""
        if not isinstance(key, GatedClass) or key not in self._parked:
            return []
        parked = self._parked[key]
        self._drop_class(key)
        woken = []
        for ident, gang in parked.gangs():
            assert isinstance(gang, GangInfo)
            self._wake(ident, gang)
            woken.append(gang)
        return woken

    def _wake_gated(self, stamp: Hashable) -> None:
        """The gate's stamp moved: the first gang of each gated class judged at another
        stamp is woken (the walk of its class starts from it, see hints.py)."""
        for key, judged in list(self._gated.items()):
            if judged == stamp:
                continue
            parked = self._parked[key]
            for ident, gang in parked.first(1):
                self._wake(ident, gang)
                self.woken[ident] = key
            if not parked:
                self._drop_class(key)

    def pod_of(self, key: str) -> PodInfo | None:
        return self.pods.get(key)

    def fingerprint(self) -> dict[str, Any]:
        """What must be equal between this state and one rebuilt from the same objects, by
        name (rows and columns may differ): every live node's usage and free GPU devices,
        every pod's status, node and devices, every gang's counts."""
        table, live, names = self.table, self.table.facts.live, self.table.names
        nodes = {}
        for row, name in enumerate(names):
            if live[row]:
                count = -(-int(table.allocatable[row, table.gpu_col]) // devices.WHOLE)
                usage = self.index.mapping(table.requested[row])
                nodes[name] = (usage, tuple(int(v) for v in table.gpu_free[row, :count]))
        gangs = {
            ident: (gang.placed, tuple(sorted((+gang.placed_by_role).items())), len(gang.members))
            for ident, gang in self.gangs.items()
            if gang.members
        }
        pods = {
            key: (pod.status.value, names[pod.node] if pod.node >= 0 else "", pod.gpus)
            for key, pod in self.pods.items()
        }
        return {"nodes": nodes, "gangs": gangs, "pods": pods}


_NOT_PARKED = object()


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
