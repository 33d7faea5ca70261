"""Plugin hooks as Protocols, and the rules that combine plugin answers.

A plugin is any object with a ``name``; it implements whichever hooks it needs, and the session
finds them once when it is built (``hooks``). Combination rules, as in Volcano:

- orderings (``order_key``): the first plugin whose keys differ decides — each plugin returns a
  sort key and the session sorts by the concatenation, which is "first non-zero answer wins"
  without a Python comparison per pair;
- validity (``unit_valid``): every plugin must accept; the first refusal's reason is kept;
- limits (``unit_limit``): how many of an elastic unit's pods, in order, a plugin lets it
  place at most (a queue's capability); the smallest wins, never below the gang's minimum;
- reach (``out_of_reach``): why a unit can never be placed whatever else runs (its minimum
  beyond its queue's capability): the first answer; such a unit gets no reservation;
- readiness (``unit_ready``): all must agree (no plugin: ready);
- filters: node masks are ANDed; scores: weighted sum (a filter or score may also answer for
  a few rows, ``filter_rows``/``score_rows``, so a session recomputes only what changed);
- GPU devices (``choose_gpus``): the first scoring plugin that chooses them decides, so a pod
  lands on the devices it was scored for (FGD); with none, the table's best fit;
- placements (``observe``) and session opening (``open_session``): every plugin is told;
- where a unit may go (``placements``): the first plugin with an opinion decides, as
  :class:`Placements` — attempts tried in order, each giving every pod the nodes it may use
  (topology: one attempt per candidate domain). No plugin: one attempt, anywhere;
- flavors (``flavors``): the first plugin with an opinion gives the node sets a unit may be
  admitted in, in order (Kueue resource flavors, :class:`Flavors`); every attempt of the
  placement is then made inside each of them in turn (:func:`within_flavors`), and the
  reservation domains are cut to them likewise. No opinion: placements are unchanged.

Scoring plugins are built from a :class:`BuildContext` (``SCORINGS`` in
:mod:`phalanx.policies.registry` maps each name to a ``build(context)``): what a plugin may
need that only the runner knows — the run's seed, FGD's target workload — travels in one frozen
value, the same in every runner.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from phalanx.api.errors import InputError
from phalanx.cluster.fragmentation import TargetWorkload
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable, Rows
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.unit import Unit

if TYPE_CHECKING:
    from phalanx.framework.session import Session
    from phalanx.framework.statement import Statement

Scores = npt.NDArray[np.float64]
#: A pod and the node masks it may use, in order of preference (``None``: any node).
PodChoice = tuple[PodInfo, tuple[Mask | None, ...]]


@dataclass(slots=True)
class Placements:
    """Where a unit may go: ``attempts`` in order (each yields its pods lazily, so it may plan
    a later group of pods on the room left by the earlier ones), and ``why`` none can
    succeed (set up front, or by an attempt that gave up)."""

    attempts: list[Callable[[], Iterator[PodChoice]]] = field(default_factory=list)
    why: str = ""
    where: list[str] = field(default_factory=list)  # each attempt's domain, for messages


@dataclass(slots=True)
class Flavors:
    """Where a unit may be admitted: ``choices`` in order, each (label, the flavor names,
    its nodes), and why every flavor not among them was skipped."""

    choices: list[tuple[str, tuple[str, ...], Mask]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    quota_only: bool = False  # some flavor was passed over for its quota (not only nodes)


def within_flavors(
    base: Placements, flavors: Flavors, chosen: Callable[[tuple[str, ...]], None]
) -> Placements:
    """``base``'s attempts made inside each flavor's nodes in turn; ``chosen`` is told the
    flavor names when an attempt of that flavor starts (the one that commits is the last)."""
    attempts: list[Callable[[], Iterator[PodChoice]]] = []
    where: list[str] = []
    for label, names, nodes in flavors.choices:
        for i, attempt in enumerate(base.attempts):
            attempts.append(partial(_inside, attempt, nodes, names, chosen))
            inner = base.where[i] if i < len(base.where) else ""
            where.append(f"{label}, {inner}" if inner else label)
    tried = [f"{label}: no room on its nodes" for label, _, _ in flavors.choices]
    why = "; ".join([*flavors.skipped, *tried])
    if base.why:
        why += f" ({base.why})"
    return Placements(attempts, why, where)


def _inside(
    attempt: Callable[[], Iterator[PodChoice]],
    nodes: Mask,
    names: tuple[str, ...],
    chosen: Callable[[tuple[str, ...]], None],
) -> Iterator[PodChoice]:
    chosen(names)
    for pod, masks in attempt():
        yield pod, tuple(nodes if m is None else m & nodes for m in masks)


@runtime_checkable
class UnitOrder(Protocol):
    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        """Units with smaller keys go first; equal keys defer to the next plugin."""


@runtime_checkable
class UnitValid(Protocol):
    def unit_valid(self, unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        """``None`` if the unit may be tried now, else ``(reason, message)``."""


@runtime_checkable
class UnitLimit(Protocol):
    def unit_limit(self, unit: Unit) -> int | None:
        """At most how many of ``unit.pods`` (the first ones) it may place; None: all."""


@runtime_checkable
class UnitReach(Protocol):
    def out_of_reach(self, unit: Unit) -> str | None:
        """Why ``unit`` can never be placed whatever else runs or ends; None: it may be."""


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
class RowFilter(Filter, Protocol):
    def filter_rows(self, table: NodeTable, pod: PodInfo, rows: Rows) -> Mask:
        """``filter`` for the nodes ``rows`` only: the same verdicts (the session then asks
        only for the rows its placements changed, see :mod:`phalanx.framework.selection`)."""

    def filter_row(self, table: NodeTable, pod: PodInfo, row: int) -> bool:
        """``filter`` for node ``row`` alone (the common refresh: a placement wrote one row)."""


@runtime_checkable
class RowScore(Score, Protocol):
    def score_rows(self, table: NodeTable, pod: PodInfo, rows: Rows) -> Scores:
        """``score`` of the nodes ``rows`` only, to the last bit; implemented only by scores
        that do not depend on the other nodes or on the feasible mask."""

    def score_row(self, table: NodeTable, pod: PodInfo, row: int) -> float:
        """``score`` of node ``row`` alone, to the last bit."""


@runtime_checkable
class QuietFilter(Filter, Protocol):
    def passes_all(self, pod: PodInfo) -> bool:
        """Would ``filter`` pass every node for ``pod`` now? (Node selection then skips it.)"""


@runtime_checkable
class ChoosesGpus(Protocol):
    def choose_gpus(self, table: NodeTable, pod: PodInfo, node: int) -> tuple[int, ...]:
        """The GPU devices ``pod`` takes on ``node`` (``()`` for none)."""


@runtime_checkable
class ObservesPlacements(Protocol):
    def observe(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """``pod`` was placed on ``node`` (called when its Statement commits)."""


@runtime_checkable
class OpensSession(Protocol):
    def open_session(self, session: Session) -> None:
        """A session opens over ``session.state`` (Volcano's OnSessionOpen): read what the
        plugin keeps from the cluster, e.g. a learned workload or the pods on each node."""


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a scoring plugin is built with: its weight in the score sum, the weight of each
    resource inside it (None: the plugin's own), and what only the runner knows."""

    weight: int = 1
    resources: Mapping[str, int] | None = None
    seed: int = 0  # the run's seed: plugins that draw at random seed their own generator
    #: the pod shapes the cluster expects (FGD's target workload); None: learn it live
    target: TargetWorkload | None = None

    def no_resource_weights(self, plugin: str) -> None:
        """Refuse per-resource weights for a plugin that has none."""
        if self.resources is not None:
            raise InputError(f"{plugin} takes no per-resource weights", field="resources")


@runtime_checkable
class UnitPlacement(Protocol):
    def placements(self, unit: Unit, session: Session) -> Placements | None:
        """Where ``unit`` may go, or None for no opinion."""


@runtime_checkable
class UnitFlavors(Protocol):
    def flavors(self, unit: Unit, session: Session, *, later: bool = False) -> Flavors | None:
        """The flavors ``unit`` may be admitted in, or None for no opinion; ``later``: those it
        may be admitted in once its queue has room (quota not asked: a reservation's)."""


@runtime_checkable
class ReservationPlacement(Protocol):
    def reservation_domains(self, unit: Unit, session: Session) -> list[Mask | None] | None:
        """Where a reservation of ``unit`` may be carved, best first: each mask must hold all
        of its pods (None: anywhere); None for no opinion."""


@runtime_checkable
class Action(Protocol):
    name: str

    def execute(self, session: Session) -> None:
        """Run this algorithm over the session."""


@runtime_checkable
class Gate(Protocol):
    """Reservations a placement must not delay (see :mod:`phalanx.actions.reserve`)."""

    def nodes_for(self, unit: Unit) -> dict[str, int]:
        """Pod key → the node its reservation holds for it now (empty: none)."""

    def admits(self, unit: Unit, stmt: Statement) -> str | None:
        """``None`` if ``unit`` may start now as ``stmt`` places it, else why not."""

    def started(self, unit: Unit, stmt: Statement) -> None:
        """``unit`` was committed as ``stmt`` places it."""

    def failed(self, unit: Unit) -> None:
        """``unit`` found no room now."""

    def refuses_alike(self, unit: Unit) -> Callable[[GangInfo], bool]:
        """``unit`` was just refused: a test of whether a gang of its failure class, later in
        its order, is sure to be refused too (False when unsure)."""

    def watched(self) -> Iterable[str]:
        """Gangs whose failures the gate notices: after a release they are woken even beyond
        their class's wake budget, to fail as the reference engine would fail them."""

    def stamp(self) -> Hashable | None:
        """What the gate's refusals depend on besides the unit and the order: a unit it
        refused is refused again while the stamp is unchanged, so it may be parked until the
        stamp moves (``None``: it may change at any time; do not park)."""

    def standing_refusal(self, unit: Unit) -> str | None:
        """Where there is no stamp (the order moves): the gate's answer for ``unit`` when
        the refusal it gave it last still stands, so no placement need be attempted (None:
        attempt it)."""


class Hooks:
    """Which plugin implements which hook, found once (isinstance on a runtime Protocol is
    slow: do it when a scheduler is built, not every cycle)."""

    def __init__(self, plugins: Sequence[object]) -> None:
        self.plugins = list(plugins)
        self.orders = [p for p in plugins if isinstance(p, UnitOrder)]
        self.validators = [p for p in plugins if isinstance(p, UnitValid)]
        self.limiters = [p for p in plugins if isinstance(p, UnitLimit)]
        self.reach = [p for p in plugins if isinstance(p, UnitReach)]
        self.readiness = [p for p in plugins if isinstance(p, UnitReady)]
        self.filters = [p for p in plugins if isinstance(p, Filter)]
        self.scorers = [p for p in plugins if isinstance(p, Score)]
        #: which of them also answer for a few rows (see :mod:`phalanx.framework.selection`)
        self.row_filters = [p for p in self.filters if isinstance(p, RowFilter)]
        self.other_filters = [p for p in self.filters if not isinstance(p, RowFilter)]
        self.row_scores = [p for p in self.scorers if isinstance(p, RowScore)]
        self.quiet_filters = [p for p in self.other_filters if isinstance(p, QuietFilter)]
        choosers = [p for p in self.scorers if isinstance(p, ChoosesGpus)]
        self.gpu_chooser: ChoosesGpus | None = choosers[0] if choosers else None
        self.observers = [p for p in plugins if isinstance(p, ObservesPlacements)]
        self.openers = [p for p in plugins if isinstance(p, OpensSession)]
        self.placers = [p for p in plugins if isinstance(p, UnitPlacement)]
        self.reservation_placers = [p for p in self.placers if isinstance(p, ReservationPlacement)]
        self.flavorers = [p for p in plugins if isinstance(p, UnitFlavors)]
