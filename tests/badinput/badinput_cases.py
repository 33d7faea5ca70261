"""The bad-input catalog: every case is an input Kubernetes (or phalanx) refuses.

Each :class:`Case` names the files it writes (``@NAME`` in ``argv`` and in ``expect`` becomes the
file's path), the command line, and the fragments the one error line must hold: the file, the
object (document index, kind, name) and the field. Manifest cases are mutations of one valid
workload (:data:`BASE`, which :func:`test_the_base_workload_is_valid` runs), so each case
differs from a good input in exactly one place.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    expect: tuple[str, ...]
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


DELETE = object()

BASE: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"}]},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}},
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    },
    {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "team"},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 60},
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p1",
            "namespace": "team",
            "labels": {"scheduling.x-k8s.io/pod-group": "g"},
            "annotations": {"phalanx.dev/duration": "10m", "phalanx.dev/submit-after": "1m"},
        },
        "spec": {
            "schedulerName": "phalanx",
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "resources": {
                        "requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
                        "limits": {"cpu": "4", "nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p2",
            "namespace": "team",
            "labels": {"scheduling.x-k8s.io/pod-group": "g"},
            "annotations": {"phalanx.dev/duration": "10m"},
        },
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]},
    },
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "team"},
        "spec": {
            "parallelism": 2,
            "completions": 4,
            "template": {
                "metadata": {"annotations": {"phalanx.dev/duration": "5m"}},
                "spec": {
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m"}}}]
                },
            },
        },
    },
    {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "vg", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "default", "minTaskMember": {"worker": 1}},
    },
    {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team"},
        "spec": {"hard": {"requests.cpu": "100", "pods": "50"}},
    },
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
]

#: How each BASE document is named in an error line.
LABELS = [
    "Node n1",
    "PriorityClass high",
    "PodGroup team/g",
    "Pod team/p1",
    "Pod team/p2",
    "Job team/j",
    "PodGroup team/vg",
    "ResourceQuota team/q",
    "Namespace team",
]
NODE, PC, PG, P1, P2, JOB, VPG, QUOTA, NS = range(9)


def base_yaml(docs: list[dict[str, Any]] | None = None) -> str:
    return yaml.safe_dump_all(BASE if docs is None else docs, sort_keys=False)


_KEY = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")


def _set(doc: dict[str, Any], path: str, value: object) -> None:
    keys: list[str | int] = []
    for name, bracketed in _KEY.findall(path):
        key = name or bracketed
        keys.append(int(key) if key.isdigit() else key)
    target: Any = doc
    for key in keys[:-1]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
    if value is DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value


def mutated(index: int, path: str, value: object) -> str:
    docs = copy.deepcopy(BASE)
    _set(docs[index], path, value)
    return base_yaml(docs)


def manifest(
    id: str, index: int, path: str, value: object, *expect: str, label: str | None = None
) -> Case:
    """``simulate`` on BASE with ``path`` of document ``index`` set to ``value``; the error
    names the object ``label`` (default: its name in BASE)."""
    return Case(
        id,
        ("simulate", "@w.yaml"),
        ("@w.yaml", LABELS[index] if label is None else label, *expect),
        {"w.yaml": mutated(index, path, value)},
    )


def raw(id: str, text: str | bytes, *expect: str, command: str = "simulate") -> Case:
    return Case(id, (command, "@w.yaml"), ("@w.yaml", *expect), {"w.yaml": text})


CTR = "spec.containers[0]"
RES = f"{CTR}.resources"

# -- YAML and JSON structure ------------------------------------------------------------------
STRUCTURE = [
    raw("yaml syntax", "kind: [Pod\n", "YAML syntax error", "line 2"),
    raw("yaml tab indent", "kind: Pod\nmetadata:\n\tname: x\n", "YAML syntax error"),
    raw("yaml unclosed quote", 'kind: "Pod\n', "YAML syntax error"),
    raw("yaml duplicate key", base_yaml().replace("kind: Node", "kind: Node\nkind: Node"), "dup"),
    raw("yaml duplicate metadata name", "metadata: {name: a, name: b}\n", "duplicate key 'name'"),
    raw("yaml deep flow nesting", "a: " + "[" * 30000 + "]" * 30000 + "\n", "nested more than"),
    raw("yaml deep flow maps", "a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n", "nested more"),
    raw("yaml deep block", "".join(" " * i + "- \n" for i in range(1500)) + "", "nested more"),
    raw("yaml not utf-8", b"kind: Pod\nmetadata: {name: \xff\xfe}\n", "not UTF-8"),
    raw("yaml latin-1", "kind: Pod # café\n".encode("latin-1"), "not UTF-8"),
    raw("yaml nul byte", "kind: Pod\x00\n", "YAML"),
    raw("yaml undefined alias", "kind: *nope\n", "YAML", "undefined alias"),
    raw("yaml python tag", "kind: !!python/object:os.system {}\n", "YAML"),
    raw("yaml unknown tag", "kind: !foo bar\n", "YAML"),
    raw("yaml huge integer", "a: " + "9" * 5000 + "\n", "YAML"),
    raw("yaml empty", "", "no Kubernetes objects"),
    raw("yaml comments only", "# nothing here\n# at all\n", "no Kubernetes objects"),
    raw("yaml separators only", "---\n---\n", "no Kubernetes objects"),
    raw("yaml top-level list", "- 1\n- 2\n", "document 1", "a map"),
    raw("yaml top-level string", "hello\n", "document 1", "a map"),
    raw("yaml top-level number", "42\n", "document 1", "a map"),
    raw("yaml second doc a list", base_yaml() + "---\n- a\n", "document 10", "a map"),
    raw("yaml non-string key", "1: a\nkind: Pod\n", "non-string keys"),
    raw("json syntax", '{"kind": "Pod", "metadata": {"name": "p"}', "YAML syntax error"),
    raw("json array", json.dumps([{"kind": "Pod"}]), "document 1", "a list"),
    raw("json duplicate key", '{"kind": "Pod", "kind": "Node"}', "duplicate key 'kind'"),
    raw("list items not a list", "apiVersion: v1\nkind: List\nitems: 5\n", "List: items"),
    raw("list item a number", "apiVersion: v1\nkind: List\nitems: [5]\n", "items[0]"),
    raw("list item null", "apiVersion: v1\nkind: List\nitems: [null]\n", "items[0]"),
    raw(
        "list item without kind",
        "apiVersion: v1\nkind: List\nitems: [{metadata: {name: x}}]\n",
        "object x",
        "kind",
    ),
    Case("file missing", ("simulate", "/nonexistent/w.yaml"), ("/nonexistent/w.yaml", "not found")),
    Case("directory without manifests", ("simulate", "@traces"), ("@traces", "holds no")),
]

# -- identity of objects ----------------------------------------------------------------------
IDENTITY = [
    raw("no kind", "apiVersion: v1\nmetadata: {name: a}\n", "kind", "required"),
    raw("no apiVersion", "kind: Pod\nmetadata: {name: a}\n", "apiVersion", "required"),
    raw("unknown kind", "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n", "Widget"),
    raw("wrong apiVersion", "apiVersion: v2\nkind: Pod\nmetadata: {name: a}\n", "apiVersion"),
    raw("kind a list", "apiVersion: v1\nkind: [Pod]\nmetadata: {name: a}\n", "kind", "string"),
    raw("apiVersion a number", "apiVersion: 1\nkind: Pod\nmetadata: {name: a}\n", "apiVersion"),
    raw("no name", "apiVersion: v1\nkind: Pod\nmetadata: {}\n", "Pod (document 1)", "name"),
    raw("no metadata", "apiVersion: v1\nkind: Node\n", "Node (document 1)", "metadata.name"),
    raw("metadata a string", "apiVersion: v1\nkind: Pod\nmetadata: x\n", "metadata", "a map"),
    manifest("name uppercase", P1, "metadata.name", "Pod1", "metadata.name", label="Pod team/Pod1"),
    manifest("name with space", NODE, "metadata.name", "n 1", "metadata.name", label="Node n 1"),
    manifest("name too long", P2, "metadata.name", "a" * 300, "metadata.name", label="Pod team/"),
    manifest("name a number", P1, "metadata.name", 5, "metadata.name", label="Pod (document 4)"),
    manifest(
        "namespace invalid", P1, "metadata.namespace", "Team_A", "metadata.namespace", label="Pod"
    ),
    manifest(
        "namespace a list", P2, "metadata.namespace", ["a"], "metadata.namespace", label="Pod"
    ),
    raw(
        "duplicate object",
        base_yaml([*BASE, BASE[P2]]),
        "Pod team/p2",
        "duplicate",
        "metadata.name",
    ),
    manifest("labels a list", P1, "metadata.labels", ["a"], "metadata.labels", "a map"),
    manifest("label value a number", NODE, "metadata.labels.zone", 1, "metadata.labels.zone"),
    manifest("label key invalid", NODE, "metadata.labels", {"bad key!": "x"}, "metadata.labels"),
    manifest("label value too long", NODE, "metadata.labels.zone", "a" * 64, "metadata.labels"),
    manifest("annotations a string", P1, "metadata.annotations", "x", "metadata.annotations"),
    manifest("annotation value a number", P2, "metadata.annotations.x", 1, "metadata.annotations"),
]

# -- Nodes --------------------------------------------------------------------------------------
ALLOC = "status.allocatable"
NODES = [
    manifest("node cpu malformed", NODE, f"{ALLOC}.cpu", "1.2.3", f"{ALLOC}.cpu", "malformed"),
    manifest("node cpu negative", NODE, f"{ALLOC}.cpu", "-4", f"{ALLOC}.cpu", "negative"),
    manifest("node cpu 100P", NODE, f"{ALLOC}.cpu", "100P", f"{ALLOC}.cpu", "out of range"),
    manifest("node memory 100E", NODE, f"{ALLOC}.memory", "100E", f"{ALLOC}.memory", "range"),
    manifest("node memory 100Ei", NODE, f"{ALLOC}.memory", "100Ei", f"{ALLOC}.memory", "range"),
    manifest(
        "node memory 10^22 Gi",
        NODE,
        f"{ALLOC}.memory",
        "9999999999999999999999Gi",
        f"{ALLOC}.memory",
        "out of range",
    ),
    manifest("node memory 1e30", NODE, f"{ALLOC}.memory", "1e30", f"{ALLOC}.memory", "range"),
    manifest("node memory exponent 1e999", NODE, f"{ALLOC}.memory", "1e999", f"{ALLOC}.memory"),
    manifest("node memory yaml int 2^64", NODE, f"{ALLOC}.memory", 2**64, f"{ALLOC}.memory"),
    manifest("node memory .inf", NODE, f"{ALLOC}.memory", float("inf"), f"{ALLOC}.memory"),
    manifest("node memory .nan", NODE, f"{ALLOC}.memory", float("nan"), f"{ALLOC}.memory"),
    manifest("node memory true", NODE, f"{ALLOC}.memory", True, f"{ALLOC}.memory"),
    manifest("node memory a list", NODE, f"{ALLOC}.memory", ["1Gi"], f"{ALLOC}.memory"),
    manifest("node memory bad suffix", NODE, f"{ALLOC}.memory", "1GB", f"{ALLOC}.memory"),
    manifest("node gpu 1.5", NODE, f"{ALLOC}[nvidia.com/gpu]", "1.5", "nvidia.com/gpu", "integer"),
    manifest("node gpu 500m", NODE, f"{ALLOC}[nvidia.com/gpu]", "500m", "nvidia.com/gpu"),
    manifest("node pods 1.5", NODE, f"{ALLOC}.pods", "1.5", f"{ALLOC}.pods", "integer"),
    manifest("node allocatable a list", NODE, ALLOC, ["cpu"], ALLOC, "a map"),
    manifest("node status a string", NODE, "status", "ready", "status", "a map"),
    manifest("node taints a map", NODE, "spec.taints", {"a": 1}, "spec.taints", "a list"),
    manifest("node taint effect", NODE, "spec.taints[0].effect", "Maybe", "spec.taints[0].effect"),
    manifest("node taint no key", NODE, "spec.taints[0].key", DELETE, "spec.taints[0]"),
    manifest("node taint a string", NODE, "spec.taints[0]", "gpu", "spec.taints[0]"),
    manifest("node unschedulable yes", NODE, "spec.unschedulable", "yes", "spec.unschedulable"),
    manifest("node spec a list", NODE, "spec", [1], "spec", "a map"),
]

# -- Pods ---------------------------------------------------------------------------------------
REQ, LIM = f"{RES}.requests", f"{RES}.limits"
PODS = [
    manifest("pod no containers", P2, "spec.containers", DELETE, "spec.containers", "required"),
    manifest("pod containers empty", P2, "spec.containers", [], "spec.containers"),
    manifest("pod containers a map", P2, "spec.containers", {"a": 1}, "spec.containers"),
    manifest("pod container a string", P2, "spec.containers[0]", "main", "spec.containers[0]"),
    manifest("pod spec a string", P2, "spec", "x", "spec", "a map"),
    manifest("pod resources a list", P2, RES, [1], RES, "a map"),
    manifest("pod requests a list", P2, REQ, ["cpu"], REQ, "a map"),
    manifest("pod cpu malformed", P2, f"{REQ}.cpu", "1.2.3", f"{REQ}.cpu", "malformed"),
    manifest("pod cpu negative", P2, f"{REQ}.cpu", "-1", f"{REQ}.cpu", "negative"),
    manifest("pod cpu 100P", P2, f"{REQ}.cpu", "100P", f"{REQ}.cpu", "out of range"),
    manifest("pod cpu 10E", P2, f"{REQ}.cpu", "10E", f"{REQ}.cpu", "out of range"),
    manifest("pod cpu 2^63 m", P2, f"{REQ}.cpu", f"{2**63}m", f"{REQ}.cpu", "out of range"),
    manifest("pod memory 100E", P2, f"{REQ}.memory", "100E", f"{REQ}.memory", "out of range"),
    manifest(
        "pod memory 10^22 Gi",
        P2,
        f"{REQ}.memory",
        "9999999999999999999999Gi",
        f"{REQ}.memory",
        "out of range",
    ),
    manifest("pod memory 1e19", P2, f"{REQ}.memory", "1e19", f"{REQ}.memory", "out of range"),
    manifest("pod memory 5000 digits", P2, f"{REQ}.memory", "9" * 5000, f"{REQ}.memory"),
    manifest("pod memory .nan", P2, f"{REQ}.memory", float("nan"), f"{REQ}.memory"),
    manifest("pod memory a map", P2, f"{REQ}.memory", {"a": 1}, f"{REQ}.memory"),
    manifest("pod gpu 1.5", P1, f"{REQ}[nvidia.com/gpu]", "1.5", "[nvidia.com/gpu]", "whole"),
    manifest("pod gpu 1.0005", P2, f"{REQ}[nvidia.com/gpu]", "1.0005", "[nvidia.com/gpu]"),
    manifest("pod gpu 0.0005", P1, f"{REQ}[nvidia.com/gpu]", "0.0005", "milli-GPUs"),
    manifest("pod gpu limit 500m", P1, f"{LIM}[nvidia.com/gpu]", "500m", "must be equal"),
    manifest("pod gpu request != limit", P1, f"{LIM}[nvidia.com/gpu]", "2", "must be equal"),
    manifest(
        "pod extended request != limit",
        P2,
        RES,
        {"requests": {"example.com/foo": "1"}, "limits": {"example.com/foo": "3"}},
        "requests[example.com/foo]",
        "must be equal",
    ),
    manifest(
        "pod extended 1.5",
        P2,
        RES,
        {"requests": {"example.com/foo": "1.5"}},
        "requests[example.com/foo]",
        "integer",
    ),
    manifest(
        "pod hugepages request != limit",
        P2,
        RES,
        {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "4Mi"}},
        "requests.hugepages-2Mi",
        "must be equal",
    ),
    manifest("pod cpu above limit", P1, f"{LIM}.cpu", "1", f"{REQ}.cpu", "less than or equal"),
    manifest("pod resource named gpu", P2, f"{REQ}.gpu", "1", f"{REQ}.gpu", "invalid container"),
    manifest("pod resource name empty", P2, f"{REQ}", {"": "1"}, REQ),
    manifest(
        "pod total memory overflows",
        P2,
        "spec.containers",
        [
            {"name": "a", "resources": {"requests": {"memory": str(2**62)}}},
            {"name": "b", "resources": {"requests": {"memory": str(2**62)}}},
        ],
        "spec.containers",
        "out of range",
    ),
    manifest("pod overhead malformed", P2, "spec.overhead", {"cpu": "x"}, "spec.overhead.cpu"),
    manifest(
        "pod init restartPolicy",
        P2,
        "spec.initContainers",
        [{"name": "i", "restartPolicy": "Never"}],
        "spec.initContainers[0].restartPolicy",
    ),
    manifest("pod init a map", P2, "spec.initContainers", {"a": 1}, "spec.initContainers"),
    manifest("pod priority a string", P2, "spec.priority", "high", "spec.priority", "integer"),
    manifest("pod priority 2^31", P2, "spec.priority", 2**31, "spec.priority", "at most"),
    manifest("pod priority 1.5", P2, "spec.priority", 1.5, "spec.priority", "integer"),
    manifest("pod priority class unknown", P1, "spec.priorityClassName", "nope", "priorityClass"),
    manifest("pod schedulerName a number", P2, "spec.schedulerName", 5, "spec.schedulerName"),
    manifest("pod nodeSelector a list", P1, "spec.nodeSelector", ["a"], "spec.nodeSelector"),
    manifest("pod nodeSelector value int", P1, "spec.nodeSelector.zone", 1, "spec.nodeSelector"),
    manifest("pod tolerations a map", P1, "spec.tolerations", {"a": 1}, "spec.tolerations"),
    manifest(
        "pod toleration operator",
        P1,
        "spec.tolerations[0].operator",
        "Maybe",
        "spec.tolerations[0].operator",
    ),
    manifest(
        "pod toleration effect",
        P1,
        "spec.tolerations[0].effect",
        "Sometimes",
        "spec.tolerations[0].effect",
    ),
    manifest("pod affinity a list", P1, "spec.affinity", [1], "spec.affinity"),
    manifest(
        "pod node affinity terms a map",
        P1,
        "spec.affinity",
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"x": 1}}},
        "spec.affinity.nodeAffinity",
    ),
    manifest(
        "pod node affinity bad operator",
        P1,
        "spec.affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "Near"}]}
                    ]
                }
            }
        },
        "operator",
    ),
    manifest(
        "pod gang group missing",
        P2,
        "metadata.labels",
        {"scheduling.x-k8s.io/pod-group": "nope"},
        "pod-group",
        "nope",
    ),
    manifest(
        "pod workloadRef a string",
        P2,
        "spec.workloadRef",
        "w",
        "spec.workloadRef",
    ),
]

# -- annotations --------------------------------------------------------------------------------
ANN = "metadata.annotations"
DUR, SUB, DEL = "phalanx.dev/duration", "phalanx.dev/submit-after", "phalanx.dev/delete-after"
ANNOTATIONS = [
    manifest("duration malformed", P1, f"{ANN}[{DUR}]", "ten", f"{ANN}[{DUR}]", "malformed"),
    manifest("duration negative", P1, f"{ANN}[{DUR}]", "-5", f"{ANN}[{DUR}]"),
    manifest("duration float syntax", P1, f"{ANN}[{DUR}]", "1e3", f"{ANN}[{DUR}]"),
    manifest("duration nan", P1, f"{ANN}[{DUR}]", "nan", f"{ANN}[{DUR}]"),
    manifest("duration 400 digits", P1, f"{ANN}[{DUR}]", "9" * 400, f"{ANN}[{DUR}]", "range"),
    manifest("duration 10^305 s", P1, f"{ANN}[{DUR}]", "86" + "0" * 303, "out of range"),
    manifest("duration 1000 years", P1, f"{ANN}[{DUR}]", "365000d", f"{ANN}[{DUR}]", "range"),
    manifest("duration a number", P1, f"{ANN}[{DUR}]", 5, f"{ANN}[{DUR}]", "string"),
    manifest("submit-after 10^305 s", P1, f"{ANN}[{SUB}]", "86" + "0" * 303, SUB, "range"),
    manifest("submit-after malformed", P1, f"{ANN}[{SUB}]", "soon", SUB, "malformed"),
    manifest("submit-after unit", P1, f"{ANN}[{SUB}]", "5y", SUB, "malformed"),
    manifest("node submit-after", NODE, f"{ANN}[{SUB}]", "10m", f"{ANN}[{SUB}]", "nodes are fixed"),
    manifest("node delete-after", NODE, f"{ANN}[{DEL}]", "10m", f"{ANN}[{DEL}]", "nodes are fixed"),
    manifest("delete-after malformed", P2, f"{ANN}[{DEL}]", "later", DEL, "malformed"),
    manifest("delete-after huge", P2, f"{ANN}[{DEL}]", "9" * 30 + "h", DEL, "range"),
    manifest("job duration malformed", JOB, f"{ANN}[{DUR}]", "x", f"{ANN}[{DUR}]"),
    manifest("podgroup duration malformed", PG, f"{ANN}[{DUR}]", "1x", f"{ANN}[{DUR}]"),
    manifest("max-member not a number", PG, f"{ANN}[phalanx.dev/max-member]", "many", "max-member"),
    manifest(
        "max-member below minMember",
        PG,
        f"{ANN}[phalanx.dev/max-member]",
        "0",
        "max-member",
        "at least the gang's minimum",
    ),
    manifest(
        "pod preemptionPolicy unknown",
        P1,
        "spec.preemptionPolicy",
        "Sometimes",
        "spec.preemptionPolicy",
        "PreemptLowerPriority or Never",
    ),
    manifest(
        "min-task-member not JSON",
        PG,
        f"{ANN}[phalanx.dev/min-task-member]",
        "{worker: 3",
        "min-task-member",
        "JSON",
    ),
    manifest(
        "min-task-member a list",
        PG,
        f"{ANN}[phalanx.dev/min-task-member]",
        "[1]",
        "min-task-member",
    ),
    manifest(
        "min-task-member negative",
        PG,
        f"{ANN}[phalanx.dev/min-task-member]",
        '{"worker": -1}',
        "min-task-member",
    ),
    manifest(
        "min-task-member huge number",
        PG,
        f"{ANN}[phalanx.dev/min-task-member]",
        '{"worker": ' + "9" * 5000 + "}",
        "min-task-member",
    ),
    manifest(
        "min-task-member deep",
        PG,
        f"{ANN}[phalanx.dev/min-task-member]",
        "[" * 5000 + "]" * 5000,
        "min-task-member",
    ),
]

# -- Jobs ---------------------------------------------------------------------------------------
TPL = "spec.template"
JOBS = [
    manifest("job parallelism negative", JOB, "spec.parallelism", -1, "spec.parallelism"),
    manifest("job parallelism 10^7", JOB, "spec.parallelism", 10**7, "spec.parallelism", "limit"),
    manifest("job completions 10^7", JOB, "spec.completions", 10**7, "spec.completions", "limit"),
    manifest("job parallelism 2^31", JOB, "spec.parallelism", 2**31, "spec.parallelism"),
    manifest("job parallelism a string", JOB, "spec.parallelism", "2", "spec.parallelism"),
    manifest("job parallelism 1.5", JOB, "spec.parallelism", 1.5, "spec.parallelism"),
    manifest("job no template", JOB, TPL, DELETE, TPL, "required"),
    manifest("job template a list", JOB, TPL, [1], TPL),
    manifest("job template no containers", JOB, f"{TPL}.spec.containers", DELETE, "containers"),
    manifest("job template cpu 100P", JOB, f"{TPL}.{REQ}.cpu", "100P", f"{TPL}.{REQ}.cpu"),
    manifest("job template gpu 1.5", JOB, f"{TPL}.{REQ}[nvidia.com/gpu]", "1.5", "whole"),
    manifest("job spec a string", JOB, "spec", "x", "spec", "a map"),
]

# -- PodGroups ----------------------------------------------------------------------------------
PODGROUPS = [
    manifest("pg minMember 0", PG, "spec.minMember", 0, "spec.minMember", "at least 1"),
    manifest("pg minMember missing", PG, "spec.minMember", DELETE, "spec.minMember"),
    manifest("pg minMember a string", PG, "spec.minMember", "2", "spec.minMember"),
    manifest("pg minMember 2^31", PG, "spec.minMember", 2**31, "spec.minMember"),
    manifest("pg name in label too long", PG, "metadata.labels.a", "b" * 70, "metadata.labels.a"),
    manifest("pg timeout a string", PG, "spec.scheduleTimeoutSeconds", "1m", "scheduleTimeout"),
    manifest("pg timeout negative", PG, "spec.scheduleTimeoutSeconds", -1, "scheduleTimeout"),
    manifest("pg minResources a list", PG, "spec.minResources", [1], "spec.minResources"),
    manifest("pg minResources cpu", PG, "spec.minResources.cpu", "lots", "spec.minResources.cpu"),
    manifest("pg minResources 100P", PG, "spec.minResources.cpu", "100P", "out of range"),
    manifest("pg spec a list", PG, "spec", [1], "spec", "a map"),
    manifest("vpg minTaskMember a list", VPG, "spec.minTaskMember", [1], "spec.minTaskMember"),
    manifest("vpg minTaskMember -1", VPG, "spec.minTaskMember.worker", -1, "minTaskMember"),
    manifest("vpg queue a number", VPG, "spec.queue", 5, "spec.queue"),
    manifest("vpg priority unknown", VPG, "spec.priorityClassName", "zz", "priorityClassName"),
]

# -- PriorityClasses, quotas, namespaces -----------------------------------------------------
OTHERS = [
    manifest("pc value missing", PC, "value", DELETE, "value", "required"),
    manifest("pc value a string", PC, "value", "high", "value"),
    manifest("pc value above 10^9", PC, "value", 2 * 10**9, "value", "at most"),
    manifest("pc value 1.5", PC, "value", 1.5, "value"),
    manifest("pc globalDefault yes", PC, "globalDefault", "yes", "globalDefault"),
    manifest("pc preemptionPolicy", PC, "preemptionPolicy", "Sometimes", "preemptionPolicy"),
    raw(
        "pc two global defaults",
        base_yaml(
            [
                *BASE,
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "d1"},
                    "value": 1,
                    "globalDefault": True,
                },
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "d2"},
                    "value": 2,
                    "globalDefault": True,
                },
            ]
        ),
        "PriorityClass d2",
        "globalDefault",
    ),
    manifest("quota hard a list", QUOTA, "spec.hard", [1], "spec.hard"),
    manifest("quota cpu malformed", QUOTA, "spec.hard[requests.cpu]", "x", "requests.cpu"),
    manifest("quota cpu negative", QUOTA, "spec.hard[requests.cpu]", "-1", "requests.cpu"),
    manifest("quota cpu 100P", QUOTA, "spec.hard[requests.cpu]", "100P", "requests.cpu"),
    manifest("quota pods 1e30", QUOTA, "spec.hard.pods", "1e30", "spec.hard.pods"),
    manifest(
        "namespace name invalid", NS, "metadata.name", "Team", "metadata.name", label="Namespace"
    ),
]

MANIFESTS = [*STRUCTURE, *IDENTITY, *NODES, *PODS, *ANNOTATIONS, *JOBS, *PODGROUPS, *OTHERS]


def _cli(id: str, *argv: str, expect: tuple[str, ...]) -> Case:
    files = {"w.yaml": base_yaml()} if any("@w.yaml" in a for a in argv) else {}
    return Case(id, tuple(argv), expect, files)


W = "@w.yaml"
SYN = "synthetic:jobs=4,nodes=1"
# -- command-line options -----------------------------------------------------------------------
CLI = [
    _cli("no command", expect=("phalanx: error:", "command")),
    _cli("unknown command", "frobnicate", expect=("phalanx: error:", "frobnicate")),
    _cli("unknown flag", "simulate", W, "--frob", expect=("phalanx: error:", "--frob")),
    _cli("sim policy", "simulate", W, "--policy", "nope", expect=("--policy", "nope")),
    _cli("sim seed abc", "simulate", W, "--seed", "abc", expect=("--seed", "abc")),
    _cli("sim seed -1", "simulate", W, "--seed=-1", expect=("--seed", "-1")),
    _cli("sim seed 2^64", "simulate", W, "--seed", str(2**64), expect=("--seed",)),
    _cli("sim seed 1.5", "simulate", W, "--seed", "1.5", expect=("--seed",)),
    _cli("sim until forever", "simulate", W, "--until", "forever", expect=("--until", "forever")),
    _cli("sim until -5", "simulate", W, "--until=-5", expect=("--until",)),
    _cli("sim until 10^400", "simulate", W, "--until", "9" * 400, expect=("--until", "range")),
    _cli("sim price nan", "simulate", W, "--price", "nan", expect=("--price", "nan")),
    _cli("sim price -1", "simulate", W, "--price=-1", expect=("--price",)),
    _cli("sim price inf", "simulate", W, "--price", "inf", expect=("--price", "inf")),
    _cli("sim price abc", "simulate", W, "--price", "abc", expect=("--price", "abc")),
    _cli("sim price 1e999", "simulate", W, "--price", "1e999", expect=("--price",)),
    _cli("sim output yaml", "simulate", W, "-o", "yaml", expect=("-o/--output", "yaml")),
    _cli("sim scoring", "simulate", W, "--scoring", "fgd9", expect=("--scoring", "fgd9")),
    _cli("sim startup-delay", "simulate", W, "--startup-delay", "x", expect=("--startup-delay",)),
    _cli("sim startup-delay nan", "simulate", W, "--startup-delay", "nan", expect=("--startup",)),
    _cli("sim events dir", "simulate", W, "--events", "/nonexistent/e.jsonl", expect=("/nonex",)),
    _cli("sim long value", "simulate", W, "--policy", "x" * 500, expect=("--policy", "...")),
    _cli(
        "sim kubeconfig without from-cluster",
        "simulate",
        W,
        "--kubeconfig",
        "/nonexistent",
        expect=("--kubeconfig", "--from-cluster"),
    ),
    _cli("cmp policies", "compare", SYN, "--policies", "nope", expect=("--policies", "nope")),
    _cli("cmp policies empty", "compare", SYN, "--policies", ",", expect=("--policies",)),
    _cli("cmp seed -1", "compare", SYN, "--seed=-1", expect=("--seed",)),
    _cli("cmp until", "compare", SYN, "--until", "1y", expect=("--until",)),
    _cli("cmp output", "compare", SYN, "-o", "yaml", expect=("-o/--output",)),
    _cli("cmp report dir", "compare", SYN, "--report", "/nonexistent/r.html", expect=("/nonex",)),
    _cli("cmp no workload", "compare", expect=("WORKLOAD",)),
    _cli("cmp file missing", "compare", "/nonexistent.yaml", expect=("/nonexistent.yaml",)),
    _cli("pack seed -1", "packing", "openb:default", "--seed=-1", expect=("--seed",)),
    _cli("pack seed abc", "packing", "openb:default", "--seed", "abc", expect=("--seed",)),
    _cli("pack output", "packing", "openb:default", "-o", "yaml", expect=("-o/--output",)),
    _cli("pack workload", "packing", "nope", expect=("nope",)),
    _cli("pack variant", "packing", "openb:nope", expect=("nope",)),
    _cli("manifests flag", "manifests", "--frob", expect=("--frob",)),
    _cli("serve metrics-port", "serve", "--metrics-port", "70000", expect=("--metrics-port",)),
    _cli("serve metrics-port abc", "serve", "--metrics-port", "abc", expect=("--metrics-port",)),
    _cli("serve period -1", "serve", "--period=-1", expect=("--period",)),
    _cli("serve period nan", "serve", "--period", "nan", expect=("--period", "nan")),
    _cli("serve period inf", "serve", "--period", "inf", expect=("--period", "inf")),
    _cli("serve period 0", "serve", "--period", "0", expect=("--period",)),
    _cli("serve bind-concurrency 0", "serve", "--bind-concurrency", "0", expect=("--bind-conc",)),
    _cli("serve bind-concurrency big", "serve", "--bind-concurrency", "1e9", expect=("--bind",)),
    _cli("serve policy", "serve", "--policy", "kube-default", expect=("--policy",)),
    _cli("serve lease-duration nan", "serve", "--lease-duration", "nan", expect=("--lease",)),
    _cli("serve request-timeout -1", "serve", "--request-timeout=-1", expect=("--request",)),
    _cli("serve shutdown-timeout inf", "serve", "--shutdown-timeout", "inf", expect=("--shut",)),
    _cli(
        "serve metrics-address",
        "serve",
        "--metrics-address",
        "not-an-ip",
        "--kubeconfig",
        "/nonexistent",
        expect=("metricsAddress", "not-an-ip"),
    ),
    _cli(
        "serve renew >= lease",
        "serve",
        "--lease-duration",
        "5",
        "--renew-deadline",
        "5",
        expect=("renewDeadline",),
    ),
    _cli("serve config missing", "serve", "--config", "/nonexistent.yaml", expect=("/nonex",)),
    _cli("explain target", "explain", "foo/bar", expect=("podgroup/NAME", "foo/bar")),
    _cli("explain config missing", "explain", "--config", "/nonexistent.yaml", expect=("/nonex",)),
]

# -- trace specs ----------------------------------------------------------------------------------
TRACE_SPECS = [
    _cli(f"trace {spec}", "compare", spec, expect=expect)
    for spec, expect in [
        ("synthetic:jobs=abc", ("jobs",)),
        ("synthetic:jobs=-1", ("jobs",)),
        ("synthetic:jobs=100000000000", ("jobs", "at most")),
        ("synthetic:nodes=10000000", ("nodes", "at most")),
        ("synthetic:gpus_per_node=0", ("gpus_per_node",)),
        ("synthetic:nope=1", ("nope",)),
        ("synthetic:load=nan", ("load",)),
        ("synthetic:load=inf", ("load",)),
        ("synthetic:share=2", ("share",)),
        ("synthetic:seed=-5", ("seed",)),
        ("synthetic:seed=99999999999999999999999", ("seed",)),
        ("synthetic:gpus_per_pod=0", ("gpus_per_pod",)),
        ("synthetic:max_duration=-1", ("max_duration",)),
        ("synthetic:mix=zzz", ("mix",)),
        ("synthetic:jobs=2,jobs=3", ("jobs", "twice")),
        ("synthetic:jobs", ("jobs",)),
        ("philly:vc=zzz", ("vc",)),
        ("philly:jobs=0", ("jobs",)),
        ("philly:scale=-1", ("scale",)),
        ("tiresias:x", ("x",)),
        ("tiresias:nodes=0", ("nodes",)),
        ("sia:set=nope", ("nope",)),
        ("openb:nope", ("nope",)),
        ("openb:pods=0", ("pods",)),
        ("nope:x=1", ("neither a file nor a known trace",)),
    ]
]

TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def _trace_file(id: str, trace: str, path: str, text: str | bytes, *expect: str) -> Case:
    return Case(
        id,
        ("compare", trace),
        (f"@traces/{path}", *expect),
        {f"traces/{path}": text},
        {"PHALANX_TRACES": "@traces"},
    )


T60 = "tiresias-60job/60_job.csv"
TRACE_FILES = [
    _trace_file("tiresias empty", "tiresias", T60, ""),
    _trace_file("tiresias not utf-8", "tiresias", T60, b"job_id\xff\n"),
    _trace_file("tiresias no header", "tiresias", T60, "0,1,0,606,vgg19,164,30\n"),
    _trace_file("tiresias gpus abc", "tiresias", T60, TIRESIAS_HEADER + "0,x,0,1,m,1,1\n", "num"),
    _trace_file("tiresias gpus 0", "tiresias", T60, TIRESIAS_HEADER + "0,0,0,1,m,1,1\n", "num_gpu"),
    _trace_file("tiresias short row", "tiresias", T60, TIRESIAS_HEADER + "0,1\n"),
    _trace_file("tiresias duration nan", "tiresias", T60, TIRESIAS_HEADER + "0,1,0,1,m,nan,1\n"),
    Case(
        "tiresias file is a directory",
        ("compare", "tiresias"),
        (f"@traces/{T60}", "directory"),
        {f"traces/{T60}/x": "x\n"},
        {"PHALANX_TRACES": "@traces"},
    ),
    _trace_file(
        "openb cpu huge",
        "openb",
        "openb/csv/openb_pod_list_default.csv",
        OPENB_HEADER + "p0," + "9" * 30 + ",16,1,1000,,LS,Running,0,100,0\n",
        "cpu_milli",
    ),
    _trace_file(
        "openb memory overflow",
        "openb",
        "openb/csv/openb_pod_list_default.csv",
        OPENB_HEADER + f"p0,1000,{2**50},1,1000,,LS,Running,0,100,0\n",
        "memory_mib",
    ),
]

# -- serve settings -----------------------------------------------------------------------------


def _settings(id: str, text: str | bytes, *expect: str, command: str = "serve") -> Case:
    return Case(
        id,
        (command, "--config", "@s.yaml", "--kubeconfig", "/nonexistent"),
        ("@s.yaml", *expect),
        {"s.yaml": text},
    )


SETTINGS = [
    _settings("settings not utf-8", b"period: 1 # \xff\n", "not UTF-8"),
    _settings("settings deep", "a: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than"),
    _settings("settings deep block", "".join(" " * i + "a:\n" for i in range(1200)), "nested"),
    _settings("settings yaml syntax", "period: [1\n", "YAML syntax error"),
    _settings("settings duplicate key", "period: 1\nperiod: 2\n", "duplicate key 'period'"),
    _settings("settings two documents", "period: 1\n---\nperiod: 2\n", "one YAML document"),
    _settings("settings a list", "- 1\n", "mapping"),
    _settings("settings unknown field", "colour: red\n", "colour", "unknown field"),
    _settings("settings period nan", "period: .nan\n", "period", "finite"),
    _settings("settings period inf", "period: .inf\n", "period", "finite"),
    _settings("settings period -1", "period: -1\n", "period", "positive"),
    _settings("settings period 0", "period: 0\n", "period", "positive"),
    _settings("settings period 1e300", "period: 1.0e+300\n", "period", "at most"),
    _settings("settings period 10^400", "period: " + "9" * 400 + "\n", "period"),
    _settings("settings period a string", "period: soon\n", "period", "number"),
    _settings("settings period true", "period: true\n", "period", "number"),
    _settings("settings request nan", "timeouts: {request: .nan}\n", "timeouts.request", "finite"),
    _settings("settings shutdown -1", "timeouts: {shutdown: -1}\n", "timeouts.shutdown"),
    _settings("settings shutdown inf", "timeouts: {shutdown: .inf}\n", "timeouts.shutdown"),
    _settings("settings timeouts a list", "timeouts: [1]\n", "timeouts", "mapping"),
    _settings("settings requeueInitial -1", "recovery: {requeueInitial: -1}\n", "requeueInitial"),
    _settings("settings requeueMax -1", "recovery: {requeueMax: -1}\n", "requeueMax"),
    _settings(
        "settings requeueMax < initial",
        "recovery: {requeueInitial: 10, requeueMax: 5}\n",
        "recovery.requeueMax",
    ),
    _settings("settings retryDelay nan", "recovery: {retryDelay: .nan}\n", "retryDelay"),
    _settings("settings partialBindLimit inf", "recovery: {partialBindLimit: .inf}\n", "partial"),
    _settings("settings bindRetries 1000", "recovery: {bindRetries: 1000}\n", "bindRetries"),
    _settings("settings undo", "recovery: {undo: drop}\n", "recovery", "undo"),
    _settings("settings metricsPort 70000", "metricsPort: 70000\n", "metricsPort"),
    _settings("settings metricsPort -1", "metricsPort: -1\n", "metricsPort"),
    _settings("settings metricsPort 1.5", "metricsPort: 1.5\n", "metricsPort", "integer"),
    _settings("settings metricsAddress", "metricsAddress: everywhere\n", "metricsAddress"),
    _settings("settings metricsAddress int", "metricsAddress: 5\n", "metricsAddress"),
    _settings("settings bindConcurrency 0", "bindConcurrency: 0\n", "bindConcurrency"),
    _settings("settings bindConcurrency 10^9", "bindConcurrency: 1000000000\n", "bindConc"),
    _settings("settings lease nan", "leaderElection: {leaseDuration: .nan}\n", "leaseDuration"),
    _settings("settings retryPeriod 0", "leaderElection: {retryPeriod: 0}\n", "retryPeriod"),
    _settings("settings renew > lease", "leaderElection: {renewDeadline: 20}\n", "renewDeadline"),
    _settings("settings enabled maybe", "leaderElection: {enabled: maybe}\n", "enabled"),
    _settings("settings policy", "policy: kube-default\n", "policy", "unknown policy"),
    _settings("settings schedulerName empty", "schedulerName: ''\n", "schedulerName"),
    _settings("settings scoring weight huge", "scoring: {binpack: 1000000000}\n", "binpack"),
    _settings("settings scoring weight -1", "scoring: {binpack: -1}\n", "scoring.binpack"),
    _settings("settings scoring unknown", "scoring: {fgd9: 1}\n", "scoring.fgd9"),
    _settings("settings scoring all zero", "scoring: {binpack: 0}\n", "scoring"),
    _settings("explain settings nan", "period: .nan\n", "period", command="explain"),
    _settings("explain settings not utf-8", b"\xff\n", "not UTF-8", command="explain"),
]

# -- kubeconfigs ----------------------------------------------------------------------------------
GOOD_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "current-context": "x",
}


def _kube(change: Callable[[dict[str, Any]], object]) -> str:
    config = copy.deepcopy(GOOD_KUBECONFIG)
    change(config)
    return yaml.safe_dump(config)


def _server(url: str) -> str:
    return _kube(lambda c: c["clusters"][0]["cluster"].update(server=url))


KUBECONFIG_TEXTS: list[tuple[str, str | bytes, tuple[str, ...]]] = [
    ("yaml syntax", "clusters: [\n", ("YAML syntax error",)),
    ("empty", "", ("empty",)),
    ("a list", "- a\n", ("a list",)),
    ("a string", "hello\n", ("a str",)),
    ("not utf-8", b"clusters: \xff\n", ("not UTF-8",)),
    ("deep", "a: " + "{b: " * 2000 + "1" + "}" * 2000, ("nested more than",)),
    ("duplicate key", "clusters: []\nclusters: []\n", ("duplicate key",)),
    ("clusters a map", _kube(lambda c: c.update(clusters={"a": 1})), ("clusters",)),
    ("contexts missing", _kube(lambda c: c.pop("contexts")), ("contexts",)),
    ("cluster item a string", _kube(lambda c: c.update(clusters=["c"])), ("clusters[0]",)),
    ("cluster no name", _kube(lambda c: c["clusters"][0].pop("name")), ("clusters[0].name",)),
    ("context a list", _kube(lambda c: c["contexts"][0].update(context=[1])), ("contexts[0]",)),
    ("users a string", _kube(lambda c: c.update(users="u")), ("users",)),
    ("current-context a list", _kube(lambda c: c.update({"current-context": [1]})), ("current",)),
    ("current-context unknown", _kube(lambda c: c.update({"current-context": "zz"})), ("zz",)),
    ("no current-context", _kube(lambda c: c.pop("current-context")), ("context",)),
    (
        "context names no cluster",
        _kube(lambda c: c["contexts"][0]["context"].update(cluster="d")),
        ("'d'",),
    ),
    ("token a number", _kube(lambda c: c["users"][0]["user"].update(token=5)), ("token",)),
    ("server not a url", _server("not a url"), ("server", "not a url")),
    ("server no scheme", _server("10.0.0.1:6443"), ("server",)),
    ("server ftp", _server("ftp://10.0.0.1"), ("server", "ftp://")),
    ("server no host", _server("https://"), ("server",)),
    ("server bad port", _server("https://10.0.0.1:99999"), ("server",)),
    ("server port 0", _server("https://10.0.0.1:0"), ("server",)),
    ("server a number", _kube(lambda c: c["clusters"][0]["cluster"].update(server=5)), ("str",)),
]

KUBECONFIG_COMMANDS = {
    "serve": ("serve",),
    "explain": ("explain",),
    # its message starts "cannot take the cluster's snapshot": an apostrophe, not a quote
    "simulate --from-cluster": ("simulate", "--from-cluster"),
}
KUBECONFIGS = [
    Case(
        f"{command} kubeconfig {id}",
        (*argv, "--kubeconfig", "@kube"),
        ("kubeconfig @kube", *expect),
        {"kube": text},
    )
    for command, argv in KUBECONFIG_COMMANDS.items()
    for id, text, expect in KUBECONFIG_TEXTS
]

KUBECONFIGS.append(
    Case(
        "explain unreachable server",
        ("explain", "--kubeconfig", "@kube"),
        ("cannot reach the API server http://127.0.0.1:1", "kubeconfig @kube"),
        {"kube": yaml.safe_dump(GOOD_KUBECONFIG)},
    )
)

CASES = [*MANIFESTS, *CLI, *TRACE_SPECS, *TRACE_FILES, *SETTINGS, *KUBECONFIGS]
