"""The Job controller: turns a ``batch/v1`` Job into pods, as kube-controller-manager does.

It keeps up to ``parallelism`` pods active until ``completions`` pods have succeeded (default:
``completions = parallelism``). Pods are named ``JOB-INDEX``. A pod the API server refuses
(ResourceQuota) is simply not created; the controller tries again whenever quota may have
freed up in that namespace (a pod finished or was deleted, a quota went away).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from phalanx.api.specs import JobSpec, PodSpec
from phalanx.traces._gangs import paused_gc


@dataclass(slots=True)
class JobRun:
    spec: JobSpec
    next_index: int = 0
    active: int = 0
    succeeded: int = 0
    deleted: bool = False
    refusal: str | None = None  # why the last pod creation failed

    @property
    def target(self) -> int:
        completions = self.spec.completions
        return self.spec.parallelism if completions is None else completions

    def wanted(self) -> int:
        if self.deleted:
            return 0
        room = self.spec.parallelism - self.active
        return max(0, min(room, self.target - self.succeeded - self.active))


#: Creates a pod; returns None when created, else the API server's refusal.
CreatePod = Callable[[PodSpec], str | None]


class JobController:
    def __init__(self, create_pod: CreatePod) -> None:
        self.create_pod = create_pod
        self.jobs: dict[str, JobRun] = {}

    def add(self, job: JobSpec) -> None:
        run = self.jobs[f"{job.namespace}/{job.name}"] = JobRun(job)
        self.sync(run)

    def sync(self, run: JobRun) -> None:
        """Create the pods ``run`` still wants: O(1) each (pods share the template's
        mappings), so a Job of a million pods expands in time linear in its size."""
        template = run.spec.template
        fields = {f.name: getattr(template, f.name) for f in dataclasses.fields(template)}
        with paused_gc():
            for _ in range(run.wanted()):
                fields["name"] = f"{run.spec.name}-{run.next_index}"
                refusal = self.create_pod(PodSpec(**fields))
                run.refusal = refusal
                if refusal is not None:
                    return
                run.next_index += 1
                run.active += 1

    def owner_of(self, pod: PodSpec) -> JobRun | None:
        if not pod.owner.startswith("Job/"):
            return None
        return self.jobs.get(f"{pod.namespace}/{pod.owner[4:]}")

    def pod_gone(self, pod: PodSpec, *, succeeded: bool) -> None:
        run = self.owner_of(pod)
        if run is not None:
            run.active -= 1
            run.succeeded += succeeded

    def resync(self, namespace: str) -> None:
        """Retry creations held back by quota in ``namespace``."""
        for run in self.jobs.values():
            if run.spec.namespace == namespace and run.refusal is not None:
                self.sync(run)

    def delete(self, job: JobSpec) -> JobRun | None:
        run = self.jobs.get(f"{job.namespace}/{job.name}")
        if run is not None:
            run.deleted = True
        return run
