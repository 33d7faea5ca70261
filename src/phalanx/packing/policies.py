"""The experiment's policies: scoring plugins of the one registry, by name.

The FGD paper's six placement policies are ordinary scoring plugins of
:data:`phalanx.policies.registry.SCORINGS` (usable as ``--scoring NAME`` in
``simulate``/``compare`` and in ``serve``'s settings too); this module only fixes the order
the experiment reports them in and their label in the published table. Any other scoring
plugin of the registry (``binpack``, ``spread``) replays too, with no published value to
compare. A plugin is built with the replay's policy seed and the pod list's target workload.
"""

from __future__ import annotations

from phalanx.api.errors import InputError
from phalanx.cluster.fragmentation import TargetWorkload
from phalanx.framework.plugin import BuildContext, Score
from phalanx.policies.registry import SCORINGS, build_scoring

#: The paper's policies: name in the registry → label in the published results, table order.
POLICIES: dict[str, str] = {
    "random": "01-Random",
    "dotproduct": "02-DotProd",
    "gpuclustering": "03-GpuClustering",
    "gpupacking": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


def check_policy(name: str) -> str:
    """``name`` if it names a scoring plugin of the registry."""
    if name not in SCORINGS:
        raise InputError(
            f"unknown packing policy {name!r} (choose from {', '.join(SCORINGS)})",
            field="--policy",
        )
    return name


def make_policy(name: str, seed: int, workload: TargetWorkload) -> Score:
    """The registry's plugin ``name``, seeded with ``seed``, descending ``workload``."""
    context = BuildContext(seed=seed, target=workload)
    return build_scoring(check_policy(name), context, "--policy")


def published_label(name: str) -> str | None:
    """The policy's label in the published table (None: not one of the paper's)."""
    return POLICIES.get(check_policy(name))
