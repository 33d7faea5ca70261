"""Strict order with queues declared (``fifo-reserve``): a gang refused for waiting behind a
blocked head or a reservation is parked until the gate's stamp moves (the ``quota`` order is
static). On random small workloads in declared queues the engine decides exactly as the
reference, which places every refused gang every cycle (hints off); behind a head whose
start is unknown it tries the waiting gangs again per change of the room, not every waiting
gang every cycle."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fairshare_refusals import queued_workloads
from test_hints import assert_as_reference, queued_cluster, queued_gang

from phalanx.api.workload import Workload
from phalanx.framework.session import Session
from phalanx.sim.simulator import SimOptions, Simulation


@settings(max_examples=120, deadline=None)
@given(queued_workloads(), st.integers(0, 3))
def test_parked_strict_refusals_decide_as_the_reference(workload: Workload, seed: int) -> None:
    assert_as_reference(workload, "fifo-reserve", seed)


def blocked_queue() -> Workload:
    """Two 4-GPU nodes and one declared queue: a job without an estimate holds 6 GPUs, so
    the 8-GPU head behind it has no known start and blocks the queue; forty small gangs
    (one or two pods of one GPU) arrive a second apart behind it, each fitting in the free
    room."""
    items = queued_cluster({"q": 1}, nodes=2)
    items += queued_gang("running", 2, "q", 0, 5000, 0, (3, 3))
    items += queued_gang("head", 2, "q", 0, 100, 1, (4, 4), estimate=100)
    for i in range(40):
        items += queued_gang(f"small{i}", 1 + i % 2, "q", 0, 100, 2 + i, (1,) * (1 + i % 2), 100)
    return Workload(items)


def run(hints: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, list[str]]:
    """Attempts, placements made (pods placed tentatively) and decisions, up to t=900."""
    placed = [0]
    select = Session.select_within

    def counted(self: Session, choice: Any) -> int | None:
        placed[0] += 1
        return select(self, choice)

    monkeypatch.setattr(Session, "select_within", counted)
    events: list[dict[str, Any]] = []
    sim = Simulation(blocked_queue(), SimOptions(policy="fifo-reserve", until=900.0), events.append)
    sim.state.hints = hints
    result = sim.run()
    decisions = [f"{e['t']} {e['type']} {e['pod']}" for e in events if e["type"] == "bind"]
    return result.attempts, placed[0], decisions


def test_a_gang_behind_a_blocked_head_is_placed_once_not_every_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts, placed, binds = run(True, monkeypatch)
    reference_attempts, reference_placed, reference_binds = run(False, monkeypatch)
    assert binds == reference_binds == ["0.0 bind default/running-0", "0.0 bind default/running-1"]
    # refused gangs stay parked (the quota order is static): fewer attempts, none re-placed
    assert attempts <= reference_attempts
    assert reference_placed >= 1000  # every waiting small gang's pods, every cycle
    # parked, the refused gangs are tried again only when the gate's stamp moves, then placed
    # once per class and room: 70 pods placed (measured), against every gang every cycle
    assert placed <= 100
