"""Least slack: among gangs of equal priority, the one closest to missing its deadline first.

A gang's slack is ``deadline − (now + estimated runtime)``; ``now`` is the same for every gang
in a cycle, so the order key is the latest time the gang may start and still meet its
``phalanx.dev/deadline``: the deadline less its own runtime hint (``phalanx.dev/
runtime-estimate``, ``activeDeadlineSeconds``, Kueue's max-exec-time; none: the deadline
itself). Gangs without a deadline go after those with one, in the next plugin's order. Listed
after ``priority`` (``--orderings queues,priority,least-slack,gang``), it reorders only gangs of
equal priority, as Slurm's deadline-aware schedulers do. The key never changes while a gang
waits, so queueing hints stay valid.
"""

from __future__ import annotations

import math

from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.runtime import runtime_hints
from phalanx.framework.unit import Unit


class LeastSlack:
    name = "least-slack"
    static_order = True

    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        gang = unit.gang
        spec = gang.spec
        if spec is None or spec.deadline is None:
            return (math.inf,)
        found = runtime_hints(gang)
        runtime = found[0][1] if found else 0.0
        return (spec.deadline.due(gang.created) - runtime,)
