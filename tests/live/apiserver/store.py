"""The fake API server's in-memory object store, event log and watch fan-out.

Design:

- One global ``resourceVersion`` counter, bumped on every write (as etcd's revision is), stamped
  on the written object and returned by lists and bookmarks. Deletions get their own revision
  too: the DELETED watch event carries it.
- Stored objects are never mutated after a write commits (copy on write), so the event log and
  watch queues can hold references to them.
- Per resource, a bounded log of :class:`Change` (``history`` entries). Dropping the oldest entry
  records its revision as that resource's *compacted* revision: a watch (or a list
  continuation) from an older revision gets 410 Gone, which forces a client to relist.
- Watchers are registered synchronously right after their initial events are computed, so no
  write can fall in between. A change is translated per watcher as the real watch cache does:
  a MODIFIED object that starts (stops) matching the watcher's selectors is sent as ADDED
  (DELETED).
- Every HTTP verb is a synchronous method that raises :class:`ApiFailure` (a Kubernetes
  ``Status``) on error; :mod:`.server` only translates HTTP to these calls.

Emulated server behaviour worth knowing: pod create defaults ``schedulerName`` and runs the
Priority admission plugin (``priorityClassName`` → ``spec.priority`` and the class's
``spec.preemptionPolicy``, 403 for an unknown class or a pod's own differing policy, the
``globalDefault`` class otherwise); pod status is reset to ``Pending`` on create; a custom
resource's status is dropped on create when it has a status subresource; writes to the main
resource keep the stored status, writes to ``/status`` change only the status; ``generation``
bumps when anything outside ``metadata``/``status`` changes; finalizers delay deletion
(``deletionTimestamp`` first). Not emulated: validation beyond names, namespaces that must
exist, graceful pod deletion (pods disappear at once — a real bound pod is first Terminating),
server-side apply, events.k8s.io and core events being one store, field managers.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import random
import re
import string
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .patches import PatchError, json_patch, merge_patch, strategic_merge_patch
from .registry import BUILTIN, PODS, PRIORITY_CLASSES, ResourceInfo
from .selectors import FieldRequirement, Requirement, fields_match, labels_match

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace or "", name)

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SYSTEM_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiFailure(Exception):
    """A request the server refuses; becomes a ``v1 Status`` body with HTTP ``code``."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(info: ResourceInfo) -> str:
    return f"{info.plural}.{info.group}" if info.group else info.plural


def _details(info: ResourceInfo, name: str) -> Obj:
    return {"name": name, "group": info.group, "kind": info.plural}


def not_found(info: ResourceInfo, name: str) -> ApiFailure:
    return ApiFailure(
        404, "NotFound", f'{_qualified(info)} "{name}" not found', _details(info, name)
    )


def already_exists(info: ResourceInfo, name: str) -> ApiFailure:
    return ApiFailure(
        409, "AlreadyExists", f'{_qualified(info)} "{name}" already exists', _details(info, name)
    )


def conflict(info: ResourceInfo, name: str, why: str) -> ApiFailure:
    return ApiFailure(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(info)} "{name}": {why}',
        _details(info, name),
    )


MODIFIED_WHY = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(info: ResourceInfo, name: str, why: str) -> ApiFailure:
    return ApiFailure(
        422, "Invalid", f'{info.kind} "{name}" is invalid: {why}', _details(info, name)
    )


def bad_request(message: str) -> ApiFailure:
    return ApiFailure(400, "BadRequest", message)


def gone(message: str) -> ApiFailure:
    return ApiFailure(410, "Expired", message)


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None


#: What a watcher's queue carries: (event type, object), or a stop signal.
STOP = ("STOP", {})
ABORT = ("ABORT", {})


def selected(
    obj: Obj,
    namespace: str | None,
    labels: tuple[Requirement, ...],
    fields: tuple[FieldRequirement, ...],
) -> bool:
    if namespace is not None and obj["metadata"].get("namespace") != namespace:
        return False
    return labels_match(labels, obj) and fields_match(fields, obj)


@dataclass(eq=False)
class Watcher:
    info: ResourceInfo
    namespace: str | None
    labels: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]
    queue: asyncio.Queue[tuple[str, Obj]] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Obj | None) -> bool:
        return obj is not None and selected(obj, self.namespace, self.labels, self.fields)

    def translate(self, change: Change) -> tuple[str, Obj] | None:
        now_matches = self.matches(change.obj)
        if change.type == "ADDED":
            return ("ADDED", change.obj) if now_matches else None
        if change.type == "DELETED":
            return ("DELETED", change.obj) if now_matches else None
        was_matching = self.matches(change.old)
        if now_matches and was_matching:
            return ("MODIFIED", change.obj)
        if now_matches:
            return ("ADDED", change.obj)
        if was_matching:
            return ("DELETED", change.obj)
        return None


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


class Store:
    def __init__(self, history: int = 1000) -> None:
        self.rv = 1000  # any start will do; a non-trivial one catches clients that assume 0
        self.history_limit = history
        self.resources: dict[tuple[str, str, str], ResourceInfo] = {}
        self.objects: dict[tuple[str, str, str], dict[ObjKey, Obj]] = {}
        self.history: dict[tuple[str, str, str], deque[Change]] = {}
        self.compacted: dict[tuple[str, str, str], int] = {}
        self.watchers: dict[tuple[str, str, str], set[Watcher]] = {}
        for info in BUILTIN:
            self.register(info)

    # ---------------------------------------------------------------- registry
    def register(self, info: ResourceInfo) -> None:
        self.resources[info.key] = info
        self.objects.setdefault(info.key, {})
        self.history.setdefault(info.key, deque())
        self.compacted.setdefault(info.key, 0)
        self.watchers.setdefault(info.key, set())

    def unregister(self, info: ResourceInfo) -> None:
        """Remove a resource (a CRD deleted): its objects go, its watches end."""
        self.resources.pop(info.key, None)
        self.objects.pop(info.key, None)
        self.history.pop(info.key, None)
        self.compacted.pop(info.key, None)
        for watcher in self.watchers.pop(info.key, set()):
            watcher.queue.put_nowait(STOP)

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self.resources.get((group, version, plural))

    def group_versions(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for info in self.resources.values():
            versions = groups.setdefault(info.group, [])
            if info.version not in versions:
                versions.append(info.version)
        return groups

    def in_group_version(self, group: str, version: str) -> list[ResourceInfo]:
        return [i for i in self.resources.values() if i.group_version == (group, version)]

    # ---------------------------------------------------------------- helpers
    def _bucket(self, info: ResourceInfo) -> dict[ObjKey, Obj]:
        return self.objects[info.key]

    def _key(self, info: ResourceInfo, namespace: str | None, name: str) -> ObjKey:
        return ((namespace or "") if info.namespaced else "", name)

    def _existing(self, info: ResourceInfo, namespace: str | None, name: str) -> Obj:
        obj = self._bucket(info).get(self._key(info, namespace, name))
        if obj is None:
            raise not_found(info, name)
        return obj

    def _commit(self, info: ResourceInfo, kind: str, obj: Obj, old: Obj | None) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = self._key(info, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if kind == "DELETED":
            self._bucket(info).pop(key, None)
        else:
            self._bucket(info)[key] = obj
        change = Change(self.rv, kind, obj, old)
        log = self.history[info.key]
        log.append(change)
        while len(log) > self.history_limit:
            self.compacted[info.key] = log.popleft().rv
        for watcher in self.watchers[info.key]:
            event = watcher.translate(change)
            if event is not None:
                watcher.queue.put_nowait(event)
        return obj

    def compact(self) -> None:
        """Forget every resource's history: a watch from any older revision gets 410."""
        for key, log in self.history.items():
            log.clear()
            self.compacted[key] = self.rv

    # ---------------------------------------------------------------- create
    def create(self, info: ResourceInfo, namespace: str | None, body: Any) -> Obj:
        obj = self._prepare_new(info, namespace, body)
        name = obj["metadata"]["name"]
        if self._key(info, namespace, name) in self._bucket(info):
            raise already_exists(info, name)
        if info.key == PODS.key:
            self._admit_pod(obj)
        elif info.has_status and info.custom:
            obj.pop("status", None)
        return self._commit(info, "ADDED", obj, None)

    def put(self, info: ResourceInfo, obj: Obj) -> Obj:
        """Store ``obj`` as given (status included, no admission): a test's back door."""
        namespace = obj.get("metadata", {}).get("namespace") or (
            "default" if info.namespaced else None
        )
        new = self._prepare_new(info, namespace, obj)
        key = self._key(info, namespace, new["metadata"]["name"])
        old = self._bucket(info).get(key)
        if old is None:
            return self._commit(info, "ADDED", new, None)
        for meta in ("uid", "creationTimestamp"):
            new["metadata"][meta] = old["metadata"][meta]
        return self._commit(info, "MODIFIED", new, old)

    def _prepare_new(self, info: ResourceInfo, namespace: str | None, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj = copy.deepcopy(body)
        self._check_type(info, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            name = meta["name"] = f"{meta['generateName']}{suffix}"
        if not name:
            raise invalid(
                info, "", "metadata.name: Required value: name or generateName is required"
            )
        if len(name) > 253 or not _NAME.fullmatch(name):
            raise invalid(
                info,
                name,
                f"metadata.name: Invalid value: {name!r}: "
                "a lowercase RFC 1123 subdomain is required",
            )
        if info.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta["generation"] = 1
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        return obj

    def _check_type(self, info: ResourceInfo, obj: Obj) -> None:
        if obj.get("kind") not in (None, "", info.kind):
            raise bad_request(f"kind {obj['kind']!r} does not match the endpoint ({info.kind})")
        if obj.get("apiVersion") not in (None, "", info.api_version):
            raise bad_request(
                f"apiVersion {obj['apiVersion']!r} does not match the endpoint ({info.api_version})"
            )
        obj["kind"] = info.kind
        obj["apiVersion"] = info.api_version

    def _admit_pod(self, pod: Obj) -> None:
        spec = pod.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")
        classes = self._bucket(PRIORITY_CLASSES).values()
        class_name = spec.get("priorityClassName")
        if class_name:
            match = next((c for c in classes if c["metadata"]["name"] == class_name), None)
            if match is None:
                raise ApiFailure(
                    403,
                    "Forbidden",
                    f'pods "{pod["metadata"]["name"]}" is forbidden: no PriorityClass with name '
                    f"{class_name} was found",
                )
        else:
            match = next((c for c in classes if c.get("globalDefault")), None)
            if match is not None:
                spec["priorityClassName"] = match["metadata"]["name"]
        spec["priority"] = match.get("value", 0) if match else 0
        policy = (match or {}).get("preemptionPolicy") or "PreemptLowerPriority"
        if spec.get("preemptionPolicy") not in (None, policy):
            raise ApiFailure(
                403,
                "Forbidden",
                f'pods "{pod["metadata"]["name"]}" is forbidden: the string value of '
                f"PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in pod "
                f"spec; priority admission controller computed {policy} from the given "
                "PriorityClass name",
            )
        spec["preemptionPolicy"] = policy
        pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}

    # ---------------------------------------------------------------- read
    def get(self, info: ResourceInfo, namespace: str | None, name: str) -> Obj:
        return self._existing(info, namespace, name)

    def list(
        self,
        info: ResourceInfo,
        namespace: str | None,
        labels: tuple[Requirement, ...] = (),
        fields: tuple[FieldRequirement, ...] = (),
        limit: int = 0,
        token: str | None = None,
    ) -> tuple[list[Obj], str, str | None]:
        """(items, list resourceVersion, continue token or None)."""
        list_rv = self.rv
        start: ObjKey | None = None
        if token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                list_rv, start = int(decoded["rv"]), (decoded["start"][0], decoded["start"][1])
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise bad_request(f"invalid continue token: {exc}") from None
            if list_rv < self.compacted[info.key]:
                raise gone(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
        items = [
            obj
            for key, obj in sorted(self._bucket(info).items())
            if (start is None or key > start) and selected(obj, namespace, labels, fields)
        ]
        next_token = None
        if limit and len(items) > limit:
            items = items[:limit]
            last = items[-1]["metadata"]
            payload = {"rv": list_rv, "start": [last.get("namespace") or "", last["name"]]}
            next_token = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
        return items, str(list_rv), next_token

    # ---------------------------------------------------------------- update
    def replace(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None = None,
    ) -> Obj:
        old = self._existing(info, namespace, name)
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        self._check_name(info, name, body)
        wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise conflict(info, name, MODIFIED_WHY)
        return self._update(info, old, copy.deepcopy(body), subresource)

    def patch(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        subresource: str | None = None,
    ) -> Obj:
        old = self._existing(info, namespace, name)
        try:
            if content_type == MERGE:
                patched = merge_patch(old, body)
            elif content_type == STRATEGIC:
                if info.custom:
                    raise ApiFailure(
                        415,
                        "UnsupportedMediaType",
                        f"the body of the request was in an unknown format - accepted media "
                        f"types include: {JSON_PATCH}, {MERGE}, {APPLY}",
                    )
                patched = strategic_merge_patch(old, body)
            elif content_type == JSON_PATCH:
                patched = json_patch(old, body)
            else:
                raise ApiFailure(
                    415,
                    "UnsupportedMediaType",
                    f"the fake API server does not support PATCH with {content_type!r}",
                )
        except PatchError as exc:
            raise invalid(info, name, str(exc)) from None
        if not isinstance(patched, dict):
            raise bad_request("a patch must leave an object")
        self._check_name(info, name, patched)
        wanted = str((patched.get("metadata") or {}).get("resourceVersion") or "")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise conflict(info, name, MODIFIED_WHY)
        return self._update(info, old, patched, subresource)

    def _check_name(self, info: ResourceInfo, name: str, body: Obj) -> None:
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, "", name):
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )

    def _update(self, info: ResourceInfo, old: Obj, body: Obj, subresource: str | None) -> Obj:
        if subresource == "status":
            if not info.has_status:
                raise not_found(info, old["metadata"]["name"])
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
        elif subresource is not None:
            raise not_found(info, old["metadata"]["name"])
        else:
            self._check_type(info, body)
            new = body
            meta = new.setdefault("metadata", {})
            meta["name"] = old["metadata"]["name"]
            if info.namespaced:
                meta["namespace"] = old["metadata"]["namespace"]
            if info.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
        meta = new["metadata"]
        for system in _SYSTEM_META:
            if system in old["metadata"]:
                meta[system] = old["metadata"][system]
            else:
                meta.pop(system, None)
        generation = old["metadata"].get("generation", 1)
        meta["generation"] = generation + (_spec_part(new) != _spec_part(old))
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._commit(info, "DELETED", new, old)
        return self._commit(info, "MODIFIED", new, old)

    # ---------------------------------------------------------------- delete
    def delete(
        self, info: ResourceInfo, namespace: str | None, name: str, options: Any = None
    ) -> Obj:
        old = self._existing(info, namespace, name)
        preconditions = (options or {}).get("preconditions") if isinstance(options, dict) else None
        if preconditions:
            uid = preconditions.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise conflict(
                    info,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                    f"{old['metadata']['uid']}",
                )
            rv = preconditions.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(info, name, MODIFIED_WHY)
        new = copy.deepcopy(old)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(info, "MODIFIED", new, old)
        return self._commit(info, "DELETED", new, old)

    # ---------------------------------------------------------------- binding
    def bind(self, namespace: str, name: str | None, binding: Any) -> Obj:
        if not isinstance(binding, dict):
            raise bad_request("the request body must be a Binding object")
        meta = binding.get("metadata") or {}
        body_name = meta.get("name") or ""
        if name is None:
            name = body_name
        elif body_name and body_name != name:
            raise bad_request("name in URL does not match name in Binding object")
        if not name:
            raise invalid(PODS, "", "metadata.name: Required value")
        target = binding.get("target") or {}
        node = target.get("name") or ""
        if not node:
            raise invalid(PODS, name, "target.name: Required value")
        if target.get("kind") not in (None, "", "Node"):
            raise invalid(PODS, name, f"target.kind: Unsupported value: {target.get('kind')!r}")
        old = self._existing(PODS, namespace, name)
        if old["metadata"].get("deletionTimestamp"):
            raise conflict(PODS, name, f"pod {name} is being deleted, cannot be assigned to a host")
        uid = meta.get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise conflict(
                PODS,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{old['metadata']['uid']}",
            )
        bound = (old.get("spec") or {}).get("nodeName")
        if bound:
            raise conflict(PODS, name, f'pod {name} is already assigned to node "{bound}"')
        new = copy.deepcopy(old)
        new.setdefault("spec", {})["nodeName"] = node
        annotations = meta.get("annotations") or {}
        if annotations:
            new["metadata"].setdefault("annotations", {}).update(annotations)
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions", []) if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now(),
            }
        )
        status["conditions"] = conditions
        self._commit(PODS, "MODIFIED", new, old)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    # ---------------------------------------------------------------- watch
    def watch(
        self,
        info: ResourceInfo,
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
        resource_version: str | None,
    ) -> tuple[list[tuple[str, Obj]], Watcher]:
        """The initial events and the registered watcher (raises 410 when too old)."""
        watcher = Watcher(info, namespace, labels, fields)
        initial: list[tuple[str, Obj]] = []
        if resource_version in (None, "", "0"):
            initial = [
                ("ADDED", obj)
                for _, obj in sorted(self._bucket(info).items())
                if watcher.matches(obj)
            ]
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise bad_request(f"invalid resource version {resource_version!r}") from None
            if since < self.compacted[info.key]:
                raise gone(f"too old resource version: {since} ({self.compacted[info.key]})")
            for change in self.history[info.key]:
                if change.rv > since:
                    event = watcher.translate(change)
                    if event is not None:
                        initial.append(event)
        self.watchers[info.key].add(watcher)
        return initial, watcher

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.get(watcher.info.key, set()).discard(watcher)

    def all_watchers(self) -> Iterable[Watcher]:
        for watchers in self.watchers.values():
            yield from watchers
