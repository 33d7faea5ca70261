"""Gang: a unit may be committed only when its whole gang is ready.

Valid: the gang's PodGroup exists and is well-formed, at least ``minMember`` members (and
every role minimum) exist, and their requests could fit the whole cluster at all. Ready: at
least ``minMember`` members placed and every role minimum met. Order: gangs that are not yet
ready go before ready gangs that merely have extra members pending (as Volcano does).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from phalanx.api.quantity import format_units
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import smallest_total
from phalanx.cluster.workloads import PodStatus
from phalanx.framework.unit import Unit

_GONE = (PodStatus.SUCCEEDED, PodStatus.DELETED)


class Gang:
    name = "gang"

    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        return (1.0 if unit.gang.ready() else 0.0,)

    def unit_valid(self, unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        gang = unit.gang
        if gang.invalid:
            return ("Invalid", gang.invalid)
        for pod in unit.pods:
            if pod.invalid:
                return ("Invalid", f"pod {pod.key} {pod.invalid}")
        if gang.hold is not None:
            return gang.hold
        if gang.implicit or gang.ready():
            return None
        alive = [pod for pod in gang.members if pod.status not in _GONE]
        if len(alive) < gang.min_member:
            return (
                "NotEnoughMembers",
                f"{len(alive)} of minMember {gang.min_member} pods exist; waiting for the rest",
            )
        roles = Counter(pod.spec.role for pod in alive)
        for role, need in sorted(gang.role_minimums.items()):
            if roles[role] < need:
                return (
                    "NotEnoughMembers",
                    f"role {role!r} has {roles[role]} of its minimum {need} pods",
                )
        return self._fits_cluster(unit, table)

    @staticmethod
    def _fits_cluster(unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        gang = unit.gang
        alive = [pod.request for pod in gang.members if pod.status not in _GONE]
        need = smallest_total(np.array(alive), gang.min_member)
        have = table.total_allocatable()
        over = np.flatnonzero(need > have)
        if over.size == 0:
            return None
        names = table.index.names
        missing = ", ".join(
            f"{names[i]} {format_units(names[i], int(need[i]))} > "
            f"{format_units(names[i], int(have[i]))}"
            for i in over
        )
        return (
            "Unresolvable",
            f"minMember {gang.min_member} needs more than the whole cluster has ({missing}); "
            f"it needs {table.index.describe(need)} in total",
        )

    def unit_ready(self, unit: Unit) -> bool:
        return unit.gang.implicit or unit.gang.ready()
