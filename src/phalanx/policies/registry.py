"""The one literal registry: every plugin and action a policy can name.

``simulate``, ``compare``, ``serve`` and ``packing`` all resolve names here. Adding a plugin
is its module, one line in the right table below, and its test; adding an action is its
module, one line in ``ACTIONS``, and its test (see docs/design.md, "Adding a plugin or an
action").

- ``ORDERINGS``: plugins that order units and vote on validity/readiness, built with no
  arguments.
- ``SCORINGS``: node-scoring plugins, each built by its ``build(context)`` from a
  :class:`~phalanx.framework.plugin.BuildContext` (weight, per-resource weights, the run's
  seed, FGD's target workload). Besides binpack and spread, the six placement policies of the
  FGD paper (random, dotproduct, gpuclustering, gpupacking, bestfit, fgd): ``phalanx
  packing`` resolves its policies here too.
- ``PLACEMENTS``: plugins that say where a unit may go before nodes are scored (topology:
  which network domain), built with no arguments.
- ``ACTIONS``: the algorithms a cycle runs, in the order a policy lists them (Volcano's
  ``actions: "enqueue, allocate, preempt, reclaim, backfill"``); built with no arguments.
  Actions never call each other: they share the session and its Statements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from phalanx.actions.allocate import Allocate
from phalanx.actions.coscheduling import Coscheduling
from phalanx.api.errors import InputError
from phalanx.framework.plugin import Action, BuildContext, Score
from phalanx.plugins.bestfit import BestFit
from phalanx.plugins.dotproduct import DotProduct
from phalanx.plugins.drf import Drf
from phalanx.plugins.fgd import FGD
from phalanx.plugins.gang import Gang
from phalanx.plugins.gpuclustering import GpuClustering
from phalanx.plugins.gpupacking import GpuPacking
from phalanx.plugins.nodeorder import Binpack, Spread
from phalanx.plugins.priority import Priority
from phalanx.plugins.randomscore import RandomScore
from phalanx.plugins.topology import GreedyTopologyPlacement, TopologyPlacement

ScoringFactory = Callable[[BuildContext], Score]

ORDERINGS: dict[str, Callable[[], object]] = {
    "priority": Priority,
    "gang": Gang,
    "drf": Drf,
}

SCORINGS: dict[str, ScoringFactory] = {
    "binpack": Binpack.build,
    "spread": Spread.build,
    "random": RandomScore.build,
    "dotproduct": DotProduct.build,
    "gpuclustering": GpuClustering.build,
    "gpupacking": GpuPacking.build,
    "bestfit": BestFit.build,
    "fgd": FGD.build,
}

PLACEMENTS: dict[str, Callable[[], object]] = {
    "topology": TopologyPlacement,
    "topology-greedy": GreedyTopologyPlacement,
}

ACTIONS: dict[str, Callable[[], Action]] = {
    "allocate": Allocate,
    "coscheduling": Coscheduling,
}


def unknown(kind: str, name: str, table: Mapping[str, object], field: str) -> InputError:
    known = ", ".join(table)
    return InputError(f"unknown {kind} {name!r} (choose from {known})", field=field)


def build_scoring(name: str, context: BuildContext, field: str = "scoring") -> Score:
    """The scoring plugin ``name`` built with ``context``; an unknown name is an input error
    naming ``field``."""
    if name not in SCORINGS:
        raise unknown("scoring", name, SCORINGS, field)
    try:
        return SCORINGS[name](context)
    except InputError as err:
        raise err.located(field=f"{field}.{name}") from None


def build_actions(names: tuple[str, ...], field: str = "actions") -> list[Action]:
    """The actions named, in order; an unknown name is an input error naming ``field``."""
    actions = []
    for name in names:
        if name not in ACTIONS:
            raise unknown("action", name, ACTIONS, field)
        actions.append(ACTIONS[name]())
    return actions
