"""The Job controller: turns a ``batch/v1`` Job into pods, as kube-controller-manager does.

It keeps up to ``parallelism`` pods active until ``completions`` pods have succeeded (default:
``completions = parallelism``): when a pod succeeds, the next is created if completions remain.
Pods are named ``JOB-INDEX``. A pod the API server refuses
(ResourceQuota) is simply not created; the controller tries again whenever quota may have
freed up in that namespace (a pod finished or was deleted, a quota went away).

Pods are made in bulk: :func:`clones` copies the template with only the name changed (its
mappings shared, not copied), and a runner that offers ``create_pods`` gets them in one call,
in order, stopping at the first refusal as pod-by-pod creation would.

A Job of a JobSet may wait for others (``dependsOn``, :class:`~phalanx.api.specs
.JobDependency`): it wants no pod until every Job it names is complete (all its pods
succeeded) or ready (all the pods it runs at once are running: the runner reports each pod
whose gang's work starts, :meth:`JobController.pod_running`). Once they are, it is released
for good and synced like any other, all its pods at once; Jobs released by one event are
synced together, so a gang of their pods arrives whole.

A runner may also offer a :class:`Deferral` (the simulator's :mod:`phalanx.sim.unborn`): it
says how many of the pods a Job wants are made now; the others are *deferred* — wanted and
counted as active, as the real controller would have created them, but made by the runner
later, when they could matter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

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
    due: bool = False  # a pod succeeded since the last sync: more may be wanted
    released: bool = True  # False while it waits for the Jobs it depends on
    watched: bool = False  # another Job waits for it: its running pods are tracked
    running: set[str] = field(default_factory=set)  # keys of its running pods (when watched)

    @property
    def target(self) -> int:
        completions = self.spec.completions
        return self.spec.parallelism if completions is None else completions

    def wanted(self) -> int:
        if self.deleted or self.spec.suspended or not self.released:
            return 0
        room = self.spec.parallelism - self.active
        return max(0, min(room, self.target - self.succeeded - self.active))

    def reached(self, status: str) -> bool:
        """Has the Job reached a JobSet ``dependsOn`` status (``Complete`` or ``Ready``)?"""
        left = self.target - self.succeeded
        if left <= 0 or status == "Complete":
            return left <= 0
        return len(self.running) >= min(self.spec.parallelism, left)


#: Creates a pod; returns None when created, else the API server's refusal.
CreatePod = Callable[[PodSpec], str | None]
#: Creates pods in order until one is refused: how many were created, and the refusal (None:
#: all were).
CreatePods = Callable[[list[PodSpec]], tuple[int, str | None]]


class Deferral(Protocol):
    def room(self, run: JobRun, count: int) -> int:
        """How many of the ``count`` pods ``run`` wants now are made at once (the first ones)."""

    def defer(self, run: JobRun, first: int, count: int, made: int) -> None:
        """Pods ``first`` … ``first + count - 1`` of ``run`` are wanted but not made yet (the
        ``made`` pods before them were made in the same sync)."""


def clones(template: PodSpec, names: Iterable[str]) -> list[PodSpec]:
    """``dataclasses.replace(template, name=name)`` for each name, at half the cost: the
    frozen template's slots are copied through their descriptors (its mappings are shared,
    as ``replace`` shares them)."""
    setters = [
        (getattr(PodSpec, f.name).__set__, getattr(template, f.name))
        for f in dataclasses.fields(template)
        if f.name != "name"
    ]
    set_name = getattr(PodSpec, "name").__set__  # noqa: B009 (the slot's descriptor)
    new = object.__new__
    out = []
    for name in names:
        pod = new(PodSpec)
        for setter, value in setters:
            setter(pod, value)
        set_name(pod, name)
        out.append(pod)
    return out


class JobController:
    def __init__(
        self,
        create_pod: CreatePod,
        create_pods: CreatePods | None = None,
        deferral: Deferral | None = None,
    ) -> None:
        self.create_pod = create_pod
        self.create_pods = create_pods
        self.deferral = deferral
        self.jobs: dict[str, JobRun] = {}
        self.waiting: dict[str, list[JobRun]] = {}  # Job key → the Jobs that wait for it

    def add(self, job: JobSpec) -> None:
        run = self.jobs[f"{job.namespace}/{job.name}"] = JobRun(job)
        if f"{job.namespace}/{job.name}" in self.waiting:
            run.watched = True
        if job.depends_on:
            for key in self._dependencies(job):
                self.waiting.setdefault(key, []).append(run)
                if key in self.jobs:
                    self.jobs[key].watched = True
            run.released = self._met(run)
        self.sync(run)

    @staticmethod
    def _dependencies(job: JobSpec) -> list[str]:
        return [f"{job.namespace}/{name}" for dep in job.depends_on for name in dep.jobs]

    def _met(self, run: JobRun) -> bool:
        ns = run.spec.namespace
        for dep in run.spec.depends_on:
            for name in dep.jobs:
                other = self.jobs.get(f"{ns}/{name}")
                if other is None or not other.reached(dep.status):
                    return False
        return True

    def _release(self, run: JobRun) -> list[JobRun]:
        """The Jobs waiting for ``run`` that may now be created (marked released and due)."""
        released = []
        for waiter in self.waiting.get(f"{run.spec.namespace}/{run.spec.name}", ()):
            if not waiter.released and not waiter.deleted and self._met(waiter):
                waiter.released = waiter.due = True
                released.append(waiter)
        return released

    def sync(self, run: JobRun) -> None:
        """Create the pods ``run`` still wants: O(1) each (pods share the template's
        mappings), so a Job of a million pods expands in time linear in its size."""
        run.due = False
        wanted = run.wanted()
        if not wanted:
            return
        first, name = run.next_index, run.spec.name
        now = wanted if self.deferral is None else self.deferral.room(run, wanted)
        with paused_gc():
            pods = clones(run.spec.template, (f"{name}-{i}" for i in range(first, first + now)))
            if self.create_pods is not None:
                created, refusal = self.create_pods(pods)
            else:
                created, refusal = one_by_one(self.create_pod, pods)
        run.next_index += created
        run.active += created
        run.refusal = refusal
        if self.deferral is not None and refusal is None and wanted > now:
            self.deferral.defer(run, run.next_index, wanted - now, created)
            run.next_index += wanted - now
            run.active += wanted - now

    def owner_of(self, pod: PodSpec) -> JobRun | None:
        if not pod.owner.startswith("Job/"):
            return None
        return self.jobs.get(f"{pod.namespace}/{pod.owner[4:]}")

    def pod_gone(self, pod: PodSpec, *, succeeded: bool) -> None:
        """A pod of a Job is gone (the runner resyncs the namespace next)."""
        run = self.owner_of(pod)
        if run is not None:
            run.active -= 1
            run.succeeded += succeeded
            run.due |= succeeded
            if run.watched:
                run.running.discard(pod.key)
                if succeeded:
                    self._release(run)

    def pod_running(self, pod: PodSpec) -> bool:
        """A pod's work started: the Jobs that waited for its Job to be ready are created.
        Were any?"""
        run = self.owner_of(pod) if self.waiting else None
        if run is None or not run.watched:
            return False
        run.running.add(pod.key)
        released = self._release(run)
        for waiter in released:
            self.sync(waiter)
        return bool(released)

    def resync(self, namespace: str) -> None:
        """Retry creations held back by quota in ``namespace``, and replace pods that
        succeeded in Jobs with completions left."""
        for run in self.jobs.values():
            if run.spec.namespace == namespace and (run.refusal is not None or run.due):
                self.sync(run)

    def delete(self, job: JobSpec) -> JobRun | None:
        run = self.jobs.get(f"{job.namespace}/{job.name}")
        if run is not None:
            run.deleted = True
        return run


def one_by_one(create_pod: CreatePod, pods: list[PodSpec]) -> tuple[int, str | None]:
    """``pods`` created in order with ``create_pod`` until one is refused (a CreatePods)."""
    for created, pod in enumerate(pods):
        refusal = create_pod(pod)
        if refusal is not None:
            return created, refusal
    return len(pods), None
