"""JobSet ``jobset.x-k8s.io/v1alpha2`` → its child Jobs, as the JobSet controller makes them.

Each ``spec.replicatedJobs[]`` entry (``name``, ``replicas`` default 1, ``template``: a Job
template) yields ``replicas`` Jobs named ``JOBSET-NAME-INDEX``; the Job controller then keeps
``parallelism`` pods of each (``JOB-INDEX``). A JobSet declares no gang by itself: its pods form
gangs only where its templates say so (a Workload ``workloadRef``/``schedulingGroup``, a
PodGroup label, or the pod-level declarations of Koordinator, Kueue, YuniKorn or KAI), or
when the JobSet carries Kueue's label ``kueue.x-k8s.io/queue-name``: Kueue admits such a JobSet
whole, so its pods are then one gang in that queue, named after the JobSet, each replicated
job a role of all its pods (:func:`phalanx.k8s.apis.kueue.job_gang`). ``dependsOn``
(:mod:`~phalanx.k8s.kinds.depends_on`) makes a Job wait for the replicated jobs it names; those
run before it, outside Kueue's gang. ``successPolicy``, ``failurePolicy``, ``startupPolicy``,
``network`` and ``coordinator`` are not modelled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import ControllerSpec, JobSpec
from phalanx.k8s.apis import kueue
from phalanx.k8s.apis.owner import owner_queue
from phalanx.k8s.fields import Obj, as_mapping, child, fail, get_int, get_list, get_mapping, get_str
from phalanx.k8s.kinds.common import snapshot_member
from phalanx.k8s.kinds.depends_on import job_dependencies, read_depends_on, waited_for
from phalanx.k8s.meta import (
    annotations_of,
    describing,
    labels_of,
    name_of,
    namespace_of,
    object_label,
    root,
)
from phalanx.k8s.objects import job_spec
from phalanx.k8s.priority import PriorityTable

KIND = "JobSet"
GROUP = "jobset.x-k8s.io"


def jobset_from_dict(obj: Mapping[str, Any], priorities: PriorityTable) -> ControllerSpec:
    with describing(object_label(obj, KIND, namespaced=True)):
        top = root(obj)
        name = name_of(top)
        namespace = namespace_of(top)
        queue = owner_queue(labels_of(top))
        spec = get_mapping(top, "spec", "")
        items = get_list(spec, "replicatedJobs", "spec")
        if not items:
            fail("spec.replicatedJobs", "at least one replicated job is required")
        read: list[tuple[str, Obj, str, int]] = []  # (replicated job, item, path, replicas)
        seen: set[str] = set()
        for i, raw in enumerate(items):
            path = child("spec.replicatedJobs", i)
            item = as_mapping(raw, path)
            rj = get_str(item, "name", path)
            if not rj:
                fail(child(path, "name"), "is required")
            if rj in seen:
                fail(child(path, "name"), f"duplicate replicated job {rj!r}")
            seen.add(rj)
            replicas = get_int(item, "replicas", path, minimum=0)
            read.append((rj, item, path, 1 if replicas is None else replicas))
        deps = read_depends_on([(rj, item, path) for rj, item, path, _ in read])
        names = {rj: [f"{name}-{rj}-{index}" for index in range(n)] for rj, _, _, n in read}
        jobs: list[tuple[str, JobSpec]] = []  # (replicated job, Job)
        for rj, item, path, _ in read:
            template = get_mapping(item, "template", path)
            after = job_dependencies(deps[rj], names)
            for job_name in names[rj]:
                try:
                    job = job_spec(
                        template, priorities, name=job_name, namespace=namespace, queue=queue
                    )
                except InputError as exc:
                    raise exc.located(field=child(path, "template")) from None
                jobs.append((rj, dataclasses.replace(job, depends_on=after)))
        if kueue.QUEUE_NAME in labels_of(top):
            return ControllerSpec(KIND, namespace, name, jobs=admitted_whole(jobs, name, top))
        return ControllerSpec(KIND, namespace, name, jobs=tuple(job for _, job in jobs))


def admitted_whole(
    jobs: list[tuple[str, JobSpec]], name: str, top: Mapping[str, Any], kind: str = KIND
) -> tuple[JobSpec, ...]:
    """The JobSet's (or a TrainJob's) Jobs with their pods in the one gang Kueue admits (see
    the module's docstring): each replicated job a role of all its pods, but those another one
    waits for (``dependsOn``), which run before it."""
    first = waited_for(jobs)  # they run before the others exist: outside the gang
    roles: dict[str, int] = {}
    for rj, job in jobs:
        if rj not in first:
            roles[rj] = roles.get(rj, 0) + job.at_once
    out = []
    for rj, job in jobs:
        if rj in first:
            out.append(job)
            continue
        member = kueue.job_gang(
            job.template,
            annotations_of(top),
            name=name,
            count=sum(roles.values()),
            roles=roles,
            role=rj,
            kind=kind,
        )
        out.append(dataclasses.replace(job, template=member))
    return tuple(out)


def snapshot_owners(spec: ControllerSpec) -> dict[str, JobSpec | ControllerSpec]:
    """``Kind/NAME`` → what the JobSet (or the TrainJob that made it) says of the pods a
    snapshot holds of it, for each owner they may name (its Jobs, the JobSet): its Kueue gang
    (if any) without role minimums, as the gang of the pods present (their roles unknown)."""
    jobs = [dataclasses.replace(job, template=snapshot_member(job.template)) for job in spec.jobs]
    whole = dataclasses.replace(spec, jobs=tuple(jobs))
    owners: dict[str, JobSpec | ControllerSpec] = {f"Job/{job.name}": job for job in jobs}
    return owners | {f"{KIND}/{spec.name}": whole}


def made_by(spec: ControllerSpec) -> set[tuple[str, str, str, str]]:
    """``(API group, kind, namespace, name)`` of the JobSet and of its Jobs
    (``NAME-RJ-INDEX``): a snapshot object owned by any of them means the JobSet already
    runs, its Jobs' pods are in the input."""
    ns = spec.namespace
    return {(GROUP, KIND, ns, spec.name)} | {("batch", "Job", ns, job.name) for job in spec.jobs}
