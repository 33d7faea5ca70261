"""The FGD paper's GPU packing experiment (Weng et al., USENIX ATC'23) on phalanx's engine.

``run_packing("default", "fgd", 42)`` replays openb's ``default`` pod list on the 1213 GPU
nodes with the registry's ``fgd`` scoring plugin and returns the GPU allocation and
fragmentation ratios at arrived = 100 % and 130 % of capacity (:mod:`.experiment` describes
the method, :mod:`.data` the inputs, :mod:`.published` the authors' table it is compared
with).
"""

from __future__ import annotations

from phalanx.packing.data import VARIANTS, load, trace_root
from phalanx.packing.experiment import PackingResult, Point, arrival_sequence, replay, run_packing
from phalanx.packing.policies import POLICIES, make_policy

__all__ = [
    "POLICIES",
    "VARIANTS",
    "PackingResult",
    "Point",
    "arrival_sequence",
    "load",
    "make_policy",
    "replay",
    "run_packing",
    "trace_root",
]
