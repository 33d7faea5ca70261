"""Koordinator's gang annotations on pods (``gang.scheduling.koordinator.sh/*``).

A pod joins gang ``name`` of its namespace; ``min-available`` members must be placed together.
``waiting-time`` becomes the gang's timeout. ``mode`` (``Strict``/``NonStrict``) and
``total-number`` are validated but change nothing here: phalanx places a gang all-or-nothing
either way. ``groups`` (a JSON list of ``namespace/name``) binds several gangs into one gang
group that Koordinator places together; phalanx reads the group as one gang whose roles are the
member gangs (each with its own minimum), so it is placed together or not at all. Koordinator's
PodGroup form (label ``pod-group.scheduling.sigs.k8s.io``) is read by :mod:`phalanx.k8s.pods`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from phalanx.api.durations import parse_duration
from phalanx.api.specs import GangRef, GangSpec
from phalanx.k8s.declaration import Declaration
from phalanx.k8s.fields import fail
from phalanx.k8s.meta import annotation_path

API = "gang.scheduling.koordinator.sh"
NAME = f"{API}/name"
MIN_AVAILABLE = f"{API}/min-available"
TOTAL_NUMBER = f"{API}/total-number"
MODE = f"{API}/mode"
WAITING_TIME = f"{API}/waiting-time"
GROUPS = f"{API}/groups"
MODES = ("Strict", "NonStrict")


def _count(annotations: Mapping[str, str], key: str, prefix: str) -> int | None:
    text = annotations.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        fail(annotation_path(key, prefix), f"must be a whole number, not {text!r}")
    if value < 1:
        fail(annotation_path(key, prefix), f"must be at least 1, not {value}")
    return value


def _groups(text: str, namespace: str, own: str, path: str) -> list[str]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        fail(path, f"not valid JSON: {exc}")
    if not isinstance(parsed, list) or not all(isinstance(g, str) for g in parsed):
        fail(path, 'must be a JSON list such as ["ns/gang-a", "ns/gang-b"]')
    names: list[str] = []
    for entry in parsed:
        ns, _, name = entry.rpartition("/")
        if not name:
            fail(path, f"gang {entry!r} must be written namespace/name")
        if ns and ns != namespace:
            fail(path, f"gang {entry!r} is in another namespace than the pod ({namespace})")
        names.append(name)
    if own not in names:
        names.append(own)
    return sorted(set(names))


def declaration(
    labels: Mapping[str, str], annotations: Mapping[str, str], namespace: str, prefix: str = ""
) -> Declaration | None:
    """The gang a pod's Koordinator annotations declare, or None without ``/name``."""
    name = annotations.get(NAME)
    if not name:
        return None
    minimum = _count(annotations, MIN_AVAILABLE, prefix)
    if minimum is None:
        fail(annotation_path(MIN_AVAILABLE, prefix), f"is required with {NAME}")
    total = _count(annotations, TOTAL_NUMBER, prefix)
    if total is not None and total < minimum:
        fail(annotation_path(TOTAL_NUMBER, prefix), f"must be at least min-available ({minimum})")
    mode = annotations.get(MODE)
    if mode is not None and mode not in MODES:
        fail(annotation_path(MODE, prefix), f"must be Strict or NonStrict, not {mode!r}")
    timeout = None
    if WAITING_TIME in annotations:
        try:
            timeout = parse_duration(annotations[WAITING_TIME])
        except ValueError as exc:
            fail(annotation_path(WAITING_TIME, prefix), str(exc))
    groups = [name]
    if GROUPS in annotations:
        groups = _groups(annotations[GROUPS], namespace, name, annotation_path(GROUPS, prefix))
    where = f"annotation {NAME}={name}"
    if len(groups) == 1:
        gang = GangSpec(namespace, name, minimum, API, timeout_seconds=timeout)
        return Declaration(where, annotation_path(NAME, prefix), GangRef(name, API), gang)
    # A gang group: one gang; each member gang is a role (the others count 1 until their own
    # pods declare their minimum).
    group_name = "+".join(groups)
    roles = {g: (minimum if g == name else 1) for g in groups}
    gang = GangSpec(
        namespace,
        group_name,
        sum(roles.values()),
        API,
        role_minimums=roles,
        timeout_seconds=timeout,
        groups=tuple(groups),
    )
    return Declaration(
        where, annotation_path(NAME, prefix), GangRef(group_name, API), gang, role=name
    )
