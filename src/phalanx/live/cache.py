"""The live scheduler's view of the cluster: a :class:`ClusterState` built from informer stores.

Design (first slice): :meth:`ClusterCache.build` rebuilds the whole state **from scratch at the
start of every cycle** from the stores of the Node, Pod, PriorityClass and gang informers:
PodGroups of ``scheduling.x-k8s.io``, ``scheduling.sigs.k8s.io`` and ``scheduling.volcano.sh``,
and ``scheduling.k8s.io/v1alpha1`` Workloads (a CRD or API missing from the cluster is simply an
empty store). That costs O(objects) per cycle — fine for hundreds of nodes and a
few thousand pods, and trivially correct: the state can never drift from the API server.
Incremental updates driven by the informers' events (and keeping per-gang engine state such as
``scheduleTimeoutSeconds`` backoff across cycles; today a gang's ``created`` is the cycle time)
are future work.

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
- The :class:`ResourceIndex` covers every resource name any node offers or any pod requests.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo
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
from phalanx.live.resources import DEFAULT_SCHEDULER_NAME

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

FINISHED_PHASES = ("Succeeded", "Failed")


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


class ClusterCache:
    """Builds per-cycle snapshots and keeps the assume cache between cycles."""

    def __init__(self, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> None:
        self.scheduler_name = scheduler_name
        self.assumed: dict[str, Assumption] = {}
        #: (kind, key, resourceVersion) of objects already warned about.
        self._warned: set[tuple[str, str, str]] = set()
        #: kind/key → why the object was skipped in the last build.
        self.rejected: dict[str, str] = {}
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
        now: float,
    ) -> Snapshot:
        """A fresh state from the stores' current objects (O(objects); see the module doc).

        Each PodGroup store may hold any of the three PodGroup API groups (the converter reads
        ``apiVersion``); ``workloads`` holds ``scheduling.k8s.io`` Workloads.
        """
        self.rejected = {}
        table = self._priorities(priority_classes)

        node_specs: list[NodeSpec] = []
        for obj in nodes:
            try:
                node_specs.append(node_from_dict(obj))
            except InputError as exc:
                self._skip("Node", obj, exc)

        gang_specs: dict[str, GangSpec] = {}
        for store in (podgroups, podgroups_sigs, volcano_podgroups):
            for obj in store:
                try:
                    gang = gang_from_dict(obj, table)
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
                spec = pod_from_dict(obj, table)
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
        snapshot = Snapshot(state, assumed=assumed)
        for gang in gang_specs.values():
            self._carry_over(state.add_gang(gang, now))
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
        return snapshot

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
