"""YAML manifests → :class:`Workload`, with the checks that span objects.

Design: loading runs in passes over the flattened documents (``kind: List`` and ``*List``
expanded, empty documents skipped), so a pod may precede the PriorityClass or PodGroup it names:

1. identify every object — supported ``(apiVersion, kind)``, a name (``generateName`` is
   completed deterministically from the seed), no duplicate ``(API group, kind, namespace,
   name)``; finished pods (``status.phase`` Succeeded or Failed) of a snapshot are dropped;
2. convert PriorityClasses into the :class:`PriorityTable` (at most one globalDefault), then
   Kubeflow training runtimes (a TrainJob may precede the runtime it names);
3. convert everything else, in order, with its timing annotations;
4. resolve the Workload API (``workloadRef`` → the gang of its pod group, ``basic`` groups →
   no gang), drop controllers whose pods are already in the input (a snapshot: something names
   them in ``ownerReferences``; a dropped Job or controller that runs to an end still tells its
   pods what it says of them, :func:`~phalanx.k8s.objects.adopted_by`; a TrainJob or a JobSet
   is dropped when something names it, its JobSet or one of its Jobs, which a snapshot need
   not hold; a RayJob speaks for the pods of the RayCluster it made, ``NAME-xxxxx``), and
   check that every gang a pod names exists.

Bad objects are collected: the run stops with an :class:`InputErrors` of all of them (one
line each, located by file, object and field). Items keep document order and carry the file
they came from as ``source``. Files may be directories (every ``*.yaml``, ``*.yml`` and
``*.json`` in them, sorted) and ``-`` is standard input.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from phalanx.api.errors import InputError, InputErrors
from phalanx.api.specs import ControllerSpec, GangSpec, JobSpec, PodSpec
from phalanx.api.workload import Timing, Workload
from phalanx.k8s.fields import Obj, as_list, child, describe, get_str
from phalanx.k8s.finished import Done, ended, lowered, note_finished
from phalanx.k8s.kinds import jobset, ray, trainer
from phalanx.k8s.kinds.trainer_runtime import API as TRAINER_API
from phalanx.k8s.kinds.trainer_runtime import CLUSTER_KIND, NAMESPACED_KIND, TrainingRuntime
from phalanx.k8s.kindtable import CLUSTER_SCOPED, KINDS, NAMESPACED, Converted, Kind
from phalanx.k8s.meta import (
    annotations_of,
    describing,
    generated_name,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    timing_from_dict,
)
from phalanx.k8s.objects import adopted_by
from phalanx.k8s.priority import PriorityTable, priority_class_from_dict
from phalanx.k8s.resolve import Doc, Resolver
from phalanx.k8s.yamlio import load_all, read_text

#: The supported ``(apiVersion, kind)`` pairs.
SUPPORTED_KINDS = frozenset(KINDS)

_EXTENSIONS = (".yaml", ".yml", ".json")
_FINISHED = ("Succeeded", "Failed")


def _label(obj: object) -> str:
    """``Kind namespace/name``; a kind not known to be cluster-scoped gets a namespace only
    when it is known to be namespaced or the object states one."""
    kind_name = obj.get("kind") if isinstance(obj, Mapping) else None
    kind = kind_name if isinstance(kind_name, str) and kind_name else "object"
    api = obj.get("apiVersion") if isinstance(obj, Mapping) else None
    known = KINDS.get((api, kind)) if isinstance(api, str) else None
    if known is not None:
        return object_label(obj, kind, namespaced=known.namespaced)
    if kind in NAMESPACED or kind in CLUSTER_SCOPED:
        return object_label(obj, kind, namespaced=kind in NAMESPACED)
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    stated = isinstance(meta, Mapping) and bool(meta.get("namespace"))
    return object_label(obj, kind, namespaced=stated)


def _kind_of(obj: Obj) -> tuple[str, str, Kind]:
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
    kinds = ", ".join(sorted({f"{k} ({v})" for v, k in KINDS}))
    raise InputError(
        f"unknown kind/apiVersion: kind {kind_name} in apiVersion {api_version} "
        f"(supported kinds: {kinds})",
        field="kind",
    )


def spec_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> Converted:
    """Convert any supported object, dispatching on its ``apiVersion`` and ``kind``."""
    with describing(_label(obj)):
        if not isinstance(obj, Mapping):
            raise InputError(f"object must be a map, not {describe(obj)}")
        _, _, kind = _kind_of(obj)
    return kind.convert(obj, priorities)


class _Loader:
    """One load: the documents, the errors found so far and the names generated."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.errors: list[InputError] = []
        self.generated: dict[str, int] = {}
        self.succeeded: Done = {}  # members of gangs that already finished

    def flatten(self, docs: Iterable[tuple[str, object]]) -> Iterator[tuple[str, str, Obj]]:
        """``(source, where, object)``: empty documents skipped, lists expanded; ``where`` adds
        the document's index (and item) to the source, for unknown-kind errors."""
        counts: dict[str, int] = {}
        for source, doc in docs:
            counts[source] = counts.get(source, 0) + 1
            where = f"document {counts[source]}"
            if doc is None:
                continue
            yield from self._expand(source, where, doc)

    def _expand(self, source: str, where: str, doc: object) -> Iterator[tuple[str, str, Obj]]:
        if not isinstance(doc, Mapping) or not all(isinstance(k, str) for k in doc):
            what = describe(doc) if not isinstance(doc, Mapping) else "a map with non-string keys"
            message = f"a document must be a Kubernetes object (a map), not {what}"
            self.errors.append(InputError(message, source=source, obj=where))
            return
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            try:
                items = as_list(doc.get("items"), "items")
            except InputError as exc:
                self.errors.append(exc.located(source=source, obj=kind))
                return
            for i, item in enumerate(items):
                if item is None or not isinstance(item, Mapping):
                    self.errors.append(
                        InputError(
                            f"must be a Kubernetes object (a map), not {describe(item)}",
                            source=source,
                            obj=kind,
                            field=child("items", i),
                        )
                    )
                    continue
                yield from self._expand(source, f"{where}, items[{i}]", item)
        else:
            yield source, where, doc

    def name(self, obj: Obj) -> Obj:
        """``obj`` with a name generated from ``metadata.generateName`` when it has none."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or meta.get("name"):
            return obj
        prefix = meta.get("generateName")
        if not isinstance(prefix, str) or not prefix:
            return obj
        count = self.generated.get(prefix, 0)
        self.generated[prefix] = count + 1
        return {**obj, "metadata": {**meta, "name": generated_name(prefix, self.seed, count)}}

    def identify(self, source: str, where: str, obj: Obj) -> Doc | None:
        obj = self.name(obj)
        try:
            try:
                api_version, kind_name, kind = _kind_of(obj)
            except InputError as exc:
                raise exc.located(obj=f"{where}: {_label(obj)}") from None
            label = object_label(obj, kind_name, namespaced=kind.namespaced)
            with describing(label):
                name = name_of(obj)
                namespace = namespace_of(obj) if kind.namespaced else ""
        except InputError as exc:
            located = exc.located(source=source)
            if " " not in located.obj:  # no name to tell it by: say which document it is
                located = InputError(
                    located.message,
                    source=located.source,
                    obj=f"{located.obj or 'object'} ({where})",
                    field=located.field,
                )
            self.errors.append(located)
            return None
        if kind_name == "Pod" and _phase(obj) in _FINISHED:
            succeeded = _phase(obj) == "Succeeded"  # it still counts for its gang
            note_finished(self.succeeded, obj, namespace, succeeded=succeeded)
            return None  # a snapshot's finished pod holds nothing
        group = api_version.rpartition("/")[0]
        return Doc(source, obj, kind, label, (group, kind_name, namespace, name))


def _phase(obj: Obj) -> str:
    status = obj.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def _owners(docs: Sequence[Doc]) -> set[tuple[str, str, str, str]]:
    """``(API group, kind, namespace, name)`` of every object some input object is owned by."""
    owners: set[tuple[str, str, str, str]] = set()
    for doc in docs:
        meta = doc.obj.get("metadata")
        refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
        for ref in refs if isinstance(refs, list) else []:
            if not isinstance(ref, Mapping):
                continue  # the object's own conversion reports it
            api, kind, name = (ref.get(key) for key in ("apiVersion", "kind", "name"))
            if isinstance(kind, str) and isinstance(name, str):  # else reported likewise
                group = api.rpartition("/")[0] if isinstance(api, str) else ""
                owners.add((group, kind, doc.key[2], name))
    return owners


def load_documents(docs: Iterable[tuple[str, object]], *, seed: int = 0) -> Workload:
    """Convert and cross-check ``(source label, parsed YAML document)`` pairs."""
    loader = _Loader(seed)
    parsed: list[Doc] = []
    first_seen: dict[tuple[str, str, str, str], str] = {}
    for source, where, obj in loader.flatten(docs):
        doc = loader.identify(source, where, obj)
        if doc is None:
            continue
        if doc.key in first_seen:
            loader.errors.append(
                InputError(
                    f"duplicate {doc.label} (first defined in {first_seen[doc.key]})",
                    source=source,
                    obj=doc.label,
                    field="metadata.name",
                )
            )
            continue
        first_seen[doc.key] = source
        parsed.append(doc)

    table = PriorityTable()
    converted: dict[int, Converted] = {}
    for i, doc in enumerate(parsed):
        if doc.key[1] == "PriorityClass":
            try:
                priority_class = priority_class_from_dict(doc.obj)
                table.add(priority_class)
            except InputError as exc:
                loader.errors.append(exc.located(source=doc.source))
                continue
            converted[i] = priority_class
    owners = _owners(parsed)
    ray_clusters = _ray_clusters(parsed)
    broken: set[tuple[str, str, str]] = set()
    runtimes = _runtimes(parsed, table, converted, loader.errors, broken)
    kept: list[tuple[Doc, Converted, Timing]] = []
    #: (namespace, "Kind/NAME") → a dropped owner (a Job, or a controller that runs to an end)
    made: dict[tuple[str, str], JobSpec | ControllerSpec] = {}
    for i, doc in enumerate(parsed):
        if (doc.key[0], doc.key[2], doc.key[3]) in broken and doc.key[1] in _RUNTIME_KINDS:
            continue  # a runtime with an error, reported
        try:
            with describing(doc.label):  # every kind's label and annotation keys and values
                labels_of(doc.obj)
                annotations_of(doc.obj)
            if i in converted:
                spec = converted[i]
            elif doc.key[:2] == (TRAINER_API, trainer.KIND):
                spec = trainer.trainjob_from_dict(doc.obj, table, runtimes)
            else:
                spec = doc.kind.convert(doc.obj, table)
            timing = _timing(doc)
        except InputError as exc:
            loader.errors.append(exc.located(source=doc.source, obj=doc.label))
            broken.add((doc.key[0], doc.key[2], doc.key[3]))  # its members are not reported
            continue
        if isinstance(spec, ControllerSpec) and (adopting := _snapshot_owners(spec, owners)):
            made.update({(spec.namespace, o): m for o, m in adopting.items()})
            continue  # a snapshot: its Jobs' pods are in the input
        if doc.key in owners and isinstance(spec, ControllerSpec | JobSpec):
            if isinstance(spec, JobSpec):
                made[spec.namespace, f"Job/{spec.name}"] = spec
            elif spec.kind in (ray.CLUSTER, ray.JOB):
                _made_by_ray(made, spec, ray_clusters.get((spec.namespace, spec.name), []))
            elif not spec.service:
                made[spec.namespace, f"{spec.kind.split('.')[0]}/{spec.name}"] = spec
            continue  # a snapshot: its controller already made the pods that are in the input
        if isinstance(spec, GangSpec) and loader.succeeded:
            spec = lowered(spec, loader.succeeded)
        if doc.key[1] != "PriorityClass" or i in converted:
            kept.append((doc, spec, timing))
    if loader.succeeded:  # a PodGroup of pods that all finished is over too
        over = ended([spec for _, spec, _ in kept], loader.succeeded)
        kept = [k for k in kept if not (isinstance(k[1], GangSpec) and k[1].key in over)]
    items = Resolver(_adopted(kept, made), loader.errors, broken).items()
    if loader.errors:
        raise InputErrors(loader.errors) if len(loader.errors) > 1 else loader.errors[0]
    return Workload(items=items)


_RUNTIME_KINDS = (CLUSTER_KIND, NAMESPACED_KIND)


def _runtimes(
    parsed: Sequence[Doc],
    table: PriorityTable,
    converted: dict[int, Converted],
    errors: list[InputError],
    broken: set[tuple[str, str, str]],
) -> dict[tuple[str, str, str], TrainingRuntime | None]:
    """Every Kubeflow training runtime of the input by (kind, namespace, name): converted (into
    ``converted``), or None when it has an error (reported; its key added to ``broken``)."""
    runtimes: dict[tuple[str, str, str], TrainingRuntime | None] = {}
    for i, doc in enumerate(parsed):
        group, kind, namespace, name = doc.key
        if group != TRAINER_API or kind not in _RUNTIME_KINDS:
            continue
        try:
            runtime = doc.kind.convert(doc.obj, table)
        except InputError as exc:
            errors.append(exc.located(source=doc.source, obj=doc.label))
            broken.add((group, namespace, name))
            runtimes[kind, namespace, name] = None
            continue
        assert isinstance(runtime, TrainingRuntime)
        converted[i] = runtimes[runtime.key] = runtime
    return runtimes


def _snapshot_owners(
    spec: ControllerSpec, owners: set[tuple[str, str, str, str]]
) -> dict[str, JobSpec | ControllerSpec]:
    """A TrainJob or JobSet that a snapshot object names, or names its JobSet or one of its
    Jobs: what it says of its pods, by each owner they may name (else nothing)."""
    if spec.kind not in (trainer.KIND, jobset.KIND):
        return {}
    kind = trainer if spec.kind == trainer.KIND else jobset
    return kind.snapshot_owners(spec) if kind.made_by(spec) & owners else {}


def _ray_clusters(docs: Sequence[Doc]) -> dict[tuple[str, str], list[str]]:
    """(namespace, RayJob name) → the RayClusters of the input that the RayJob controls."""
    clusters: dict[tuple[str, str], list[str]] = {}
    for doc in docs:
        if doc.key[:2] != ("ray.io", ray.CLUSTER):
            continue
        meta = doc.obj.get("metadata")
        refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
        for ref in refs if isinstance(refs, list) else []:
            if isinstance(ref, Mapping) and ref.get("kind") == ray.JOB and ref.get("controller"):
                name = ref.get("name")
                if isinstance(name, str):
                    clusters.setdefault((doc.key[2], name), []).append(doc.key[3])
    return clusters


def _made_by_ray(
    made: dict[tuple[str, str], JobSpec | ControllerSpec],
    spec: ControllerSpec,
    clusters: list[str],
) -> None:
    """Record what a snapshot's RayCluster or RayJob says of its pods: a RayJob's word on the
    clusters it made comes before what those clusters say themselves."""
    for owner, said in ray.snapshot_owners(spec, clusters).items():
        if spec.kind == ray.JOB:
            made[spec.namespace, owner] = said
        else:
            made.setdefault((spec.namespace, owner), said)


def _adopted(
    kept: list[tuple[Doc, Converted, Timing]],
    made: Mapping[tuple[str, str], JobSpec | ControllerSpec],
) -> list[tuple[Doc, Converted, Timing]]:
    """``kept`` with each pod of a dropped owner told what that owner says of its pods."""
    if not made:
        return kept
    present: dict[tuple[str, str], int] = {}
    for _, spec, _ in kept:
        if isinstance(spec, PodSpec):
            key = (spec.namespace, spec.owner)
            present[key] = present.get(key, 0) + 1
    out: list[tuple[Doc, Converted, Timing]] = []
    for doc, spec, timing in kept:
        owner = made.get((spec.namespace, spec.owner)) if isinstance(spec, PodSpec) else None
        if owner is not None and isinstance(spec, PodSpec):
            spec = adopted_by(spec, owner, present[spec.namespace, spec.owner])
        out.append((doc, spec, timing))
    return out


def _timing(doc: Doc) -> Timing:
    try:
        return timing_from_dict(doc.obj, doc.label)
    except InputError as exc:
        raise exc.located(source=doc.source, obj=doc.label) from None


def _paths(path: str) -> list[str]:
    """``path`` itself, or the manifest files of the directory ``path`` (sorted)."""
    if path != "-" and os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(_EXTENSIONS))
        files = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
        if not files:
            raise InputError("directory holds no *.yaml, *.yml or *.json file", source=path)
        return files
    return [path]


def read_documents(path: str | os.PathLike[str]) -> list[tuple[str, object]]:
    """The YAML documents of one file (``-``: standard input), each paired with its path; read
    by :mod:`phalanx.k8s.yamlio` (no key twice, at most 1,000 levels deep, UTF-8)."""
    source = os.fspath(path)
    if source == "-":
        return [("<stdin>", doc) for doc in load_all(sys.stdin.read(), "<stdin>")]
    return [(source, doc) for doc in load_all(read_text(source), source)]


def manifest_documents(path: str | os.PathLike[str]) -> list[tuple[str, object]]:
    """The documents of a file, of every manifest file in a directory, or of ``-``."""
    docs: list[tuple[str, object]] = []
    for file in _paths(os.fspath(path)):
        docs.extend(read_documents(file))
    return docs


def load_files(paths: Sequence[str | os.PathLike[str]], *, seed: int = 0) -> Workload:
    """Read multi-document YAML files (or directories of them, or ``-``) and return their
    workload (see the module docstring)."""
    docs: list[tuple[str, object]] = []
    for path in paths:
        docs.extend(manifest_documents(path))
    if paths and all(doc is None for _, doc in docs):  # as ``kubectl apply``: no objects
        names = ", ".join(os.fspath(p) for p in paths)
        raise InputError("no Kubernetes objects in the file (empty or comments only)", source=names)
    return load_documents(docs, seed=seed)
