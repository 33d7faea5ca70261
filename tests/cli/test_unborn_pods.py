"""A big Job through ``phalanx simulate``: the pods the cluster could not place yet are made only
when they could matter (``phalanx.sim.unborn``), and the run decides and reports as if every
pod had been made when the Job wanted it. The reference is the same run with every pod made at
once (deferral switched off)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.cli.main import main
from phalanx.sim import unborn
from phalanx.sim.controller import JobRun

ESTIMATE = "phalanx.dev/runtime-estimate"
PODS = 400  # the cluster holds 8 of them at once: the window is 8 + MARGIN, the rest unborn


def nodes(count: int, prefix: str, **allocatable: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"{prefix}{i}"},
            "status": {"allocatable": {"cpu": "64", **allocatable}},
        }
        for i in range(count)
    ]


NODES = nodes(2, "cpu-", memory="256Gi", pods="4")


def job(pods: int = PODS, **annotations: str) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}
    template = {
        "metadata": {"annotations": {"phalanx.dev/duration": "10m", ESTIMATE: "10m"}},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sweep", "namespace": "lab", "annotations": annotations},
        "spec": {"parallelism": pods, "completions": pods, "template": template},
    }


def quota(after: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "q",
            "namespace": "lab",
            "annotations": {"phalanx.dev/submit-after": after},
        },
        "spec": {"hard": {"pods": "1000"}},
    }


Run = tuple[dict[str, Any], list[dict[str, Any]], int]  # JSON, events, pods deferred


def simulate(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    docs: list[dict[str, Any]],
    *args: str,
    defer: bool = True,
) -> Run:
    """The run's JSON, its events and how many pods were deferred (made later)."""
    path, events = tmp_path / "in.yaml", tmp_path / "events.jsonl"
    path.write_text(yaml.safe_dump_all(NODES + docs))
    deferred = [0]
    real = unborn.Unborn.defer

    def spy(self: unborn.Unborn, run: JobRun, first: int, count: int, made: int) -> None:
        deferred[0] += count
        real(self, run, first, count, made)

    with monkeypatch.context() as patch:
        patch.setattr(unborn.Unborn, "defer", spy)
        if not defer:
            patch.setattr(unborn, "deferrable", lambda sim: False)
        code = main(["simulate", str(path), "-o", "json", "--events", str(events), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    log = [json.loads(line) for line in events.read_text().splitlines()]
    return json.loads(out.out), log, deferred[0]


def both(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    docs: list[dict[str, Any]],
    *args: str,
) -> tuple[Run, Run]:
    lazy = simulate(tmp_path, monkeypatch, capsys, docs, *args)
    eager = simulate(tmp_path, monkeypatch, capsys, docs, *args, defer=False)
    assert eager[2] == 0
    return lazy, eager


def test_the_first_cycle_reports_every_pod_as_if_all_were_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (out, events, deferred), (ref, ref_events, _) = both(
        tmp_path, monkeypatch, capsys, [job()], "--until", "0"
    )
    assert deferred == PODS - 8 - unborn.MARGIN
    assert out == ref and events == ref_events
    assert [g["name"] for g in out["gangs"]] == [f"sweep-{i}" for i in range(PODS)]
    waiting = [g for g in out["gangs"] if g["state"] == "waiting"]
    assert len(waiting) == PODS - 8 and len({g["reason"] for g in waiting}) == 1
    assert waiting[-1]["reason"] and waiting[-1]["expected_start_first"] == 600.0
    assert sum(e["type"] == "expect" for e in events) == PODS - 8


@pytest.mark.parametrize("policy", ["phalanx", "volcano", "tas-greedy"])
def test_the_pods_place_over_many_cycles_as_if_all_were_made(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    policy: str,
) -> None:
    (out, events, deferred), (ref, ref_events, _) = both(
        tmp_path, monkeypatch, capsys, [job()], "--policy", policy
    )
    assert deferred > 0
    assert out == ref and events == ref_events
    starts = [g["start"] for g in out["gangs"]]
    assert starts == sorted(starts) and starts[-1] == (PODS // 8 - 1) * 600.0  # FIFO, 8 at once
    assert out["completed"] == PODS


def test_an_unknown_estimate_is_told_again_as_if_all_were_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No runtime estimate: expected starts are unknown at arrival and told again 15 min
    later (then learned from the pods that finished): the unborn pods are made before that,
    taken in by the reservation action as they were when they arrived."""
    unknown = job()
    del unknown["spec"]["template"]["metadata"]["annotations"][ESTIMATE]
    (out, events, deferred), (ref, ref_events, _) = both(tmp_path, monkeypatch, capsys, [unknown])
    assert deferred > 0
    assert out == ref and events == ref_events
    told = [e for e in events if e["type"] == "expect"]
    assert {e["t"] for e in told} > {0.0} and len(told) > PODS


def test_a_job_the_run_deletes_is_made_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reservation action keeps a candidate for a pending pod that is deleted: a Job the
    run deletes has every pod made when wanted, and its pods go with it in order."""
    docs = [job(**{"phalanx.dev/delete-after": "25m"})]
    (out, events, deferred), (ref, ref_events, _) = both(tmp_path, monkeypatch, capsys, docs)
    assert deferred == 0
    assert out == ref and events == ref_events
    deleted = [e["pod"] for e in events if e["type"] == "delete"]
    assert len(deleted) == PODS - 2 * 8  # two rounds finished; the third and the rest deleted
    assert deleted[-1] == f"lab/sweep-{PODS - 1}"


def test_a_quota_arriving_counts_the_unborn_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (out, events, deferred), (ref, ref_events, _) = both(
        tmp_path, monkeypatch, capsys, [job(), quota("15m")]
    )
    assert deferred > 0
    assert out == ref and events == ref_events


def test_queues_that_count_make_every_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A queue key adds up the demand ahead in its queue (made or not): once a Volcano Queue
    appears every unborn pod is made, and the run goes on as if all had been made; a Job
    whose pods name a queue has them all made at once."""
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research", "annotations": {"phalanx.dev/submit-after": "25m"}},
        "spec": {"weight": 2},
    }
    (out, events, deferred), (ref, ref_events, _) = both(
        tmp_path, monkeypatch, capsys, [job(), queue]
    )
    assert deferred > 0
    assert out == ref and events == ref_events
    named = job()
    named["spec"]["template"]["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "q"
    (out, events, _), (ref, ref_events, _) = both(
        tmp_path, monkeypatch, capsys, [named], "--until", "0"
    )
    assert out == ref and events == ref_events


@pytest.mark.parametrize("policy", ["phalanx-reserve", "fifo-reserve", "kube-default"])
def test_policies_that_would_look_at_every_pod_make_every_pod(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    policy: str,
) -> None:
    """Reservations for gangs of any size list every waiting pod as a big gang; a
    pod-at-a-time policy backs off per pod (a later pod may go first): no deferral."""
    out, _, deferred = simulate(
        tmp_path, monkeypatch, capsys, [job(100)], "--policy", policy, "--until", "0"
    )
    assert deferred == 0 and len(out["gangs"]) == 100


def test_pods_a_reservation_refuses_are_counted_as_if_all_were_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Job's pods fit but would delay a 40-GPU gang's reservation: each is refused by the
    gate (one attempt each), the unborn ones as well, and waits to be tried again."""

    def gang(name: str, gpus: int, duration: str, after: str) -> list[dict[str, Any]]:
        notes = {"phalanx.dev/submit-after": after, "phalanx.dev/duration": duration}
        notes[ESTIMATE] = duration
        group = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "c", "annotations": notes},
            "spec": {"minMember": 5},
        }
        gpu = {"nvidia.com/gpu": str(gpus)}
        pods = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": "c",
                    "labels": {"scheduling.x-k8s.io/pod-group": name},
                    "annotations": {"phalanx.dev/submit-after": after},
                },
                "spec": {"containers": [{"name": "c", "resources": {"requests": gpu}}]},
            }
            for i in range(5)
        ]
        return [group, *pods]

    sweep = job(300, **{"phalanx.dev/submit-after": "2s"})
    sweep["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "6"},
        "limits": {"nvidia.com/gpu": "6"},
    }
    docs = [*gang("hog", 2, "30m", "0s"), *gang("big", 8, "20m", "1s"), sweep]
    gpu_nodes = nodes(5, "g", pods="110", **{"nvidia.com/gpu": "8"})
    monkeypatch.setattr(sys.modules[__name__], "NODES", gpu_nodes)
    (out, events, deferred), (ref, ref_events, _) = both(tmp_path, monkeypatch, capsys, docs)
    assert deferred > 0
    assert out == ref and events == ref_events
    starts = [g["start"] for g in out["gangs"] if g["name"].startswith("sweep-")]
    big = next(g["start"] for g in out["gangs"] if g["name"] == "big")
    assert starts == sorted(starts) and big == 1800.0 and starts[-1] > big  # in order
    assert out["scheduling_attempts"] > 300  # every pod refused at arrival, once each
