"""Queue objects of every peer read into the one queue model, and bad input located."""

from __future__ import annotations

import pytest

from phalanx.api.errors import InputError
from phalanx.api.queues import BudgetSpec, QueueBindingSpec, QueueSpec
from phalanx.k8s.load import load_documents

GPU = "nvidia.com/gpu"


def one(obj: dict[str, object]) -> object:
    return load_documents([("q.yaml", obj)]).items[0].spec


def test_volcano_queue() -> None:
    spec = one(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {
                "weight": 3,
                "capability": {GPU: "16", "cpu": "64"},
                "deserved": {GPU: "8"},
                "guarantee": {"resource": {GPU: "4"}},
                "parent": "org",
                "reclaimable": False,
                "priority": 2,
            },
            "status": {"state": "Closed"},
        }
    )
    assert spec == QueueSpec(
        "research",
        parent="org",
        deserved={GPU: 8000},
        guarantee={GPU: 4000},
        capability={GPU: 16000, "cpu": 64000},
        weight=3,
        priority=2,
        reclaimable=False,
        open=False,
        api="scheduling.volcano.sh",
    )


def test_volcano_root_parent_and_defaults() -> None:
    spec = one(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"parent": "root"},
        }
    )
    assert isinstance(spec, QueueSpec)
    assert spec.parent is None and spec.weight == 1 and spec.reclaimable and spec.open


def test_kai_queue_units_and_unlimited() -> None:
    spec = one(
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "team"},
            "spec": {
                "parentQueue": "dept",
                "priority": 50,
                "resources": {
                    "gpu": {"quota": 2.5, "limit": -1, "overQuotaWeight": 3},
                    "cpu": {"quota": 8000, "limit": 16000, "overQuotaWeight": 1},
                    "memory": {"quota": -1, "limit": 1000},
                },
            },
        }
    )
    assert spec == QueueSpec(
        "team",
        parent="dept",
        deserved={GPU: 2500, "cpu": 8000},
        capability={"cpu": 16000, "memory": 1000 * 10**6},
        weight=3,
        priority=50,
        api="scheduling.run.ai",
    )


def test_kueue_cluster_queue_sums_flavors_and_maps_limits() -> None:
    spec = one(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "cohort": "org",
                "fairSharing": {"weight": "2"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {
                                "name": "a100",
                                "resources": [
                                    {
                                        "name": GPU,
                                        "nominalQuota": 8,
                                        "borrowingLimit": 4,
                                        "lendingLimit": 2,
                                    }
                                ],
                            },
                            {"name": "h100", "resources": [{"name": GPU, "nominalQuota": 8}]},
                        ],
                    }
                ],
            },
        }
    )
    assert isinstance(spec, QueueSpec)
    assert spec.parent == "org" and spec.weight == 2
    assert spec.deserved == {GPU: 16000}
    assert spec.guarantee == {GPU: 14000}  # nominal 16 - lending 2
    assert spec.capability == {}  # h100 has no borrowingLimit: unlimited within the cohort


def test_kueue_local_queue_and_elastic_quota() -> None:
    local = one(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ml"},
            "spec": {"clusterQueue": "cq"},
        }
    )
    assert local == QueueBindingSpec("ml", "lq", "cq")
    quota = one(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": "ml"},
            "spec": {"min": {GPU: "4"}, "max": {GPU: "8"}},
        }
    )
    assert quota == QueueSpec(
        "ml",
        deserved={GPU: 4000},
        guarantee={GPU: 4000},
        capability={GPU: 8000},
        api="scheduling.x-k8s.io",
        namespaces=("ml",),
    )


def test_pod_disruption_budget() -> None:
    budget = one(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": "ml"},
            "spec": {"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "x"}}},
        }
    )
    assert budget == BudgetSpec("ml", "pdb", (("app", "x"),), (), None, "25%")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "q"},
                "spec": {"weight": -1},
            },
            "q.yaml: Queue q: spec.weight: must be at least 1, not -1",
        ),
        (
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": "q"},
                "spec": {"resources": {"tpu": {"quota": 1}}},
            },
            "q.yaml: Queue q: spec.resources.tpu: unknown KAI resource 'tpu' "
            "(one of cpu, memory, gpu)",
        ),
        (
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": "lq"},
                "spec": {},
            },
            "q.yaml: LocalQueue default/lq: spec.clusterQueue: is required",
        ),
        (
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "p"},
                "spec": {"minAvailable": 1, "maxUnavailable": 1},
            },
            "q.yaml: PodDisruptionBudget default/p: spec: minAvailable and maxUnavailable are "
            "mutually exclusive",
        ),
    ],
)
def test_bad_queue_objects_are_one_located_line(obj: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as caught:
        one(obj)
    assert str(caught.value) == message
