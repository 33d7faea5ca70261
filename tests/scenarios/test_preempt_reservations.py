"""Preemption never takes what a reservation needs unless the preemptor outranks the
reserved gang (issue 12), through ``phalanx simulate`` with ``reserve-easy, allocate,
preempt`` and perfect runtime estimates.

One 8-GPU node: ``victim`` (priority 10, 4 GPUs, 2 h) and ``keeper`` (priority 1000, 4 GPUs,
10 min) run; ``reserved`` (priority 100, 8 GPUs, never preempts) holds a reservation for
t=2h, when both have ended. ``taker`` (4 GPUs) arrives at t=10s and could preempt ``victim``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_preempt_topology import evictions, simulate
from test_queue_scenarios import Obj, gang, node

NEVER = {"phalanx.dev/preemption-policy": "Never"}
OPTIONS = ("--actions", "reserve-easy,allocate,preempt", "--estimates", "perfect")


def cluster(taker_class: str, taker_runs: str) -> list[Obj]:
    return [
        node("n0", 8),
        *gang("victim", 1, 4, cls="low", run="2h"),
        *gang("keeper", 1, 4, cls="high", run="10m"),
        *gang("reserved", 1, 8, cls="mid", at="1s", run="1h", annotations=NEVER),
        *gang("taker", 1, 4, cls=taker_class, at="10s", run=taker_runs),
    ]


def starts(result: dict[str, Any]) -> dict[str, float | None]:
    return {g["name"]: g["start"] for g in result["gangs"]}


def test_a_preemptor_ranked_below_a_reservation_does_not_delay_it(tmp_path: Path) -> None:
    # taking victim's room for 3 h would push the reservation from t=2h to past t=3h
    result, events = simulate(tmp_path, cluster("pre", "3h"), *OPTIONS, until="8h")
    assert evictions(events) == set()
    assert starts(result)["reserved"] == 7200.0
    assert starts(result)["taker"] == 3 * 3600.0  # after the reservation's hour


def test_a_preemptor_that_ends_before_the_reserved_start_may_preempt(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, cluster("pre", "1h"), *OPTIONS, until="8h")
    assert evictions(events) == {"default/victim"}
    assert starts(result)["taker"] == 10.0
    assert starts(result)["reserved"] <= 7200.0  # not delayed (earlier, with victim gone)


def test_a_preemptor_that_outranks_the_reserved_gang_may_take_its_room(tmp_path: Path) -> None:
    result, events = simulate(tmp_path, cluster("over", "3h"), *OPTIONS, until="8h")
    assert evictions(events) == {"default/victim"}
    assert starts(result)["taker"] == 10.0
