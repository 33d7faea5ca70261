"""A gang that started after it had aged (the starvation fix: its reservation) is not
preempted at once by the gangs it waited behind (issue 12), through ``phalanx simulate``.

The rule (:mod:`phalanx.actions.guard`): such a gang is protected for its estimated runtime;
while protected, only a preemptor that has aged too may take it whole (of those, ``preempt``
picks a strictly higher priority).

The hand-made cases: one 4-GPU node; ``filler`` (high, 1h10m) runs; ``starved`` (low,
4 GPUs, estimate 1 h, runs 2 h) ages at 1 h (``aging-factor=1``: max(20m, its estimate)),
is reserved for the filler's end and starts at 1h10m, protected until 2h10m; ``urgent``
(high, 4 GPUs) arrives at 1h20m.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from test_preempt_topology import binds, simulate
from test_queue_scenarios import Obj, gang, node

from phalanx.cli.main import main

EXAMPLES = Path(__file__).parents[2] / "src" / "phalanx" / "examples"
ACTIONS = ("--actions", "reserve:aging=20m:aging-factor=1,allocate,preempt")


def estimate(text: str) -> dict[str, str]:
    return {"phalanx.dev/runtime-estimate": text}


def cluster(urgent_estimate: str, **starved: str) -> list[Obj]:
    """``starved``: more annotations of starved's pods."""
    urgent = estimate(urgent_estimate)
    return [
        node("n0", 4),
        *gang("filler", 1, 4, cls="high", run="70m", annotations=estimate("70m")),
        *gang("starved", 1, 4, at="1s", run="2h", annotations={**estimate("1h"), **starved}),
        *gang("urgent", 1, 4, cls="high", at="80m", run="10m", annotations=urgent),
    ]


def evictions_of(events: list[dict[str, Any]], gang_key: str) -> list[tuple[float, str]]:
    return [(e["t"], e["by"]) for e in events if e["type"] == "evict" and e["gang"] == gang_key]


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in result["gangs"]}


def test_the_starved_job_of_the_example_is_not_preempted_after_its_reserved_start(
    tmp_path: Path,
) -> None:
    """04-starvation under ``phalanx``: b ages at 1h00m10s, starts on its reservation at
    1h10m and runs its 30 minutes (it was preempted by the next 2-GPU job and finished at
    2h50m before protection); all 25 gangs complete."""
    out, log = tmp_path / "out.json", tmp_path / "events.jsonl"
    argv = ["simulate", str(EXAMPLES / "04-starvation.yaml"), "--policy", "phalanx"]
    with out.open("w") as sink, contextlib.redirect_stdout(sink):
        assert main([*argv, "--until", "4h", "--events", str(log), "-o", "json"]) == 0
    result = json.loads(out.read_text())
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert evictions_of(events, "default/b") == []
    starts = {t for t, _ in binds(events, "default/b")}
    assert len(starts) == 1  # started once, all four pods together
    b = by_name(result)["b"]
    assert 3610 <= b["start"] <= 3610 + 600
    assert b["finish"] == b["start"] + 1800 <= 6000  # 1h40m
    assert result["completed"] == 25 and result["preemptions"] == 0


def test_a_low_priority_big_gang_ranked_first_is_not_preempted_again_and_again(
    tmp_path: Path,
) -> None:
    """04-starvation with b (4 GPUs, low priority) a big gang (``min-gpus=4``, ``big-first``):
    it ranks ahead of the high-priority jobs, starts on its reservation at 10m and runs its
    30 minutes. Unprotected, each high job preempted it: 11 preemptions, 48 pods made."""
    argv = ["simulate", str(EXAMPLES / "04-starvation.yaml"), "--estimates", "perfect"]
    argv += ["--actions", "reserve:min-gpus=4,allocate,preempt,reclaim", "-o", "json"]
    out, log = tmp_path / "out.json", tmp_path / "events.jsonl"
    with out.open("w") as sink, contextlib.redirect_stdout(sink):
        assert main([*argv, "--events", str(log)]) == 0
    result = json.loads(out.read_text())
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert evictions_of(events, "default/b") == [] and result["preemptions"] == 0
    b = by_name(result)["b"]
    assert (b["start"], b["finish"], b["gpus"]) == (600, 600 + 1800, 4)
    assert result["completed"] == 25


def test_protection_ends_with_the_estimated_runtime(tmp_path: Path) -> None:
    """urgent, not aged (its 3 h estimate ages it after 3 h), waits until starved has run its
    1 h estimate, then preempts it at once (the lapse is a wake-up)."""
    result, events = simulate(tmp_path, cluster("3h"), *ACTIONS, until="6h")
    assert binds(events, "default/starved")[0][0] == 70 * 60
    assert evictions_of(events, "default/starved") == [(130 * 60, "default/urgent")]
    assert by_name(result)["urgent"]["start"] == 130 * 60  # bound in the same instant
    assert result["completed"] == 3


def test_an_aged_higher_priority_gang_may_take_a_protected_one(tmp_path: Path) -> None:
    """urgent (estimate 10m) ages after 20 minutes of waiting: it then outranks starved's
    reservation (aged, higher priority) and preempts it before the protection ends."""
    _, events = simulate(tmp_path, cluster("10m"), *ACTIONS, until="6h")
    assert evictions_of(events, "default/starved") == [(100 * 60, "default/urgent")]


def test_without_reservations_the_same_gang_is_preempted_at_once(tmp_path: Path) -> None:
    """The contrast: with ``allocate,preempt`` only, urgent preempts starved on arrival."""
    _, events = simulate(tmp_path, cluster("3h"), "--actions", "allocate,preempt", until="6h")
    starts = binds(events, "default/starved")
    assert starts and starts[0][0] == 70 * 60
    assert evictions_of(events, "default/starved")[0] == (80 * 60, "default/urgent")


def test_a_gang_preempted_and_made_again_keeps_its_size(tmp_path: Path) -> None:
    """starved's 4-GPU pods are evicted and made again by their Job: its size (the JSON's
    ``gpus``, the wait-by-size bucket) stays 4 GPUs, not every pod it ever had."""
    result, events = simulate(tmp_path, cluster("3h"), "--actions", "allocate,preempt", until="6h")
    assert evictions_of(events, "default/starved")
    assert by_name(result)["starved"]["gpus"] == 4.0
    assert set(result["max_wait_by_size"]) == {"2-8"}


def test_a_parked_preemptor_binds_in_the_instant_a_min_runtime_ends(tmp_path: Path) -> None:
    """No reservations: urgent fails on arrival (starved's 50-minute min-runtime), is parked,
    and preempts when the min-runtime ends at 2h; it binds in that instant (the simulator
    once dropped the cycle it asked for, as a wake-up of that instant had run already)."""
    objects = cluster("3h", **{"phalanx.dev/min-runtime": "50m"})
    result, events = simulate(tmp_path, objects, "--actions", "allocate,preempt", until="6h")
    assert evictions_of(events, "default/starved") == [(120 * 60, "default/urgent")]
    assert by_name(result)["urgent"]["start"] == 120 * 60
    assert result["completed"] == 3
