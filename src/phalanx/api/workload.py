"""A workload: the specs read from manifests, each with its simulation timing.

``phalanx.dev/submit-after`` and ``phalanx.dev/delete-after`` (durations such as ``30s``,
``2h``, ``1h30m`` or plain seconds) become :class:`Timing`. The live scheduler ignores timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from phalanx.api.queues import BudgetSpec, QueueBindingSpec, QueueSpec
from phalanx.api.specs import (
    ControllerSpec,
    GangSpec,
    JobSpec,
    NamespaceSpec,
    NodeSpec,
    PodSpec,
    PriorityClassSpec,
    QuotaSpec,
    ResourceFlavorSpec,
)
from phalanx.api.topology import HyperNodeSpec, TopologySpec

Spec = (
    NodeSpec
    | PodSpec
    | GangSpec
    | JobSpec
    | PriorityClassSpec
    | QuotaSpec
    | NamespaceSpec
    | ControllerSpec
    | ResourceFlavorSpec
    | TopologySpec
    | HyperNodeSpec
    | QueueSpec
    | QueueBindingSpec
    | BudgetSpec
)
S = TypeVar(
    "S",
    NodeSpec,
    PodSpec,
    GangSpec,
    JobSpec,
    PriorityClassSpec,
    QuotaSpec,
    NamespaceSpec,
    ControllerSpec,
    ResourceFlavorSpec,
    TopologySpec,
    HyperNodeSpec,
    QueueSpec,
    QueueBindingSpec,
    BudgetSpec,
)


@dataclass(frozen=True, slots=True)
class Timing:
    submit_after: float = 0.0
    delete_after: float | None = None  # seconds after submission


@dataclass(frozen=True, slots=True)
class Item:
    """One object of a workload: its spec, when it appears and goes, and where it came from."""

    spec: Spec
    timing: Timing = Timing()
    source: str = ""  # the file it came from, for error messages


@dataclass(slots=True)
class Workload:
    items: list[Item] = field(default_factory=list)

    def of(self, kind: type[S]) -> Iterator[S]:
        for item in self.items:
            if isinstance(item.spec, kind):
                yield item.spec

    def items_of(self, kind: type[Spec]) -> Iterator[Item]:
        return (item for item in self.items if isinstance(item.spec, kind))
