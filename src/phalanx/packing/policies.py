"""The six placement policies of the FGD paper: ordinary scoring plugins of the one registry.

Each name is a scoring plugin of :data:`phalanx.policies.registry.SCORINGS` (usable as
``--scoring NAME`` in ``simulate``/``compare`` and in ``serve``'s settings too); this module
only fixes the order the experiment reports them in and their label in the published table.
A plugin is built with the replay's policy seed and the pod list's target workload.
"""

from __future__ import annotations

from phalanx.api.errors import InputError
from phalanx.cluster.fragmentation import TargetWorkload
from phalanx.framework.plugin import BuildContext, Score
from phalanx.policies.registry import build_scoring

#: name in the registry → the policy's label in the published results, in table order
POLICIES: dict[str, str] = {
    "random": "01-Random",
    "dotproduct": "02-DotProd",
    "gpuclustering": "03-GpuClustering",
    "gpupacking": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


def check_policy(name: str) -> str:
    if name not in POLICIES:
        raise InputError(
            f"unknown packing policy {name!r} (choose from {', '.join(POLICIES)})",
            field="--policy",
        )
    return name


def make_policy(name: str, seed: int, workload: TargetWorkload) -> Score:
    """The registry's plugin ``name``, seeded with ``seed``, descending ``workload``."""
    context = BuildContext(seed=seed, target=workload)
    return build_scoring(check_policy(name), context, "--policy")


def published_label(name: str) -> str:
    return POLICIES[check_policy(name)]
