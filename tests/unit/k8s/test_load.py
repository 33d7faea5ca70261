"""Loading YAML files into a Workload, and every bad input as one located InputError."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.api.errors import InputError
from phalanx.api.specs import (
    GangSpec,
    JobSpec,
    NamespaceSpec,
    NodeSpec,
    PodSpec,
    PriorityClassSpec,
    QuotaSpec,
)
from phalanx.api.workload import Timing, Workload
from phalanx.k8s import load_documents, load_files


def write(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load_error(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_files([path])
    return info.value


GOOD = """\
apiVersion: v1
kind: Pod
metadata:
  name: worker-0
  namespace: ml
  labels: {scheduling.x-k8s.io/pod-group: train}
  annotations: {phalanx.dev/submit-after: 30s, phalanx.dev/delete-after: 1h}
spec:
  priorityClassName: high
  containers:
  - name: main
    resources: {requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: 1}}
---
# an empty document is skipped
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec: {minMember: 1}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "8", memory: 64Gi}}
- apiVersion: v1
  kind: Namespace
  metadata: {name: ml}
"""

MORE = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  parallelism: 2
  template:
    metadata: {annotations: {scheduling.k8s.io/group-name: vc}}
    spec: {containers: [{name: c}]}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: vc, namespace: ml}
spec: {minMember: 2}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: q, namespace: ml}
spec: {hard: {requests.cpu: "4"}}
"""


def test_load_files_in_order_with_sources(tmp_path: Path) -> None:
    first = write(tmp_path, GOOD, "a.yaml")
    second = write(tmp_path, MORE, "b.yaml")
    workload = load_files([first, str(second)])
    kinds = [type(item.spec) for item in workload.items]
    assert kinds == [
        PodSpec,
        PriorityClassSpec,
        GangSpec,
        NodeSpec,
        NamespaceSpec,
        JobSpec,
        GangSpec,
        QuotaSpec,
    ]
    assert [item.source for item in workload.items] == [str(first)] * 5 + [str(second)] * 3
    (pod,) = workload.of(PodSpec)
    assert pod.priority == 1000  # the PriorityClass comes later in the file
    assert pod.requests == {"cpu": 500, "memory": 2**30, "nvidia.com/gpu": 1000, "pods": 1}
    assert workload.items[0].timing == Timing(submit_after=30.0, delete_after=3600.0)
    assert workload.items[1].timing == Timing()
    (job,) = workload.of(JobSpec)
    assert job.template.gang is not None and job.template.gang.api == "scheduling.volcano.sh"


def test_load_documents_from_parsed_objects() -> None:
    docs = [("inline", d) for d in yaml.safe_load_all(GOOD)]
    workload = load_documents(docs)
    assert isinstance(workload, Workload)
    assert {item.source for item in workload.items} == {"inline"}
    assert len(workload.items) == 5


def test_files_with_no_object_at_all_are_an_error_naming_them(tmp_path: Path) -> None:
    path = write(tmp_path, "---\n# nothing\n---\n")
    with pytest.raises(InputError, match=f"^{path}: no Kubernetes objects"):
        load_files([path])


def test_same_name_in_other_group_or_namespace_is_not_a_duplicate(tmp_path: Path) -> None:
    text = """\
    apiVersion: scheduling.x-k8s.io/v1alpha1
    kind: PodGroup
    metadata: {name: g}
    spec: {minMember: 1}
    ---
    apiVersion: scheduling.sigs.k8s.io/v1alpha1
    kind: PodGroup
    metadata: {name: g}
    spec: {minMember: 1}
    ---
    apiVersion: scheduling.x-k8s.io/v1alpha1
    kind: PodGroup
    metadata: {name: g, namespace: other}
    spec: {minMember: 1}
    """
    gangs = list(load_files([write(tmp_path, text)]).of(GangSpec))
    assert [(g.api, g.key) for g in gangs] == [
        ("scheduling.x-k8s.io", "default/g"),
        ("scheduling.sigs.k8s.io", "default/g"),
        ("scheduling.x-k8s.io", "other/g"),
    ]


# --- every bad input is one InputError naming file, object and field ----------------------------

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: "1"}}
"""


def pod_with(spec_yaml: str, meta: str = "{name: p}") -> str:
    body = textwrap.indent(textwrap.dedent(spec_yaml), "  ")
    return f"apiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec:\n{body}"


def requests(text: str, key: str = "requests") -> str:
    return pod_with(f"containers:\n- name: c\n  resources: {{{key}: {{{text}}}}}\n")


def affinity(expression: str, where: str = "matchExpressions") -> str:
    return pod_with(
        f"""\
        containers: [{{name: c}}]
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - {where}: [{expression}]
        """
    )


def toleration(text: str) -> str:
    return pod_with(f"containers: [{{name: c}}]\ntolerations: [{text}]\n")


def node(text: str) -> str:
    return f"apiVersion: v1\nkind: Node\nmetadata: {{name: n1}}\n{textwrap.dedent(text)}"


def podgroup(spec: str, api: str = "scheduling.x-k8s.io/v1alpha1", meta: str = "{name: g}") -> str:
    return f"apiVersion: {api}\nkind: PodGroup\nmetadata: {meta}\nspec: {spec}\n"


VOLCANO = "scheduling.volcano.sh/v1beta1"


def job(spec: str) -> str:
    return f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec: {spec}\n"


def priority_class(body: str, name: str = "pc") -> str:
    head = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
    return f"{head}metadata: {{name: {name}}}\n{body}\n"


POD_REQ = "Pod default/p: spec.containers[0].resources.requests"
ANN = "metadata.annotations"

BAD: list[tuple[str, str]] = [
    # kinds and identity
    (
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n",
        "document 1: DaemonSet d: kind: unknown kind/apiVersion: kind DaemonSet in apiVersion "
        "apps/v1 (supported kinds: ClusterQueue (kueue.x-k8s.io/v1beta1), ",
    ),
    (
        "apiVersion: batch.volcano.sh/v1\nkind: Job\nmetadata: {name: j}\n",
        "document 1: Job default/j: apiVersion: unknown kind/apiVersion: kind Job in apiVersion "
        "batch.volcano.sh/v1 "
        "(supported apiVersion for Job: batch.volcano.sh/v1alpha1, batch/v1)",
    ),
    (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {}\n",
        "Pod (document 2): metadata.name: name is required",
    ),
    ("apiVersion: v1\nmetadata: {name: x}\n", "object x: kind: kind is required"),
    ("kind: Pod\nmetadata: {name: x}\n", "Pod default/x: apiVersion: apiVersion is required"),
    ("apiVersion: v1\nkind: [Pod]\n", "object: kind: must be a string, not a list"),
    (
        "apiVersion: v1\nkind: Pod\nmetadata: x\n",
        "Pod (document 1): metadata: must be a map, not a string ('x')",
    ),
    (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: Bad_NS}\n",
        "Pod Bad_NS/p: metadata.namespace: invalid namespace 'Bad_NS'",
    ),
    (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: My_Pod}\n",
        "Pod default/My_Pod: metadata.name: invalid name 'My_Pod'",
    ),
    (
        POD + "---\n" + POD,
        "Pod default/p: metadata.name: duplicate Pod default/p (first defined in {file})",
    ),
    # malformed structure
    (
        pod_with("5").replace("spec:\n  5", "spec: 5"),
        "Pod default/p: spec: must be a map, not a number (5)",
    ),
    (
        pod_with("containers: null\n"),
        "Pod default/p: spec.containers: at least one container is required",
    ),
    (pod_with("containers: {a: 1}\n"), "Pod default/p: spec.containers: must be a list, not a map"),
    (
        pod_with("containers: [5]\n"),
        "Pod default/p: spec.containers[0]: must be a map, not a number (5)",
    ),
    (
        pod_with("containers: [{name: c, resources: [1]}]\n"),
        "Pod default/p: spec.containers[0].resources: must be a map, not a list",
    ),
    (
        pod_with("containers: [{name: c}]\n", meta="{name: p, labels: [a]}"),
        "Pod default/p: metadata.labels: must be a map, not a list",
    ),
    (
        pod_with("containers: [{name: c}]\n", meta="{name: p, labels: {tier: 1}}"),
        "Pod default/p: metadata.labels.tier: must be a string, not a number (1) "
        "(quote it in YAML)",
    ),
    # quantities
    (requests("cpu: 1.2.3"), f"{POD_REQ}.cpu: malformed quantity '1.2.3'"),
    (requests("cpu: abc"), f"{POD_REQ}.cpu: malformed quantity 'abc'"),
    (requests("memory: 5 Gi"), f"{POD_REQ}.memory: malformed quantity '5 Gi'"),
    (requests("memory: 1Gb"), f"{POD_REQ}.memory: malformed quantity '1Gb'"),
    (requests("memory: -1Gi"), f"{POD_REQ}.memory: negative quantity '-1Gi'"),
    (requests("cpu: -1"), f"{POD_REQ}.cpu: negative quantity -1"),
    (requests("nvidia.com/gpu: x"), f"{POD_REQ}[nvidia.com/gpu]: malformed quantity 'x'"),
    (
        requests("cpu: [1]"),
        f"{POD_REQ}.cpu: quantity a list of 1 is not a string or number",
    ),
    (
        requests("cpus: 1"),
        f"{POD_REQ}.cpus: invalid container resource 'cpus'",
    ),
    (
        requests("memory: lots", key="limits"),
        "Pod default/p: spec.containers[0].resources.limits.memory: malformed quantity 'lots'",
    ),
    (
        pod_with("containers: [{name: c, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]\n"),
        f"{POD_REQ}.cpu: must be less than or equal to the cpu limit",
    ),
    (
        pod_with(
            "containers: [{name: c}]\n"
            "initContainers: [{name: i, resources: {requests: {cpu: 1x}}}]\n"
        ),
        "Pod default/p: spec.initContainers[0].resources.requests.cpu: malformed quantity '1x'",
    ),
    (
        pod_with("containers: [{name: c}]\ninitContainers: [{name: i, restartPolicy: Never}]\n"),
        "Pod default/p: spec.initContainers[0].restartPolicy: must be 'Always' or unset",
    ),
    (
        pod_with("containers: [{name: c}]\noverhead: {cpu: 1.2.3}\n"),
        "Pod default/p: spec.overhead.cpu: malformed quantity '1.2.3'",
    ),
    # placement
    (
        pod_with("containers: [{name: c}]\nnodeSelector: {disk: 1}\n"),
        "Pod default/p: spec.nodeSelector.disk: must be a string",
    ),
    (
        affinity("{key: gpu, operator: In, values: []}"),
        "Pod default/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values: must be specified when operator is 'In'",
    ),
    (
        affinity("{key: gpu, operator: NotIn}"),
        "matchExpressions[0].values: must be specified when operator is 'NotIn'",
    ),
    (
        affinity("{key: gpu, operator: Exists, values: [a]}"),
        "matchExpressions[0].values: may not be specified when operator is 'Exists'",
    ),
    (
        affinity("{key: gpu, operator: DoesNotExist, values: [a]}"),
        "matchExpressions[0].values: may not be specified when operator is 'DoesNotExist'",
    ),
    (
        affinity("{key: cores, operator: Gt, values: ['1', '2']}"),
        "matchExpressions[0].values: must have exactly one value when operator is 'Gt'",
    ),
    (
        affinity("{key: cores, operator: Lt, values: [abc]}"),
        "matchExpressions[0].values[0]: must be an integer for operator 'Lt'",
    ),
    (
        affinity("{key: cores, operator: Gt, values: [8]}"),
        "matchExpressions[0].values[0]: must be a string, not a number (8) (quote it in YAML)",
    ),
    (
        affinity("{key: gpu, operator: Like, values: [a]}"),
        "matchExpressions[0].operator: unknown operator 'Like'",
    ),
    (affinity("{operator: Exists}"), "matchExpressions[0].key: is required"),
    (
        affinity("{key: metadata.labels, operator: In, values: [a]}", "matchFields"),
        "matchFields[0].key: unsupported field 'metadata.labels' (only 'metadata.name')",
    ),
    (
        affinity("{key: metadata.name, operator: Exists}", "matchFields"),
        "matchFields[0].operator: operator must be 'In' or 'NotIn' for a field, not 'Exists'",
    ),
    (
        affinity("{key: metadata.name, operator: In, values: [a, b]}", "matchFields"),
        "matchFields[0].values: must have exactly one value for operator 'In'",
    ),
    (
        pod_with(
            """\
            containers: [{name: c}]
            affinity:
              nodeAffinity:
                requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}
            """
        ),
        "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: must have at least one "
        "node selector term",
    ),
    (
        toleration("{key: k, effect: NoWay}"),
        "Pod default/p: spec.tolerations[0].effect: unknown effect 'NoWay' "
        "(one of NoSchedule, PreferNoSchedule, NoExecute)",
    ),
    (
        toleration("{value: v}"),
        "Pod default/p: spec.tolerations[0].operator: must be 'Exists' when key is empty",
    ),
    (
        toleration("{key: k, operator: Exists, value: v}"),
        "Pod default/p: spec.tolerations[0].value: must be empty when operator is 'Exists'",
    ),
    (
        toleration("{key: k, operator: Matches}"),
        "Pod default/p: spec.tolerations[0].operator: unknown operator 'Matches'",
    ),
    (
        toleration("{key: k, effect: NoSchedule, tolerationSeconds: 5}"),
        "Pod default/p: spec.tolerations[0].effect: must be 'NoExecute' when "
        "tolerationSeconds is set",
    ),
    # priority
    (
        pod_with("containers: [{name: c}]\npriorityClassName: missing\n"),
        "Pod default/p: spec.priorityClassName: unknown PriorityClass 'missing' "
        "(admission would refuse it)",
    ),
    (
        pod_with("containers: [{name: c}]\npriority: high\n"),
        "Pod default/p: spec.priority: must be an integer, not a string ('high')",
    ),
    (
        pod_with("containers: [{name: c}]\npriority: 3000000000\n"),
        "Pod default/p: spec.priority: must be at most 2147483647, not 3000000000",
    ),
    (priority_class(""), "PriorityClass pc: value: value is required"),
    (
        priority_class("value: '5'"),
        "PriorityClass pc: value: must be an integer, not a string ('5')",
    ),
    (
        priority_class("value: 1000000001"),
        "PriorityClass pc: value: must be at most 1000000000 for a user-defined class",
    ),
    (
        priority_class("value: 1\nglobalDefault: yes please"),
        "PriorityClass pc: globalDefault: must be true or false",
    ),
    (
        priority_class("value: 1\nglobalDefault: true", "a")
        + "---\n"
        + priority_class("value: 2\nglobalDefault: true", "b"),
        "PriorityClass b: globalDefault: only one PriorityClass may be globalDefault (a is)",
    ),
    # timing annotations
    (
        pod_with(
            "containers: [{name: c}]\n",
            meta="{name: p, annotations: {phalanx.dev/submit-after: soon}}",
        ),
        f"Pod default/p: {ANN}[phalanx.dev/submit-after]: malformed duration 'soon'",
    ),
    (
        node("metadata: {name: n1, annotations: {phalanx.dev/delete-after: '-5'}}\n").replace(
            "metadata: {name: n1}\n", "", 1
        ),
        f"Node n1: {ANN}[phalanx.dev/delete-after]: malformed duration '-5'",
    ),
    (
        pod_with(
            "containers: [{name: c}]\n", meta="{name: p, annotations: {phalanx.dev/duration: 1y}}"
        ),
        f"Pod default/p: {ANN}[phalanx.dev/duration]: malformed duration '1y'",
    ),
    (
        pod_with(
            "containers: [{name: c}]\n", meta="{name: p, annotations: {phalanx.dev/duration: 600}}"
        ),
        f"Pod default/p: {ANN}[phalanx.dev/duration]: must be a string, not a number (600)",
    ),
    # nodes
    (node("spec: {taints: [{key: k}]}"), "Node n1: spec.taints[0].effect: effect is required"),
    (
        node("spec: {taints: [{key: k, effect: Sometimes}]}"),
        "Node n1: spec.taints[0].effect: unknown effect 'Sometimes'",
    ),
    (node("spec: {taints: [{effect: NoSchedule}]}"), "Node n1: spec.taints[0].key: is required"),
    (
        node(
            "spec: {taints: [{key: k, effect: NoSchedule}, {key: k, value: v, effect: NoSchedule}]}"
        ),
        "Node n1: spec.taints[1]: duplicate taint k:NoSchedule",
    ),
    (node("spec: {unschedulable: 'yes'}"), "Node n1: spec.unschedulable: must be true or false"),
    (
        node("status: {allocatable: {cpu: eight}}"),
        "Node n1: status.allocatable.cpu: malformed quantity",
    ),
    (
        node("status: {capacity: {memory: -1}}"),
        "Node n1: status.capacity.memory: negative quantity",
    ),
    # pod groups
    (
        podgroup("{minMember: 0}"),
        "PodGroup default/g: spec.minMember: minMember must be at least 1, not 0",
    ),
    (podgroup("{}"), "PodGroup default/g: spec.minMember: minMember is required"),
    (podgroup("{minMember: '3'}"), "PodGroup default/g: spec.minMember: must be an integer"),
    (
        podgroup("{minMember: 0}", "scheduling.sigs.k8s.io/v1alpha1"),
        "PodGroup default/g: spec.minMember: minMember must be at least 1",
    ),
    (
        podgroup("{minMember: 0}", VOLCANO),
        "PodGroup default/g: spec.minMember: minMember must be at least 1",
    ),
    (
        podgroup("{minMember: 2, scheduleTimeoutSeconds: -1}"),
        "PodGroup default/g: spec.scheduleTimeoutSeconds: must be at least 0, not -1",
    ),
    (
        podgroup("{minMember: 2, minResources: {cpu: lots}}"),
        "PodGroup default/g: spec.minResources.cpu: malformed quantity 'lots'",
    ),
    (
        podgroup("{minMember: 2, minTaskMember: {worker: -1}}", VOLCANO),
        "PodGroup default/g: spec.minTaskMember.worker: must be at least 0, not -1",
    ),
    (
        podgroup("{minMember: 2, minTaskMember: [worker]}", VOLCANO),
        "PodGroup default/g: spec.minTaskMember: must be a map, not a list",
    ),
    (
        podgroup("{minMember: 2, priorityClassName: nope}", VOLCANO),
        "PodGroup default/g: spec.priorityClassName: unknown PriorityClass 'nope'",
    ),
    (
        podgroup(
            "{minMember: 2}",
            meta="{name: g, annotations: {phalanx.dev/min-task-member: '{worker'}}",
        ),
        f"PodGroup default/g: {ANN}[phalanx.dev/min-task-member]: not valid JSON",
    ),
    (
        podgroup(
            "{minMember: 2}", meta="{name: g, annotations: {phalanx.dev/min-task-member: '[1]'}}"
        ),
        f"PodGroup default/g: {ANN}[phalanx.dev/min-task-member]: must be a JSON object",
    ),
    (
        podgroup(
            "{minMember: 2}",
            meta="""{name: g, annotations: {phalanx.dev/min-task-member: '{"w": -1}'}}""",
        ),
        f"PodGroup default/g: {ANN}[phalanx.dev/min-task-member]: minimum of role 'w' must not be "
        "negative, not -1",
    ),
    (
        podgroup(
            "{minMember: 2}",
            meta="""{name: g, annotations: {phalanx.dev/min-task-member: '{"w": "2"}'}}""",
        ),
        f"PodGroup default/g: {ANN}[phalanx.dev/min-task-member]: minimum of role 'w' must be "
        "an integer",
    ),
    # jobs
    (
        job("{parallelism: -1, template: {spec: {containers: [{name: c}]}}}"),
        "Job default/j: spec.parallelism: must be at least 0",
    ),
    (
        job("{completions: two, template: {spec: {containers: [{name: c}]}}}"),
        "Job default/j: spec.completions: must be an integer",
    ),
    (job("{parallelism: 1}"), "Job default/j: spec.template: template is required"),
    (
        job("{template: {spec: {}}}"),
        "Job default/j: spec.template.spec.containers: at least one container is required",
    ),
    (
        job("{template: {spec: {containers: [{name: c, resources: {requests: {memory: 1Gb}}}]}}}"),
        "Job default/j: spec.template.spec.containers[0].resources.requests.memory: "
        "malformed quantity '1Gb'",
    ),
    (
        job("{template: {spec: {containers: [{name: c}], priorityClassName: vip}}}"),
        "Job default/j: spec.template.spec.priorityClassName: unknown PriorityClass 'vip'",
    ),
    (
        job("{template: {metadata: {labels: [x]}, spec: {containers: [{name: c}]}}}"),
        "Job default/j: spec.template.metadata.labels: must be a map, not a list",
    ),
    # quotas
    (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\n"
        "spec: {hard: {requests.cpu: x}}\n",
        "ResourceQuota default/q: spec.hard[requests.cpu]: malformed quantity 'x'",
    ),
    (
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\nspec: {hard: {services: -2}}\n",
        "ResourceQuota default/q: spec.hard.services: negative quantity -2",
    ),
    # gang references
    (
        pod_with(
            "containers: [{name: c}]\n",
            meta="{name: p, labels: {scheduling.x-k8s.io/pod-group: g}}",
        ),
        "Pod default/p: metadata.labels[scheduling.x-k8s.io/pod-group]: PodGroup default/g of API "
        "group scheduling.x-k8s.io does not exist",
    ),
    (
        podgroup("{minMember: 1}")
        + "---\n"
        + pod_with(
            "containers: [{name: c}]\n",
            meta="{name: p, labels: {pod-group.scheduling.sigs.k8s.io: g}}",
        ),
        "Pod default/p: metadata.labels[pod-group.scheduling.sigs.k8s.io]: PodGroup default/g of "
        "API group scheduling.sigs.k8s.io does not exist",
    ),
    (
        podgroup("{minMember: 1}", VOLCANO, meta="{name: g, namespace: other}")
        + "---\n"
        + pod_with(
            "containers: [{name: c}]\n",
            meta="{name: p, annotations: {scheduling.k8s.io/group-name: g}}",
        ),
        "Pod default/p: metadata.annotations[scheduling.k8s.io/group-name]: PodGroup default/g of "
        "API group scheduling.volcano.sh does not exist",
    ),
    (
        job(
            "{template: {metadata: {labels: {scheduling.x-k8s.io/pod-group: g}}, "
            "spec: {containers: [{name: c}]}}}"
        ),
        "Job default/j: spec.template.metadata.labels[scheduling.x-k8s.io/pod-group]: PodGroup "
        "default/g of API group scheduling.x-k8s.io does not exist",
    ),
    # documents
    ("- a\n- b\n", "a document must be a Kubernetes object (a map), not a list"),
    (
        "apiVersion: v1\nkind: List\nitems: 5\n",
        "List: items: must be a list, not a number (5)",
    ),
    (
        "apiVersion: v1\nkind: List\nitems: [5]\n",
        "List: items[0]: must be a Kubernetes object (a map)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_bad_input_is_one_located_error(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    error = load_error(path)
    message = str(error)
    assert message.startswith(f"{path}: "), message
    assert expected.format(file=path) in message
    assert error.source == str(path)
    assert "\n" not in message


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata: {name: p\nspec: {}\n")
    assert str(load_error(path)) == (
        f"{path}: YAML syntax error at line 4, column 5: did not find expected ',' or '}}' "
        "(while parsing a flow mapping started at line 3)"
    )


def test_yaml_tab_error_has_line(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: p\n")
    assert str(load_error(path)).startswith(f"{path}: YAML syntax error at line 4, column 1: ")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert str(load_error(path)) == f"{path}: file not found"


def test_a_directory_without_manifests_is_an_error(tmp_path: Path) -> None:
    assert str(load_error(tmp_path)) == (
        f"{tmp_path}: directory holds no *.yaml, *.yml or *.json file"
    )


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"kind: \xff\xfe\n")
    assert str(load_error(path)).startswith(f"{path}: not UTF-8 text")


def test_first_error_wins_across_files(tmp_path: Path) -> None:
    good = write(tmp_path, POD, "good.yaml")
    dup = write(tmp_path, POD, "dup.yaml")
    assert str(load_error_of([good, dup])) == (
        f"{dup}: Pod default/p: metadata.name: duplicate Pod default/p (first defined in {good})"
    )


def load_error_of(paths: list[Path]) -> InputError:
    with pytest.raises(InputError) as info:
        load_files(paths)
    return info.value


# --- malformed input never escapes as anything but InputError -----------------------------------

FUZZ_BASE = yaml.safe_load_all(
    GOOD
    + "---\n"
    + MORE
    + "---\n"
    + """\
apiVersion: v1
kind: Pod
metadata:
  name: full
  labels: {pod-group.scheduling.sigs.k8s.io: old, phalanx.dev/role: ps}
  annotations: {phalanx.dev/duration: 5m}
spec:
  priority: 5
  schedulerName: phalanx
  nodeSelector: {disk: ssd}
  overhead: {cpu: 10m}
  initContainers: [{name: i, restartPolicy: Always, resources: {requests: {cpu: "1"}}}]
  containers: [{name: c, resources: {requests: {cpu: "1"}, limits: {cpu: "2", memory: 1Gi}}}]
  tolerations: [{key: k, operator: Equal, value: v, effect: NoExecute, tolerationSeconds: 5}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: a, operator: In, values: [x]}
          - {key: b, operator: Gt, values: ["1"]}
          matchFields: [{key: metadata.name, operator: In, values: [n1]}]
---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: old, annotations: {phalanx.dev/min-task-member: '{"ps": 1}'}}
spec: {minMember: 2, scheduleTimeoutSeconds: 5, minResources: {cpu: "2"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: v}
spec: {minMember: 2, minTaskMember: {w: 1}, queue: q, priorityClassName: high}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {a: x}}
spec: {unschedulable: true, taints: [{key: k, value: v, effect: NoSchedule}]}
status: {capacity: {cpu: "4"}}
"""
)
FUZZ_DOCS: list[Any] = [d for d in FUZZ_BASE if d is not None]
JUNK: list[Any] = [None, 5, -1, "x", "", [], {}, [5], [None], True, 1.5, {"a": None}, {5: 1}]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


def _replaced(doc: Any, path: tuple[Any, ...], junk: Any, *, delete: bool = False) -> Any:
    if not path:
        return junk
    clone = copy.deepcopy(doc)
    parent = clone
    for step in path[:-1]:
        parent = parent[step]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(junk)
    return clone


def test_fuzz_base_is_valid_and_input_is_not_mutated() -> None:
    before = copy.deepcopy(FUZZ_DOCS)
    workload = load_documents([("fuzz.yaml", d) for d in FUZZ_DOCS])
    assert len(workload.items) == len(FUZZ_DOCS) + 1  # the List holds two objects
    assert before == FUZZ_DOCS


def test_malformed_values_only_raise_input_error() -> None:
    outcomes = {"ok": 0, "error": 0}
    for index, doc in enumerate(FUZZ_DOCS):
        for path in _paths(doc):
            variants = [_replaced(doc, path, junk) for junk in JUNK]
            if path:
                variants.append(_replaced(doc, path, None, delete=True))
            for variant in variants:
                docs = [("fuzz.yaml", d) for d in FUZZ_DOCS]
                docs[index] = ("fuzz.yaml", variant)
                try:
                    load_documents(docs)
                except InputError as exc:
                    assert exc.source == "fuzz.yaml", (path, exc)
                    assert "\n" not in str(exc)
                    outcomes["error"] += 1
                else:
                    outcomes["ok"] += 1
    assert outcomes["error"] > 500 and outcomes["ok"] > 100, outcomes
