"""KubeRay RayClusters and RayJobs through `phalanx simulate`.

The manifests in tests/workloads/ray/ were written for these tests in the shape of KubeRay's
documentation; they run on tests/workloads/trainer/gpu-nodes.yaml (three 8-GPU nodes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peer_cli import gang, run

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"
HERE = WORKLOADS / "ray"
NODES = WORKLOADS / "trainer" / "gpu-nodes.yaml"
KUEUE = WORKLOADS / "trainer" / "kueue.yaml"


def cluster(name: str, labels: str = "{}", *, workers: int = 2, spec: str = "") -> str:
    return f"""
apiVersion: ray.io/v1
kind: RayCluster
metadata: {{name: {name}, namespace: ml, labels: {labels}}}
spec:
{spec}
  headGroupSpec:
    rayStartParams: {{}}
    template:
      spec:
        containers: [{{name: ray-head, image: ray, resources: {{requests: {{cpu: "2"}}}}}}]
  workerGroupSpecs:
    - groupName: gpu
      replicas: {workers}
      minReplicas: 1
      rayStartParams: {{}}
      template:
        spec:
          containers:
            - {{name: ray-worker, image: ray, resources: {{limits: {{nvidia.com/gpu: "8"}}}}}}
"""


def simulate(
    tmp_path: Path, *files: Path, docs: tuple[str, ...] = (), until: str = "4h"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    extra = tmp_path / "ray.yaml"
    extra.write_text("---".join(docs) or "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n")
    events = tmp_path / "events.jsonl"
    args = [str(NODES), *map(str, files), str(extra), "-o", "json", "--until", until]
    code, out = run(["simulate", *args, "--events", str(events)])
    assert code == 0, out
    lines = events.read_text().splitlines()
    return json.loads(out), [json.loads(line) for line in lines]


def bound(events: list[dict[str, Any]], gang_key: str) -> list[float]:
    return [e["t"] for e in events if e["type"] == "bind" and e["gang"] == gang_key]


def test_a_gang_labelled_raycluster_waits_for_room_for_head_and_every_worker(
    tmp_path: Path,
) -> None:
    labels = '{ray.io/gang-scheduling-enabled: "true"}'
    result, events = simulate(tmp_path, docs=(cluster("big", labels, workers=4),))
    record = gang(result, "big")
    assert (record["min_member"], record["state"]) == (5, "waiting")
    assert bound(events, "ml/big") == []  # three of four workers would fit: none is bound
    result, events = simulate(tmp_path, docs=(cluster("fits", labels, workers=3),))
    assert gang(result, "fits")["state"] == "running"  # a RayCluster serves until the end
    assert bound(events, "ml/fits") == [0.0] * 4


def test_without_a_gang_label_a_raycluster_is_placed_pod_by_pod(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, docs=(cluster("loose", workers=4),))
    binds = [e for e in events if e["type"] == "bind" and e["t"] == 0]
    assert len(binds) == 4  # the head and three workers; the fourth worker waits
    assert not any(g["name"] == "loose" for g in result["gangs"])


def test_a_volcano_rayjob_is_an_elastic_gang_in_its_queue_for_its_deadline(
    tmp_path: Path,
) -> None:
    result, events = simulate(tmp_path, HERE / "rayjob-volcano.yaml")
    record = gang(result, "ray-sweep-pg")
    assert (record["min_member"], record["queue"], record["priority"]) == (3, "research", 1000)
    # elastic: 5 pods' work of 5400 s each, done by the 4 that fit (docs/manifests.md)
    assert record["state"] == "completed" and record["finish"] - record["start"] == 5400 * 5 / 4
    pods = sorted(e["pod"] for e in events if e["type"] == "bind")
    assert len(pods) == 4 and pods[0].startswith("ml/sweep-a100-worker-")  # head + 3 of 4
    assert any(p.startswith("ml/sweep-head-") for p in pods)


def test_a_kueue_rayjob_lands_in_its_cluster_queue_whole(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, KUEUE, HERE / "rayjob-kueue.yaml")
    record = gang(result, "pretrain")
    assert (record["min_member"], record["queue"], record["state"]) == (3, "gpu-cq", "completed")
    assert record["finish"] - record["start"] == 7200
    assert bound(events, "ml/pretrain") == [0.0] * 3


def test_a_kai_labelled_raycluster_needs_the_head_and_min_replicas(tmp_path: Path) -> None:
    labels = "{kai.scheduler/queue: team-b}"
    result, _ = simulate(tmp_path, docs=(cluster("kai", labels, workers=3),))
    record = gang(result, "kai")
    assert (record["min_member"], record["queue"]) == (2, "team-b")


def test_suspended_and_selector_objects_make_no_pods(tmp_path: Path) -> None:
    selector = """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: reuse, namespace: ml}
spec:
  entrypoint: python job.py
  clusterSelector: {ray.io/cluster: shared}
"""
    held = cluster("held", spec="  suspend: true")
    _, events = simulate(tmp_path, docs=(held, selector))
    assert not [e for e in events if e["type"] == "submit"]


def test_bad_ray_objects_get_one_line_each(tmp_path: Path) -> None:
    bounds = cluster("bounds").replace("minReplicas: 1", "minReplicas: 3\n      maxReplicas: 2")
    typo = cluster("typo").replace("replicas: 2", "replicas: two")
    headless = cluster("headless").replace("headGroupSpec", "headGroup")
    huge = cluster("huge", workers=2**31 - 1).replace(
        "groupName: gpu", "groupName: gpu\n      numOfHosts: 2"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("---".join([bounds, typo, headless, huge]))
    code, out = run(["simulate", str(NODES), str(bad)])
    assert code == 2 and "Traceback" not in out
    assert out.strip().splitlines() == [
        f"phalanx: error: {bad}: RayCluster ml/bounds: spec.workerGroupSpecs[0].minReplicas: "
        "must not exceed maxReplicas (2)",
        f"phalanx: error: {bad}: RayCluster ml/typo: spec.workerGroupSpecs[0].replicas: "
        "must be an integer, not a string ('two')",
        f"phalanx: error: {bad}: RayCluster ml/headless: spec.headGroupSpec: is required",
        f"phalanx: error: {bad}: RayCluster ml/huge: spec.workerGroupSpecs[0].replicas: "
        "4294967294 pods is above phalanx's limit of 1,000,000",
    ]


def test_a_snapshots_ray_pods_run_their_owners_declared_duration(tmp_path: Path) -> None:
    """A `kubectl get rayjobs,rayclusters,pods -o yaml` dump: the RayJob's cluster pods run
    its activeDeadlineSeconds, the RayCluster's its phalanx.dev/duration, not the default."""
    result, events = simulate(tmp_path, HERE / "snapshot.yaml", until="5h")
    finish = {g["name"]: g["finish"] for g in result["gangs"]}
    assert finish == {
        "tune-x4k2z-head-7hq2p": 7200,
        "tune-x4k2z-gpu-worker-m2v8s": 7200,
        "notebook-head-c5t9k": 10800,
        "notebook-gpu-worker-w6n3r": 10800,
    }
    assert result["default_duration_gangs"] == 0
    assert len([e for e in events if e["type"] == "submit" and e["pod"]]) == 4  # none made again
    assert result["gpu_allocation"] == [[0, 16], [7200, 8], [10800, 0]]
