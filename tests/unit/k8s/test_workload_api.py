"""Kubernetes 1.35 ``scheduling.k8s.io/v1alpha1`` Workload and pods' ``spec.workloadRef``."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.api.errors import InputError
from phalanx.api.specs import GangRef
from phalanx.k8s import (
    WORKLOAD_GROUP,
    PriorityTable,
    pod_from_dict,
    workload_from_dict,
    workload_gang_name,
)
from phalanx.k8s.pods import gang_field


def workload(*groups: dict[str, Any], name: str = "train") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"podGroups": list(groups)},
    }


def gang_group(name: str, min_count: int) -> dict[str, Any]:
    return {"name": name, "policy": {"gang": {"minCount": min_count}}}


def pod(ref: dict[str, Any] | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if ref is not None:
        spec["workloadRef"] = ref
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team", "labels": labels or {}},
        "spec": spec,
    }


def test_a_workload_yields_one_gang_per_gang_pod_group_and_replica_key() -> None:
    spec = workload(gang_group("workers", 4), {"name": "driver", "policy": {"basic": {}}})
    wl = workload_from_dict(spec)
    assert wl.key == "team/train"
    assert wl.pod_groups == {"workers": 4, "driver": None}
    a = wl.gang("workers", "0")
    b = wl.gang("workers", "1")
    assert a is not None and b is not None
    assert (a.key, a.min_member, a.api) == ("team/train-workers-0", 4, WORKLOAD_GROUP)
    assert b.key == "team/train-workers-1"  # same pod group, other replica: independent gang
    plain = wl.gang("workers")
    assert plain is not None and plain.name == "train-workers"
    assert wl.gang("driver") is None  # basic: no gang
    assert wl.gang("nope") is None


def test_a_pod_joins_the_gang_of_its_workload_ref() -> None:
    table = PriorityTable()
    ref = {"name": "train", "podGroup": "workers", "podGroupReplicaKey": "1"}
    assert pod_from_dict(pod(ref), table).gang == GangRef("train-workers-1", WORKLOAD_GROUP)
    no_key = pod_from_dict(pod({"name": "train", "podGroup": "workers"}), table)
    assert no_key.gang == GangRef(workload_gang_name("train", "workers"), WORKLOAD_GROUP)
    assert no_key.gang_key == "team/train-workers"
    assert pod_from_dict(pod(None), table).gang is None
    conflict = r"two gangs: label scheduling\.x-k8s\.io/pod-group=pg and"
    with pytest.raises(InputError, match=conflict):
        pod_from_dict(pod(ref, {"scheduling.x-k8s.io/pod-group": "pg"}), table)
    assert gang_field(WORKLOAD_GROUP) == "spec.workloadRef"


BAD_WORKLOADS = [
    ({"apiVersion": "scheduling.k8s.io/v9"}, "apiVersion", "unknown Workload apiVersion"),
    ({"spec": {"podGroups": []}}, "spec.podGroups", "at least one"),
    (
        {"spec": {"podGroups": [gang_group(f"g{i}", 1) for i in range(9)]}},
        "spec.podGroups",
        "at most 8",
    ),
    (
        {"spec": {"podGroups": [gang_group("a", 1), gang_group("a", 2)]}},
        "spec.podGroups[1].name",
        "duplicate",
    ),
    ({"spec": {"podGroups": [{"policy": {"basic": {}}}]}}, "spec.podGroups[0].name", "required"),
    (
        {"spec": {"podGroups": [{"name": "A_b", "policy": {"basic": {}}}]}},
        "spec.podGroups[0].name",
        "DNS-1123",
    ),
    ({"spec": {"podGroups": [{"name": "a"}]}}, "spec.podGroups[0].policy", "exactly one"),
    (
        {"spec": {"podGroups": [{"name": "a", "policy": {"basic": {}, "gang": {"minCount": 1}}}]}},
        "spec.podGroups[0].policy",
        "exactly one",
    ),
    (
        {"spec": {"podGroups": [{"name": "a", "policy": {"fair": {}}}]}},
        "spec.podGroups[0].policy.fair",
        "unknown policy",
    ),
    (
        {"spec": {"podGroups": [{"name": "a", "policy": {"gang": {}}}]}},
        "spec.podGroups[0].policy.gang.minCount",
        "required",
    ),
    (
        {"spec": {"podGroups": [gang_group("a", 0)]}},
        "spec.podGroups[0].policy.gang.minCount",
        "at least 1",
    ),
    (
        {"spec": {"podGroups": [gang_group("a", "3")]}},
        "spec.podGroups[0].policy.gang.minCount",
        "integer",
    ),  # type: ignore[arg-type]
    ({"spec": {"podGroups": "workers"}}, "spec.podGroups", "list"),
]


@pytest.mark.parametrize(("patch", "field", "message"), BAD_WORKLOADS)
def test_bad_workloads_are_one_line_errors(patch: dict[str, Any], field: str, message: str) -> None:
    obj = {**workload(gang_group("w", 2)), **patch}
    with pytest.raises(InputError) as info:
        workload_from_dict(obj)
    line = info.value.line()
    assert "\n" not in line
    assert "Workload team/train" in line
    assert field in line
    assert message in line


BAD_REFS = [
    ("workers", "spec.workloadRef", "map"),
    ({"podGroup": "w"}, "spec.workloadRef.name", "required"),
    ({"name": "Train", "podGroup": "w"}, "spec.workloadRef.name", "DNS-1123"),
    ({"name": "train"}, "spec.workloadRef.podGroup", "required"),
    ({"name": "train", "podGroup": 3}, "spec.workloadRef.podGroup", "string"),
    (
        {"name": "train", "podGroup": "w", "podGroupReplicaKey": "-x"},
        "spec.workloadRef.podGroupReplicaKey",
        "replica key",
    ),
]


@pytest.mark.parametrize(("ref", "field", "message"), BAD_REFS)
def test_bad_workload_refs_are_one_line_errors(ref: Any, field: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        pod_from_dict(pod(ref), PriorityTable())
    line = info.value.line()
    assert "\n" not in line
    assert "Pod team/p" in line
    assert field in line
    assert message in line
