"""Members of a snapshot's gangs that already succeeded.

A snapshot's finished pods hold nothing and are dropped (:mod:`phalanx.k8s.load`), but a pod
that *succeeded* still counts for its gang, as Volcano counts a succeeded task among a job's
ready ones: a gang of 4 whose fourth member is done runs with the 3 others. Each PodGroup's
``minMember`` (and the minimum of the member's role) is lowered by its succeeded members, never
below 1 (0 for a role). Failed pods count for nothing: their controller makes them again.
A PodGroup whose members all finished (finished pods name it, nothing in the input is or
makes a pod of it) is over: it is left out, as a finished pod is, instead of waiting for ever.

The gang is found by the keys a pod names its PodGroup with (scheduler-plugins' and Volcano's,
:data:`~phalanx.k8s.pods.GANG_KEYS`, and KAI's ``pod-group-name``); the role by Volcano's
task annotation, KAI's subgroup label or ``phalanx.dev/role``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from phalanx.api.specs import ControllerSpec, GangSpec, JobSpec, PodSpec
from phalanx.k8s.apis import kai
from phalanx.k8s.kindtable import Converted
from phalanx.k8s.meta import ROLE_LABEL
from phalanx.k8s.pods import TASK_SPEC, gang_ref

#: (namespace, PodGroup name) → per role its succeeded members (role ``FAILED``: failed ones)
Done = dict[tuple[str, str], Counter[str]]
FAILED = "\x00failed"  # no role name: a label value cannot hold it


def _strings(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    meta = obj.get("metadata")
    found = meta.get(key) if isinstance(meta, Mapping) else None
    if not isinstance(found, Mapping):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def note_finished(done: Done, obj: Mapping[str, Any], namespace: str, *, succeeded: bool) -> None:
    """Count a finished pod ``obj`` for the PodGroup it names (if any): in ``done`` under its
    role if it succeeded, else under the role ``FAILED``."""
    labels, annotations = _strings(obj, "labels"), _strings(obj, "annotations")
    ref = gang_ref(labels, annotations)
    group = ref.name if ref else annotations.get(kai.GROUP_KEY) or labels.get(kai.GROUP_KEY)
    if not group:
        return
    role = (
        annotations.get(TASK_SPEC)
        or labels.get(TASK_SPEC)
        or labels.get(kai.SUBGROUP_LABEL)
        or labels.get(ROLE_LABEL)
        or ""
    )
    done.setdefault((namespace, group), Counter())[role if succeeded else FAILED] += 1


def lowered(gang: GangSpec, done: Done) -> GangSpec:
    """``gang`` with its minimums lowered by its members that already succeeded."""
    finished = done.get((gang.namespace, gang.name), Counter())
    roles = {role: n for role, n in finished.items() if role != FAILED}
    if not roles:
        return gang
    minimums = {
        role: max(need - roles.get(role, 0), 0) for role, need in gang.role_minimums.items()
    }
    return dataclasses.replace(
        gang,
        min_member=max(gang.min_member - sum(roles.values()), 1),
        role_minimums=minimums,
    )


def ended(items: Sequence[Converted], done: Done) -> set[str]:
    """Keys of the PodGroups whose members all finished: finished pods name them and nothing
    in the input makes or is a pod of theirs (a completed Volcano job's PodGroup, kept until
    its TTL). Such a PodGroup is over, not waiting for members."""
    named = {f"{ns}/{name}" for ns, name in done}
    if not named:
        return set()
    live = set()
    for spec in items:
        if isinstance(spec, PodSpec) and spec.gang_key is not None:
            live.add(spec.gang_key)
        elif isinstance(spec, JobSpec) and spec.template.gang_key is not None:
            live.add(spec.template.gang_key)
        elif isinstance(spec, ControllerSpec):
            live.update(gang.key for gang in spec.gangs)
    return named - live
