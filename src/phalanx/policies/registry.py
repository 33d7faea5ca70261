"""The one literal registry: every plugin and action a policy can name.

``simulate``, ``compare``, ``serve`` and ``packing`` all resolve names here. Adding a plugin
is its module, one line in the right table below, and its test; adding an action is its
module, one line in ``ACTIONS``, and its test (see docs/design.md, "Adding a plugin or an
action").

- ``ORDERINGS``: plugins that order units and vote on validity/readiness, built with no
  arguments.
- ``SCORINGS``: node-scoring plugins, built with ``(weight, per-resource weights or None)``.
- ``ACTIONS``: the algorithms a cycle runs, in the order a policy lists them (Volcano's
  ``actions: "enqueue, allocate, preempt, reclaim, backfill"``); built with no arguments.
  Actions never call each other: they share the session and its Statements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from phalanx.actions.allocate import Allocate
from phalanx.actions.coscheduling import Coscheduling
from phalanx.api.errors import InputError
from phalanx.framework.plugin import Action
from phalanx.plugins.drf import Drf
from phalanx.plugins.gang import Gang
from phalanx.plugins.nodeorder import Binpack, Spread
from phalanx.plugins.priority import Priority

ScoringFactory = Callable[[int, Mapping[str, int] | None], object]

ORDERINGS: dict[str, Callable[[], object]] = {
    "priority": Priority,
    "gang": Gang,
    "drf": Drf,
}

SCORINGS: dict[str, ScoringFactory] = {
    "binpack": Binpack,
    "spread": Spread,
}

ACTIONS: dict[str, Callable[[], Action]] = {
    "allocate": Allocate,
    "coscheduling": Coscheduling,
}


def unknown(kind: str, name: str, table: Mapping[str, object], field: str) -> InputError:
    known = ", ".join(table)
    return InputError(f"unknown {kind} {name!r} (choose from {known})", field=field)


def build_actions(names: tuple[str, ...], field: str = "actions") -> list[Action]:
    """The actions named, in order; an unknown name is an input error naming ``field``."""
    actions = []
    for name in names:
        if name not in ACTIONS:
            raise unknown("action", name, ACTIONS, field)
        actions.append(ACTIONS[name]())
    return actions
