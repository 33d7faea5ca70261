"""Edge inputs Kubernetes accepts, so phalanx must too (the other side of the catalog)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from badinput_cases import BASE, NODE, P1, P2, base_yaml, mutated

from phalanx.cli.main import main

LARGEST = str(2**63 - 1)
REQ = "spec.containers[0].resources.requests"

MERGE = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: m1}
  status: {allocatable: &sizes {cpu: "16", memory: 64Gi}}
- apiVersion: v1
  kind: Node
  metadata: {name: m2}
  status: {allocatable: {<<: *sizes, cpu: "8"}}
"""


def two_huge_nodes() -> str:
    docs = copy.deepcopy(BASE)
    docs[NODE]["status"]["allocatable"]["memory"] = "5E"  # two of them: beyond int64
    second: dict[str, Any] = copy.deepcopy(docs[NODE])
    second["metadata"]["name"] = "n2"
    return base_yaml([*docs, second])


def offered(resource: str, amount: str) -> str:
    """P2 requests ``resource`` with an equal limit, and the node offers it."""
    docs = copy.deepcopy(BASE)
    docs[NODE]["status"]["allocatable"][resource] = amount
    docs[P2]["spec"]["containers"][0]["resources"] = {
        "requests": {resource: amount},
        "limits": {resource: amount},
    }
    return base_yaml(docs)


ACCEPTED = [
    ("memory 2^63-1 bytes", mutated(NODE, "status.allocatable.memory", LARGEST)),
    ("cpu 2^63-1 milli", mutated(NODE, "status.allocatable.cpu", f"{LARGEST}m")),
    ("memory 7Ei", mutated(NODE, "status.allocatable.memory", "7Ei")),
    ("two nodes of 5E memory", two_huge_nodes()),
    ("gpu request = limit", mutated(P1, f"{REQ}[nvidia.com/gpu]", "1")),
    ("extended request = limit", offered("example.com/foo", "2")),
    ("hugepages request = limit", offered("hugepages-2Mi", "4Mi")),
    ("gpu written 1000m", mutated(P1, f"{REQ}[nvidia.com/gpu]", "1000m")),
    ("label value 63 characters", mutated(NODE, "metadata.labels.zone2", "a" * 63)),
    ("empty label value", mutated(P2, "metadata.labels.tier", "")),
    ("prefixed label key", mutated(P2, "metadata.labels[example.com/tier]", "gold")),
    ("duration of 200 years", mutated(P1, "metadata.annotations[phalanx.dev/duration]", "73000d")),
    ("cpu as a YAML number", mutated(P2, f"{REQ}.cpu", 0.5)),
    ("yaml merge key overridden", base_yaml() + "---" + MERGE),
    ("utf-8 byte order mark", "\ufeff" + base_yaml()),
    ("json list", json.dumps({"apiVersion": "v1", "kind": "List", "items": BASE})),
]


@pytest.mark.parametrize(("name", "text"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_kubernetes_accepts_it_so_phalanx_does(
    name: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["simulate", str(path)]) == 0, capsys.readouterr().err
