"""Node selection that costs what changed: per pod shape, the filters' and scores' vectors are
kept for the whole session and only the rows a placement wrote are recomputed.

Pods of one gang (or one role, or one template) share a shape: the same request, placement and
validity. A session places them one after another, and each placement changes one node's row
of the table. So the first pod of a shape computes every node's feasibility and score, as the
plugins' whole-table hooks do; each later pod of that shape recomputes only the rows written
since (the table logs them, see :meth:`NodeTable.track`), with the plugins' row hooks
(``filter_rows``, ``score_rows``), which give the same numbers to the last bit (tested against
the whole-table hooks). A plugin without row hooks is asked for the whole table every time, as
before. When many rows changed, or nodes or columns did, the shape is computed afresh.

Decisions are the same as computing everything for every pod: the same feasible nodes, the
same scores, the same ties in the same order, so the same draws of the tie-break generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable, Rows
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import Filter, Hooks, RowFilter, RowScore, Score, Scores

#: above this many written rows (or an eighth of the nodes), a shape is computed afresh
_MAX_ROWS = 64
_MAX_SHAPES = 256
#: below this many nodes a whole-table vector costs no more than a row refresh (measured:
#: ``benchmarks/run.py``, 500 nodes), so nothing is kept
MIN_NODES = 1024


@dataclass(slots=True)
class _Shape:
    feasible: Mask  # the row-hooked filters' verdict
    scores: Scores | None  # the weighted score sum, when every scorer has row hooks
    masked: Scores | None  # the scores where feasible, -inf elsewhere
    seen: int  # how much of the table's write log is reflected
    epoch: int  # the table's node/column epoch it was computed at


class Selector:
    """The feasible mask and scores of each pod shape over one session's table."""

    def __init__(self, table: NodeTable, hooks: Hooks) -> None:
        """``hooks``: the plugins' hooks, found once per scheduler (isinstance on a runtime
        Protocol is slow)."""
        self.table = table
        self.filters: Sequence[Filter] = hooks.filters
        self.row_filters: Sequence[RowFilter] = hooks.row_filters
        self.other_filters: Sequence[Filter] = hooks.other_filters
        self.scorers: Sequence[Score] = hooks.scorers
        self.row_scores: Sequence[RowScore] = hooks.row_scores
        self._shapes: dict[tuple[object, ...], _Shape] = {}
        #: keep each shape's scores: every scorer has row hooks and the table is big enough
        self.incremental_scores = False
        if len(table) >= MIN_NODES:  # below, nothing is kept: no write log
            table.track()
            self.incremental_scores = len(self.row_scores) == len(self.scorers)

    def feasible(self, pod: PodInfo) -> Mask:
        """Nodes where ``pod`` may go now (a new array: the caller may change it)."""
        if len(self.table) < MIN_NODES:
            mask = np.ones(len(self.table), dtype=bool)
            for plugin in self.filters:
                mask &= plugin.filter(self.table, pod)
            return mask
        mask = self._shape(pod).feasible.copy()
        for plugin in self.other_filters:
            mask &= plugin.filter(self.table, pod)
        return mask

    def masked(self, pod: PodInfo, within: Mask | None) -> Scores:
        """With row hooks on every scorer: the scores of the feasible nodes (among ``within``),
        -inf elsewhere (read only)."""
        shape = self._shape(pod)
        assert shape.masked is not None
        extra = within
        for plugin in self.other_filters:
            mask = plugin.filter(self.table, pod)
            extra = mask if extra is None else extra & mask
        if extra is None or extra.all():
            return shape.masked
        return np.where(extra, shape.masked, -np.inf)

    def scores(self, pod: PodInfo, feasible: Mask) -> Scores:
        """Every node's weighted score sum (read only when shared with the cache)."""
        if self.incremental_scores:
            scores = self._shape(pod).scores
            assert scores is not None
            return scores
        return self._score(pod, feasible)

    def _score(self, pod: PodInfo, feasible: Mask) -> Scores:
        total = np.zeros(len(self.table), dtype=np.float64)
        for plugin in self.scorers:
            total += plugin.weight * plugin.score(self.table, pod, feasible)
        return total

    def _shape(self, pod: PodInfo) -> _Shape:
        table = self.table
        written = table.written
        assert written is not None
        key = (pod.request.tobytes(), pod.spec.placement, pod.invalid)
        shape = self._shapes.get(key)
        if shape is None or shape.epoch != table.epoch:
            return self._fresh(pod, key)
        if shape.seen == len(written):
            return shape
        if len(written) - shape.seen > min(_MAX_ROWS, len(table) // 8 + 1):
            return self._fresh(pod, key)
        fresh = written[shape.seen :]
        rows: Rows = np.unique(np.asarray(fresh, dtype=np.intp)) if len(fresh) > 1 else _one(fresh)
        verdict = np.ones(rows.size, dtype=bool)
        for plugin in self.row_filters:
            verdict &= plugin.filter_rows(table, pod, rows)
        shape.feasible[rows] = verdict
        if shape.scores is not None and shape.masked is not None:
            total = np.zeros(rows.size, dtype=np.float64)
            for scorer in self.row_scores:
                total += scorer.weight * scorer.score_rows(table, pod, rows)
            shape.scores[rows] = total
            shape.masked[rows] = np.where(verdict, total, -np.inf)
        shape.seen = len(written)
        return shape

    def _fresh(self, pod: PodInfo, key: tuple[object, ...]) -> _Shape:
        table = self.table
        assert table.written is not None
        feasible = np.ones(len(table), dtype=bool)
        for plugin in self.row_filters:
            feasible &= plugin.filter(table, pod)
        scores = masked = None
        if self.incremental_scores:
            scores = self._score(pod, feasible)
            masked = np.where(feasible, scores, -np.inf)
        if len(self._shapes) >= _MAX_SHAPES:
            self._shapes.clear()
        seen = len(table.written)
        shape = self._shapes[key] = _Shape(feasible, scores, masked, seen, table.epoch)
        return shape


def _one(written: list[int]) -> Rows:
    return np.array(written, dtype=np.intp)
