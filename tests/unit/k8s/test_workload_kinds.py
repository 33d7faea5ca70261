"""Each new converter, table-driven: what it reads and, for bad input, the one located line."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from phalanx.api.errors import InputError
from phalanx.api.specs import ControllerSpec, GangSpec, JobSpec, PodSpec
from phalanx.k8s import load_documents
from phalanx.k8s.workloads import workload_from_dict

CONTAINER = "containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: '1'}}}]"


def load(text: str) -> list[Any]:
    docs = [("m.yaml", doc) for doc in yaml.safe_load_all(text)]
    return [item.spec for item in load_documents(docs).items]


def error(text: str) -> str:
    with pytest.raises(InputError) as info:
        load(text)
    return info.value.line()


def vcjob(spec: str) -> str:
    return (
        f"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: j}}\nspec: {spec}\n"
    )


def task(name: str, replicas: int, extra: str = "") -> str:
    return f"{{name: {name}, replicas: {replicas}, {extra} template: {{spec: {{{CONTAINER}}}}}}}"


def test_volcano_job_makes_its_podgroup_and_task_pods() -> None:
    text = vcjob(
        f"{{minAvailable: 3, queue: q1, tasks: [{task('ps', 1)}, "
        f"{task('worker', 4, 'minAvailable: 2,')}]}}"
    )
    (job,) = load(text)
    assert isinstance(job, ControllerSpec)
    (gang,) = job.gangs
    assert (gang.name, gang.min_member, gang.queue, gang.role_minimums) == (
        "j",
        3,
        "q1",
        {"worker": 2},
    )
    assert [(s.template.name, s.count, s.template.role) for s in job.pod_sets] == [
        ("j-ps", 1, "ps"),
        ("j-worker", 4, "worker"),
    ]
    assert all(s.template.scheduler_name == "volcano" for s in job.pod_sets)
    assert job.pod_sets[0].template.gang is not None


def test_task_completed_complete_job_sets_the_job_duration() -> None:
    master = task(
        "master",
        1,
        "policies: [{event: TaskCompleted, action: CompleteJob}],",
    ).replace(
        "template: {spec:", "template: {metadata: {annotations: {phalanx.dev/duration: 10m}}, spec:"
    )
    (job,) = load(vcjob(f"{{tasks: [{master}, {task('worker', 2)}]}}"))
    assert job.gangs[0].duration == 600
    assert ("TaskCompleted", "CompleteJob") in job.policies


def test_kubeflow_jobs_make_one_gang_of_all_replicas() -> None:
    text = f"""apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {{name: m}}
spec:
  runPolicy:
    activeDeadlineSeconds: 900
    schedulingPolicy: {{queue: q, scheduleTimeoutSeconds: 60}}
  mpiReplicaSpecs:
    Launcher: {{replicas: 1, template: {{spec: {{{CONTAINER}}}}}}}
    Worker: {{replicas: 3, template: {{spec: {{schedulerName: volcano, {CONTAINER}}}}}}}
"""
    (job,) = load(text)
    gang = job.gangs[0]
    assert (gang.min_member, gang.api, gang.queue, gang.timeout_seconds, gang.duration) == (
        4,
        "scheduling.volcano.sh",
        "q",
        60.0,
        900.0,
    )
    assert [(s.template.name, s.naming) for s in job.pod_sets] == [
        ("m-launcher", "fixed"),
        ("m-worker", "index"),
    ]


def test_controller_objects_carry_runtime_hints_and_deadlines_to_their_gang() -> None:
    """A Volcano Job's or a Kubeflow job's own annotations (and a Kubeflow runPolicy's
    activeDeadlineSeconds, an upper bound) are its gang's runtime hints and deadline."""
    volcano = vcjob(f"{{tasks: [{task('worker', 2)}]}}").replace(
        "metadata: {name: j}",
        "metadata: {name: j, annotations: {phalanx.dev/runtime-estimate: 2h, "
        "phalanx.dev/deadline: 6h}, labels: {kueue.x-k8s.io/max-exec-time-seconds: '9000'}}",
    )
    (job,) = load(volcano)
    gang = job.gangs[0]
    assert gang.runtime_hints == (("runtime-estimate", 7200.0), ("max-exec-time", 9000.0))
    assert gang.deadline is not None and gang.deadline.due(100.0) == 21700.0
    kubeflow = f"""apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: p}}
spec:
  runPolicy: {{activeDeadlineSeconds: 900}}
  pytorchReplicaSpecs:
    Master: {{replicas: 1, template: {{spec: {{{CONTAINER}}}}}}}
"""
    (job,) = load(kubeflow)
    assert job.gangs[0].runtime_hints == (("activeDeadlineSeconds", 900.0),)
    assert job.gangs[0].deadline is None


HINTS = (
    "annotations: {phalanx.dev/runtime-estimate: 2h, phalanx.dev/deadline: 6h, "
    "phalanx.dev/duration: 3h}, labels: {kueue.x-k8s.io/max-exec-time-seconds: '9000'}"
)


@pytest.mark.parametrize(
    "text",
    [
        f"apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {{name: g, {HINTS}}}\n"
        "spec: {minMember: 2, queue: q}\n",
        f"apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: g, {HINTS}}}\n"
        "spec: {schedulingPolicy: {gang: {minCount: 2}}}\n",
    ],
    ids=["kai", "workload-api"],
)
def test_podgroups_of_every_api_carry_runtime_hints_deadline_and_duration(text: str) -> None:
    """phalanx's annotations count on a KAI PodGroup and a Workload API PodGroup as on any
    PodGroup (they were once read only from pods, Volcano/coscheduling PodGroups and
    controllers, so a KAI gang's estimate was unknown)."""
    (gang,) = load(text)
    assert isinstance(gang, GangSpec)
    assert gang.runtime_hints == (("runtime-estimate", 7200.0), ("max-exec-time", 9000.0))
    assert gang.deadline is not None and gang.deadline.due(100.0) == 21700.0
    assert gang.duration == 10800.0


def test_a_workloads_annotations_reach_each_of_its_gangs() -> None:
    text = (
        f"apiVersion: scheduling.k8s.io/v1alpha1\nkind: Workload\nmetadata: {{name: w, {HINTS}}}\n"
        "spec: {podGroups: [{name: a, policy: {gang: {minCount: 2}}}]}\n"
    )
    workload = workload_from_dict(yaml.safe_load(text))
    gang = workload.gang("a", "r1")
    assert gang is not None and gang.name == "w-a-r1"
    assert gang.runtime_hints == (("runtime-estimate", 7200.0), ("max-exec-time", 9000.0))
    assert gang.deadline is not None and gang.duration == 10800.0


def test_jobset_makes_child_jobs_and_lws_makes_groups() -> None:
    jobset = f"""apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: js}}
spec:
  replicatedJobs:
    - name: w
      replicas: 2
      template: {{spec: {{parallelism: 2, template: {{spec: {{{CONTAINER}}}}}}}}}
"""
    (spec,) = load(jobset)
    assert [(j.name, j.parallelism) for j in spec.jobs] == [("js-w-0", 2), ("js-w-1", 2)]
    assert all(isinstance(j, JobSpec) and j.template.gang is None for j in spec.jobs)
    lws = f"""apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: l, annotations: {{phalanx.dev/gang-per-group: "true"}}}}
spec:
  replicas: 2
  leaderWorkerTemplate: {{size: 2, workerTemplate: {{spec: {{{CONTAINER}}}}}}}
"""
    (spec,) = load(lws)
    assert [g.name for g in spec.gangs] == ["l-0", "l-1"]
    assert [(s.template.name, s.count, s.start, s.template.role) for s in spec.pod_sets] == [
        ("l-0", 1, 0, "leader"),
        ("l-0", 1, 1, "worker"),
        ("l-1", 1, 0, "leader"),
        ("l-1", 1, 1, "worker"),
    ]


def pod(meta: str, spec: str = "") -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec: {{{spec}{CONTAINER}}}\n"


def test_pod_level_gangs_are_declared_by_their_pods() -> None:
    koord = (
        "{name: p, annotations: {gang.scheduling.koordinator.sh/name: g, "
        "gang.scheduling.koordinator.sh/min-available: '2', "
        "gang.scheduling.koordinator.sh/waiting-time: 5m}}"
    )
    (p,) = load(pod(koord))
    assert isinstance(p, PodSpec) and p.declared_gang == GangSpec(
        "default", "g", 2, "gang.scheduling.koordinator.sh", timeout_seconds=300
    )
    kueue = (
        "{name: p, labels: {kueue.x-k8s.io/pod-group-name: g, kueue.x-k8s.io/queue-name: lq}, "
        "annotations: {kueue.x-k8s.io/pod-group-total-count: '4'}}"
    )
    (p,) = load(pod(kueue, "schedulingGates: [{name: kueue.x-k8s.io/admission}], "))
    assert p.declared_gang is not None and p.declared_gang.min_member == 4
    assert (p.queue, p.gates) == ("lq", ("kueue.x-k8s.io/admission",))


BAD = [
    (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: research}\n"
        "spec: {weight: 0}\n",
        "Queue research: spec.weight: must be at least 1",
    ),
    (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: "
        "{name: cq, annotations: {phalanx.dev/submit-after: soon}}\n",
        "ClusterQueue cq: metadata.annotations[phalanx.dev/submit-after]: malformed duration",
    ),
    (
        vcjob(f"{{tasks: [{task('a', 1)}, {task('a', 1)}]}}"),
        "Job default/j: spec.tasks[1].name: duplicate task 'a'",
    ),
    (
        vcjob(f"{{tasks: [{task('a', 2, 'minAvailable: 3,')}]}}"),
        "Job default/j: spec.tasks[0].minAvailable: must not exceed replicas (2)",
    ),
    (
        vcjob(
            f"{{policies: [{{event: PodExploded, action: RestartJob}}], tasks: [{task('a', 1)}]}}"
        ),
        "Job default/j: spec.policies[0].events: unknown event 'PodExploded'",
    ),
    (vcjob("{tasks: []}"), "Job default/j: spec.tasks: at least one task is required"),
    (
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\n"
        "spec: {pytorchReplicaSpecs: {Chief: {replicas: 1}}}\n",
        "PyTorchJob default/p: spec.pytorchReplicaSpecs.Chief: unknown replica type",
    ),
    (
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\nspec: "
        f"{{runPolicy: {{schedulingPolicy: {{minAvailable: 5}}}}, pytorchReplicaSpecs: "
        f"{{Worker: {{replicas: 2, template: {{spec: {{{CONTAINER}}}}}}}}}}}\n",
        "spec.runPolicy.schedulingPolicy.minAvailable: must not exceed the job's 2 replicas",
    ),
    (
        pod("{name: p, annotations: {gang.scheduling.koordinator.sh/name: g}}"),
        "Pod default/p: metadata.annotations[gang.scheduling.koordinator.sh/min-available]: "
        "is required",
    ),
    (
        pod(
            "{name: p, annotations: {gang.scheduling.koordinator.sh/name: g, "
            "gang.scheduling.koordinator.sh/min-available: '1', "
            "gang.scheduling.koordinator.sh/mode: Loose}}"
        ),
        "gang.scheduling.koordinator.sh/mode]: must be Strict or NonStrict",
    ),
    (
        pod("{name: p, labels: {kueue.x-k8s.io/pod-group-name: g}}"),
        "kueue.x-k8s.io/pod-group-total-count]: is required with the label",
    ),
    (
        pod("{name: p, annotations: {yunikorn.apache.org/task-group-name: w}}"),
        "needs the application's label applicationId",
    ),
    (
        pod(
            "{name: p, labels: {applicationId: a}, annotations: {yunikorn.apache.org/task-groups: "
            '\'[{"name": "w", "minMember": 2}]\', yunikorn.apache.org/task-group-name: x}}'
        ),
        "task group 'x' is not declared",
    ),
    (
        "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: g}\n"
        "spec: {minMember: 0}\n",
        "PodGroup default/g: spec.minMember: must be at least 1, not 0",
    ),
    (
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g}\nspec: {}\n",
        "PodGroup default/g: spec.schedulingPolicy: exactly one of basic or gang is required",
    ),
    (
        pod("{name: p}", "workloadRef: {name: w, podGroup: g}, "),
        "Pod default/p: spec.workloadRef: Workload default/w does not exist",
    ),
    (
        pod("{name: p}", "schedulingGates: [{}], "),
        "Pod default/p: spec.schedulingGates[0].name: is required",
    ),
    (
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: l}\n"
        "spec: {leaderWorkerTemplate: {size: 2}}\n",
        "LeaderWorkerSet default/l: spec.leaderWorkerTemplate.workerTemplate: template is required",
    ),
    (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: -1}\n",
        "Deployment default/d: spec.replicas: must be at least 0",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_bad_objects_are_one_located_line(text: str, expected: str) -> None:
    line = error(text)
    assert line.startswith("m.yaml: ") and expected in line and "\n" not in line
