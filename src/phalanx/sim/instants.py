"""Cycles at one instant: a loop of take-backs is cut short, and reported.

A cycle may ask for another at its own instant (a preemptor binds in the next one), and an
eviction takes effect at once in the simulator (no grace period). So a rule under which gangs
take room back from each other in turn — Volcano's reclaim, where a queue below its deserved
share takes from one above it, which is then below its own and takes back — would loop at
one instant forever, the run never ending. On a cluster such a loop is paced by the
scheduling period and eviction grace periods, and shows as evictions without progress.

Here at most :data:`MAX_CYCLES` cycles run at one instant: the further wake-ups of that
instant are dropped (the next event runs the next cycle) and the run reports each instant it
cut short, with the gangs evicted in it (``livelocks`` in ``simulate -o json`` and in each
policy of ``compare -o json``; a note under ``compare``'s table). Runs without such a loop
stay far below the bound: the most cycles seen at one instant was 4 (``examples/06-queues``,
a 500-job multi-tenant synthetic run, Philly with queues and ``ee9e8c`` at 3,000 jobs, under
``phalanx``, ``phalanx-reserve`` and ``volcano``).
"""

from __future__ import annotations

from typing import Any

#: At most this many cycles run at one simulated instant.
MAX_CYCLES = 32
#: Gangs named per cut-short instant (the rest are counted).
NAMED = 6


class Instants:
    def __init__(self) -> None:
        self.at: float | None = None
        self.cycles = 0  # cycles run at ``at`` so far
        self.evicted: dict[str, None] = {}  # gangs evicted at ``at``, in order
        self.cut: list[dict[str, Any]] = []  # one entry per instant cut short

    def cycle(self, now: float) -> None:
        """A cycle starts at ``now``."""
        if now != self.at:
            self.at, self.cycles, self.evicted = now, 0, {}
        self.cycles += 1

    def evicting(self, gang: str) -> None:
        self.evicted[gang] = None

    def wake_allowed(self, at: float) -> bool:
        """May a cycle at ``at`` ask for one more at ``at``? (No, once the instant has had
        :data:`MAX_CYCLES`: it is then reported, once.)"""
        if at != self.at or self.cycles < MAX_CYCLES:
            return True
        if not self.cut or self.cut[-1]["t"] != at:
            self.cut.append({"t": at, "cycles": self.cycles, "evicted": list(self.evicted)})
        return False


def note(policy: str, cut: list[dict[str, Any]]) -> str:
    """One line for a comparison: where ``policy``'s runs looped at one instant."""
    first = cut[0]
    gangs = list(first["evicted"])
    named = ", ".join(gangs[:NAMED]) + (
        f" and {len(gangs) - NAMED} more" if len(gangs) > NAMED else ""
    )
    return (
        f"{policy}: a loop of evictions at {len(cut)} instant(s), each cut short after "
        f"{MAX_CYCLES} cycles (first at t={first['t']:g} s: {named or 'no gang'} evicted in "
        "turn); see livelocks in -o json"
    )
