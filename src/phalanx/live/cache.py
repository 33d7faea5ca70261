"""The live scheduler's view of the cluster: one :class:`ClusterState`, changed by watch events.

Design: :meth:`ClusterCache.start` builds the state once, after the informers' first lists (in
bulk: the node table at once, then gangs, Workloads and pods). From then on every informer
event goes through :meth:`ClusterCache.event`, which changes the state in O(size of the object)
— a node change costs O(nodes) for the table's facts, a PriorityClass change re-converts the
pods and PodGroups (rare) — and the state is never rebuilt. A relist after ``410 Gone`` reaches
the cache as the informer's diff of its old and new store (ADDED/MODIFIED/DELETED), so it
reconciles like any other events. Conversions are memoised per object uid and
``resourceVersion`` (:mod:`phalanx.live.convert`). The cache also records what each event
touched: gang idents (:attr:`ClusterCache.touched`, for the partial-bind watch) and PodGroups
(:attr:`ClusterCache.groups_touched`, for status planning), so a cycle where nothing changed
looks at nothing.

Rules (as kube-scheduler's cache, in the state's terms — see :mod:`phalanx.cluster.state`):

- A pod with ``spec.nodeName`` set — bound by anyone, whatever its ``schedulerName`` — that has
  not Succeeded or Failed holds its node's resources (``add_bound_pod``, or ``bind`` when it
  was pending, ``confirm`` when this scheduler had assumed it). One bound to a node the state
  does not have (gone, or rejected) is parked until that node appears; when a node goes, its
  pods are parked.
- A pending pod (no ``nodeName``, not being deleted) whose ``schedulerName`` is ours is a
  candidate. Pending pods of other schedulers are left out: they hold nothing.
- **Assumed** pods (bound by this scheduler, the watch not caught up) keep their node until the
  watch shows them bound (``confirm``), finished, deleted or re-created with another uid
  (``remove_pod``); a failed bind is ``forget``-ed by the backend. Assumptions never expire by
  time: the bind succeeded, so the event will come.
- A finished or deleted pod leaves the state and frees what it held.
- An object that fails conversion (:class:`InputError`, or any exception, or a quantity that
  overflows int64) is removed from the state and kept in :attr:`ClusterCache.rejected` (a
  warning once per version, an ``Invalid`` Event by the status writer); one bad object never
  stops the others. Pods of a PodGroup that failed conversion wait as orphans.
- PodGroups of the five APIs (scheduler-plugins in both groups, Volcano, KAI
  ``scheduling.run.ai``, and the Workload API's standalone PodGroup of the version discovery
  chose) share the ``namespace/name`` gang key; if several APIs have a group of the same name,
  ``scheduling.x-k8s.io`` wins, then ``scheduling.sigs.k8s.io``, Volcano, KAI, the Workload
  API. A pod whose PodGroup does not exist yet waits as an orphan and joins it when it comes.
- Workloads (any served version): every (podGroup, replica key) that a pod's
  ``spec.workloadRef`` names becomes a gang ``WORKLOAD-PODGROUP[-REPLICAKEY]`` of ``minCount``
  (removed with its last pod or its Workload); pods of a ``basic`` pod group are scheduled one
  by one; pods of a missing Workload (or of a pod group the Workload does not list) wait as
  orphans, like kube-scheduler's PreEnqueue. Pods naming a standalone PodGroup in
  ``spec.schedulingGroup.podGroupName`` join its gang, or are scheduled one by one when its
  policy is ``basic``.
- A pending pod with ``spec.schedulingGates`` holds its gang back (hold ``SchedulingGated``,
  which explain and the Events show) until an update removes its last gate; then the gang is
  tried again at once. Only pending pods count: gates do not affect a bound pod.
- Volcano PodGroups wait (``QueueMissing`` / ``QueueClosed``) while their ``spec.queue`` does
  not exist or is ``Closed``/``Closing`` — checked only while the Queue API is served.
- Queue objects of every API — Volcano and KAI ``Queue``, Kueue ``ClusterQueue``,
  ``LocalQueue`` and ``Cohort``, ``ElasticQuota`` — go into the state's queue book through
  the simulator's readers (:mod:`phalanx.live.queue_objects`), changed in place on every
  event; when the book changed, every parked gang is tried again (a limit may have been
  raised). A malformed one is rejected like any other object: its queue is then undeclared
  (no limits).
- Kueue/KAI ``Topology`` and Volcano ``HyperNode`` objects (and the settings' levels, after
  them) become the state's topology (docs/topology.md), made again when one changes; a
  malformed one is skipped like any other object.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.api.topology import TopologySpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.topology import TopologySource
from phalanx.cluster.workloads import HOLDING, GangInfo, PodStatus
from phalanx.k8s import (
    WORKLOAD_GROUP,
    PriorityTable,
    WorkloadSpec,
    node_from_dict,
    pod_from_dict,
    workload_ref,
)
from phalanx.k8s.apis import kai
from phalanx.k8s.pods import gang_ref
from phalanx.k8s.topology import hypernode_from_dict, topology_from_dict
from phalanx.live.convert import (
    FINISHED_PHASES,
    Conversions,
    Obj,
    Rejections,
    key_of,
    meta,
    orphan_message,
    queue_hold,
    spec_of,
    uid_of,
)
from phalanx.live.gang_events import DELETED, GROUP_ORDER, GangEvents
from phalanx.live.queue_objects import QueueObjects
from phalanx.live.resources import (
    DEFAULT_SCHEDULER_NAME,
    NODES,
    PDBS,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    QUEUE_OBJECT_RESOURCES,
    TOPOLOGY_RESOURCES,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_VERSIONS,
    Resource,
)

logger = logging.getLogger(__name__)

__all__ = ["ClusterCache", "Obj", "Snapshot", "group_of", "orphan_message", "queue_hold"]


def group_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(API group, namespace/name)`` of the PodGroup ``pod`` belongs to, if any."""
    data = meta(pod)
    labels, annotations = data.get("labels") or {}, data.get("annotations") or {}
    ref = gang_ref(labels, annotations)
    api, name = (ref.api, ref.name) if ref is not None else ("", "")
    group = spec_of(pod).get("schedulingGroup")
    if not name and isinstance(group, dict) and isinstance(group.get("podGroupName"), str):
        api, name = WORKLOAD_GROUP, group["podGroupName"]
    if not name:
        api, name = kai.API, str(annotations.get(kai.GROUP_KEY) or labels.get(kai.GROUP_KEY) or "")
    return (api, f"{data.get('namespace') or 'default'}/{name}") if name else None


class Snapshot:
    """What a cycle and its backend read: the state, and the pods' objects (for uids, phases)."""

    def __init__(self, state: ClusterState, pods: dict[str, Obj]) -> None:
        self.state = state
        #: pod key → the pod's dict as the informer last saw it (pods in the state).
        self.pods = pods

    @property
    def assumed(self) -> Mapping[str, int]:
        """Pods bound by this scheduler that the watch has not confirmed (key → node row)."""
        return self.state.assumed

    def uid(self, key: str) -> str | None:
        return uid_of(self.pods.get(key) or {}) or None


class ClusterCache(GangEvents):
    """Keeps one :class:`ClusterState` in step with the informers (see the module doc)."""

    def __init__(
        self, scheduler_name: str = DEFAULT_SCHEDULER_NAME, topology: Sequence[str] = ()
    ) -> None:
        self.scheduler_name = scheduler_name
        #: the settings' topology levels (after any Topology object the cluster declares)
        self.topology_levels = tuple(topology)
        self._topologies: dict[tuple[str, str], Obj] = {}  # (resource, key) → object
        self.state = ClusterState([], ResourceIndex())
        self.pods: dict[str, Obj] = {}
        self.snapshot = Snapshot(self.state, self.pods)
        self.conversions = Conversions()
        self.rejections = Rejections()
        #: the queue objects of every API (Volcano's too) and which of them the book holds
        self.queue_objects = QueueObjects(self.conversions, self.rejections)
        self.started = False
        #: gang idents whose members or spec changed since the loop last drained them.
        self.touched: set[str] = set()
        #: (API group, group key) of PodGroups whose object or members changed (ditto).
        self.groups_touched: set[tuple[str, str]] = set()
        #: idents of gangs new since the loop last looked: it stamps their ``created`` with
        #: the cycle's clock ("first seen by a cycle", for ``scheduleTimeoutSeconds``)
        self.fresh: set[str] = set()
        #: counts events that changed anything (the explainer skips unchanged orphans).
        self.changes = 0
        #: (API group, group key) → pod key → the pod (every pod, whatever its phase).
        self.members: dict[tuple[str, str], dict[str, Obj]] = {}
        self._member_of: dict[str, tuple[str, str]] = {}
        self._parked: dict[str, dict[str, Obj]] = {}  # node name → pods bound to it
        self._parked_on: dict[str, str] = {}
        self._groups: dict[str, dict[str, GangSpec]] = {}  # gang key → resource name → spec
        self._group_objs: dict[tuple[str, str], Obj] = {}  # (resource name, key) → object
        self._workloads: dict[str, WorkloadSpec] = {}
        self._workload_pods: dict[str, dict[str, Obj]] = {}  # Workload key → its pods
        self._workload_of: dict[str, str] = {}
        self._workload_gangs: dict[str, set[str]] = {}  # Workload key → gang keys made
        self._classes: dict[str, Obj] = {}
        self._priorities = PriorityTable()
        self._salt: object = ()
        self._queues: dict[str, Obj] | None = None
        self._from_object: set[str] = set()  # gang keys made by a PodGroup object
        self._basic: set[str] = set()  # Workload-API PodGroups of the basic policy
        self._gated: dict[str, dict[str, tuple[str, ...]]] = {}  # gang key → pod → gates
        self._gated_of: dict[str, str] = {}  # gated pending pod → its gang key

    # -- what others read ----------------------------------------------------------------
    @property
    def rejected(self) -> dict[str, str]:
        """``kind/key`` → why the object is not used."""
        return self.rejections.why

    @property
    def rejected_objects(self) -> dict[str, Obj]:
        return self.rejections.objects

    @property
    def assumed(self) -> Mapping[str, int]:
        return self.state.assumed

    def take_fresh(self) -> list[str]:
        """The gangs created since the last call (and forget them)."""
        fresh, self.fresh = list(self.fresh), set()
        return fresh

    def drain(self) -> tuple[set[str], set[tuple[str, str]]]:
        """The gangs and PodGroups touched since the last drain (and forget them)."""
        gangs, groups = self.touched, self.groups_touched
        self.touched, self.groups_touched = set(), set()
        return gangs, groups

    # -- start-up --------------------------------------------------------------------------
    def start(
        self,
        *,
        nodes: Iterable[Obj],
        pods: Iterable[Obj],
        groups: Mapping[Resource, Iterable[Obj]],
        workloads: Iterable[Obj] = (),
        priority_classes: Iterable[Obj] = (),
        volcano_queues: Iterable[Obj] | None = None,
        queue_objects: Mapping[Resource, Iterable[Obj]] | None = None,
        topologies: Iterable[Obj] = (),
        hypernodes: Iterable[Obj] = (),
        budgets: Iterable[Obj] = (),
        now: float,
    ) -> Snapshot:
        """Build the state once from the informers' first lists (``volcano_queues``: None when
        the Queue API is not served; ``queue_objects``: the other queue objects, by resource;
        ``topologies``: Kueue/KAI Topology objects, ``hypernodes``: Volcano HyperNodes;
        ``budgets``: PodDisruptionBudgets)."""
        for obj in priority_classes:
            self._classes[key_of(obj)] = obj
        self._reprioritise()
        specs: list[NodeSpec] = []
        for obj in nodes:
            spec = self._convert("Node", obj, node_from_dict)
            if spec is not None:
                specs.append(spec)
        names = {name for spec in specs for name in spec.allocatable}
        self.state = ClusterState(specs, ResourceIndex(names))
        self.snapshot = Snapshot(self.state, self.pods)
        for obj in topologies:
            self._topologies[("Topology", key_of(obj))] = obj
        for obj in hypernodes:
            self._topologies[("HyperNode", key_of(obj))] = obj
        self._retopologise()
        self._queues = None if volcano_queues is None else {key_of(q): q for q in volcano_queues}
        for queue in (self._queues or {}).values():
            self._queue_book("ADDED", queue)
        for resource, objs in (queue_objects or {}).items():
            for obj in objs:
                self._queue_object(resource, "ADDED", obj)
        for budget in budgets:
            self._budget("ADDED", budget)
        for resource in GROUP_ORDER:
            for obj in groups.get(resource, ()):
                self._podgroup(resource, "ADDED", obj, now)
        for obj in workloads:
            self._workload("ADDED", obj, now)
        for obj in pods:
            self._pod("ADDED", obj, now)
        self.touched.update(self.state.gangs)
        self.fresh.update(self.state.gangs)
        self.started = True
        return self.snapshot

    def build(
        self,
        *,
        nodes: Iterable[Obj],
        pods: Iterable[Obj],
        podgroups: Iterable[Obj] = (),
        priority_classes: Iterable[Obj] = (),
        podgroups_sigs: Iterable[Obj] = (),
        volcano_podgroups: Iterable[Obj] = (),
        workloads: Iterable[Obj] = (),
        volcano_queues: Iterable[Obj] | None = None,
        queue_objects: Mapping[Resource, Iterable[Obj]] | None = None,
        topologies: Iterable[Obj] = (),
        hypernodes: Iterable[Obj] = (),
        groups: Mapping[Resource, Iterable[Obj]] | None = None,
        budgets: Iterable[Obj] = (),
        now: float,
    ) -> Snapshot:
        """A state built from scratch from these objects (``phalanx explain``, and tests that
        compare it with an incrementally changed one; ``groups``: PodGroups of other APIs, by
        resource). Conversions are still memoised."""
        memo = self.conversions
        self.__init__(self.scheduler_name, self.topology_levels)  # type: ignore[misc]
        self.conversions = self.queue_objects.conversions = memo
        known = {PODGROUPS: podgroups, PODGROUPS_SIGS: podgroups_sigs}
        return self.start(
            nodes=nodes,
            pods=pods,
            groups={**known, VOLCANO_PODGROUPS: volcano_podgroups, **(groups or {})},
            workloads=workloads,
            priority_classes=priority_classes,
            volcano_queues=volcano_queues,
            queue_objects=queue_objects,
            topologies=topologies,
            hypernodes=hypernodes,
            budgets=budgets,
            now=now,
        )

    # -- events ----------------------------------------------------------------------------
    def event(self, resource: Resource, kind: str, obj: Obj, now: float) -> None:
        """Apply one informer event (after the informer updated its store)."""
        if not self.started:
            return  # start() reads the stores
        self.changes += 1
        try:
            if resource is PODS:
                self._pod(kind, obj, now)
            elif resource is NODES:
                self._node(kind, obj, now)
            elif resource in GROUP_ORDER:
                self._podgroup(resource, kind, obj, now)
            elif resource in WORKLOAD_VERSIONS:
                self._workload(kind, obj, now)
            elif resource is PRIORITY_CLASSES:
                self._priority_class(kind, obj, now)
            elif resource is VOLCANO_QUEUES:
                self._queue(kind, obj)
            elif resource in QUEUE_OBJECT_RESOURCES:
                self._queue_object(resource, kind, obj)
            elif resource in TOPOLOGY_RESOURCES:
                self._topology(resource, kind, obj)
            elif resource is PDBS:
                self._budget(kind, obj)
        except Exception as exc:  # contained to this object: log it, mark it, carry on
            logger.exception("applying %s %s %s failed", kind, resource.kind, key_of(obj))
            self.rejections.reject(resource.kind, obj, InputError(f"cannot be applied: {exc}"))

    def _topology(self, resource: Resource, kind: str, obj: Obj) -> None:
        """Topology objects change rarely: the state's topology is made again from them all."""
        marker = ("HyperNode" if resource is VOLCANO_HYPERNODES else "Topology", key_of(obj))
        if kind == DELETED:
            self._topologies.pop(marker, None)
            self.rejections.accept(*marker)
        else:
            self._topologies[marker] = obj
        self._retopologise()

    def _retopologise(self) -> None:
        specs: dict[str, list[Any]] = {"Topology": [], "HyperNode": []}
        convert = {"Topology": topology_from_dict, "HyperNode": hypernode_from_dict}
        for (kind, _), obj in self._topologies.items():
            spec = self._convert(kind, obj, convert[kind])
            if spec is not None:
                specs[kind].append(spec)
        if self.topology_levels:
            specs["Topology"].append(TopologySpec("settings", self.topology_levels, "settings"))
        self.state.topology = TopologySource(specs["Topology"], specs["HyperNode"])
        for gang in list(self.state.blocked.values()):  # a new shape may let them fit
            self.state.unblock(gang)

    def queues_served(self, served: bool) -> None:
        """Whether the Volcano Queue API is served now (holds are checked only then)."""
        if served == (self._queues is not None):
            return
        self._queues = {} if served else None
        self._rehold()

    def resync(self, key: str, now: float) -> None:
        """Put a pod back as its last watched object says (e.g. an eviction was refused)."""
        obj = self.pods.get(key)
        if obj is not None:
            self._drop_pod(key)
            self._pod("MODIFIED", obj, now)

    def _convert(
        self, kind: str, obj: Obj, convert: Any, salt: object = None, memo: str = ""
    ) -> Any:
        """``convert(obj)``, or None when ``obj`` is rejected (``memo``: the memo's kind)."""
        try:
            result = self.conversions.convert(kind, obj, convert, salt, memo=memo)
        except InputError as exc:
            self.rejections.reject(kind, obj, exc)
            return None
        self.rejections.accept(kind, key_of(obj))
        return result

    # -- nodes -----------------------------------------------------------------------------
    def _node(self, kind: str, obj: Obj, now: float) -> None:
        name = key_of(obj)
        if kind == DELETED:
            self.rejections.accept("Node", name)
            self.conversions.drop("Node", name)
            self._remove_node(name, now)
            return
        spec: NodeSpec | None = self._convert("Node", obj, node_from_dict)
        if spec is None:
            self._remove_node(name, now)
            return
        row = self.state.node_index(name)
        if row is not None and self.state.table.facts.specs[row] == spec:
            return  # a status heartbeat: nothing the scheduler reads changed
        self.state.add_node(spec)
        for key, pod in self._parked.pop(name, {}).items():
            del self._parked_on[key]
            self._pod("MODIFIED", pod, now)

    def _remove_node(self, name: str, now: float) -> None:
        row = self.state.node_index(name)
        if row is None:
            return
        on_it = [
            key for key, pod in self.state.pods.items() if pod.node == row and pod.status in HOLDING
        ]
        objs = [self.pods[key] for key in on_it if key in self.pods]
        for key in on_it:
            self._drop_pod(key)
        self.state.remove_node(name)
        for obj in objs:  # bound ones are parked until their node is back; assumed ones wait
            self._pod("MODIFIED", obj, now)

    # -- pods ------------------------------------------------------------------------------
    def _pod(self, kind: str, obj: Obj, now: float) -> None:
        key = key_of(obj)
        self._index(key, None if kind == DELETED else obj)
        if kind == DELETED:
            self.rejections.accept("Pod", key)
            self.conversions.drop("Pod", key)
            self._drop_pod(key)
            return
        known = self.pods.get(key) or self._parked.get(self._parked_on.get(key, ""), {}).get(key)
        if known is not None and uid_of(known) != uid_of(obj):
            self._drop_pod(key)  # re-created under the same name: the old one's fate is moot
        node_name = str(spec_of(obj).get("nodeName") or "")
        phase = (obj.get("status") or {}).get("phase")
        assumed = key in self.state.assumed
        if phase in FINISHED_PHASES or not (node_name or assumed or self._candidate(obj)):
            self.rejections.accept("Pod", key)
            self._drop_pod(key)
            return
        spec: PodSpec | None = self._convert(
            "Pod", obj, partial(pod_from_dict, priorities=self._priorities), self._salt
        )
        if spec is not None and spec.gang is not None and spec.gang.api == WORKLOAD_GROUP:
            spec = self._join_workload(spec, obj, now)
            if spec.gang is not None and spec.gang_key in self._basic:
                spec = dataclasses.replace(spec, gang=None)  # a basic PodGroup: one by one
        if spec is None:
            self._drop_pod(key)
        elif node_name:
            self._bound(key, spec, node_name, obj, now)
        else:
            self._pending(key, spec, obj, now)

    def _candidate(self, obj: Obj) -> bool:
        """A pending pod this scheduler should place."""
        return not meta(obj).get("deletionTimestamp") and (
            str(spec_of(obj).get("schedulerName") or "") == self.scheduler_name
        )

    def _bound(self, key: str, spec: PodSpec, node_name: str, obj: Obj, now: float) -> None:
        state = self.state
        row = state.node_index(node_name)
        if row is None:
            self._drop_pod(key)
            self._parked.setdefault(node_name, {})[key] = obj
            self._parked_on[key] = node_name
            return
        self._unpark(key)
        pod = state.pods.get(key)
        if pod is None:
            pod = state.add_bound_pod(spec, row, now)
            self._fresh(pod.gang)
        else:
            if pod.spec != spec:
                pod = state.update_pod(spec, now)
            if pod.status is PodStatus.PENDING:
                state.bind(pod, row, now)
            elif pod.status in HOLDING and pod.node == row:
                state.confirm(key)
            else:  # held elsewhere (an assumption the API contradicts): as the API says
                self._drop_pod(key)
                pod = state.add_bound_pod(spec, row, now)
        self.pods[key] = obj
        self.touched.add(pod.gang.ident)
        self._regate(key, None)

    def _pending(self, key: str, spec: PodSpec, obj: Obj, now: float) -> None:
        state = self.state
        self._unpark(key)
        pod = state.pods.get(key)
        if pod is None:
            pod = state.add_pod(spec, now)
            self._fresh(pod.gang)
        elif pod.status is PodStatus.PENDING or key in state.assumed:
            pod = state.update_pod(spec, now)
        else:  # it held a node the API no longer shows: pending again
            self._drop_pod(key)
            pod = state.add_pod(spec, now)
        self.pods[key] = obj
        self.touched.add(pod.gang.ident)
        self._regate(key, pod.gang if spec.gates else None, spec.gates)

    def _regate(self, key: str, gang: GangInfo | None, gates: tuple[str, ...] = ()) -> None:
        """Keep the index of gated pending pods (``gang``: the gang of pod ``key`` while it is
        gated) and the holds of the gangs it leaves or joins."""
        before = self._gated_of.pop(key, None)
        if before is not None:
            self._gated[before].pop(key, None)
            if not self._gated[before]:
                del self._gated[before]
            old = self.state.gangs.get(before)
            if old is not None and old is not gang:
                self._set_hold(old)
        if gang is not None:
            self._gated.setdefault(gang.key, {})[key] = gates
            self._gated_of[key] = gang.key
            self._set_hold(gang)

    def _set_hold(self, gang: GangInfo) -> None:
        held = gang.hold
        gang.hold = self._hold(gang.key, gang.spec)
        if held is not None and gang.hold is None:
            self.state.unblock(gang)  # ungated: try it again at once
        self.touched.add(gang.ident)

    def _fresh(self, gang: GangInfo) -> None:
        if gang.implicit:
            self.fresh.add(gang.ident)

    def _drop_pod(self, key: str) -> None:
        self._unpark(key)
        self.pods.pop(key, None)
        self._regate(key, None)
        pod = self.state.remove_pod(key)
        if pod is None:
            return
        gang = pod.gang
        self.touched.add(gang.ident)
        derived = gang.spec is not None and gang.spec.api == WORKLOAD_GROUP
        if derived and not gang.members and gang.key not in self._from_object:
            self.state.remove_gang(gang.key)  # a Workload gang lives as long as its pods

    def _unpark(self, key: str) -> None:
        node = self._parked_on.pop(key, None)
        if node is not None:
            self._parked[node].pop(key, None)
            if not self._parked[node]:
                del self._parked[node]

    def _index(self, key: str, obj: Obj | None) -> None:
        """Keep the PodGroup → pods and Workload → pods indices (every pod, any phase)."""
        before = self._member_of.pop(key, None)
        if before is not None:
            self.members[before].pop(key, None)
            if not self.members[before]:
                del self.members[before]
            self.groups_touched.add(before)
        workload = self._workload_of.pop(key, None)
        if workload is not None:
            self._workload_pods[workload].pop(key, None)
        if obj is None:
            return
        marker = group_of(obj)
        if marker is not None:
            self.members.setdefault(marker, {})[key] = obj
            self._member_of[key] = marker
            self.groups_touched.add(marker)
        try:
            ref = workload_ref(spec_of(obj))
        except InputError:
            ref = None
        if ref is not None:
            namespace = meta(obj).get("namespace") or "default"
            self._workload_of[key] = f"{namespace}/{ref.name}"
            self._workload_pods.setdefault(self._workload_of[key], {})[key] = obj
