"""JobSets through `phalanx simulate`: snapshots of running JobSets and ``dependsOn``.

tests/workloads/jobset/snapshot.yaml was written for these tests in the shape of a
`kubectl get jobsets,pods -o yaml` dump (the pods name the JobSet's Jobs, which are not in it,
and carry the JobSet's labels); the cluster is tests/workloads/trainer/gpu-nodes.yaml (three
8-GPU nodes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peer_cli import run

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"
HERE = WORKLOADS / "jobset"
NODES = WORKLOADS / "trainer" / "gpu-nodes.yaml"


def simulate(
    tmp_path: Path, *files: Path, docs: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    extra = tmp_path / "jobsets.yaml"
    extra.write_text("---".join(docs) or "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
    events = tmp_path / "events.jsonl"
    args = [str(NODES), *map(str, files), str(extra), "-o", "json", "--events", str(events)]
    code, out = run(["simulate", *args])
    assert code == 0, out
    return json.loads(out), [json.loads(line) for line in events.read_text().splitlines()]


def submitted(events: list[dict[str, Any]]) -> list[str]:
    return [e["pod"] for e in events if e["type"] == "submit" and e["pod"]]


def test_a_snapshots_running_jobset_is_counted_once_where_its_pods_run(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, HERE / "snapshot.yaml")
    assert sorted(submitted(events)) == [
        "ml/pretrain-workers-0-0-q8w2c",
        "ml/pretrain-workers-1-0-h7d4m",
    ]
    assert len(result["gangs"]) == 2
    binds = {e["pod"]: e["node"] for e in events if e["type"] == "bind"}
    assert binds == {
        "ml/pretrain-workers-0-0-q8w2c": "gpu-a",
        "ml/pretrain-workers-1-0-h7d4m": "gpu-b",
    }
    # 16 GPUs for the 2h its Jobs' template declares (not 32, not the 1h default)
    assert result["gpu_allocation"] == [[0, 16], [7200, 0]]
    assert result["default_duration_gangs"] == 0


def test_a_pending_pod_of_a_snapshots_jobset_is_placed_once(tmp_path: Path) -> None:
    snapshot = (HERE / "snapshot.yaml").read_text().replace("      nodeName: gpu-b\n", "")
    head, _, tail = snapshot.rpartition("{phase: Running}")
    pending = tmp_path / "snapshot.yaml"
    pending.write_text(head + "{phase: Pending}" + tail)
    result, events = simulate(tmp_path, pending)
    assert len(submitted(events)) == 2 and len(result["gangs"]) == 2
    nodes = sorted(e["node"] for e in events if e["type"] == "bind")
    assert nodes[0] == "gpu-a" and len(nodes) == 2  # the running one stays, the other is placed
    assert result["gpu_allocation"] == [[0, 16], [7200, 0]]
