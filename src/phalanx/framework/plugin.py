"""Plugin hooks as Protocols, and the rules that combine plugin answers.

A plugin is any object with a ``name``; it implements whichever hooks it needs, and the session
finds them once when it is built (``hooks``). Combination rules, as in Volcano:

- orderings (``order_key``): the first plugin whose keys differ decides — each plugin returns a
  sort key and the session sorts by the concatenation, which is "first non-zero answer wins"
  without a Python comparison per pair;
- validity (``unit_valid``): every plugin must accept; the first refusal's reason is kept;
- readiness (``unit_ready``): all must agree (no plugin: ready);
- filters: node masks are ANDed; scores: weighted sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.unit import Unit

if TYPE_CHECKING:
    from phalanx.framework.session import Session

Scores = npt.NDArray[np.float64]


@runtime_checkable
class UnitOrder(Protocol):
    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        """Units with smaller keys go first; equal keys defer to the next plugin."""


@runtime_checkable
class UnitValid(Protocol):
    def unit_valid(self, unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        """``None`` if the unit may be tried now, else ``(reason, message)``."""


@runtime_checkable
class UnitReady(Protocol):
    def unit_ready(self, unit: Unit) -> bool:
        """May the unit's tentative placement be committed?"""


@runtime_checkable
class Filter(Protocol):
    def filter(self, table: NodeTable, pod: PodInfo) -> Mask:
        """Nodes where ``pod`` may go now."""

    def rejections(self, table: NodeTable, pod: PodInfo) -> list[tuple[str, Mask]]:
        """For explanations: each reason and the nodes it rejects."""


@runtime_checkable
class Score(Protocol):
    weight: int

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        """A score in [0, 100] for every node (only ``feasible`` ones are used)."""


@runtime_checkable
class Action(Protocol):
    name: str

    def execute(self, session: Session) -> None:
        """Run this algorithm over the session."""


class Hooks:
    """Which plugin implements which hook, found once (isinstance on a runtime Protocol is
    slow: do it when a scheduler is built, not every cycle)."""

    def __init__(self, plugins: Sequence[object]) -> None:
        self.plugins = list(plugins)
        self.orders = [p for p in plugins if isinstance(p, UnitOrder)]
        self.validators = [p for p in plugins if isinstance(p, UnitValid)]
        self.readiness = [p for p in plugins if isinstance(p, UnitReady)]
        self.filters = [p for p in plugins if isinstance(p, Filter)]
        self.scorers = [p for p in plugins if isinstance(p, Score)]
