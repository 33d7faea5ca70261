"""Gang: a unit may be committed only when its whole gang is ready.

Valid: the gang's PodGroup exists and is well-formed, at least ``minMember`` members (and
every role minimum) exist, and their requests could fit the whole cluster at all (its
schedulable nodes; members already running on a cordoned node need none of it). Ready: at
least ``minMember`` members placed and every role minimum met. Order: gangs that are not yet
ready go before ready gangs that merely have extra members pending (as Volcano does).

Validity is computed when the gang changes, not every cycle: the verdict on its members is
memoised on the gang under its ``generation`` (bumped when a member joins or goes), its spec's
minimums and the cluster's total allocatable.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from phalanx.api.quantity import format_units
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import smallest_total
from phalanx.cluster.workloads import GONE, HOLDING
from phalanx.framework.unit import Unit


class Gang:
    name = "gang"
    static_order = True  # a waiting gang that is not ready keeps its key

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
        # The rest depends only on the members that exist, the spec and the cluster's size:
        # computed again only when one of those changes (see GangInfo.generation).
        memo_key = (
            gang.generation,
            gang.min_member,
            tuple(gang.role_minimums.items()),
            table.total_allocatable().tobytes(),
        )
        memo = gang.valid_memo
        if memo is not None and memo[0] == memo_key:
            return memo[1]  # type: ignore[return-value]
        verdict = self._members_valid(unit, table)
        gang.valid_memo = (memo_key, verdict)
        return verdict

    def _members_valid(self, unit: Unit, table: NodeTable) -> tuple[str, str] | None:
        gang = unit.gang
        alive = [pod for pod in gang.members if pod.status not in GONE]
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
        # members a snapshot shows running on a node cordoned since hold room that the
        # whole cluster (its schedulable nodes) leaves out: the rest of the minimum is what
        # must fit it (they join or go only with a generation bump, so the memo holds)
        cordoned = table.facts.unschedulable
        alive, held = [], 0
        for pod in gang.members:
            if pod.status in HOLDING and pod.node >= 0 and cordoned[pod.node]:
                held += 1
            elif pod.status not in GONE:
                alive.append(pod.request)
        if held >= gang.min_member:
            return None
        need = smallest_total(np.array(alive), gang.min_member - held)
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
