"""Kueue-managed controller objects: a Job or JobSet labelled ``kueue.x-k8s.io/queue-name`` is
one gang in that queue (Kueue admits it whole), read from manifests written the way Kueue's
users write them, and run end to end through ``simulate``; and the queue label Kueue's and
KAI-Scheduler's users put on the object they submit reaches every pod it makes."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from phalanx.api.errors import InputError
from phalanx.api.specs import ControllerSpec, JobSpec
from phalanx.k8s import load_documents
from phalanx.sim.simulator import SimOptions, simulate

POD = "containers: [{name: c, image: i, resources: {requests: {nvidia.com/gpu: '4'}}}]"


def kueue_job(name: str, parallelism: int, extra_meta: str = "", extra_spec: str = "") -> str:
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: team-a
  labels: {{kueue.x-k8s.io/queue-name: user-queue}}
  annotations: {{phalanx.dev/duration: 1h{extra_meta}}}
spec:
  suspend: true
  parallelism: {parallelism}
  completions: {parallelism}
  {extra_spec}
  template: {{spec: {{restartPolicy: Never, {POD}}}}}
"""


QUEUES = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: team-a, name: user-queue}
spec: {clusterQueue: research}
"""

NODES = "\n---\n".join(
    f"""apiVersion: v1
kind: Node
metadata: {{name: n{i}}}
status: {{allocatable: {{cpu: '32', memory: 256Gi, nvidia.com/gpu: '8', pods: '110'}}}}"""
    for i in range(2)
)


def load(text: str) -> list[Any]:
    return [
        item.spec for item in load_documents(("m.yaml", d) for d in yaml.safe_load_all(text)).items
    ]


def test_a_kueue_job_is_one_gang_of_its_parallelism_in_its_local_queue() -> None:
    (job,) = load(kueue_job("train", 3))
    assert isinstance(job, JobSpec)
    gang = job.template.declared_gang
    assert gang is not None and (gang.name, gang.min_member, gang.queue) == (
        "train",
        3,
        "user-queue",
    )
    assert job.template.queue == "user-queue" and job.template.gang_key == "team-a/train"


def test_partial_admission_sets_the_minimum_and_completions_cap_the_count() -> None:
    (job,) = load(kueue_job("sweep", 6, ', kueue.x-k8s.io/job-min-parallelism: "2"'))
    assert job.template.declared_gang.min_member == 2
    (short,) = load(kueue_job("short", 4).replace("completions: 4", "completions: 2"))
    assert short.template.declared_gang.min_member == 2


def test_a_template_that_declares_its_own_gang_keeps_it() -> None:
    text = kueue_job("own", 4).replace(
        "template: {spec:",
        "template: {metadata: {labels: {scheduling.x-k8s.io/pod-group: pg}}, spec:",
    )
    group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
    group += "metadata: {name: pg, namespace: team-a}\nspec: {minMember: 4}\n---\n"
    _, job = load(group + text)
    assert job.template.gang is not None and job.template.gang.name == "pg"
    assert job.template.declared_gang is None


@pytest.mark.parametrize("value", ['"0"', '"7"', '"two"'])
def test_a_bad_min_parallelism_is_one_located_line(value: str) -> None:
    with pytest.raises(InputError) as info:
        load(kueue_job("bad", 6, f", kueue.x-k8s.io/job-min-parallelism: {value}"))
    line = info.value.line()
    assert "Job team-a/bad" in line
    assert "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]" in line
    assert "from 1 to the Job's 6 pods" in line


def test_a_kueue_jobset_is_one_gang_each_replicated_job_a_role() -> None:
    text = f"""apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: sft, namespace: team-a, labels: {{kueue.x-k8s.io/queue-name: user-queue}}}}
spec:
  replicatedJobs:
  - {{name: driver, template: {{spec: {{template: {{spec: {{{POD}}}}}}}}}}}
  - name: workers
    replicas: 2
    template: {{spec: {{parallelism: 2, template: {{spec: {{{POD}}}}}}}}}
"""
    (spec,) = load(text)
    assert isinstance(spec, ControllerSpec)
    gang = spec.jobs[0].template.declared_gang
    assert all(job.template.declared_gang == gang for job in spec.jobs)
    assert gang is not None and gang.name == "sft" and gang.min_member == 5
    assert gang.role_minimums == {"driver": 1, "workers": 4}
    assert [job.template.role for job in spec.jobs] == ["driver", "workers", "workers"]


def test_kueue_jobs_run_as_gangs_within_their_cluster_queue() -> None:
    """Two 2-pod Jobs of 8 GPUs each, a ClusterQueue of 8 GPUs on a 16-GPU cluster: they run
    one after the other, each whole (before, each pod was its own gang and the queue label on
    the Job was not read, so both ran at once)."""
    text = "\n---\n".join([NODES, QUEUES, kueue_job("first", 2), kueue_job("second", 2)])
    result = simulate(load_documents(("m.yaml", d) for d in yaml.safe_load_all(text)), SimOptions())
    runs = {g.name: (g.min_member, g.queue, g.start) for g in result.gangs}
    assert runs == {"first": (2, "research", 0.0), "second": (2, "research", 3600.0)}


def test_a_snapshots_running_kueue_job_counts_against_its_queue() -> None:
    """A ``kubectl get -o yaml`` snapshot: Job ``train-a`` (8 GPUs, its ClusterQueue's whole
    quota) runs as two pods that name it in ``ownerReferences``; suspended Job ``train-b``
    waits in the same LocalQueue. The running pods are ``train-a``'s gang in that queue, with
    the Job's duration, so ``train-b`` starts when they end (it used to start at once: the
    pods were lone pods in no queue, running the default duration)."""
    running = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"train-a-{i}-x7k2p",
                "namespace": "team-a",
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": "train-a", "controller": True}
                ],
            },
            "spec": {
                "nodeName": f"n{i}",
                **yaml.safe_load("{" + POD + "}"),
            },
            "status": {"phase": "Running"},
        }
        for i in range(2)
    ]
    snapshot = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            *yaml.safe_load_all(NODES),
            *yaml.safe_load_all(QUEUES),
            yaml.safe_load(kueue_job("train-a", 2).replace("suspend: true", "suspend: false")),
            *running,
            yaml.safe_load(kueue_job("train-b", 2)),
        ],
    }
    result = simulate(load_documents([("snapshot.yaml", snapshot)]), SimOptions())
    runs = {g.name: (g.min_member, g.queue, g.start, g.finish) for g in result.gangs}
    assert runs == {
        "train-a": (2, "research", 0.0, 3600.0),
        "train-b": (2, "research", 3600.0, 7200.0),
    }


PYTORCHJOB = f"""apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: ddp, namespace: team-a, labels: {{LABEL}}}}
spec:
  pytorchReplicaSpecs:
    Master: {{replicas: 1, template: {{spec: {{{POD}}}}}}}
    Worker: {{replicas: 3, template: {{spec: {{{POD}}}}}}}
"""


@pytest.mark.parametrize(
    "label", ["kai.scheduler/queue: team-a", "kueue.x-k8s.io/queue-name: user-queue"]
)
def test_the_queue_label_on_a_kubeflow_job_is_its_gangs_queue(label: str) -> None:
    (spec,) = load(PYTORCHJOB.replace("LABEL", label))
    (gang,) = spec.gangs
    assert gang.min_member == 4 and gang.queue == label.split(": ")[1]
    assert {s.template.queue for s in spec.pod_sets} == {gang.queue}


def test_a_kai_labelled_job_puts_its_pods_in_the_queue_one_by_one() -> None:
    """KAI groups a plain Job's pods with ``minMember`` 1: the queue, and no gang."""
    text = kueue_job("batch", 3).replace(
        "kueue.x-k8s.io/queue-name: user-queue", "kai.scheduler/queue: team-a"
    )
    (job,) = load(text)
    assert job.template.queue == "team-a"
    assert job.template.gang is None and job.template.declared_gang is None


def test_a_deployments_queue_label_reaches_its_pods() -> None:
    text = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: serve, namespace: team-a, labels: {{kai.scheduler/queue: inference}}}}
spec: {{replicas: 2, template: {{spec: {{{POD}}}}}}}
"""
    (spec,) = load(text)
    assert [s.template.queue for s in spec.pod_sets] == ["inference"]


def test_a_suspended_job_without_a_queue_manager_makes_no_pods_and_is_listed() -> None:
    """Kubernetes makes no pods for a suspended Job until something resumes it; without
    Kueue's label nothing will (with it, phalanx admits it in Kueue's place, above)."""
    paused = kueue_job("paused", 2).replace("labels: {kueue.x-k8s.io/queue-name: user-queue}", "")
    text = "\n---\n".join([NODES, paused, kueue_job("admitted", 2).replace("team-a", "team-b")])
    result = simulate(load_documents(("m.yaml", d) for d in yaml.safe_load_all(text)), SimOptions())
    assert result.suspended == ["team-a/paused"]
    assert [g.name for g in result.gangs] == ["admitted"]
    assert result.to_json()["suspended_jobs"] == ["team-a/paused"]


def test_a_deleted_local_queue_leaves_its_pending_jobs_inadmissible_at_once() -> None:
    """The LocalQueue is deleted at 30m: ``first`` runs on, ``second`` (pending) names a queue
    that no longer exists and waits, as Kueue leaves it inadmissible. The deletion did not
    count as a change of the queues, so ``second`` kept its ClusterQueue and started when
    ``first`` ended."""
    queues = QUEUES.replace(
        "metadata: {namespace: team-a, name: user-queue}",
        "metadata: {namespace: team-a, name: user-queue, "
        "annotations: {phalanx.dev/delete-after: 30m}}",
    )
    text = "\n---\n".join([NODES, queues, kueue_job("first", 2), kueue_job("second", 2)])
    result = simulate(load_documents(("m.yaml", d) for d in yaml.safe_load_all(text)), SimOptions())
    runs = {g.name: (g.start, g.reason.split(":")[0]) for g in result.gangs}
    assert runs == {"first": (0.0, ""), "second": (None, "queue 'user-queue' does not exist")}


def test_a_job_naming_a_local_queue_that_does_not_exist_waits_and_says_so() -> None:
    """A typo in ``kueue.x-k8s.io/queue-name``: Kueue leaves the Job inadmissible; it used to
    run here in a queue of its own, with no quota."""
    typo = kueue_job("typo", 1).replace("queue-name: user-queue", "queue-name: user-queu")
    text = "\n---\n".join([NODES, QUEUES, typo, kueue_job("good", 1)])
    result = simulate(load_documents(("m.yaml", d) for d in yaml.safe_load_all(text)), SimOptions())
    runs = {g.name: (g.start, g.reason) for g in result.gangs}
    assert runs["good"] == (0.0, "")
    assert runs["typo"][0] is None
    assert runs["typo"][1].startswith(
        "queue 'user-queu' does not exist: no Queue or ClusterQueue of that name, nor a "
        "LocalQueue team-a/user-queu"
    )


def test_a_local_queue_pointing_to_a_missing_cluster_queue_is_named_in_the_reason() -> None:
    """The LocalQueue exists but its ClusterQueue does not (a typo in ``clusterQueue``): the
    Job waits, and the reason names both, not only the ClusterQueue the user never typed."""
    queues = QUEUES.replace("spec: {clusterQueue: research}", "spec: {clusterQueue: reserch}")
    text = "\n---\n".join([NODES, queues, kueue_job("job", 1)])
    result = simulate(load_documents(("m.yaml", d) for d in yaml.safe_load_all(text)), SimOptions())
    (gang,) = result.gangs
    assert gang.start is None
    assert gang.reason.startswith(
        "LocalQueue team-a/user-queue points to ClusterQueue 'reserch', which does not exist"
    )
