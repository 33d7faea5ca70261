"""Predicates: the filters of kube-scheduler that matter for batch work, vectorised.

A node passes when it is not cordoned (``spec.unschedulable``), matches ``nodeSelector`` and
required node affinity, has no NoSchedule/NoExecute taint the pod does not tolerate, and has
room on every resource the pod requests (``pods`` included, so the pod-count limit is just
another resource). The static part is cached per placement; the resource part is one
comparison over the columns the pod requests. ``filter_rows`` gives the same verdict for a few
nodes and ``filter_row`` for one (in Python integers), so a session can refresh only the rows
its placements changed.
"""

from __future__ import annotations

import numpy as np

from phalanx.api.specs import Placement
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeFacts, NodeTable, Rows
from phalanx.cluster.workloads import PodInfo


class Predicates:
    name = "predicates"

    def __init__(self) -> None:
        self._facts: NodeFacts | None = None
        self._static: dict[Placement, Mask] = {}

    def static(self, facts: NodeFacts, placement: Placement) -> Mask:
        if facts is not self._facts:
            self._facts, self._static = facts, {}
        mask = self._static.get(placement)
        if mask is None:
            mask = (
                facts.selector_mask(placement)
                & facts.toleration_mask(placement)
                & ~facts.unschedulable
            )
            self._static[placement] = mask
        return mask

    def table_only(self) -> bool:
        """The verdict reads only the table and the pod's request, placement and validity (so
        explanations may be kept per table generation, see ``framework.explain``)."""
        return True

    def filter(self, table: NodeTable, pod: PodInfo) -> Mask:
        if pod.invalid:
            return np.zeros(len(table), dtype=bool)
        return self.static(table.facts, pod.spec.placement) & table.fits(pod.request)

    def filter_rows(self, table: NodeTable, pod: PodInfo, rows: Rows) -> Mask:
        """:meth:`filter` for the nodes ``rows`` only (the session's per-row refresh)."""
        if pod.invalid:
            return np.zeros(rows.size, dtype=bool)
        static = self.static(table.facts, pod.spec.placement)[rows]
        return np.asarray(static & table.fits_rows(pod.request, rows), dtype=bool)

    def filter_row(self, table: NodeTable, pod: PodInfo, row: int) -> bool:
        """:meth:`filter` for node ``row`` alone (a placement wrote one row)."""
        if pod.invalid or not self.static(table.facts, pod.spec.placement)[row]:
            return False
        return table.fits_row(pod.request, row)

    def rejections(self, table: NodeTable, pod: PodInfo) -> list[tuple[str, Mask]]:
        """Each node is charged to the first check it fails, resources last (all of them)."""
        facts, placement = table.facts, pod.spec.placement
        if pod.invalid:
            return [(pod.invalid, np.ones(len(table), dtype=bool))]
        left = np.ones(len(table), dtype=bool)
        out: list[tuple[str, Mask]] = []
        for reason, passed in (
            ("node(s) were unschedulable", ~facts.unschedulable),
            ("node(s) didn't match Pod's node affinity/selector", facts.selector_mask(placement)),
            ("node(s) had untolerated taint", facts.toleration_mask(placement)),
        ):
            failed = left & ~passed
            out.append((reason, failed))
            left &= passed
        free = table.free_columns()
        for col in np.flatnonzero(pod.request):
            name = table.index.names[col]
            reason = "Too many pods" if name == "pods" else f"Insufficient {name}"
            out.append((reason, left & (free[:, col] < pod.request[col])))
        return [(reason, mask) for reason, mask in out if mask.any()]
