"""``phalanx manifests``: valid Kubernetes objects, least-privilege RBAC, hardened Deployment.

Schemas come from ``kubernetes-validate`` (bundled JSON schemas, no network: the sockets are
blocked while validating), strict mode so a misspelled field fails.
"""

from __future__ import annotations

import argparse
import io
import socket
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from apiserver.harness import connected

from phalanx.api.errors import InputError
from phalanx.cli.install import add_parser, manifests_command
from phalanx.live.loop import LiveScheduler
from phalanx.live.manifests import install_manifests
from phalanx.live.resources import POD_GROUP_VERSIONS, QUEUE_OBJECT_VERSIONS, WORKLOAD_VERSIONS

K8S_VERSION = "1.37.0"  # the newest schema set kubernetes-validate 1.37.0 ships (1.25 … 1.37)
CLUSTER_SCOPED = ("CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding")
#: every PodGroup API read (and its status written): scheduler-plugins, Volcano, KAI, Workload API
POD_GROUP_GROUPS = (
    "scheduling.x-k8s.io",
    "scheduling.sigs.k8s.io",
    "scheduling.volcano.sh",
    "scheduling.run.ai",
    "scheduling.k8s.io",
)


def run_cli(*argv: str) -> list[dict[str, Any]]:
    root = argparse.ArgumentParser(prog="phalanx")
    add_parser(root.add_subparsers(dest="command", required=True))
    out = io.StringIO()
    assert manifests_command(root.parse_args(["manifests", *argv]), out) == 0
    text = out.getvalue()
    assert "&id" not in text and "*id" not in text  # no YAML anchors/aliases
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return run_cli()


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access during schema validation")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_kinds_in_apply_order(docs: list[dict[str, Any]]) -> None:
    assert [d["kind"] for d in docs] == [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
    ]
    assert docs == install_manifests()  # the YAML round-trips to the dicts


@pytest.mark.usefixtures("offline")
def test_every_manifest_validates_against_kubernetes_schemas(docs: list[dict[str, Any]]) -> None:
    assert K8S_VERSION.rsplit(".", 1)[0] in kubernetes_validate.utils.all_versions()[-1]
    for doc in docs:
        version = kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        assert version == "1.37"


@pytest.mark.usefixtures("offline")
def test_validator_is_not_vacuous(docs: list[dict[str, Any]]) -> None:
    deployment = one(docs, "Deployment")
    bad = {**deployment, "spec": {**deployment["spec"], "replica": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_custom_options_are_applied_and_valid() -> None:
    docs = run_cli(
        "--namespace", "sched", "--image", "reg.example/p:dev", "--scheduler-name", "gang"
    )
    assert one(docs, "Namespace")["metadata"]["name"] == "sched"
    for doc in docs:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"]["namespace"] == "sched"
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "reg.example/p:dev"
    assert container["args"][container["args"].index("--scheduler-name") + 1] == "gang"
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert one(docs, kind)["subjects"] == [
            {"kind": "ServiceAccount", "name": "gang", "namespace": "sched"}
        ]


@pytest.mark.parametrize(
    ("option", "value"),
    [("namespace", "Bad_NS"), ("scheduler_name", "-x"), ("image", "a b"), ("image", "")],
)
def test_bad_options_are_input_errors(option: str, value: str) -> None:
    with pytest.raises(InputError):
        install_manifests(**{option: value})


def triples(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    out = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}  # no resourceNames, no URLs
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, resource, verb)
                    out.add((group, resource, verb))
    return out


def test_cluster_role_grants_exactly_the_verbs_used(docs: list[dict[str, Any]]) -> None:
    read = ("get", "list", "watch")
    expected = {("", "pods", v) for v in (*read, "delete")}
    expected |= {("", "pods/eviction", "create")}
    expected |= {("policy", "poddisruptionbudgets", v) for v in read}
    expected |= {("", "pods/binding", "create"), ("", "pods/status", "patch")}
    expected |= {("", "events", "create"), ("events.k8s.io", "events", "create")}
    expected |= {("", "nodes", v) for v in read}
    expected |= {("scheduling.k8s.io", "priorityclasses", v) for v in read}
    expected |= {("scheduling.k8s.io", "workloads", v) for v in read}
    expected |= {(g, "podgroups", v) for g in POD_GROUP_GROUPS for v in read}
    expected |= {(g, "podgroups/status", "patch") for g in POD_GROUP_GROUPS}
    expected |= {
        (g, "queues", v) for g in ("scheduling.volcano.sh", "scheduling.run.ai") for v in read
    }
    expected |= {("scheduling.volcano.sh", "queues/status", "patch")}  # live/queue_status.py
    kueue = ("clusterqueues", "localqueues", "cohorts", "resourceflavors")
    expected |= {("kueue.x-k8s.io", r, v) for r in kueue for v in read}
    expected |= {(g, "elasticquotas", v) for g in POD_GROUP_GROUPS[:2] for v in read}
    expected |= {(g, "topologies", v) for g in ("kueue.x-k8s.io", "kai.scheduler") for v in read}
    expected |= {("topology.volcano.sh", "hypernodes", v) for v in read}
    assert triples(one(docs, "ClusterRole")["rules"]) == expected
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "phalanx", "namespace": "phalanx-system"}
    ]


async def test_every_api_serve_may_watch_is_granted(docs: list[dict[str, Any]]) -> None:
    """The informers of a live scheduler, and every version discovery may choose."""
    async with connected() as (_server, client):
        watched = list(LiveScheduler(client).informers)
    families = (WORKLOAD_VERSIONS, POD_GROUP_VERSIONS, *QUEUE_OBJECT_VERSIONS)
    watched += [resource for family in families for resource in family]
    assert {r.plural for r in watched} >= {"queues", "clusterqueues", "localqueues"}
    wanted = {(r.group, r.plural, v) for r in watched for v in ("get", "list", "watch")}
    assert wanted - triples(one(docs, "ClusterRole")["rules"]) == set()


def test_eviction_is_granted_by_default_and_the_old_flag_changes_nothing(
    docs: list[dict[str, Any]],
) -> None:
    evicting = run_cli("--allow-evict")
    assert triples(one(evicting, "ClusterRole")["rules"]) == triples(
        one(docs, "ClusterRole")["rules"]
    )


def test_lease_access_is_namespaced(docs: list[dict[str, Any]]) -> None:
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == "phalanx-system"
    assert triples(role["rules"]) == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")
    }
    binding = one(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == "phalanx-system"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert not any(r["resources"] == ["leases"] for r in one(docs, "ClusterRole")["rules"])


def test_deployment_is_hardened_and_probed(docs: list[dict[str, Any]]) -> None:
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [container] = pod["containers"]
    assert container["image"] == "ghcr.io/phalanx-sched/phalanx:0.1.0"
    assert container["args"][:4] == ["serve", "--leader-elect", "--metrics-port", "8080"]
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    service = one(docs, "Service")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_podgroup_crd(docs: list[dict[str, Any]]) -> None:
    crd = one(docs, "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    spec = crd["spec"]
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["pg", "pgs"]
    [version] = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Phase", "MinMember", "Running", "Succeeded", "Failed", "Age"]
    schema = version["schema"]["openAPIV3Schema"]
    min_member = schema["properties"]["spec"]["properties"]["minMember"]
    assert min_member == {**min_member, "type": "integer", "format": "int32", "minimum": 1}


@pytest.mark.parametrize(
    ("spec", "valid"),
    [
        ({"minMember": 1}, True),
        ({"minMember": 4, "minResources": {"nvidia.com/gpu": 8, "memory": "64Gi"}}, True),
        ({"minMember": 2, "scheduleTimeoutSeconds": 30}, True),
        ({"minMember": 0}, False),
        ({"minMember": -3}, False),
        ({"minMember": "2"}, False),
        ({"minMember": 2, "minResources": {"cpu": "lots"}}, False),
    ],
)
def test_crd_schema_accepts_and_rejects_podgroups(
    docs: list[dict[str, Any]], spec: dict[str, Any], valid: bool
) -> None:
    version = one(docs, "CustomResourceDefinition")["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    podgroup = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": spec,
        "status": {"phase": "Running", "running": 4, "scheduleStartTime": "2026-01-01T00:00:00Z"},
    }
    validator = jsonschema.Draft7Validator(schema)
    assert validator.is_valid(podgroup) is valid


@pytest.mark.usefixtures("offline")
def test_the_seed_example_is_valid_and_names_the_scheduler(docs: list[dict[str, Any]]) -> None:
    crd = one(docs, "CustomResourceDefinition")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    docs = run_cli("--example", "--scheduler-name", "gang")
    assert [d["kind"] for d in docs] == ["Namespace", "PodGroup", "Job"]
    for doc in docs:
        if doc["kind"] != "PodGroup":
            assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.37"
    group, job = docs[1], docs[2]
    assert group["spec"] == {"minMember": 3}
    assert job["spec"]["parallelism"] == 4
    template = job["spec"]["template"]
    assert template["spec"]["schedulerName"] == "gang"
    assert template["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "train"}
    assert jsonschema.Draft7Validator(schema).is_valid(group)  # our CRD accepts it
