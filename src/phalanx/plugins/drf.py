"""DRF job order (Volcano's drf plugin): the gang with the smaller dominant share goes first.

``share(gang) = max_r allocated_r / total_r`` over the cluster's resources, where
``allocated`` sums the requests of the gang's placed members and ``total`` is the cluster's
schedulable allocatable. Gangs waiting with nothing placed share 0 and fall through to the
next key (creation time); among running gangs that still have members to place, the one
using the least of its dominant resource goes first.
"""

from __future__ import annotations

import numpy as np

from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import saturating_sum
from phalanx.cluster.workloads import PLACED
from phalanx.framework.unit import Unit


class Drf:
    name = "drf"
    static_order = True  # a waiting gang keeps its key while nothing of it is placed

    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        gang = unit.gang
        if gang.placed == 0:
            return (0.0,)
        allocated = saturating_sum(
            np.array([pod.request for pod in gang.members if pod.status in PLACED])
        )
        total = table.total_allocatable()
        shares = allocated[total > 0] / total[total > 0]
        return (float(shares.max(initial=0.0)),)
