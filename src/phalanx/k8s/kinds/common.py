"""Helpers shared by the controller kinds: pod templates and joining controller-made gangs."""

from __future__ import annotations

import dataclasses

from phalanx.api.errors import InputError
from phalanx.api.specs import GangRef, GangSpec, PodSpec
from phalanx.k8s.fields import Obj, child, fail, get_mapping
from phalanx.k8s.pods import convert_pod
from phalanx.k8s.priority import PriorityTable


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
