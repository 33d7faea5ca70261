"""``phalanx simulate`` with ``phalanx.dev/max-member`` (an elastic gang's explicit maximum) and
with ``preemptionPolicy`` read from PriorityClass objects (issue 11)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli.main import main

GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def node(gpus: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n0"},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", GPU: str(gpus)}},
    }


def priority_class(name: str, value: int, policy: str | None = None) -> Obj:
    kind = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
    obj: Obj = {**kind, "metadata": {"name": name}, "value": value}
    return obj if policy is None else {**obj, "preemptionPolicy": policy}


def gang(
    name: str,
    pods: int,
    gpus: int,
    *,
    min_member: int | None = None,
    cls: str = "low",
    at: str = "0s",
    annotations: dict[str, str] | None = None,
) -> list[Obj]:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"minMember": pods if min_member is None else min_member, "queue": "default"},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "annotations": {"phalanx.dev/submit-after": at, "phalanx.dev/duration": "1h"},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {
                "metadata": {"annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {
                    "priorityClassName": cls,
                    "containers": [{"name": "w", "resources": {"requests": {GPU: str(gpus)}}}],
                },
            },
        },
    }
    return [group, job]


Run = tuple[dict[str, Any], list[dict[str, Any]]]


@pytest.fixture
def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[[list[Obj]], Run]:
    """``phalanx simulate FILE -o json --events LOG``: its JSON and its event log."""

    def run(objects: list[Obj]) -> Run:
        path = tmp_path / "workload.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        log = tmp_path / "events.jsonl"
        assert main(["simulate", str(path), "-o", "json", "--events", str(log)]) == 0
        events = [json.loads(line) for line in log.read_text().splitlines()]
        return json.loads(capsys.readouterr().out), events

    return run


def binds(events: list[dict[str, Any]], gang_key: str) -> list[float]:
    return [e["t"] for e in events if e["type"] == "bind" and e["gang"] == gang_key]


def finish(result: dict[str, Any], name: str) -> float:
    (record,) = [g for g in result["gangs"] if g["name"] == name]
    return float(record["finish"])


def test_max_member_caps_an_elastic_gang_and_its_speed(
    simulate: Callable[[list[Obj]], Run],
) -> None:
    classes = [priority_class("low", 10)]
    free, events = simulate([node(8), *classes, *gang("e", 6, 2, min_member=2)])
    assert binds(events, "default/e") == [0.0] * 4  # room for 4 of its 6 pods
    assert finish(free, "e") == pytest.approx(6 * 3600 / 4)  # 6 pod-hours on 4 members

    capped = gang("e", 6, 2, min_member=2, annotations={"phalanx.dev/max-member": "3"})
    result, events = simulate([node(8), *classes, *capped])
    assert binds(events, "default/e") == [0.0] * 3  # at most 3 members, though 4 fit
    assert finish(result, "e") == pytest.approx(3600)  # 1 h with its maximum running
    assert result["queues"]["default"]["mean_gpu_share"] == pytest.approx(75.0)


def test_a_bad_max_member_is_one_line_naming_the_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "workload.yaml"
    bad = gang("e", 4, 1, min_member=3, annotations={"phalanx.dev/max-member": "2"})
    path.write_text(yaml.safe_dump_all([node(8), priority_class("low", 10), *bad]))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "PodGroup default/e" in err[0]
    assert "metadata.annotations[phalanx.dev/max-member]" in err[0]
    assert "at least the gang's minimum (3), not 2" in err[0]


@pytest.mark.parametrize(("policy", "preempts"), [("Never", False), (None, True)])
def test_preemption_policy_comes_from_the_priority_class(
    simulate: Callable[[list[Obj]], Run], policy: str | None, preempts: bool
) -> None:
    objects = [
        node(8),
        priority_class("low", 10),
        priority_class("high", 1000, policy),
        *gang("low", 1, 8),
        *gang("high", 1, 8, cls="high", at="10s"),
    ]
    result, events = simulate(objects)
    evicted = [e["gang"] for e in events if e["type"] == "evict"]
    assert evicted == (["default/low"] if preempts else [])
    assert result["preemptions"] == (1 if preempts else 0)
    assert binds(events, "default/high") == ([10.0] if preempts else [3600.0])
