"""A run whose only activity left is a scheduler's own wake-ups ends when its state repeats.

A wake-up (``Kind.RETRY``) is progress: a backoff or a Permit deadline may let a gang try
again. Under coscheduling a gang that cannot fit reserves what it can, is rejected at Permit
when its wait runs out, and retries after its backoff — which reserves the same room again. Its
own release wakes it, so with nothing else left to happen the run never ended (a RayJob whose
two 8-GPU hosts never fit beside a pod that runs forever: one reserve and one reject a minute,
for ever). On a cluster that gang retries for ever too; a simulation learns nothing more.

So once every progress event left is a wake-up, the simulator notes after each instant the
cluster's state (every pod's status, node and devices; every node's usage: see
``ClusterState.fingerprint``) with the pending events as offsets from now. The run is
deterministic, so if a note repeats one taken since the last event of another kind, the run
would repeat that stretch for ever: it ends there, as a run with nothing left to do does.
Runs that end by themselves never reach this (the notes start only once nothing but wake-ups
is left, and a repeat never comes before the end of such a run), so their results are unchanged.
A run ended so says where (``retry_loop`` in ``simulate -o json`` and per policy in ``compare
-o json``: the instant and the gangs whose wake-ups were left; a note under ``compare``'s
table); any other run has ``retry_loop: null``.
The note leaves out what a scheduler reads from the clock alone (aging, decayed usage,
deadlines): a loop of wake-ups that such a reading would break later is ended too early.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

from phalanx.cluster.state import ClusterState
from phalanx.sim.events import Event, EventQueue, Kind


class Repeats:
    def __init__(self) -> None:
        self.seen: set[Hashable] = set()
        #: where the run ended on the loop (``retry_loop`` in ``-o json``): the instant, and
        #: the gangs whose wake-ups were all that was left (None: it did not)
        self.end: dict[str, Any] | None = None

    @property
    def ended(self) -> bool:
        """Did the run end here: nothing left to do but the loop?"""
        return self.end is not None

    def end_here(self, now: float, retrying: list[str]) -> None:
        """The run ends at ``now``: only these gangs' wake-ups were left, repeating."""
        self.end = {"t": now, "gangs": retrying}

    def handled(self, event: Event) -> None:
        """An event ran: anything but a wake-up starts a new stretch."""
        if event.kind is not Kind.RETRY and self.seen:
            self.seen.clear()

    def looping(self, queue: EventQueue, state: ClusterState, now: float) -> bool:
        """After the instant ``now``: would the run from here repeat what it did since the
        last event of another kind than a wake-up?"""
        if not queue.only_wakeups():
            self.seen.clear()
            return False
        note = (json.dumps(state.fingerprint(), sort_keys=True, default=str), queue.offsets(now))
        if note in self.seen:
            return True
        self.seen.add(note)
        return False


def note(policy: str, end: dict[str, Any]) -> str:
    """One line for a comparison: ``policy``'s run ended on a loop of wake-ups."""
    gangs = list(end.get("gangs", []))
    named = ", ".join(gangs[:3]) + (f" and {len(gangs) - 3} more" if len(gangs) > 3 else "")
    return (
        f"{policy}: ended at t={end['t']:g} s on a loop of retries that repeated with nothing "
        f"else left to happen ({named or 'no gang'} still waiting); see retry_loop in -o json"
    )
