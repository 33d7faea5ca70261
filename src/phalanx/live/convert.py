"""Turning API objects into specs, for the live cache: memoised, checked, rejected one by one.

Design: :class:`Conversions` memoises a dict → spec conversion per object (kind and key),
reused while the object's uid and ``salt`` (what else the result depends on: the
PriorityClasses) are the same and its ``resourceVersion`` or the parts the conversion reads are
unchanged (a bind or a status write changes the version, not the spec); a failure is memoised
too. Any exception a conversion
raises becomes an :class:`InputError` for that one object (an unexpected one is logged with its
traceback), and a spec whose quantity does not fit a 64-bit integer (``cpu: 100P``,
``memory: 100E``) is refused here, so one bad object never reaches the state's int64 tables.
:class:`Rejections` keeps what was rejected (for the ``Invalid`` Events and the orphans'
messages) and warns once per object version.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec, PodSpec
from phalanx.cluster.workloads import PodInfo
from phalanx.k8s import WORKLOAD_GROUP

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")

FINISHED_PHASES = ("Succeeded", "Failed")
#: Pod templates remembered (:meth:`Conversions._shared`); forgotten all at once beyond this.
TEMPLATES = 4096
#: The largest quantity a state table holds (int64).
LIMIT = 2**63 - 1


def meta(obj: Mapping[str, Any]) -> Obj:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def spec_of(obj: Mapping[str, Any]) -> Obj:
    value = obj.get("spec")
    return value if isinstance(value, dict) else {}


def key_of(obj: Mapping[str, Any]) -> str:
    data = meta(obj)
    namespace = data.get("namespace")
    name = str(data.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def version_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def basis(obj: Mapping[str, Any]) -> tuple[object, ...]:
    """What a conversion reads: labels, annotations, and the spec without ``nodeName`` (a bind
    changes only that), plus a node's ``allocatable``. Writes that change none of it — a bind,
    a status or condition patch, a heartbeat — keep the memoised spec."""
    data = meta(obj)
    spec = {k: v for k, v in spec_of(obj).items() if k != "nodeName"}
    allocatable = (obj.get("status") or {}).get("allocatable")  # nodes only
    return (data.get("labels"), data.get("annotations"), spec, allocatable)


def check_quantities(kind: str, key: str, spec: object) -> None:
    """Refuse a node or pod whose quantities overflow the int64 tables."""
    if isinstance(spec, NodeSpec):
        amounts, where = spec.allocatable, "status.allocatable"
    elif isinstance(spec, PodSpec):
        amounts, where = spec.requests, "spec.containers[].resources.requests"
    else:
        return
    for name, amount in amounts.items():
        if not -LIMIT <= amount <= LIMIT:
            raise InputError(
                "quantity too large (does not fit a 64-bit integer)",
                obj=f"{kind} {key}",
                field=f"{where}.{name}",
            )


class Conversions:
    """Memoised conversions, one entry per object (see the module doc). An entry is reused
    while the object's uid and ``salt`` are the same and either its ``resourceVersion`` or
    what the conversion reads (:func:`basis`) is unchanged."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], tuple[str, str, object, object, Any]] = {}
        self._templates: dict[tuple[object, str, object], PodSpec] = {}
        self.hits = 0
        self.misses = 0

    def convert(
        self, kind: str, obj: Obj, convert: Callable[[Obj], T], salt: object = None, memo: str = ""
    ) -> T:
        """``convert(obj)``, memoised under ``(memo or kind, key)``; raises InputError."""
        key = key_of(obj)
        version = version_of(obj)
        uid = uid_of(obj)
        entry = self._memo.get((memo or kind, key))
        if (
            version
            and entry is not None
            and entry[0] == uid
            and entry[2] == salt
            and (entry[1] == version or entry[3] == basis(obj))
        ):
            self.hits += 1
            result = entry[4]
        else:
            result = self._shared(kind, key, obj, convert, salt) if kind == "Pod" else None
            if result is None:
                result = _safely(kind, key, obj, convert)
            if version:  # an object without one is converted every time
                self.misses += 1
                self._memo[(memo or kind, key)] = (uid, version, salt, basis(obj), result)
        if isinstance(result, InputError):
            raise result
        return cast(T, result)

    def drop(self, kind: str, key: str) -> None:
        self._memo.pop((kind, key), None)

    def _shared(
        self, kind: str, key: str, obj: Obj, convert: Callable[[Obj], T], salt: object
    ) -> Any:
        """The pods of one gang or Job differ only in their names: one conversion per
        template (namespace, :func:`basis` and ``salt``), renamed for each pod."""
        try:
            text = json.dumps(basis(obj), sort_keys=True)
            template = (meta(obj).get("namespace"), text, salt)
        except (TypeError, ValueError):
            return None
        known = self._templates.get(template)
        if known is not None:
            return dataclasses.replace(known, name=str(meta(obj).get("name") or ""))
        result = _safely(kind, key, obj, convert)
        if isinstance(result, PodSpec):
            if len(self._templates) >= TEMPLATES:
                self._templates.clear()
            self._templates[template] = result
        return result


def _safely(kind: str, key: str, obj: Obj, convert: Callable[[Obj], T]) -> T | InputError:
    try:
        result = convert(obj)
        check_quantities(kind, key, result)
        return result
    except InputError as exc:
        return exc
    except Exception as exc:  # one object's bug must not stop the others
        logger.exception("converting %s %s failed", kind, key)
        return InputError(f"cannot be read: {type(exc).__name__}: {exc}", obj=f"{kind} {key}")


class Rejections:
    """Objects skipped because they cannot be used: ``kind/key`` → why, and the object."""

    def __init__(self) -> None:
        self.why: dict[str, str] = {}
        self.objects: dict[str, Obj] = {}
        self._warned: set[tuple[str, str, str]] = set()

    def reject(self, kind: str, obj: Obj, exc: InputError) -> None:
        key = key_of(obj)
        self.why[f"{kind}/{key}"] = exc.line()
        self.objects[f"{kind}/{key}"] = obj
        marker = (kind, key, exc.line())  # not per resourceVersion: status writes change it
        if marker not in self._warned:
            self._warned.add(marker)
            logger.warning("skipping %s %s: %s", kind, key, exc.line())

    def accept(self, kind: str, key: str) -> None:
        self.why.pop(f"{kind}/{key}", None)
        self.objects.pop(f"{kind}/{key}", None)


def orphan_message(key: str, pods: Iterable[PodInfo], rejected: Mapping[str, str]) -> str:
    """Why pods wait for the gang object ``key`` that the state does not have: it does not
    exist, or it was rejected (``rejected``: :attr:`Rejections.why`)."""
    pods = list(pods)
    ref = next((p.spec.gang for p in pods if p.spec.gang is not None), None)
    api = ref.api if ref is not None else ""
    if api == WORKLOAD_GROUP and any(p.spec.workload_ref is not None for p in pods):
        return f"Workload pod group {key} ({api}) does not exist"
    why = rejected.get(f"PodGroup/{key}")
    if why is not None:
        return f"PodGroup {key} ({api}) is invalid: {why}"
    return f"PodGroup {key} ({api}) does not exist"


def queue_hold(name: str, queues: Mapping[str, Obj]) -> tuple[str, str] | None:
    """Why a Volcano PodGroup of queue ``name`` may not be scheduled, as Volcano rules it: its
    queue must exist and be ``Open`` (a ``Closed`` or ``Closing`` queue takes no new work)."""
    queue = queues.get(name)
    if queue is None:
        return ("QueueMissing", f"Volcano queue {name!r} does not exist")
    state = (queue.get("status") or {}).get("state")
    if state in ("Closed", "Closing"):
        return ("QueueClosed", f"Volcano queue {name!r} is {state}")
    return None
