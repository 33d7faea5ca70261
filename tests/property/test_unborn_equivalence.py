"""Unborn pods change nothing: seeded random workloads with big Jobs (several times what the
cluster holds) beside PodGroups, lone pods, priorities (preemption), runtime estimates or none,
Jobs deleted and replaced, run with the Job pods beyond each window made later
(``phalanx.sim.unborn``) and with every pod made at once; the result JSON and the event
stream must be equal."""

from __future__ import annotations

import random
from typing import Any

import pytest

from phalanx.k8s import load_documents
from phalanx.sim import unborn
from phalanx.sim.simulator import SimOptions, Simulation

GPU = "nvidia.com/gpu"


def workload(seed: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    ]
    for i in range(rng.randint(2, 4)):
        allocatable = {"cpu": str(rng.choice([8, 16, 32])), "pods": str(rng.randint(3, 8))}
        if i == 0 or rng.random() < 0.5:
            allocatable[GPU] = "4"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": allocatable},
            }
        )
    for j in range(rng.randint(1, 2)):
        docs.append(job(rng, f"sweep{j}", rng.randint(200, 300), deleted=j > 0))
    for g in range(rng.randint(1, 4)):
        docs += gang(rng, f"pg{g}")
    for p in range(rng.randint(0, 6)):
        docs.append(pod(rng, f"lone{p}", {}))
    return [("random.yaml", doc) for doc in docs]


def annotations(rng: random.Random, after: bool = True) -> dict[str, str]:
    notes = {"phalanx.dev/duration": f"{rng.randint(3, 40)}m"}
    if after:
        notes["phalanx.dev/submit-after"] = f"{rng.choice([0, 0, 1, 5, 20])}m"
    if rng.random() < 0.5:
        notes["phalanx.dev/runtime-estimate"] = f"{rng.randint(3, 40)}m"
    return notes


def requests(rng: random.Random) -> dict[str, str]:
    out = {"cpu": str(rng.choice([1, 2, 4]))}
    if rng.random() < 0.3:
        out[GPU] = "1"
    return out


def job(rng: random.Random, name: str, pods: int, deleted: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {}}]}
    if rng.random() < 0.3:
        spec["priorityClassName"] = "high"  # preempts the other Job's pods
    wanted = requests(rng)
    spec["containers"][0]["resources"] = {"requests": wanted, "limits": dict(wanted)}
    meta: dict[str, Any] = {"name": name, "namespace": "lab", "annotations": {}}
    if deleted and rng.random() < 0.6:
        meta["annotations"]["phalanx.dev/delete-after"] = f"{rng.randint(10, 90)}m"
    parallelism = pods if rng.random() < 0.7 else pods // 2
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "parallelism": parallelism,
            "completions": pods,
            "template": {"metadata": {"annotations": annotations(rng, False)}, "spec": spec},
        },
    }


def pod(rng: random.Random, name: str, labels: dict[str, str], **notes: str) -> dict[str, Any]:
    wanted = requests(rng)
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": wanted, "limits": dict(wanted)}}]
    }
    if rng.random() < 0.3:
        spec["priorityClassName"] = "high"
    meta = {"name": name, "namespace": "team", "labels": labels}
    meta["annotations"] = {**annotations(rng), **notes}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def gang(rng: random.Random, name: str) -> list[dict[str, Any]]:
    size = rng.randint(2, 4)
    notes = annotations(rng)
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team", "annotations": notes},
        "spec": {"minMember": size},
    }
    after = {"phalanx.dev/submit-after": notes["phalanx.dev/submit-after"]}
    label = {"scheduling.x-k8s.io/pod-group": name}
    return [group, *(pod(rng, f"{name}-{i}", label, **after) for i in range(size))]


def run(seed: int, policy: str, defer: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    events: list[dict[str, Any]] = []
    made = [0]
    with monkeypatch.context() as patch:
        if not defer:
            patch.setattr(unborn, "deferrable", lambda sim: False)
        sim = Simulation(
            load_documents(workload(seed)),
            SimOptions(policy=policy, seed=seed, until=6 * 3600.0),
            events.append,
        )
        real = sim.unborn.defer

        def counted(*args: Any) -> None:
            made[0] += args[2]
            real(*args)

        patch.setattr(sim.unborn, "defer", counted)
        sim.jobs.deferral = sim.unborn
        result = sim.run()
    return result.to_json(), events, made[0]


@pytest.mark.parametrize("policy", ["phalanx", "volcano"])
@pytest.mark.parametrize("seed", range(8))
def test_unborn_pods_change_nothing(
    seed: int, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lazy, lazy_events, deferred = run(seed, policy, True, monkeypatch)
    eager, eager_events, none = run(seed, policy, False, monkeypatch)
    assert none == 0
    assert lazy == eager
    assert lazy_events == eager_events
    if policy == "volcano":
        assert deferred > 0  # every seed has a Job several times its window
