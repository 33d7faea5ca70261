"""YAML manifests → :class:`Workload`, with the checks that span objects.

Design: loading runs in passes over the flattened documents (``kind: List`` expanded, empty
documents skipped), so a pod may precede the PriorityClass or PodGroup it names:

1. identify every object — supported ``(apiVersion, kind)``, a name, no duplicate
   ``(API group, kind, namespace, name)``;
2. convert PriorityClasses into the :class:`PriorityTable` (at most one globalDefault);
3. convert everything else, in order, with its timing annotations;
4. check that every gang a Pod or Job template names exists in its namespace and API group.

The first problem raises an :class:`InputError` located by file, object and field. Items keep
document order and carry the file they came from as ``source``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, JobSpec, PodSpec
from phalanx.api.workload import Item, Spec, Timing, Workload
from phalanx.k8s.fields import Obj, as_list, child, describe, get_str
from phalanx.k8s.meta import describing, name_of, namespace_of, object_label, timing_from_dict
from phalanx.k8s.objects import (
    gang_from_dict,
    job_from_dict,
    namespace_from_dict,
    node_from_dict,
    quota_from_dict,
)
from phalanx.k8s.pods import gang_field, pod_from_dict
from phalanx.k8s.priority import PriorityTable, priority_class_from_dict

Converter = Callable[[Mapping[str, Any], PriorityTable], Spec]


@dataclass(frozen=True, slots=True)
class _Kind:
    namespaced: bool
    convert: Converter


#: Every supported (apiVersion, kind).
KINDS: dict[tuple[str, str], _Kind] = {
    ("v1", "Node"): _Kind(False, lambda obj, _: node_from_dict(obj)),
    ("v1", "Pod"): _Kind(True, lambda obj, table: pod_from_dict(obj, table)),
    ("batch/v1", "Job"): _Kind(True, job_from_dict),
    ("scheduling.k8s.io/v1", "PriorityClass"): _Kind(
        False, lambda obj, _: priority_class_from_dict(obj)
    ),
    ("v1", "ResourceQuota"): _Kind(True, lambda obj, _: quota_from_dict(obj)),
    ("v1", "Namespace"): _Kind(False, lambda obj, _: namespace_from_dict(obj)),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): _Kind(True, gang_from_dict),
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"): _Kind(True, gang_from_dict),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): _Kind(True, gang_from_dict),
}

# Kinds labelled ``Kind name``; an object without a kind is labelled ``object name``.
_CLUSTER_SCOPED = frozenset(
    {"object", *(k for (_, k), kind in KINDS.items() if not kind.namespaced)}
)
#: The supported ``(apiVersion, kind)`` pairs.
SUPPORTED_KINDS = frozenset(KINDS)

_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class _Doc:
    source: str
    obj: Obj
    kind: _Kind
    label: str
    key: tuple[str, str, str, str]  # API group, kind, namespace ("" if cluster-scoped), name


def _kind_of(obj: Obj) -> tuple[str, str, _Kind]:
    """The object's (apiVersion, kind) and its converter, or an InputError."""
    kind_name = get_str(obj, "kind", "")
    api_version = get_str(obj, "apiVersion", "")
    if not kind_name:
        raise InputError("kind is required", field="kind")
    if not api_version:
        raise InputError("apiVersion is required", field="apiVersion")
    kind = KINDS.get((api_version, kind_name))
    if kind is not None:
        return api_version, kind_name, kind
    versions = sorted(v for v, k in KINDS if k == kind_name)
    if versions:
        raise InputError(
            f"unknown kind/apiVersion: kind {kind_name} in apiVersion {api_version} "
            f"(supported apiVersion for {kind_name}: {', '.join(versions)})",
            field="apiVersion",
        )
    kinds = ", ".join(sorted({k for _, k in KINDS}))
    raise InputError(
        f"unknown kind/apiVersion: kind {kind_name} in apiVersion {api_version} "
        f"(supported kinds: {kinds})",
        field="kind",
    )


def spec_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> Spec:
    """Convert any supported object, dispatching on its ``apiVersion`` and ``kind``."""
    kind_name = obj.get("kind") if isinstance(obj, Mapping) else None
    label = kind_name if isinstance(kind_name, str) and kind_name else "object"
    with describing(object_label(obj, label, namespaced=label not in _CLUSTER_SCOPED)):
        if not isinstance(obj, Mapping):
            raise InputError(f"object must be a map, not {describe(obj)}")
        _, _, kind = _kind_of(obj)
    return kind.convert(obj, priorities)


def _identify(source: str, obj: Obj) -> _Doc:
    kind_name = obj.get("kind")
    label_kind = kind_name if isinstance(kind_name, str) and kind_name else "object"
    try:
        with describing(
            object_label(obj, label_kind, namespaced=label_kind not in _CLUSTER_SCOPED)
        ):
            api_version, kind_name, kind = _kind_of(obj)
        label = object_label(obj, kind_name, namespaced=kind.namespaced)
        with describing(label):
            name = name_of(obj)
            namespace = namespace_of(obj) if kind.namespaced else ""
    except InputError as exc:
        raise exc.located(source=source) from None
    group = api_version.rpartition("/")[0]
    return _Doc(source, obj, kind, label, (group, kind_name, namespace, name))


def _flatten(docs: Iterable[tuple[str, object]]) -> Iterator[tuple[str, Obj]]:
    """Objects in order: empty documents skipped, ``kind: List`` items expanded."""
    for source, doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, Mapping) or not all(isinstance(k, str) for k in doc):
            what = describe(doc) if not isinstance(doc, Mapping) else "a map with non-string keys"
            raise InputError(
                f"a document must be a Kubernetes object (a map), not {what}", source=source
            )
        if doc.get("kind") == "List":
            try:
                items = as_list(doc.get("items"), "items")
            except InputError as exc:
                raise exc.located(source=source, obj="List") from None
            for i, item in enumerate(items):
                if item is None or not isinstance(item, Mapping):
                    raise InputError(
                        f"must be a Kubernetes object (a map), not {describe(item)}",
                        source=source,
                        obj="List",
                        field=child("items", i),
                    )
            yield from _flatten((source, item) for item in items)
        else:
            yield source, doc


def load_documents(docs: Iterable[tuple[str, object]]) -> Workload:
    """Convert and cross-check ``(source label, parsed YAML document)`` pairs."""
    parsed: list[_Doc] = []
    first_seen: dict[tuple[str, str, str, str], str] = {}
    for source, obj in _flatten(docs):
        doc = _identify(source, obj)
        if doc.key in first_seen:
            raise InputError(
                f"duplicate {doc.label} (first defined in {first_seen[doc.key]})",
                source=source,
                obj=doc.label,
                field="metadata.name",
            )
        first_seen[doc.key] = source
        parsed.append(doc)

    table = PriorityTable()
    specs: dict[int, Spec] = {}
    for i, doc in enumerate(parsed):
        if doc.key[1] == "PriorityClass":
            try:
                priority_class = priority_class_from_dict(doc.obj)
                table.add(priority_class)
            except InputError as exc:
                raise exc.located(source=doc.source) from None
            specs[i] = priority_class
    items: list[Item] = []
    for i, doc in enumerate(parsed):
        spec = specs[i] if i in specs else _convert(doc, table)
        items.append(Item(spec=spec, timing=_timing(doc), source=doc.source))
    _check_gangs(parsed, items)
    return Workload(items=items)


def _convert(doc: _Doc, table: PriorityTable) -> Spec:
    try:
        return doc.kind.convert(doc.obj, table)
    except InputError as exc:
        raise exc.located(source=doc.source) from None


def _timing(doc: _Doc) -> Timing:
    try:
        return timing_from_dict(doc.obj)
    except InputError as exc:
        raise exc.located(source=doc.source, obj=doc.label) from None


def _check_gangs(parsed: Sequence[_Doc], items: Sequence[Item]) -> None:
    gangs = {
        (s.api, s.namespace, s.name)
        for s in (item.spec for item in items)
        if isinstance(s, GangSpec)
    }
    for doc, item in zip(parsed, items, strict=True):
        spec = item.spec
        if isinstance(spec, PodSpec):
            pod, prefix = spec, ""
        elif isinstance(spec, JobSpec):
            pod, prefix = spec.template, "spec.template."
        else:
            continue
        gang = pod.gang
        if gang is None or (gang.api, pod.namespace, gang.name) in gangs:
            continue
        raise InputError(
            f"PodGroup {pod.namespace}/{gang.name} of API group {gang.api} does not exist",
            source=doc.source,
            obj=doc.label,
            field=prefix + gang_field(gang.api),
        )


def read_documents(path: str | os.PathLike[str]) -> list[tuple[str, object]]:
    """The YAML documents of one file, each paired with the file's path."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", source=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason}", source=source) from None
    try:
        documents = list(yaml.load_all(text, Loader=_SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "malformed YAML"
        context = exc.context_mark
        if exc.problem and exc.context and context is not None and context is not mark:
            problem += f" ({exc.context} started at line {context.line + 1})"
        raise InputError(f"YAML syntax error{where}: {problem}", source=source) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML error: {exc}", source=source) from None
    return [(source, doc) for doc in documents]


def load_files(paths: Sequence[str | os.PathLike[str]]) -> Workload:
    """Read multi-document YAML files and return their workload (see the module docstring)."""
    docs: list[tuple[str, object]] = []
    for path in paths:
        docs.extend(read_documents(path))
    return load_documents(docs)
