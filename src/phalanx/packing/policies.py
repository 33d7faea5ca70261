"""The six placement policies of the FGD paper, as phalanx Score plugins.

Each name maps to the plugin that scores nodes (and, where the policy has its own rule, chooses
GPU devices) and to the policy's label in the published results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from phalanx.api.errors import InputError
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import Score
from phalanx.plugins.bestfit import BestFit
from phalanx.plugins.dotproduct import DotProduct
from phalanx.plugins.fgd import FGD, TargetWorkload
from phalanx.plugins.gpuclustering import GpuClustering
from phalanx.plugins.gpupacking import GpuPacking
from phalanx.plugins.randomscore import RandomScore


@runtime_checkable
class ChoosesGpus(Protocol):
    def choose_gpus(self, table: NodeTable, pod: PodInfo, node: int) -> tuple[int, ...]:
        """The GPU devices ``pod`` takes on ``node``."""


@runtime_checkable
class ObservesPlacements(Protocol):
    def observe(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        """``pod`` was placed on ``node``."""


Factory = Callable[[int, TargetWorkload], Score]

#: name → (plugin factory taking (seed, target workload), label in the published table)
POLICIES: dict[str, tuple[Factory, str]] = {
    "random": (lambda seed, _: RandomScore(seed), "01-Random"),
    "dotproduct": (lambda _s, _w: DotProduct(), "02-DotProd"),
    "gpuclustering": (lambda _s, _w: GpuClustering(), "03-GpuClustering"),
    "gpupacking": (lambda _s, _w: GpuPacking(), "04-GpuPacking"),
    "bestfit": (lambda _s, _w: BestFit(), "05-BestFit"),
    "fgd": (lambda _s, workload: FGD(workload), "06-FGD"),
}


def check_policy(name: str) -> str:
    if name not in POLICIES:
        raise InputError(
            f"unknown packing policy {name!r} (choose from {', '.join(POLICIES)})",
            field="--policy",
        )
    return name


def make_policy(name: str, seed: int, workload: TargetWorkload) -> Score:
    factory, _ = POLICIES[check_policy(name)]
    return factory(seed, workload)


def published_label(name: str) -> str:
    return POLICIES[check_policy(name)][1]
