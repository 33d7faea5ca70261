"""A simulation that writes no events tells passed expected starts only when something reads
them (``Teller.lazy``): what the run reports is what a run telling every passed start on
schedule reports — decisions, first expected starts, foreseen deadline misses — with fewer
re-tells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_reservations import gang, nodes

from phalanx.actions import expect
from phalanx.k8s import load_files
from phalanx.sim.simulator import SimOptions, simulate


def workload() -> str:
    """4 one-GPU nodes. ``blind`` (no estimate) holds one of them for an hour, so gangs that
    need all four start as ``unknown`` until it ends; the others overrun their estimates (half
    their runtime), so their expected starts pass while they wait; every third has a deadline,
    some too tight to meet."""
    text = nodes(4) + gang("blind", 1, at=0, runs=3600, estimate=None)
    for i in range(12):
        gpus = 1 + i % 4
        deadline = None if i % 3 else f"{900 + 300 * i}s"
        runs = 600 + 120 * (i % 5)
        text += gang(f"g{i}", gpus, at=10 * i, runs=runs, estimate=runs / 2, deadline=deadline)
    return text


def run(path: Path, *, events: bool) -> tuple[dict[str, Any], int]:
    """The run's JSON, and how many expected starts the teller made."""
    made = 0
    estimate = expect.Teller._estimate

    def counted(self: expect.Teller, *args: Any) -> None:
        nonlocal made
        made += 1
        estimate(self, *args)

    sink: list[dict[str, Any]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(expect.Teller, "_estimate", counted)
        result = simulate(load_files([path]), SimOptions(), sink.append if events else None)
    return result.to_json(), made


def test_a_run_without_events_reports_what_a_run_telling_everything_does(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(workload())
    eager, told_eagerly = run(path, events=True)
    lazy, told_lazily = run(path, events=False)
    fields = ("start", "expected_start_first", "deadline", "deadline_miss_foreseen")
    by_gang = {g["name"]: [g[f] for f in fields] for g in eager["gangs"]}
    assert {g["name"]: [g[f] for f in fields] for g in lazy["gangs"]} == by_gang
    for metric in ("eta_error", "deadlines_met", "deadlines_missed", "deadline_misses_foreseen"):
        assert lazy[metric] == eager[metric]
    assert eager["deadline_misses_foreseen"] > 0  # a deadline gang re-told into a miss
    assert told_lazily < told_eagerly  # passed starts nobody read were not told again
