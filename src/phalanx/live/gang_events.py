"""Gang objects in the live cache: PodGroups, Workloads, PriorityClasses, queue objects.

Design: :class:`GangEvents` is the half of :class:`~phalanx.live.cache.ClusterCache` that turns
events about the objects gangs are made of into state changes (the rules are in the cache's
module doc): a PodGroup's spec (``update_gang``, or ``remove_gang`` when it goes or turns
invalid: its pods wait as orphans), a Workload's pod groups (its pods are placed again, its
gangs made or removed), a PriorityClass (the pods and PodGroups are converted again — rare),
a Volcano Queue (the holds of the groups of that API) and every queue object (the queue book,
:mod:`phalanx.live.queue_objects`), a PodDisruptionBudget (the queue book's budgets).
PodGroups of five APIs come here, each
read by its own converter (:func:`convert_group`); a Workload-API PodGroup with the ``basic``
policy makes no gang: its pods are placed again, one by one. A gang's ``hold`` is its Volcano
queue's verdict, else a scheduling gate of one of its pods (:meth:`GangEvents._hold`). It works
on the cache's attributes, declared here.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, PodSpec
from phalanx.cluster.state import ClusterState
from phalanx.k8s import (
    WORKLOAD_GROUP,
    PriorityTable,
    WorkloadSpec,
    gang_from_dict,
    priority_class_from_dict,
    workload_from_dict,
    workload_ref,
)
from phalanx.k8s.apis import kai
from phalanx.k8s.objects import VOLCANO_GROUP
from phalanx.k8s.queues import budget_from_dict
from phalanx.k8s.workloads import BasicGroup, pod_group_from_dict
from phalanx.live.convert import (
    Conversions,
    Obj,
    Rejections,
    key_of,
    queue_hold,
    spec_of,
    version_of,
)
from phalanx.live.queue_objects import QueueObjects
from phalanx.live.resources import (
    KAI_PODGROUPS,
    POD_GROUP_VERSIONS,
    PODGROUPS,
    PODGROUPS_SIGS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Resource,
)

DELETED = "DELETED"
#: PodGroup APIs in the order that wins when several have a group of the same name.
GROUP_ORDER = (PODGROUPS, PODGROUPS_SIGS, VOLCANO_PODGROUPS, KAI_PODGROUPS, *POD_GROUP_VERSIONS)
#: The hold reason of a gang with a scheduling-gated member (as the simulator's).
GATED = "SchedulingGated"


def convert_group(resource: Resource, obj: Obj, priorities: PriorityTable) -> GangSpec | BasicGroup:
    """A PodGroup of ``resource``'s API → its gang (or a Workload-API ``basic`` group)."""
    if resource.group == KAI_PODGROUPS.group:
        return kai.pod_group_from_dict(obj, priorities)
    if resource.group == WORKLOAD_GROUP:
        return pod_group_from_dict(obj)
    return gang_from_dict(obj, priorities)


class GangEvents:
    """PodGroup, Workload, PriorityClass and Queue events (mixed into the cache)."""

    state: ClusterState
    pods: dict[str, Obj]
    conversions: Conversions
    rejections: Rejections
    queue_objects: QueueObjects
    touched: set[str]
    groups_touched: set[tuple[str, str]]
    fresh: set[str]
    _parked: dict[str, dict[str, Obj]]
    _groups: dict[str, dict[str, GangSpec]]
    _group_objs: dict[tuple[str, str], Obj]
    _workloads: dict[str, WorkloadSpec]
    _workload_pods: dict[str, dict[str, Obj]]
    _workload_gangs: dict[str, set[str]]
    _classes: dict[str, Obj]
    _priorities: PriorityTable
    _salt: object
    _queues: dict[str, Obj] | None
    _from_object: set[str]
    _basic: set[str]
    _gated: dict[str, dict[str, tuple[str, ...]]]
    members: dict[tuple[str, str], dict[str, Obj]]

    def _pod(self, kind: str, obj: Obj, now: float) -> None:
        raise NotImplementedError

    def _convert(
        self, kind: str, obj: Obj, convert: Any, salt: object = None, memo: str = ""
    ) -> Any:
        raise NotImplementedError

    # -- gangs -------------------------------------------------------------------------------
    def _podgroup(self, resource: Resource, kind: str, obj: Obj, now: float) -> None:
        key = key_of(obj)
        specs = self._groups.setdefault(key, {})
        self.groups_touched.add((resource.group, key))
        spec: GangSpec | BasicGroup | None = None
        if kind == DELETED:
            specs.pop(resource.group, None)
            self._group_objs.pop((resource.group, key), None)
            self.conversions.drop(f"PodGroup.{resource.group}", key)
            self.rejections.accept("PodGroup", key)
        else:
            self._group_objs[(resource.group, key)] = obj
            convert = partial(convert_group, resource, priorities=self._priorities)
            memo = f"PodGroup.{resource.group}"
            spec = self._convert("PodGroup", obj, convert, self._salt, memo)
            if isinstance(spec, GangSpec):
                specs[resource.group] = spec
            else:
                specs.pop(resource.group, None)
        if resource.group == WORKLOAD_GROUP:
            basic = kind != DELETED and isinstance(spec, BasicGroup)
            if basic != (key in self._basic):  # its pods are placed one by one, or no more
                (self._basic.add if basic else self._basic.discard)(key)
                self._sync_gang(key, now)
                for pod in list(self.members.get((WORKLOAD_GROUP, key), {}).values()):
                    self._pod("MODIFIED", pod, now)
                return
        self._sync_gang(key, now)

    def _sync_gang(self, key: str, now: float) -> None:
        specs = self._groups.get(key) or {}
        spec = next((specs[r.group] for r in GROUP_ORDER if r.group in specs), None)
        gang = self.state.gangs.get(key)
        if spec is None:
            if not specs:
                self._groups.pop(key, None)
            if gang is not None and key in self._from_object:
                self._from_object.discard(key)
                self.touched.add(gang.ident)
                self.state.remove_gang(key)
            return
        if key not in self.state.gangs:
            self.fresh.add(key)
        self._from_object.add(key)
        gang = self.state.update_gang(spec, now)
        gang.hold = self._hold(key, spec)
        self.touched.add(gang.ident)

    def _hold(self, key: str, spec: GangSpec | None) -> tuple[str, str] | None:
        """Why gang ``key`` may not be scheduled now: its Volcano queue, or a gated pod."""
        if self._queues is not None and spec is not None and spec.api == VOLCANO_GROUP:
            held = queue_hold(spec.queue, self._queues)
            if held is not None:
                return held
        gated = self._gated.get(key)
        if not gated:
            return None
        pod, gates = next(iter(gated.items()))  # the longest gated (O(1): gangs can be big)
        return (GATED, f"pod {pod} is gated ({', '.join(gates)}): waits for its gates' removal")

    def _rehold(self) -> None:
        for key in self._groups:
            gang = self.state.gangs.get(key)
            if gang is not None and gang.spec is not None:
                gang.hold = self._hold(key, gang.spec)
                self.state.unblock(gang)
                self.touched.add(gang.ident)

    def _queue(self, kind: str, obj: Obj) -> None:
        if self._queues is None:
            self._queues = {}
        if kind == DELETED:
            self._queues.pop(key_of(obj), None)
        else:
            self._queues[key_of(obj)] = obj
        self._queue_book(kind, obj)
        self._rehold()

    def _queue_book(self, kind: str, obj: Obj) -> None:
        """The Volcano Queue into the state's queue book (weights, capability, guarantee...);
        a malformed one is rejected with a warning, and its gangs see it as undeclared."""
        self._queue_object(VOLCANO_QUEUES, kind, obj)

    def _queue_object(self, resource: Resource, kind: str, obj: Obj) -> None:
        """A queue object of any API into the queue book (:mod:`phalanx.live.queue_objects`);
        when the book changed (a limit raised, a binding moved) parked gangs are tried again."""
        if self.queue_objects.apply(resource, kind, obj, self.state.queues):
            self.state.room_changed()

    def _budget(self, kind: str, obj: Obj) -> None:
        """A PodDisruptionBudget into the queue book (preemption plans within it); a malformed
        one is rejected with a warning and protects nothing (the API still enforces it)."""
        key = key_of(obj)
        self.state.queues.budgets.pop(key, None)
        self.rejections.accept("PodDisruptionBudget", key)
        if kind == DELETED:
            return
        try:
            self.state.queues.add_budget(budget_from_dict(obj))
        except InputError as exc:
            self.rejections.reject("PodDisruptionBudget", obj, exc)

    def _workload(self, kind: str, obj: Obj, now: float) -> None:
        key = key_of(obj)
        if kind == DELETED:
            self._workloads.pop(key, None)
            self.rejections.accept("Workload", key)
            self.conversions.drop("Workload", key)
        else:
            workload: WorkloadSpec | None = self._convert("Workload", obj, workload_from_dict)
            if workload is None:
                self._workloads.pop(key, None)
            else:
                self._workloads[key] = workload
        before = self._workload_gangs.pop(key, set())
        for pod in list(self._workload_pods.get(key, {}).values()):
            self._pod("MODIFIED", pod, now)
        for gang_key in before - self._workload_gangs.get(key, set()):
            gang = self.state.gangs.get(gang_key)
            if gang is not None:
                self.touched.add(gang.ident)
                self.state.remove_gang(gang_key)  # its pods wait as orphans

    def _join_workload(self, spec: PodSpec, obj: Obj, now: float) -> PodSpec:
        """Create the gang of the pod's ``workloadRef`` (or ungroup a ``basic`` pod group's pod)."""
        ref = workload_ref(spec_of(obj))  # pod_from_dict already validated it
        key = f"{spec.namespace}/{ref.name}" if ref else ""
        workload = self._workloads.get(key)
        if ref is None or workload is None or ref.pod_group not in workload.pod_groups:
            return spec  # waits for a missing gang
        gang = workload.gang(ref.pod_group, ref.replica_key)
        if gang is None:
            return dataclasses.replace(spec, gang=None)  # basic: scheduled pod by pod
        self._workload_gangs.setdefault(key, set()).add(gang.key)
        current = self.state.gangs.get(gang.key)
        if gang.key in self._from_object:
            return spec  # a PodGroup object of the same name owns the gang
        if current is None or current.spec is None or current.spec.api == WORKLOAD_GROUP:
            if current is None:
                self.fresh.add(gang.key)
            self.state.update_gang(gang, now)
        return spec

    def _priority_class(self, kind: str, obj: Obj, now: float) -> None:
        """PriorityClasses change rarely; a change re-converts the pods and PodGroups."""
        if kind == DELETED:
            self._classes.pop(key_of(obj), None)
            self.rejections.accept("PriorityClass", key_of(obj))
        else:
            self._classes[key_of(obj)] = obj
        self._reprioritise()
        for (name, _), group in list(self._group_objs.items()):
            resource = next(r for r in GROUP_ORDER if r.group == name)  # converters go by group
            self._podgroup(resource, "MODIFIED", group, now)
        pods = [*self.pods.values(), *(p for ps in self._parked.values() for p in ps.values())]
        pods += [o for k, o in self.rejections.objects.items() if k.startswith("Pod/")]
        for pod in pods:
            self._pod("MODIFIED", pod, now)

    def _reprioritise(self) -> None:
        table = PriorityTable()
        for obj in self._classes.values():
            try:
                table.add(priority_class_from_dict(obj))
                self.rejections.accept("PriorityClass", key_of(obj))
            except InputError as exc:
                self.rejections.reject("PriorityClass", obj, exc)
        self._priorities = table
        self._salt = tuple(sorted((k, version_of(o)) for k, o in self._classes.items()))
