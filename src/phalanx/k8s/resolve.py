"""Pass 4 of loading: references between objects.

The Workload API's ``workloadRef`` becomes the gang of its pod group (``basic`` groups: no
gang); a pod naming a ``basic`` standalone PodGroup is ungrouped; a standalone PodGroup with no
constraint of its own takes its template's (``podGroupTemplateRef``); then every gang a pod, Job
template or controller template names must exist — a PodGroup object, a gang a controller
makes, or one a pod declares itself. Members of an object that failed to convert are not
reported again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.api.errors import InputError
from phalanx.api.specs import ControllerSpec, GangRef, GangSpec, JobSpec, PodSpec
from phalanx.api.workload import Item, Timing
from phalanx.k8s.fields import Obj
from phalanx.k8s.kinds.trainer_runtime import TrainingRuntime
from phalanx.k8s.kindtable import Converted, Kind
from phalanx.k8s.pods import gang_field
from phalanx.k8s.workloads import WORKLOAD_GROUP, BasicGroup, WorkloadSpec, template_ref


@dataclass(frozen=True, slots=True)
class Doc:
    """One identified input object."""

    source: str
    obj: Obj
    kind: Kind
    label: str
    key: tuple[str, str, str, str]  # API group, kind, namespace ("" if cluster-scoped), name


class Resolver:
    """Pass 4: the Workload API's references, then a check that every named gang exists."""

    def __init__(
        self,
        kept: Sequence[tuple[Doc, Converted, Timing]],
        errors: list[InputError],
        broken: set[tuple[str, str, str]],
    ) -> None:
        self.kept = kept
        self.errors = errors
        self.broken = broken  # (API group, namespace, name) of objects that failed
        self.workloads = {s.key: s for _, s, _ in kept if isinstance(s, WorkloadSpec)}
        self.basic = {s.key for _, s, _ in kept if isinstance(s, BasicGroup)}
        self.made: dict[str, dict[str, GangSpec]] = {}  # workload key → gangs it yields
        self.known: set[tuple[str, str, str]] = set()

    def items(self) -> list[Item]:
        resolved: list[tuple[Doc, Converted, Timing]] = []
        for doc, spec, timing in self.kept:
            try:
                resolved.append((doc, self._resolve(self._templated(doc, spec)), timing))
            except InputError as exc:
                self.errors.append(exc.located(source=doc.source, obj=doc.label))
        items: list[Item] = []
        for doc, spec, timing in resolved:
            if isinstance(spec, WorkloadSpec):
                for gang in self.made.get(spec.key, {}).values():
                    items.append(Item(spec=gang, timing=timing, source=doc.source))
            elif not isinstance(spec, BasicGroup | TrainingRuntime):  # no item of their own
                items.append(Item(spec=spec, timing=timing, source=doc.source))
        self._check(resolved, items)
        return items

    def _templated(self, doc: Doc, spec: Converted) -> Converted:
        """A Workload-API PodGroup without a topology constraint, given its template's."""
        if not isinstance(spec, GangSpec) or spec.api != WORKLOAD_GROUP or spec.topology:
            return spec
        ref = template_ref(doc.obj)
        workload = None if ref is None else self.workloads.get(f"{spec.namespace}/{ref[0]}")
        if ref is None or workload is None:
            return spec  # the Workload is not in the input: nothing to copy
        if ref[1] not in workload.pod_groups:
            raise InputError(
                f"Workload {workload.key} has no pod group template {ref[1]!r}",
                field="spec.podGroupTemplateRef",
            )
        constraint = workload.constraints.get(ref[1])
        return spec if constraint is None else dataclasses.replace(spec, topology=constraint)

    def _resolve(self, spec: Converted) -> Converted:
        if isinstance(spec, PodSpec):
            return self._pod(spec, "")
        if isinstance(spec, JobSpec):
            return dataclasses.replace(spec, template=self._pod(spec.template, "spec.template."))
        if isinstance(spec, ControllerSpec):
            pod_sets = tuple(
                dataclasses.replace(s, template=self._pod(s.template, "")) for s in spec.pod_sets
            )
            jobs = tuple(
                dataclasses.replace(j, template=self._pod(j.template, "")) for j in spec.jobs
            )
            return dataclasses.replace(spec, pod_sets=pod_sets, jobs=jobs)
        return spec

    def _pod(self, pod: PodSpec, prefix: str) -> PodSpec:
        if pod.workload_ref is not None:
            return self._workload_pod(pod, prefix)
        gang = pod.gang
        if gang is not None and gang.api == WORKLOAD_GROUP and pod.gang_key in self.basic:
            return dataclasses.replace(pod, gang=None)
        return pod

    def _workload_pod(self, pod: PodSpec, prefix: str) -> PodSpec:
        assert pod.workload_ref is not None
        name, group, replica_key = pod.workload_ref
        key = f"{pod.namespace}/{name}"
        workload = self.workloads.get(key)
        field = prefix + "spec.workloadRef"
        if workload is None:
            raise InputError(f"Workload {key} does not exist", field=field)
        if group not in workload.pod_groups:
            raise InputError(
                f"Workload {key} has no pod group {group!r}", field=field + ".podGroup"
            )
        gang = workload.gang(group, replica_key)
        if gang is None:
            return dataclasses.replace(pod, gang=None, workload_ref=None)
        self.made.setdefault(key, {}).setdefault(gang.key, gang)
        return dataclasses.replace(pod, gang=GangRef(gang.name, gang.api), workload_ref=None)

    def _check(self, resolved: Sequence[tuple[Doc, Converted, Timing]], items: list[Item]) -> None:
        known = {
            (s.api, s.namespace, s.name) for s in (i.spec for i in items) if isinstance(s, GangSpec)
        } | self.broken
        pods: list[tuple[Doc, PodSpec, str]] = []
        for doc, spec, _ in resolved:
            if isinstance(spec, PodSpec):
                pods.append((doc, spec, ""))
            elif isinstance(spec, JobSpec):
                pods.append((doc, spec.template, "spec.template."))
            elif isinstance(spec, ControllerSpec):
                known.update((g.api, g.namespace, g.name) for g in spec.gangs)
                pods.extend((doc, s.template, "") for s in spec.pod_sets)
                pods.extend((doc, j.template, "") for j in spec.jobs)
        for _, pod, _ in pods:
            declared = pod.declared_gang
            if declared is not None:
                known.add((declared.api, declared.namespace, declared.name))
        reported: set[str] = set()
        for doc, pod, prefix in pods:
            gang = pod.gang
            if gang is None or (gang.api, pod.namespace, gang.name) in known:
                continue
            if doc.label in reported:
                continue
            reported.add(doc.label)
            self.errors.append(
                InputError(
                    f"PodGroup {pod.namespace}/{gang.name} of API group {gang.api} does not exist",
                    source=doc.source,
                    obj=doc.label,
                    field=prefix + gang_field(gang.api),
                )
            )
