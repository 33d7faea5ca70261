"""What a TrainJob changes in the pods of the runtime's replicated jobs, in every Trainer version.

- v2.0: ``spec.podSpecOverrides[] {targetJobs[{name}], nodeSelector, tolerations,
  schedulingGates, …}``;
- v2.1: ``spec.podTemplateOverrides[] {targetJobs[{name}], metadata, spec {nodeSelector,
  affinity, tolerations, schedulingGates, …}}``;
- v2.2 on: ``spec.runtimePatches[] {manager, trainingRuntimeSpec.template.spec
  .replicatedJobs[] {name, template.spec.template {metadata, spec}}}`` (Kueue writes its
  flavor's node selector here).

The JobSet's own annotations (the Volcano queue's): ``spec.annotations`` (v2.0, v2.1) and a
runtime patch's ``trainingRuntimeSpec.template.metadata.annotations`` (v2.2 on).

Of a pod: ``metadata.labels`` and ``annotations`` and ``nodeSelector`` are merged key by key
(the patch wins), ``tolerations`` and ``schedulingGates`` added, ``affinity`` replaced — what
decides placement. Patches apply in the order written. Their containers, volumes and security
settings are not read.
"""

from __future__ import annotations

from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    child,
    fail,
    get_list,
    get_mapping,
    get_str,
    get_string_map,
)
from phalanx.k8s.placement import placement_from

#: replicated job → its pod patches: (pod metadata, pod spec), in order
Patches = dict[str, list[tuple[Obj, Obj]]]
_MERGED = ("nodeSelector",)
_ADDED = ("tolerations", "schedulingGates")
_REPLACED = ("affinity",)


def pod_patches(spec: Obj) -> Patches:
    """Every pod patch of the TrainJob ``spec``, validated, by replicated job."""
    patches: Patches = {}
    for i, raw in enumerate(get_list(spec, "podSpecOverrides", "spec")):
        path = child("spec.podSpecOverrides", i)
        item = as_mapping(raw, path)
        _add(patches, _targets(item, path), {}, _checked(item, path))
    for i, raw in enumerate(get_list(spec, "podTemplateOverrides", "spec")):
        path = child("spec.podTemplateOverrides", i)
        item = as_mapping(raw, path)
        meta = _meta(item, path)
        spec_path = child(path, "spec")
        _add(
            patches,
            _targets(item, path),
            meta,
            _checked(get_mapping(item, "spec", path), spec_path),
        )
    for i, raw in enumerate(get_list(spec, "runtimePatches", "spec")):
        _runtime_patch(patches, as_mapping(raw, child("spec.runtimePatches", i)), i)
    return patches


def _runtime_patch(patches: Patches, patch: Obj, index: int) -> None:
    path = child("spec.runtimePatches", index)
    runtime_spec = get_mapping(patch, "trainingRuntimeSpec", path)
    path = child(path, "trainingRuntimeSpec")
    template = get_mapping(runtime_spec, "template", path)
    jobs_path = child(path, "template.spec")
    jobs = get_list(
        get_mapping(template, "spec", child(path, "template")), "replicatedJobs", jobs_path
    )
    for j, raw in enumerate(jobs):
        job_path = child(child(jobs_path, "replicatedJobs"), j)
        job = as_mapping(raw, job_path)
        name = get_str(job, "name", job_path)
        if not name:
            fail(child(job_path, "name"), "is required")
        job_template = get_mapping(job, "template", job_path)
        job_spec = get_mapping(job_template, "spec", child(job_path, "template"))
        pod_path = child(job_path, "template.spec.template")
        pod = get_mapping(job_spec, "template", child(job_path, "template.spec"))
        spec_path = child(pod_path, "spec")
        _add(
            patches,
            [name],
            _meta(pod, pod_path),
            _checked(get_mapping(pod, "spec", pod_path), spec_path),
        )


def jobset_annotations(spec: Obj) -> dict[str, str]:
    """The annotations the TrainJob ``spec`` gives its JobSet (see the module's docstring)."""
    annotations = get_string_map(spec, "annotations", "spec")
    for i, raw in enumerate(get_list(spec, "runtimePatches", "spec")):
        path = child("spec.runtimePatches", i)
        runtime_spec = get_mapping(as_mapping(raw, path), "trainingRuntimeSpec", path)
        path = child(path, "trainingRuntimeSpec")
        template = get_mapping(runtime_spec, "template", path)
        annotations.update(_meta(template, child(path, "template")).get("annotations", {}))
    return annotations


def _meta(obj: Obj, path: str) -> dict[str, dict[str, str]]:
    """``obj.metadata``'s labels and annotations, validated."""
    meta = get_mapping(obj, "metadata", path)
    where = child(path, "metadata")
    return {key: get_string_map(meta, key, where) for key in ("labels", "annotations")}


def _targets(item: Obj, path: str) -> list[str]:
    names = []
    for i, raw in enumerate(get_list(item, "targetJobs", path)):
        where = child(child(path, "targetJobs"), i)
        name = get_str(as_mapping(raw, where), "name", where)
        if not name:
            fail(child(where, "name"), "is required")
        names.append(name)
    return names


def _checked(spec: Obj, path: str) -> Obj:
    """The placement fields of a patch's pod ``spec`` (validated as a pod's would be)."""
    placement_from(spec, path)
    for i, gate in enumerate(get_list(spec, "schedulingGates", path)):
        where = child(child(path, "schedulingGates"), i)
        if not get_str(as_mapping(gate, where), "name", where):
            fail(child(where, "name"), "is required")
    return {key: spec[key] for key in (*_MERGED, *_ADDED, *_REPLACED) if spec.get(key) is not None}


def _add(patches: Patches, targets: list[str], meta: Obj, spec: Obj) -> None:
    for name in targets:
        patches.setdefault(name, []).append((meta, spec))


def patched(template: Obj, patches: list[tuple[Obj, Obj]]) -> Obj:
    """The pod ``template`` with ``patches`` applied (see the module's docstring)."""
    meta = dict(get_mapping(template, "metadata", ""))
    spec = dict(get_mapping(template, "spec", ""))
    for patch_meta, patch_spec in patches:
        for key in ("labels", "annotations"):
            if patch_meta.get(key):
                meta[key] = {**get_mapping(meta, key, ""), **get_mapping(patch_meta, key, "")}
        for key in _MERGED:
            if key in patch_spec:
                spec[key] = {**get_mapping(spec, key, ""), **get_mapping(patch_spec, key, "")}
        for key in _ADDED:
            if key in patch_spec:
                spec[key] = get_list(spec, key, "") + get_list(patch_spec, key, "")
        for key in _REPLACED:
            if key in patch_spec:
                spec[key] = patch_spec[key]
    return {**template, "metadata": meta, "spec": spec}
