"""The live scheduler's view of the cluster: a :class:`ClusterState` built from informer stores.

Design: :meth:`ClusterCache.build` rebuilds the whole state **from scratch at the start of
every cycle** from the stores of the Node, Pod, PriorityClass and gang informers: PodGroups of
``scheduling.x-k8s.io``, ``scheduling.sigs.k8s.io`` and ``scheduling.volcano.sh``, and
``scheduling.k8s.io/v1alpha1`` Workloads (a CRD or API missing from the cluster is simply an
empty store). That is trivially correct — the state can never drift from the API server — and
costs O(objects) per cycle. The expensive part, converting dicts to specs (quantities,
affinities, tolerations), is memoised by object uid and ``resourceVersion`` (and, for pods and
PodGroups, the PriorityClasses they resolve against), so an unchanged object is converted
once; what remains per cycle is building the numpy tables. A gang's history (first seen,
timeout, backoff, condition) carries over between builds (:meth:`ClusterCache._carry_over`).
Incremental table updates driven by informer events are future work.

Rules:

- A pod with ``spec.nodeName`` set — bound by anyone, whatever its ``schedulerName`` — that has
  not Succeeded or Failed holds its node's resources: it is added and bound on that node.
- A pending pod (no ``nodeName``, not being deleted) whose ``schedulerName`` is ours is a
  candidate. Pending pods of other schedulers are left out: they hold nothing.
- **Assume cache**: a pod this scheduler bound whose watch event has not arrived yet is treated
  as bound on the assumed node, so nothing is double-booked between cycles. An assumption is
  dropped when the informer shows the pod bound (to any node) or gone (or re-created: another
  uid). Assumptions never expire by time: the bind succeeded, so the event will come.
- An object that fails conversion (:class:`InputError`) is skipped with a warning, logged once
  per object version; one bad object never stops the others. Pods of a PodGroup that failed
  conversion wait as members of a missing PodGroup.
- Workloads: every (podGroup, replica key) that a pending or bound pod's ``spec.workloadRef``
  names becomes a gang ``WORKLOAD-PODGROUP[-REPLICAKEY]`` of ``minCount``; pods of a ``basic``
  pod group are scheduled one by one; pods of a missing Workload (or of a pod group the
  Workload does not list) wait as members of a missing gang, like kube-scheduler's PreEnqueue.
- Volcano PodGroups wait (reason ``QueueMissing`` / ``QueueClosed``) while their ``spec.queue``
  does not exist or is ``Closed``/``Closing``, as Volcano holds them — checked only when the
  Queue API is served (no Volcano installed: queue names are not checked).
- The :class:`ResourceIndex` covers every resource name any node offers or any pod requests.
- Kueue/KAI ``Topology`` and Volcano ``HyperNode`` objects become the state's topology
  (docs/topology.md); a malformed one is skipped like any other object.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.api.topology import TopologySpec
from phalanx.cluster import topology
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.k8s import (
    WORKLOAD_GROUP,
    PriorityTable,
    WorkloadSpec,
    gang_from_dict,
    node_from_dict,
    pod_from_dict,
    priority_class_from_dict,
    workload_from_dict,
    workload_ref,
)
from phalanx.k8s.objects import VOLCANO_GROUP
from phalanx.k8s.topology import hypernode_from_dict, topology_from_dict
from phalanx.live.resources import DEFAULT_SCHEDULER_NAME

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")

FINISHED_PHASES = ("Succeeded", "Failed")


class Conversions:
    """Memoised dict → spec conversions, kept for the objects seen in the last build.

    Keyed by (kind, uid or key, resourceVersion, salt): a changed object has a new
    resourceVersion; ``salt`` covers what else the result depends on (the PriorityClasses).
    Objects without a resourceVersion are converted every time. Failures are memoised too.
    """

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, str, object], Any] = {}
        self._next: dict[tuple[str, str, str, object], Any] = {}
        self.hits = 0
        self.misses = 0

    def convert(self, kind: str, obj: Obj, convert: Callable[[Obj], T], salt: object = None) -> T:
        meta = _meta(obj)
        version = str(meta.get("resourceVersion") or "")
        if not version:
            return convert(obj)
        marker = (kind, str(meta.get("uid") or _key(obj)), version, salt)
        if marker in self._next:
            result = self._next[marker]
        elif marker in self._last:
            result = self._next[marker] = self._last[marker]
            self.hits += 1
        else:
            self.misses += 1
            try:
                result = convert(obj)
            except InputError as exc:
                result = exc
            self._next[marker] = result
        if isinstance(result, InputError):
            raise result
        return cast(T, result)

    def end_build(self) -> None:
        """Forget what the build just finished did not see."""
        self._last, self._next = self._next, {}


@dataclass(frozen=True, slots=True)
class Assumption:
    uid: str
    node: str
    at: float


@dataclass
class Snapshot:
    """One cycle's state plus what the loop needs to act on its decisions."""

    state: ClusterState
    #: pod key → the pod's dict as the informer last saw it (candidates and bound alike).
    pods: dict[str, Obj] = field(default_factory=dict)
    #: pod keys treated as bound only because of an assumption.
    assumed: set[str] = field(default_factory=set)

    def uid(self, key: str) -> str | None:
        meta = self.pods.get(key, {}).get("metadata") or {}
        uid = meta.get("uid")
        return str(uid) if uid else None


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _key(obj: Obj) -> str:
    meta = _meta(obj)
    namespace = meta.get("namespace")
    name = str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def orphan_message(key: str, pods: Iterable[PodInfo], rejected: Mapping[str, str]) -> str:
    """Why pods wait for the gang object ``key`` that the state does not have: it does not
    exist, or it was rejected (``rejected``: :attr:`ClusterCache.rejected`)."""
    ref = next((p.spec.gang for p in pods if p.spec.gang is not None), None)
    api = ref.api if ref is not None else ""
    if api == WORKLOAD_GROUP:
        return f"Workload pod group {key} ({api}) does not exist"
    why = rejected.get(f"PodGroup/{key}")
    if why is not None:
        return f"PodGroup {key} ({api}) is invalid: {why}"
    return f"PodGroup {key} ({api}) does not exist"


def queue_hold(name: str, queues: dict[str, Obj]) -> tuple[str, str] | None:
    """Why a Volcano PodGroup of queue ``name`` may not be scheduled, as Volcano rules it: its
    queue must exist and be ``Open`` (a ``Closed`` or ``Closing`` queue takes no new work)."""
    queue = queues.get(name)
    if queue is None:
        return ("QueueMissing", f"Volcano queue {name!r} does not exist")
    state = (queue.get("status") or {}).get("state")
    if state in ("Closed", "Closing"):
        return ("QueueClosed", f"Volcano queue {name!r} is {state}")
    return None


class ClusterCache:
    """Builds per-cycle snapshots and keeps the assume cache between cycles."""

    def __init__(
        self, scheduler_name: str = DEFAULT_SCHEDULER_NAME, topology: Sequence[str] = ()
    ) -> None:
        self.scheduler_name = scheduler_name
        #: the settings' topology, after any Topology object the cluster declares
        self.settings_topology = (
            [TopologySpec("settings", tuple(topology), "settings")] if topology else []
        )
        self.assumed: dict[str, Assumption] = {}
        #: (kind, key, resourceVersion) of objects already warned about.
        self._warned: set[tuple[str, str, str]] = set()
        #: kind/key → why the object was skipped in the last build (and the object).
        self.rejected: dict[str, str] = {}
        self.rejected_objects: dict[str, Obj] = {}
        #: dict → spec conversions of unchanged objects are reused between builds.
        self.conversions = Conversions()
        #: the gangs of the last build: what the engine learnt about them carries over
        self._gangs: dict[str, GangInfo] = {}

    # -- assume cache ------------------------------------------------------------------------
    def assume(self, key: str, uid: str, node: str, now: float) -> None:
        self.assumed[key] = Assumption(uid, node, now)

    def forget(self, key: str) -> None:
        self.assumed.pop(key, None)

    # -- conversion ----------------------------------------------------------------------------
    def _skip(self, kind: str, obj: Obj, exc: InputError) -> None:
        key = _key(obj)
        self.rejected[f"{kind}/{key}"] = exc.line()
        self.rejected_objects[f"{kind}/{key}"] = obj
        marker = (kind, key, str(_meta(obj).get("resourceVersion") or ""))
        if marker not in self._warned:
            self._warned.add(marker)
            logger.warning("skipping %s %s: %s", kind, key, exc.line())

    def _priorities(self, classes: Iterable[Obj]) -> PriorityTable:
        table = PriorityTable()
        for obj in classes:
            try:
                table.add(priority_class_from_dict(obj))
            except InputError as exc:
                self._skip("PriorityClass", obj, exc)
        return table

    @staticmethod
    def _join_workload(
        spec: PodSpec,
        obj: Obj,
        workloads: dict[str, WorkloadSpec],
        gangs: dict[str, GangSpec],
    ) -> PodSpec:
        """Create the gang of the pod's ``workloadRef`` (or ungroup a ``basic`` pod group's pod)."""
        ref = workload_ref(_spec(obj))  # pod_from_dict already validated it
        workload = workloads.get(f"{spec.namespace}/{ref.name}") if ref else None
        if ref is None or workload is None or ref.pod_group not in workload.pod_groups:
            return spec  # waits for a missing gang
        gang = workload.gang(ref.pod_group, ref.replica_key)
        if gang is None:
            return dataclasses.replace(spec, gang=None)  # basic: scheduled pod by pod
        gangs.setdefault(gang.key, gang)
        return spec

    # -- the snapshot ------------------------------------------------------------------------
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
        topologies: Iterable[Obj] = (),
        hypernodes: Iterable[Obj] = (),
        now: float,
    ) -> Snapshot:
        """A fresh state from the stores' current objects (O(objects); see the module doc).

        Each PodGroup store may hold any of the three PodGroup API groups (the converter reads
        ``apiVersion``); ``workloads`` holds ``scheduling.k8s.io`` Workloads; ``volcano_queues``
        the Volcano Queues, or None when that API is not served (then queues are not checked).
        """
        self.rejected = {}
        self.rejected_objects = {}
        priority_classes = list(priority_classes)
        table = self._priorities(priority_classes)
        salt = tuple(
            sorted((_key(o), str(_meta(o).get("resourceVersion"))) for o in priority_classes)
        )
        memo = self.conversions

        node_specs: list[NodeSpec] = []
        for obj in nodes:
            try:
                node_specs.append(memo.convert("Node", obj, node_from_dict))
            except InputError as exc:
                self._skip("Node", obj, exc)

        gang_specs: dict[str, GangSpec] = {}
        for store in (podgroups, podgroups_sigs, volcano_podgroups):
            for obj in store:
                try:
                    gang = memo.convert(
                        "PodGroup", obj, partial(gang_from_dict, priorities=table), salt
                    )
                except InputError as exc:
                    self._skip("PodGroup", obj, exc)
                    continue
                gang_specs.setdefault(gang.key, gang)
        workload_specs: dict[str, WorkloadSpec] = {}
        for obj in workloads:
            try:
                workload = workload_from_dict(obj)
            except InputError as exc:
                self._skip("Workload", obj, exc)
                continue
            workload_specs[workload.key] = workload

        bound: list[tuple[PodSpec, str, Obj]] = []
        pending: list[tuple[PodSpec, Obj]] = []
        assumed: set[str] = set()
        seen: set[str] = set()
        for obj in pods:
            key = _key(obj)
            seen.add(key)
            node_name = str(_spec(obj).get("nodeName") or "")
            assumption = self.assumed.get(key)
            if assumption is not None and (
                node_name or str(_meta(obj).get("uid") or "") != assumption.uid
            ):
                self.forget(key)  # the informer caught up (or the pod was re-created)
                assumption = None
            phase = (obj.get("status") or {}).get("phase")
            if phase in FINISHED_PHASES:
                continue
            if not node_name and assumption is None:
                if _meta(obj).get("deletionTimestamp"):
                    continue
                if str(_spec(obj).get("schedulerName") or "") != self.scheduler_name:
                    continue  # another scheduler's pending pod holds nothing
            try:
                spec = memo.convert("Pod", obj, partial(pod_from_dict, priorities=table), salt)
            except InputError as exc:
                self._skip("Pod", obj, exc)
                continue
            if spec.gang is not None and spec.gang.api == WORKLOAD_GROUP:
                spec = self._join_workload(spec, obj, workload_specs, gang_specs)
            if node_name:
                bound.append((spec, node_name, obj))
            elif assumption is not None:
                bound.append((spec, assumption.node, obj))
                assumed.add(key)
            else:
                pending.append((spec, obj))
        for key in [k for k in self.assumed if k not in seen]:
            self.forget(key)  # the pod is gone

        names: set[str] = set()
        for node_spec in node_specs:
            names.update(node_spec.allocatable)
        for pod_spec in [b[0] for b in bound] + [p[0] for p in pending]:
            names.update(pod_spec.requests)
        state = ClusterState(node_specs, ResourceIndex(names))
        state.topology = topology.TopologySource(
            self._converted("Topology", topologies, topology_from_dict) + self.settings_topology,
            self._converted("HyperNode", hypernodes, hypernode_from_dict),
        )
        snapshot = Snapshot(state, assumed=assumed)
        queues = None if volcano_queues is None else {_key(q): q for q in volcano_queues}
        for gang in gang_specs.values():
            info = state.add_gang(gang, now)
            self._carry_over(info)
            if queues is not None and gang.api == VOLCANO_GROUP:
                info.hold = queue_hold(gang.queue, queues)
        position = {name: i for i, name in enumerate(state.table.names)}
        for spec, node_name, obj in bound:
            where = position.get(node_name)
            if where is None:
                continue  # bound to a node we do not know (gone, or not converted)
            pod = state.add_pod(spec, now)
            state.bind(pod, where, now)
            snapshot.pods[spec.key] = obj
        for spec, obj in pending:
            state.add_pod(spec, now)
            snapshot.pods[spec.key] = obj
        self._gangs = state.gangs
        memo.end_build()
        return snapshot

    def _converted(self, kind: str, objs: Iterable[Obj], convert: Callable[[Obj], T]) -> list[T]:
        """The objects that convert (memoised); the others are skipped with a warning."""
        specs: list[T] = []
        for obj in objs:
            try:
                specs.append(self.conversions.convert(kind, obj, convert))
            except InputError as exc:
                self._skip(kind, obj, exc)
        return specs

    def _carry_over(self, gang: GangInfo) -> None:
        """The state is rebuilt every cycle, but a gang's history is not: when it was first
        seen (for ``scheduleTimeoutSeconds``), whether it timed out, its backoff, its
        condition."""
        before = self._gangs.get(gang.ident)
        if before is None:
            return
        gang.created = before.created
        gang.timed_out = before.timed_out
        gang.failures = before.failures
        gang.backoff_until = before.backoff_until
        gang.condition = before.condition
