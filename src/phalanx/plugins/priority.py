"""Priority: higher priority first, then earlier creation (FIFO within a priority)."""

from __future__ import annotations

from phalanx.cluster.nodes import NodeTable
from phalanx.framework.unit import Unit


class Priority:
    name = "priority"
    static_order = True  # priority and creation time do not change while a gang waits

    def order_key(self, unit: Unit, table: NodeTable) -> tuple[float, ...]:
        return (-unit.priority, unit.created)
