"""Deadlines through ``phalanx simulate``: a gang that will miss its ``phalanx.dev/deadline``
says so (an event, its expected start's reason, the JSON), and ``least-slack`` ordering runs the
gang closest to its deadline first among gangs of equal priority."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_reservations import gang as two_gpus

from phalanx.cli.main import main

#: 2 one-GPU nodes. r (2 GPUs) runs 0-100. At t=1 b (2 GPUs, 100 s, deadline 1000 s after
#: submission) then c (2 GPUs, 100 s, deadline 250 s). FIFO: b 100-200, c 200-300 — c misses
#: its deadline (due 251) by 49 s. Neither is reserved (small gangs), so c's first expected start
#: is the room at 100; when b takes it at 100, c's new expected start (200) misses: foreseen
#: then, 100 s before c starts. Least slack: c 100-200, b 200-300, both met.
NODES = "".join(
    f"""---
apiVersion: v1
kind: Node
metadata: {{name: n{i}}}
status: {{allocatable: {{cpu: "8", memory: 32Gi, nvidia.com/gpu: "1", pods: "110"}}}}
"""
    for i in range(2)
)


def gang(name: str, at: float, deadline: str | None) -> str:
    return two_gpus(name, 2, at=at, runs=100, estimate=100, deadline=deadline)


def simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = tmp_path / "deadlines.yaml"
    path.write_text(NODES + gang("r", 0, None) + gang("b", 1, "1000s") + gang("c", 1, "250s"))
    events = tmp_path / "events.jsonl"
    assert main(["simulate", str(path), "-o", "json", "--events", str(events), *extra]) == 0
    doc = json.loads(capsys.readouterr().out)
    return doc, [json.loads(line) for line in events.read_text().splitlines()]


def test_a_gang_that_will_miss_its_deadline_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, events = simulate(tmp_path, capsys)
    starts = {g["name"]: g["start"] for g in doc["gangs"]}
    assert starts == {"r": 0.0, "b": 100.0, "c": 200.0}
    assert (doc["deadlines_met"], doc["deadlines_missed"]) == (1, 1)
    assert doc["deadline_misses_foreseen"] == 1
    late = [e for e in events if e["type"] == "deadline"]
    assert [(e["gang"], e["t"], e["late"]) for e in late] == [("default/c", 100.0, 49.0)]
    assert "will miss its deadline t=4m11s by 49s" in late[0]["message"]
    on_time = [e for e in events if e["type"] == "expect" and e["gang"] == "default/b"]
    assert on_time[0]["message"].endswith("expected finish t=3m20s, slack 801s")
    by_name = {g["name"]: g for g in doc["gangs"]}
    assert by_name["c"]["deadline_miss_foreseen"] and not by_name["b"]["deadline_miss_foreseen"]


def test_least_slack_runs_the_gang_closest_to_its_deadline_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, events = simulate(tmp_path, capsys, "--orderings", "queues,priority,least-slack,gang")
    starts = {g["name"]: g["start"] for g in doc["gangs"]}
    assert starts == {"r": 0.0, "c": 100.0, "b": 200.0}
    assert (doc["deadlines_met"], doc["deadlines_missed"]) == (2, 0)
    assert doc["deadline_misses_foreseen"] == 0
    assert not [e for e in events if e["type"] == "deadline"]


def test_an_unknown_ordering_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(NODES + gang("r", 0, None))
    assert main(["simulate", str(path), "--orderings", "priority,slackest"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--orderings" in err[0] and "least-slack" in err[0]
