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
from dataclasses import replace
from typing import Any

from phalanx.actions.allocate import Allocate
from phalanx.actions.book import Settings
from phalanx.actions.coscheduling import Coscheduling
from phalanx.actions.preempt import Preempt
from phalanx.actions.reclaim import Reclaim
from phalanx.actions.reserve import Reserve
from phalanx.actions.volcano import VolcanoPreempt, VolcanoReclaim
from phalanx.api.durations import parse_duration
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
from phalanx.plugins.queues import Queues, Quota
from phalanx.plugins.randomscore import RandomScore
from phalanx.plugins.slack import LeastSlack
from phalanx.plugins.topology import GreedyTopologyPlacement, TopologyPlacement

ScoringFactory = Callable[[BuildContext], Score]

ORDERINGS: dict[str, Callable[[], object]] = {
    "priority": Priority,
    "gang": Gang,
    "drf": Drf,
    "queues": Queues,
    "quota": Quota,
    "least-slack": LeastSlack,
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

#: phalanx's default reservation rule (chosen from measurements: benchmarks/README.md,
#: "Reservations and backfill"): EASY backfill, a reservation for the head of each queue if it
#: is at least ``min_gpus`` GPUs (more than 32), ranked before every other gang of its queue
#: (``big_first``), and for the oldest ``max_aged`` gangs (two) of each queue that have waited
#: ``max(aging, aging_factor × its estimate)`` (1 h, 3 ×); learned estimates are the median of
#: the shape's runtimes, or of the queue's until three of the shape have finished (``pooled``),
#: and a backfill may make a reservation whose start rests on them (not a big head's) start
#: later by a quarter of the time until it (``slack``: relaxed backfill; benchmarks/README.md,
#: "Session 9").
RESERVE = Settings(
    "easy",
    depth=1,
    aging=3600.0,
    min_gpus=33.0,
    aging_factor=3.0,
    max_aged=2,
    quantile=0.5,
    big_first=True,
    slack=0.25,
    pooled=True,
)

ACTIONS: dict[str, Callable[[], Action]] = {
    "allocate": Allocate,
    "coscheduling": Coscheduling,
    "reserve": lambda: Reserve(RESERVE),
    "reserve-easy": lambda: Reserve(Settings("easy")),
    "reserve-conservative": lambda: Reserve(Settings("conservative")),
    "reserve-strict": lambda: Reserve(Settings("strict")),
    "preempt": Preempt,
    "reclaim": Reclaim,
    "volcano-preempt": VolcanoPreempt,
    "volcano-reclaim": VolcanoReclaim,
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
    """The actions named, in order; an unknown name is an input error naming ``field``.

    ``reserve`` takes its settings after colons, e.g. ``reserve:mode=easy:aging=2h:min-gpus=16``
    (keys ``mode``, ``depth``, ``aging``, ``min-gpus``, ``min-share``, ``aging-factor``,
    ``max-aged``, ``aging-cap``, ``head-wait``, ``quantile``, ``big-first``, ``slack``,
    ``pooled``; unset ones keep ``reserve``'s default; ``aging=off``, ``max-aged=all``,
    ``aging-cap=off``, ``big-first=true|false``, ``pooled=true|false``; ``min-share`` is a
    fraction of the cluster's GPUs; ``slack=0`` is strict EASY).
    """
    actions: list[Action] = []
    for name in names:
        base, *options = name.split(":")
        if base not in ACTIONS:
            raise unknown("action", base, ACTIONS, field)
        if options and base != "reserve":
            raise InputError(f"action {base!r} takes no options", field=field)
        actions.append(_reserve(options, field) if options else ACTIONS[base]())
    return actions


def _reserve(options: list[str], field: str) -> Action:
    values: dict[str, str] = {}
    keys = tuple(_FIELDS)
    for option in options:
        key, equals, value = option.partition("=")
        if not equals or key not in keys:
            known = ", ".join(keys)
            raise InputError(f"bad reserve option {option!r} (keys: {known})", field=field)
        values[key] = value
    try:
        changes: dict[str, Any] = {_FIELDS[k]: _parse(k, v) for k, v in values.items()}
        settings = replace(RESERVE, **changes)
    except ValueError as exc:
        raise InputError(f"bad reserve option: {exc}", field=field) from None
    if settings.mode not in ("easy", "conservative", "strict") or settings.depth < 1:
        raise InputError("reserve mode is easy, conservative or strict; depth ≥ 1", field=field)
    if not 0.0 < settings.quantile <= 1.0:
        raise InputError("reserve quantile is in (0, 1]", field=field)
    if not 0.0 <= settings.min_share <= 1.0:
        raise InputError("reserve min-share is in [0, 1]", field=field)
    if not settings.slack >= 0.0:  # NaN too
        raise InputError("reserve slack is at least 0", field=field)
    return Reserve(settings)


_FIELDS = {
    "mode": "mode",
    "depth": "depth",
    "aging": "aging",
    "min-gpus": "min_gpus",
    "min-share": "min_share",
    "aging-factor": "aging_factor",
    "max-aged": "max_aged",
    "aging-cap": "aging_cap",
    "head-wait": "head_wait",
    "quantile": "quantile",
    "big-first": "big_first",
    "slack": "slack",
    "pooled": "pooled",
}


def _parse(key: str, value: str) -> object:
    if key == "mode":
        return value
    if key == "depth":
        return int(value)
    if key in ("aging", "aging-cap"):
        return None if value in ("off", "none") else parse_duration(value)
    if key == "head-wait":
        return parse_duration(value)
    if key in ("big-first", "pooled"):
        if value not in ("true", "false"):
            raise ValueError(f"{key} is true or false, not {value!r}")
        return value == "true"
    if key == "max-aged":
        return None if value in ("all", "none") else int(value)
    return float(value)
