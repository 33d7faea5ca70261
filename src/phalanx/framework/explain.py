"""Why a unit waits, with numbers.

Messages read like ``kubectl describe`` output of the default scheduler, but for the whole
gang: ``needs 4 × {nvidia.com/gpu: 1}; 3 fit now (0/4 nodes have room: 3 Insufficient
nvidia.com/gpu, 1 node(s) were unschedulable)``. They are computed only on the failure path,
after the unit's statement was discarded, so they describe the cluster the unit really saw.

What one pod shape needs (its request, how many fit, why nodes refuse it) depends only on the
table's contents when every filter says it reads nothing else (``table_only``), so it is kept
for the table's generation (:mod:`phalanx.cluster.nodes`): in a full cluster, every arrival
that finds no room fails with the same message, computed once until something is bound or
released.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

import numpy as np

from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit


def shapes(pods: list[PodInfo]) -> list[tuple[PodInfo, int]]:
    """Pods grouped by identical request and placement: (an example pod, how many)."""
    groups: dict[tuple[bytes, object], list[PodInfo]] = {}
    for pod in pods:
        groups.setdefault((pod.request.tobytes(), pod.spec.placement), []).append(pod)
    return [(members[0], len(members)) for members in groups.values()]


def node_reasons(session: Session, pod: PodInfo) -> str:
    """``0/8 nodes have room: 7 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable``."""
    total = len(session.table)
    counts: Counter[str] = Counter()
    rejected = np.zeros(total, dtype=bool)
    for plugin in session.filters:
        for reason, mask in plugin.rejections(session.table, pod):
            counts[reason] += int(mask.sum())
            rejected |= mask
    room = total - int(rejected.sum())
    detail = ", ".join(
        f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    return f"{room}/{total} nodes have room" + (f": {detail}" if detail else "")


def progress(unit: Unit) -> str:
    """``2/4 required members placed, 2 more needed`` (empty for a lone pod)."""
    return progress_of(unit.gang)


def progress_of(gang: GangInfo, placed: int | None = None) -> str:
    """:func:`progress` of a gang (``placed``: its count of placed members at an earlier
    moment of the cycle, default now)."""
    if gang.implicit:
        return ""
    placed = gang.placed if placed is None else placed
    still = max(gang.min_member - placed, 0)
    return f"{placed}/{gang.min_member} required members placed, {still} more needed; "


def needs(session: Session, unit: Unit) -> str:
    """What the unit's pending pods need and how many of each shape fit right now."""
    kept = _KEPT.over(session)
    parts = []
    for pod, count in shapes(unit.pods):
        key = (pod.request.tobytes(), pod.spec.placement, pod.invalid)
        text = None if kept is None else kept.get(key)
        if text is None:
            text = _shape_needs(session, pod)
            if kept is not None:
                kept[key] = text
        parts.append(f"needs {count} × {text}")
    return "; ".join(parts)


def _shape_needs(session: Session, pod: PodInfo) -> str:
    """``{nvidia.com/gpu: 1}; 0 fit now (0/8 nodes have room: ...)`` for ``pod``'s shape."""
    shape = session.table.index.describe(pod.request)
    feasible = session.feasible(pod)
    fit = session.table.capacity_for(pod.request, feasible) if feasible.any() else 0
    text = f"{shape}; {fit} fit now"
    if fit == 0:
        text += f" ({node_reasons(session, pod)})"
    return text


class _Kept:
    """Per-shape texts of :func:`needs` for one table generation."""

    def __init__(self) -> None:
        self.generation = -1
        self.texts: dict[Hashable, str] = {}

    def over(self, session: Session) -> dict[Hashable, str] | None:
        """The texts valid for ``session``'s table now (None: a filter reads more than the
        table, so nothing is kept)."""
        if not all(_table_only(f) for f in session.filters):
            return None
        if self.generation != session.table.generation:
            self.generation, self.texts = session.table.generation, {}
        return self.texts


def _table_only(plugin: object) -> bool:
    answer = getattr(plugin, "table_only", None)
    return bool(answer()) if callable(answer) else False


_KEPT = _Kept()
