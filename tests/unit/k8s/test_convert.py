"""Per-object conversion: plain dicts → api specs (no files involved)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from phalanx.api.errors import InputError
from phalanx.api.specs import (
    DEFAULT_MAX_PODS,
    GangRef,
    PriorityClassSpec,
    Requirement,
    SelectorTerm,
    Taint,
    TaintEffect,
    Toleration,
)
from phalanx.api.workload import Timing
from phalanx.k8s import (
    PriorityTable,
    gang_from_dict,
    job_from_dict,
    namespace_from_dict,
    node_from_dict,
    pod_from_dict,
    priority_class_from_dict,
    quota_from_dict,
    spec_from_dict,
    timing_from_dict,
)

NO_CLASSES = PriorityTable()


def pod(spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    meta.update(metadata)
    body = spec if spec is not None else {"containers": [{"name": "c"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def container(requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    resources.update(extra)
    return {"name": "c", "resources": resources}


def error_of(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InputError) as info:
        call(*args, **kwargs)
    return str(info.value)


# --- pod requests -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"containers": [{"name": "c"}]}, {"pods": 1}),
        (
            {"containers": [container({"cpu": "500m", "memory": "1Gi"})]},
            {"cpu": 500, "memory": 2**30, "pods": 1},
        ),
        ({"containers": [container({"nvidia.com/gpu": 1})]}, {"nvidia.com/gpu": 1000, "pods": 1}),
        (
            {"containers": [container({"cpu": "1"}), container({"cpu": "250m", "memory": "1Mi"})]},
            {"cpu": 1250, "memory": 2**20, "pods": 1},
        ),
        # init containers: per resource, the max of the sum of containers and each init container
        (
            {
                "containers": [container({"cpu": "1", "memory": "1Gi"})],
                "initContainers": [container({"cpu": "3"}), container({"memory": "2Gi"})],
            },
            {"cpu": 3000, "memory": 2 * 2**30, "pods": 1},
        ),
        (
            {
                "containers": [container({"cpu": "2"})],
                "initContainers": [container({"cpu": "1"})],
                "overhead": {"cpu": "100m", "memory": "64Mi"},
            },
            {"cpu": 2100, "memory": 64 * 2**20, "pods": 1},
        ),
        # a limit alone is the request (Kubernetes defaulting)
        (
            {"containers": [container(None, limits={"cpu": "2", "nvidia.com/gpu": "1"})]},
            {"cpu": 2000, "nvidia.com/gpu": 1000, "pods": 1},
        ),
        (
            {"containers": [container({"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"})]},
            {"cpu": 1000, "memory": 2**30, "pods": 1},
        ),
        # sidecars (restartable init containers) add to the running sum
        (
            {
                "containers": [container({"cpu": "1"})],
                "initContainers": [
                    {**container({"cpu": "500m"}), "restartPolicy": "Always"},
                    container({"cpu": "2"}),
                ],
            },
            {"cpu": 2500, "pods": 1},
        ),
        (
            {"containers": [container({"cpu": 0.5, "memory": 1000})]},
            {"cpu": 500, "memory": 1000, "pods": 1},
        ),
    ],
)
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_from_dict(pod(spec), NO_CLASSES).requests == expected


def test_pod_basics() -> None:
    spec = pod(
        {"containers": [{"name": "c"}], "schedulerName": "phalanx"},
        namespace="team-a",
        labels={"app": "x"},
        annotations={"phalanx.dev/duration": "1h30m"},
    )
    result = pod_from_dict(spec, NO_CLASSES)
    assert (result.namespace, result.name, result.key) == ("team-a", "p", "team-a/p")
    assert result.scheduler_name == "phalanx"
    assert result.labels == {"app": "x"}
    assert result.duration == 5400.0
    assert result.gang is None and result.role == "" and result.owner == ""
    default = pod_from_dict(pod(), NO_CLASSES)
    assert (default.namespace, default.scheduler_name, default.duration) == ("default", "", None)


def test_pod_namespace_argument_overrides_metadata() -> None:
    result = pod_from_dict(pod(namespace="a"), NO_CLASSES, namespace="b")
    assert result.namespace == "b"


# --- gangs and roles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "gang", "role"),
    [
        ({}, {}, None, ""),
        ({"scheduling.x-k8s.io/pod-group": "g"}, {}, GangRef("g", "scheduling.x-k8s.io"), ""),
        ({"pod-group.scheduling.sigs.k8s.io": "g"}, {}, GangRef("g", "scheduling.sigs.k8s.io"), ""),
        ({}, {"scheduling.k8s.io/group-name": "g"}, GangRef("g", "scheduling.volcano.sh"), ""),
        # declarations naming the same group: the first API wins
        (
            {"scheduling.x-k8s.io/pod-group": "g", "pod-group.scheduling.sigs.k8s.io": "g"},
            {"scheduling.k8s.io/group-name": "g"},
            GangRef("g", "scheduling.x-k8s.io"),
            "",
        ),
        (
            {"pod-group.scheduling.sigs.k8s.io": "old"},
            {"scheduling.k8s.io/group-name": "old"},
            GangRef("old", "scheduling.sigs.k8s.io"),
            "",
        ),
        # an empty value names no group
        (
            {"scheduling.x-k8s.io/pod-group": ""},
            {"scheduling.k8s.io/group-name": "vc"},
            GangRef("vc", "scheduling.volcano.sh"),
            "",
        ),
        # roles: volcano.sh/task-spec, else phalanx.dev/role
        ({"phalanx.dev/role": "ps"}, {}, None, "ps"),
        ({"phalanx.dev/role": "ps"}, {"volcano.sh/task-spec": "worker"}, None, "worker"),
    ],
)
def test_gang_and_role(
    labels: dict[str, str], annotations: dict[str, str], gang: GangRef | None, role: str
) -> None:
    result = pod_from_dict(pod(labels=labels, annotations=annotations), NO_CLASSES)
    assert (result.gang, result.role) == (gang, role)
    assert result.gang_key == (None if gang is None else f"default/{gang.name}")


# --- priority -----------------------------------------------------------------------------------

TABLE = PriorityTable(
    [PriorityClassSpec("high", 1000), PriorityClassSpec("normal", 10, global_default=True)]
)


@pytest.mark.parametrize(
    ("spec_extra", "table", "expected"),
    [
        ({}, NO_CLASSES, 0),
        ({}, TABLE, 10),  # the globalDefault class
        ({"priorityClassName": "high"}, TABLE, 1000),
        ({"priorityClassName": "high", "priority": 7}, TABLE, 7),  # explicit priority wins
        ({"priorityClassName": "gone", "priority": 7}, TABLE, 7),  # no lookup needed
        ({"priority": -5}, TABLE, -5),
        ({"priorityClassName": "system-node-critical"}, NO_CLASSES, 2_000_001_000),
        ({"priorityClassName": "system-cluster-critical"}, NO_CLASSES, 2_000_000_000),
    ],
)
def test_priority_resolution(
    spec_extra: dict[str, Any], table: PriorityTable, expected: int
) -> None:
    spec = {"containers": [{"name": "c"}], **spec_extra}
    assert pod_from_dict(pod(spec), table).priority == expected


def test_priority_table_is_a_mapping() -> None:
    assert TABLE["high"] == 1000
    assert "normal" in TABLE and "system-node-critical" in TABLE
    assert len(TABLE) == 4
    assert (TABLE.default, TABLE.default_class) == (10, "normal")
    assert (NO_CLASSES.default, NO_CLASSES.default_class) == (0, None)


def test_priority_table_rejects_two_global_defaults() -> None:
    table = PriorityTable([PriorityClassSpec("a", 1, global_default=True)])
    with pytest.raises(InputError) as info:
        table.add(PriorityClassSpec("b", 2, global_default=True))
    assert str(info.value) == (
        "PriorityClass b: globalDefault: only one PriorityClass may be globalDefault (a is)"
    )


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"metadata": {"name": "hi"}, "value": 100}, PriorityClassSpec("hi", 100, False)),
        (
            {"metadata": {"name": "d"}, "value": -3, "globalDefault": True},
            PriorityClassSpec("d", -3, True),
        ),
        (
            {"metadata": {"name": "system-x"}, "value": 2_000_000_000},
            PriorityClassSpec("system-x", 2_000_000_000),
        ),
    ],
)
def test_priority_class(obj: dict[str, Any], expected: PriorityClassSpec) -> None:
    assert priority_class_from_dict(obj) == expected


# --- placement ----------------------------------------------------------------------------------


def test_node_selector_is_sorted_pairs() -> None:
    spec = {"containers": [{"name": "c"}], "nodeSelector": {"zone": "b", "disk": "ssd"}}
    placement = pod_from_dict(pod(spec), NO_CLASSES).placement
    assert placement.node_selector == (("disk", "ssd"), ("zone", "b"))
    assert placement.affinity_terms == () and placement.tolerations == ()


def test_required_node_affinity() -> None:
    terms = [
        {
            "matchExpressions": [
                {"key": "gpu", "operator": "In", "values": ["a100", "h100"]},
                {"key": "spot", "operator": "DoesNotExist"},
                {"key": "cores", "operator": "Gt", "values": ["16"]},
            ]
        },
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
        {},
    ]
    spec = {
        "containers": [{"name": "c"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
            },
            "podAntiAffinity": {"anything": "ignored"},
        },
    }
    assert pod_from_dict(pod(spec), NO_CLASSES).placement.affinity_terms == (
        SelectorTerm(
            expressions=(
                Requirement("gpu", "In", ("a100", "h100")),
                Requirement("spot", "DoesNotExist"),
                Requirement("cores", "Gt", ("16",)),
            )
        ),
        SelectorTerm(fields=(Requirement("metadata.name", "NotIn", ("n1",)),)),
        SelectorTerm(),
    )


def test_preferred_affinity_alone_does_not_restrict() -> None:
    spec = {
        "containers": [{"name": "c"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
    }
    assert pod_from_dict(pod(spec), NO_CLASSES).placement.affinity_terms == ()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"operator": "Exists"}, Toleration(None, "Exists", "", None)),
        ({"key": "gpu", "operator": "Exists"}, Toleration("gpu", "Exists", "", None)),
        (
            {"key": "gpu", "value": "true", "effect": "NoSchedule"},
            Toleration("gpu", "Equal", "true", TaintEffect.NO_SCHEDULE),
        ),
        (
            {"key": "k", "operator": "Equal", "value": "v", "effect": "PreferNoSchedule"},
            Toleration("k", "Equal", "v", TaintEffect.PREFER_NO_SCHEDULE),
        ),
        (
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            Toleration("k", "Exists", "", TaintEffect.NO_EXECUTE),
        ),
    ],
)
def test_tolerations(raw: dict[str, Any], expected: Toleration) -> None:
    spec = {"containers": [{"name": "c"}], "tolerations": [raw]}
    assert pod_from_dict(pod(spec), NO_CLASSES).placement.tolerations == (expected,)


def test_exists_with_empty_key_tolerates_every_taint() -> None:
    spec = {"containers": [{"name": "c"}], "tolerations": [{"operator": "Exists"}]}
    (toleration,) = pod_from_dict(pod(spec), NO_CLASSES).placement.tolerations
    for effect in TaintEffect:
        assert toleration.tolerates(Taint("anything", "x", effect))


# --- nodes --------------------------------------------------------------------------------------


def test_node_defaults() -> None:
    node = node_from_dict(
        {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}
    )
    assert node.allocatable == {"cpu": 8000, "memory": 32 * 2**30, "pods": DEFAULT_MAX_PODS}
    assert node.labels == {"kubernetes.io/hostname": "n1"}
    assert node.taints == () and node.unschedulable is False


def test_node_full() -> None:
    node = node_from_dict(
        {
            "metadata": {
                "name": "n1",
                "labels": {"kubernetes.io/hostname": "host-1", "gpu": "h100"},
            },
            "spec": {
                "unschedulable": True,
                "taints": [
                    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                    {"key": "gpu", "effect": "NoExecute"},
                ],
            },
            "status": {
                "capacity": {"cpu": "64", "pods": "250"},
                "allocatable": {"cpu": "63500m", "nvidia.com/gpu": "8", "pods": 200},
            },
        }
    )
    assert node.allocatable == {"cpu": 63500, "nvidia.com/gpu": 8000, "pods": 200}
    assert node.labels == {"kubernetes.io/hostname": "host-1", "gpu": "h100"}
    assert node.taints == (
        Taint("gpu", "true", TaintEffect.NO_SCHEDULE),
        Taint("gpu", "", TaintEffect.NO_EXECUTE),
    )
    assert node.unschedulable is True


# --- pod groups ---------------------------------------------------------------------------------


@pytest.mark.parametrize("group", ["scheduling.x-k8s.io", "scheduling.sigs.k8s.io"])
def test_scheduler_plugins_podgroup(group: str) -> None:
    gang = gang_from_dict(
        {
            "apiVersion": f"{group}/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "g",
                "namespace": "ml",
                "annotations": {
                    "phalanx.dev/min-task-member": '{"worker": 2}',
                    "phalanx.dev/duration": "10m",
                },
            },
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 10, "minResources": {"cpu": "3"}},
        },
        NO_CLASSES,
    )
    assert (gang.namespace, gang.name, gang.key, gang.api) == ("ml", "g", "ml/g", group)
    assert (gang.min_member, gang.timeout_seconds, gang.min_resources) == (3, 10.0, {"cpu": 3000})
    assert (gang.role_minimums, gang.priority, gang.queue, gang.duration) == (
        {"worker": 2},
        None,
        "default",
        600.0,
    )


def test_volcano_podgroup() -> None:
    gang = gang_from_dict(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "pg1",
                "annotations": {"phalanx.dev/min-task-member": '{"ps": 2, "chief": 1}'},
            },
            "spec": {
                "minMember": 4,
                "minTaskMember": {"worker": 3, "ps": 1},
                "queue": "research",
                "priorityClassName": "high",
                "minResources": {"nvidia.com/gpu": "32"},
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            },
        },
        TABLE,
    )
    assert gang.api == "scheduling.volcano.sh"
    assert gang.min_member == 4
    # the annotation is merged over minTaskMember; role sums above minMember are allowed
    assert gang.role_minimums == {"worker": 3, "ps": 2, "chief": 1}
    assert (gang.queue, gang.priority, gang.timeout_seconds) == ("research", 1000, None)
    assert gang.min_resources == {"nvidia.com/gpu": 32000}


def test_volcano_podgroup_defaults() -> None:
    gang = gang_from_dict(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {"minMember": 1},
        },
        TABLE,
    )
    assert (gang.queue, gang.priority, gang.role_minimums, gang.min_resources) == (
        "default",
        None,
        {},
        {},
    )


# --- jobs ---------------------------------------------------------------------------------------


def job(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", **metadata},
        "spec": spec,
    }


TEMPLATE = {
    "metadata": {
        "labels": {"scheduling.x-k8s.io/pod-group": "train"},
        "annotations": {"phalanx.dev/duration": "5m"},
    },
    "spec": {"containers": [container({"cpu": "1"})], "priorityClassName": "high"},
}


@pytest.mark.parametrize(
    ("spec_extra", "parallelism", "completions"),
    [
        ({}, 1, 1),  # neither set: both default to 1
        ({"parallelism": 4}, 4, None),
        ({"completions": 8}, 1, 8),
        ({"parallelism": 0, "completions": 2}, 0, 2),
    ],
)
def test_job_counts(spec_extra: dict[str, Any], parallelism: int, completions: int | None) -> None:
    result = job_from_dict(job({"template": TEMPLATE, **spec_extra}), TABLE)
    assert (result.parallelism, result.completions) == (parallelism, completions)


def test_job_template() -> None:
    result = job_from_dict(job({"parallelism": 2, "template": TEMPLATE}), TABLE)
    template = result.template
    assert (result.namespace, result.name) == ("ml", "train")
    assert (template.namespace, template.name, template.owner) == ("ml", "train", "Job/train")
    assert template.requests == {"cpu": 1000, "pods": 1}
    assert template.priority == 1000
    assert template.gang == GangRef("train", "scheduling.x-k8s.io")
    assert template.duration == 300.0  # the template's annotation


def test_job_duration_annotation_wins_over_template() -> None:
    obj = job({"template": TEMPLATE}, annotations={"phalanx.dev/duration": "2h"})
    assert job_from_dict(obj, TABLE).template.duration == 7200.0


# --- quotas, namespaces, timing -----------------------------------------------------------------


def test_quota_maps_request_resources_only() -> None:
    quota = quota_from_dict(
        {
            "metadata": {"name": "q", "namespace": "ml"},
            "spec": {
                "hard": {
                    "pods": "10",
                    "count/pods": 20,
                    "requests.cpu": "8",
                    "cpu": "16",
                    "memory": "1Gi",
                    "requests.nvidia.com/gpu": 4,
                    "requests.ephemeral-storage": "10Gi",
                    "requests.storage": "1Ti",
                    "limits.cpu": "32",
                    "services": 5,
                    "count/jobs.batch": 3,
                }
            },
        }
    )
    assert (quota.namespace, quota.name) == ("ml", "q")
    assert quota.hard == {
        "pods": 10,
        "cpu": 8000,
        "memory": 2**30,
        "nvidia.com/gpu": 4000,
        "ephemeral-storage": 10 * 2**30,
    }


def test_namespace() -> None:
    assert namespace_from_dict({"metadata": {"name": "team-a"}}).name == "team-a"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, Timing()),
        ({"phalanx.dev/submit-after": "30s"}, Timing(submit_after=30.0)),
        ({"phalanx.dev/delete-after": "1h"}, Timing(delete_after=3600.0)),
        (
            {"phalanx.dev/submit-after": "90", "phalanx.dev/delete-after": "1h30m"},
            Timing(90.0, 5400.0),
        ),
    ],
)
def test_timing(annotations: dict[str, str], expected: Timing) -> None:
    obj = {"kind": "Node", "metadata": {"name": "n", "annotations": annotations}}
    assert timing_from_dict(obj) == expected


def test_spec_from_dict_dispatches_on_kind() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    assert spec_from_dict(node, NO_CLASSES) == node_from_dict(node)
    bad = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}}
    # an unknown kind's scope is unknown: no namespace is invented for it
    assert error_of(spec_from_dict, bad, NO_CLASSES).startswith("DaemonSet d: kind: ")


# --- errors name the object and the field -------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            lambda: pod_from_dict(pod({"containers": [container({"cpu": "1.2.3"})]}), NO_CLASSES),
            "Pod default/p: spec.containers[0].resources.requests.cpu: malformed quantity '1.2.3'",
        ),
        (
            lambda: pod_from_dict(pod({"containers": None}), NO_CLASSES),
            "Pod default/p: spec.containers: at least one container is required",
        ),
        (
            lambda: pod_from_dict({"metadata": {}, "spec": {}}, NO_CLASSES),
            "Pod: metadata.name: name is required",
        ),
        (
            lambda: pod_from_dict(cast(Any, [1]), NO_CLASSES),
            "Pod: object must be a map, not a list",
        ),
        (
            lambda: node_from_dict({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k"}]}}),
            "Node n: spec.taints[0].effect: effect is required",
        ),
        (
            lambda: gang_from_dict(
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "metadata": {"name": "g"},
                    "spec": {"minMember": 0},
                },
                NO_CLASSES,
            ),
            "PodGroup default/g: spec.minMember: minMember must be at least 1, not 0",
        ),
        (
            lambda: job_from_dict(
                job({"template": {"spec": {"containers": [container({"cpu": "x"})]}}}), NO_CLASSES
            ),
            "Job ml/train: spec.template.spec.containers[0].resources.requests.cpu: "
            "malformed quantity 'x'",
        ),
        (
            lambda: quota_from_dict({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "-1"}}}),
            "ResourceQuota default/q: spec.hard.pods: negative quantity '-1'",
        ),
        (
            lambda: priority_class_from_dict({"metadata": {"name": "x"}}),
            "PriorityClass x: value: value is required",
        ),
        (
            lambda: namespace_from_dict({"metadata": {"name": "Team_A"}}),
            "Namespace Team_A: metadata.name: invalid name 'Team_A': must be a lowercase "
            "DNS-1123 subdomain",
        ),
        (
            lambda: timing_from_dict(
                {
                    "kind": "Pod",
                    "metadata": {"name": "p", "annotations": {"phalanx.dev/submit-after": "soon"}},
                }
            ),
            "Pod default/p: metadata.annotations[phalanx.dev/submit-after]: malformed duration "
            "'soon' (use e.g. 90, 30s, 2h, 1h30m)",
        ),
    ],
)
def test_errors_name_object_and_field(call: Any, expected: str) -> None:
    assert error_of(call) == expected
