"""Named scheduling policies: which plugins and actions a cycle runs.

The registry is a literal table. ``phalanx`` is the engine's own policy: gang units, priority
then FIFO order, kube-scheduler's filters, binpack scoring. ``kube-default`` emulates the
default Kubernetes scheduler: every pod is placed on its own, in priority-then-FIFO order,
with spread (LeastAllocated) scoring and no idea that pods belong together — the behaviour
that deadlocks two gangs and leaves seven of eight GPUs idle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from phalanx.actions.allocate import Allocate
from phalanx.api.errors import InputError
from phalanx.cluster.state import ClusterState
from phalanx.framework.plugin import Action
from phalanx.framework.session import CycleResult, Session, SessionConfig
from phalanx.plugins.gang import Gang
from phalanx.plugins.nodeorder import Binpack, Spread
from phalanx.plugins.predicates import Predicates
from phalanx.plugins.priority import Priority

SCORINGS: dict[str, Callable[[], object]] = {"binpack": Binpack, "spread": Spread}


@dataclass(frozen=True)
class Policy:
    name: str
    summary: str
    gang_aware: bool
    default_scoring: str

    def plugins(self, scoring: str | None = None) -> list[object]:
        chosen = scoring or self.default_scoring
        if chosen not in SCORINGS:
            raise InputError(
                f"unknown scoring {chosen!r} (choose from {', '.join(SCORINGS)})", field="--scoring"
            )
        gang: list[object] = [Gang()] if self.gang_aware else []
        return [Priority(), *gang, Predicates(), SCORINGS[chosen]()]

    def actions(self) -> list[Action]:
        return [Allocate()]

    def config(self) -> SessionConfig:
        return SessionConfig(gang_units=self.gang_aware)


POLICIES: dict[str, Policy] = {
    "phalanx": Policy(
        "phalanx", "gang all-or-nothing, priority then FIFO, binpack", True, "binpack"
    ),
    "kube-default": Policy(
        "kube-default", "pod at a time, priority then FIFO, spread; no gangs", False, "spread"
    ),
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        known = ", ".join(POLICIES)
        raise InputError(
            f"unknown policy {name!r} (choose from {known})", field="--policy"
        ) from None


class Scheduler:
    """The engine: one session per cycle with a policy's plugins and actions, seeded."""

    def __init__(self, policy: Policy, *, seed: int = 0, scoring: str | None = None) -> None:
        self.policy = policy
        self.plugins: Sequence[object] = policy.plugins(scoring)
        self.actions = policy.actions()
        self.config = policy.config()
        self.rng = np.random.default_rng(seed)

    def cycle(self, state: ClusterState, now: float) -> CycleResult:
        session = Session(state, self.plugins, now=now, rng=self.rng, config=self.config)
        for action in self.actions:
            action.execute(session)
        return session.close()
