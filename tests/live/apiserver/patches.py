"""PATCH bodies: JSON merge patch (RFC 7386), a strategic-merge subset, JSON patch (RFC 6902).

Strategic merge patch is a merge patch except that some lists merge element-wise by a key
(``patchMergeKey`` in the Kubernetes Go types): pod ``status.conditions`` by ``type``,
containers/volumes/env by ``name``, node ``spec.taints`` by ``key``, ``ownerReferences`` by
``uid``, and so on (:data:`MERGE_KEYS`). An element ``{"$patch": "delete", key: ...}`` removes
it. Other ``$``-directives (``$setElementOrder``, ``$retainKeys``,
``$deleteFromPrimitiveList``) are accepted and ignored. Lists not in the table are replaced,
as in a merge patch. Custom resources have no Go types, so the server refuses strategic merge
for them (415), exactly like the real one.
"""

from __future__ import annotations

import copy
from typing import Any

#: list field name → merge key (only where Kubernetes declares ``patchStrategy: merge``).
MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "taints": "key",
    "addresses": "type",
    "readinessGates": "conditionType",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}


class PatchError(ValueError):
    """A patch that cannot be applied (the server answers 422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_list(result.get(key), value, MERGE_KEYS[key])
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_list(target: Any, patch: list[Any], merge_key: str) -> list[Any]:
    merged = list(target) if isinstance(target, list) else []
    for element in patch:
        if not isinstance(element, dict) or merge_key not in element:
            raise PatchError(f"list element {element!r} has no merge key {merge_key!r}")
        index = next(
            (
                i
                for i, old in enumerate(merged)
                if isinstance(old, dict) and old.get(merge_key) == element[merge_key]
            ),
            None,
        )
        if element.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge_patch({}, element))
        else:
            merged[index] = strategic_merge_patch(merged[index], element)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    current = doc
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise PatchError(f"path /{'/'.join(parts)} does not exist")
    return current


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError(f"path /{'/'.join(parts)} does not exist")


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"index {last} out of range")
    else:
        raise PatchError(f"cannot add below a scalar at /{'/'.join(parts)}")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        del parent[int(last)]
    else:
        raise PatchError(f"path /{'/'.join(parts)} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind = op["op"]
        parts = _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts)
            value = copy.deepcopy(op.get("value"))
            doc = _add(_remove(doc, parts), parts, value) if parts else value
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_get(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchError(f"test operation failed at {op['path']}")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc
