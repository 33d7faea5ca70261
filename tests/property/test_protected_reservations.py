"""A gang that started after it had aged is not taken whole, for its estimated runtime, by a
preemptor that had not aged itself (issue 12; the rule is in :mod:`phalanx.actions.guard`).

Checked from the event log alone, on random contended workloads where only aged gangs get
reservations (see ``reserved_workloads``): a gang first bound at least ``aging`` after it
was submitted started aged; no ``preempt`` or ``reclaim`` eviction of it before its start
plus its estimate may name a preemptor submitted less than ``aging`` before the eviction.
Its elastic surplus (``shrink``) may go.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from reserved_workloads import Case, cases, first_binds, run

WHOLE = ("preempt", "reclaim")


def violations(case: Case, events: list[dict[str, Any]]) -> list[str]:
    started = first_binds(events)
    out, ended = [], set()
    for e in events:
        if e["type"] != "evict" or e.get("reason") not in WHOLE or e["gang"] in ended:
            continue
        ended.add(e["gang"])  # its first run ends here: later runs are not checked
        victim, by = case.gangs[e["gang"]], case.gangs[e["by"]]
        start = started[e["gang"]]
        aged = start - victim.submit >= case.aging
        protected = aged and e["t"] < start + victim.estimate
        if protected and e["t"] - by.submit < case.aging:
            out.append(f"{e['gang']} (started {start:g}) taken at {e['t']:g} by {e['by']}")
    return out


@settings(max_examples=120, deadline=None)
@given(cases())
def test_a_gang_started_on_its_aged_reservation_is_spared_by_gangs_not_aged(case: Case) -> None:
    events = run(case, case.actions("preempt"))
    found = violations(case, events)
    assert not found, f"{case.summary()}: {found}"
