"""Helpers shared by the controller kinds: pod templates, joining controller-made gangs, and
what the controller object itself says of its runtime and deadline."""

from __future__ import annotations

import dataclasses

from phalanx.api.errors import InputError
from phalanx.api.specs import Deadline, GangRef, GangSpec, PodSpec, RuntimeHints
from phalanx.k8s.fields import Obj, child, fail, get_mapping
from phalanx.k8s.meta import annotations_of, labels_of
from phalanx.k8s.pods import convert_pod, with_duration
from phalanx.k8s.priority import PriorityTable
from phalanx.k8s.runtime import deadline_of, merged, runtime_hints


def template_pod(
    spec: Obj,
    path: str,
    priorities: PriorityTable,
    *,
    namespace: str,
    name: str,
    owner: str,
    key: str = "template",
) -> PodSpec:
    """The pod template at ``path.key``, converted as a pod named ``name``."""
    where = child(path, key)
    if spec.get(key) is None:
        fail(where, "template is required")
    template = get_mapping(spec, key, path)
    try:
        return convert_pod(template, priorities, namespace=namespace, name=name, owner=owner)
    except InputError as exc:
        raise exc.located(field=where) from None


def join(pod: PodSpec, gang: GangSpec, role: str, path: str) -> PodSpec:
    """``pod`` as a member of the controller-made ``gang`` with ``role``."""
    if pod.gang is not None and (pod.gang.name, pod.gang.api) != (gang.name, gang.api):
        fail(
            path,
            f"the template declares gang {pod.gang.name} ({pod.gang.api}), but its controller "
            f"makes the PodGroup {gang.name} ({gang.api}); remove the template's declaration",
        )
    return dataclasses.replace(
        pod,
        gang=GangRef(gang.name, gang.api),
        role=role or pod.role,
        declared_gang=None,
        queue=pod.queue or gang.queue,
    )


def controller_hints(
    top: Obj, spec: Obj | None = None, path: str = "spec"
) -> tuple[RuntimeHints, Deadline | None]:
    """The runtime hints (``phalanx.dev/runtime-estimate``, Kueue's max-exec-time, and
    ``activeDeadlineSeconds`` of ``spec`` when given) and the ``phalanx.dev/deadline`` the
    controller object carries, for the gang it makes (its pods' own hints come after)."""
    annotations = annotations_of(top)
    return runtime_hints(annotations, labels_of(top), spec, path), deadline_of(annotations)


def owner_timed(pod: PodSpec, duration: float | None, hints: RuntimeHints) -> PodSpec:
    """``pod`` with its owner's duration and runtime hints where it says nothing itself."""
    pod = with_duration(pod, pod.duration or duration)
    return dataclasses.replace(pod, runtime_hints=merged(pod.runtime_hints, hints))


def snapshot_member(pod: PodSpec) -> PodSpec:
    """``pod`` (a template) as a snapshot's pods take it: its declared gang (Kueue's, ...)
    without role minimums, as the gang of the pods present, whose roles are unknown."""
    gang = pod.declared_gang
    if gang is None or not gang.role_minimums:
        return pod
    return dataclasses.replace(pod, declared_gang=dataclasses.replace(gang, role_minimums={}))
