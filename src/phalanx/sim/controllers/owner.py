"""The owner controller: creates what a workload controller's object stands for.

When a :class:`ControllerSpec` appears (a Deployment, a Volcano Job, a PyTorchJob, a JobSet,
...), its gangs are created first, then its child Jobs (handed to the Job controller), then its
pods, in pod-set order: ``TEMPLATE-INDEX``, ``TEMPLATE`` (``fixed``) or ``TEMPLATE-xxxxx``
(``generated``, a suffix derived from the seed and the pod's number, as the API server completes
``generateName``). Work is linear in the number of pods. A pod the API server refuses
(ResourceQuota) is kept and created again when quota may have freed in its namespace, as the
ReplicaSet and Volcano controllers retry. Deleting the object stops its child Jobs; the
simulator removes the pods it owns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from phalanx.api.specs import ControllerSpec, GangSpec, PodSet, PodSpec
from phalanx.k8s.meta import generated_name
from phalanx.sim.controller import CreatePod, JobController, clones
from phalanx.traces._gangs import paused_gc

AddGang = Callable[[GangSpec], None]
#: Controllers whose pods serve until stopped (a snapshot's pods name them as their owner).
SERVING_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "LeaderWorkerSet"}
)


def pod_names(pod_set: PodSet, seed: int) -> Iterator[str]:
    base = pod_set.template.name
    for i in range(pod_set.start, pod_set.start + pod_set.count):
        if pod_set.naming == "fixed":
            yield base
        elif pod_set.naming == "generated":
            yield generated_name(f"{base}-", seed, i)
        else:
            yield f"{base}-{i}"


class OwnerController:
    def __init__(
        self, create_pod: CreatePod, add_gang: AddGang, jobs: JobController, seed: int
    ) -> None:
        self.create_pod = create_pod
        self.add_gang = add_gang
        self.jobs = jobs
        self.seed = seed
        self.owners: dict[str, ControllerSpec] = {}  # "Kind/name" in a namespace → spec
        self.refused: dict[str, list[PodSpec]] = {}  # namespace → pods to create again

    def add(self, spec: ControllerSpec) -> None:
        self.owners[f"{spec.namespace}/{spec.owner}"] = spec
        for gang in spec.gangs:
            self.add_gang(gang)
        for job in spec.jobs:
            self.jobs.add(job)
        with paused_gc():
            for pod_set in spec.pod_sets:
                for pod in clones(pod_set.template, pod_names(pod_set, self.seed)):
                    self._create(pod)

    def _create(self, pod: PodSpec) -> None:
        if self.create_pod(pod) is not None:
            self.refused.setdefault(pod.namespace, []).append(pod)

    def resync(self, namespace: str) -> None:
        """Create again the pods quota refused in ``namespace`` (those still refused stay)."""
        waiting = self.refused.pop(namespace, [])
        for pod in waiting:
            if f"{pod.namespace}/{pod.owner}" in self.owners:
                self._create(pod)

    def delete(self, spec: ControllerSpec) -> None:
        self.owners.pop(f"{spec.namespace}/{spec.owner}", None)
        for job in spec.jobs:
            self.jobs.delete(job)

    def serves(self, pod: PodSpec) -> bool:
        """Is ``pod`` a serving replica (Deployment, StatefulSet, ...) that runs until stopped?"""
        owner = self.owners.get(f"{pod.namespace}/{pod.owner}")
        if owner is not None:
            return owner.service
        return pod.owner.partition("/")[0] in SERVING_KINDS
