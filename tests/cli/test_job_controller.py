"""The Job controller through `phalanx simulate`: a batch/v1 Job's pods, made in bulk from its
template, are created in index order up to ``parallelism`` until ``completions`` succeeded; a
ResourceQuota refusal stops creation and a later resync resumes at the next index."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.api.specs import PodSpec
from phalanx.cli.main import main
from phalanx.sim.controller import clones

CLUSTER = Path(__file__).resolve().parent.parent / "workloads" / "cluster.yaml"


def job(name: str, parallelism: int, completions: int) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}
    template = {
        "metadata": {"annotations": {"phalanx.dev/duration": "10m"}, "labels": {"app": name}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "batch"},
        "spec": {"parallelism": parallelism, "completions": completions, "template": template},
    }


def quota(pods: str, delete_after: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "q",
            "namespace": "batch",
            "annotations": {"phalanx.dev/delete-after": delete_after},
        },
        "spec": {"hard": {"pods": pods}},
    }


def submits(tmp_path: Path, capsys: pytest.CaptureFixture[str], *docs: Any) -> dict[str, float]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    events = tmp_path / "events.jsonl"
    code = main(["simulate", str(CLUSTER), str(path), "--events", str(events), "-o", "json"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    log = [json.loads(line) for line in events.read_text().splitlines()]
    pods = [e for e in log if e["type"] == "submit" and (e["pod"] or "").startswith("batch/")]
    return {e["pod"]: e["t"] for e in pods}


def test_parallelism_and_completions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    made = submits(tmp_path, capsys, job("sweep", 3, 5))
    assert made == {
        "batch/sweep-0": 0,
        "batch/sweep-1": 0,
        "batch/sweep-2": 0,
        "batch/sweep-3": 600,
        "batch/sweep-4": 600,
    }


def test_quota_refusal_stops_creation_and_resync_resumes_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = submits(tmp_path, capsys, quota("2", "5m"), job("sweep", 3, 6))
    assert made == {
        "batch/sweep-0": 0,
        "batch/sweep-1": 0,
        "batch/sweep-2": 300,  # refused at 0, created when the quota went away
        "batch/sweep-3": 600,
        "batch/sweep-4": 600,
        "batch/sweep-5": 900,
    }


def test_clones_equal_replace_and_share_the_template_mappings() -> None:
    template = PodSpec(
        "ns", "t", {"cpu": 500}, priority=7, labels={"a": "b"}, owner="Job/t", duration=60.0
    )
    made = clones(template, ["t-0", "t-1"])
    assert made == [dataclasses.replace(template, name=n) for n in ("t-0", "t-1")]
    assert made[0].requests is template.requests and made[1].labels is template.labels
    assert [p.key for p in made] == ["ns/t-0", "ns/t-1"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].name = "x"  # type: ignore[misc]
