"""Node selection that costs what changed: per pod shape, the filters' and scores' vectors are
kept for the whole session and only the rows a placement wrote are recomputed.

Pods of one gang (or one role, or one template) share a shape: the same request, placement and
validity. A session places them one after another, and each placement changes one node's row
of the table. So the first pod of a shape computes every node's feasibility and score, as the
plugins' whole-table hooks do; each later pod of that shape recomputes only the rows written
since (the table logs them, see :meth:`NodeTable.track`): a few rows one by one with the
plugins' one-row hooks (``filter_row``, ``score_row``, in Python numbers, no array built),
more with their row hooks (``filter_rows``, ``score_rows``); all give the same numbers to the
last bit as the whole-table hooks (tested). A plugin without row hooks is asked for the whole
table every time, as before. When many rows changed, or nodes or columns did, the shape is
computed afresh.

Each shape also keeps its best score and the nodes that have it (ascending), updated row by
row: a placement that raises its node's score makes that node the only best, one that lowers
a best node's score drops it (the best are found again over every node only when none is
left). A filter that passes every node now (``passes_all``: no room held) is not asked.

Decisions are the same as computing everything for every pod: the same feasible nodes, the
same scores, the same ties in the same order, so the same draws of the tie-break generator.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable, Rows
from phalanx.cluster.workloads import PodInfo
from phalanx.framework.plugin import Filter, Hooks, QuietFilter, RowFilter, RowScore, Score, Scores

#: above this many written rows (or an eighth of the nodes), a shape is computed afresh
_MAX_ROWS = 64
#: up to this many written rows, each is refreshed alone with the one-row hooks
_FEW_ROWS = 8
_MAX_SHAPES = 256
#: below this many nodes nothing is kept (one node: numpy computes a one-row score as a dot
#: product, whose last bit may differ from the matrix product's); from two nodes on, the
#: one-row refresh costs less than a whole-table vector (``benchmarks/run.py``: 8 to 5,000
#: nodes)
MIN_NODES = 2

_NONE: Rows = np.zeros(0, dtype=np.intp)


@dataclass(slots=True)
class _Shape:
    feasible: Mask  # the row-hooked filters' verdict
    scores: Scores | None  # the weighted score sum, when every scorer has row hooks
    masked: Scores | None  # the scores where feasible, -inf elsewhere
    seen: int  # how much of the table's write log is reflected
    epoch: int  # the table's node/column epoch it was computed at
    #: the highest of ``masked`` and the nodes holding it, ascending (none when it is -inf);
    #: None: not known (found again over every node when asked)
    top: float = -math.inf
    best: Rows | None = None


class Selector:
    """The feasible mask and scores of each pod shape over one session's table."""

    def __init__(self, table: NodeTable, hooks: Hooks) -> None:
        """``hooks``: the plugins' hooks, found once per scheduler (isinstance on a runtime
        Protocol is slow)."""
        self.table = table
        self.filters: Sequence[Filter] = hooks.filters
        self.row_filters: Sequence[RowFilter] = hooks.row_filters
        self.other_filters: Sequence[Filter] = hooks.other_filters
        self.quiet: Sequence[QuietFilter] = hooks.quiet_filters
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
            if not self._passes(plugin, pod):
                mask &= plugin.filter(self.table, pod)
        return mask

    def masked(self, pod: PodInfo, within: Mask | None) -> Scores:
        """With row hooks on every scorer: the scores of the feasible nodes (among ``within``),
        -inf elsewhere (read only)."""
        shape = self._shape(pod)
        assert shape.masked is not None
        extra = self._extra(pod, within)
        if extra is None:
            return shape.masked
        return np.where(extra, shape.masked, -np.inf)

    def best(self, pod: PodInfo, within: Mask | None) -> Rows:
        """With row hooks on every scorer: the feasible nodes (among ``within``) with the
        highest score, ascending (none when no node is feasible)."""
        shape = self._shape(pod)
        assert shape.masked is not None
        extra = self._extra(pod, within)
        if extra is not None:
            return _top(np.where(extra, shape.masked, -np.inf))[1]
        if shape.best is None:
            shape.top, shape.best = _top(shape.masked)
        return shape.best

    def scores(self, pod: PodInfo, feasible: Mask) -> Scores:
        """Every node's weighted score sum (read only when shared with the cache)."""
        if self.incremental_scores:
            scores = self._shape(pod).scores
            assert scores is not None
            return scores
        return self._score(pod, feasible)

    def _passes(self, plugin: Filter, pod: PodInfo) -> bool:
        """Does ``plugin`` say it passes every node for ``pod`` now?"""
        for quiet in self.quiet:
            if quiet is plugin:
                return quiet.passes_all(pod)
        return False

    def _extra(self, pod: PodInfo, within: Mask | None) -> Mask | None:
        """What the filters without row hooks and ``within`` leave (None: every node)."""
        extra = within
        for plugin in self.other_filters:
            if not self._passes(plugin, pod):
                mask = plugin.filter(self.table, pod)
                extra = mask if extra is None else extra & mask
        return None if extra is None or extra.all() else extra

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
        shape.seen = len(written)
        if len(fresh) <= _FEW_ROWS:
            for row in dict.fromkeys(fresh):
                self._refresh_row(shape, pod, row)
            return shape
        rows: Rows = np.unique(np.asarray(fresh, dtype=np.intp))
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
            shape.best = None
        return shape

    def _refresh_row(self, shape: _Shape, pod: PodInfo, row: int) -> None:
        """Node ``row``'s verdict and score for the shape, and its best nodes after that."""
        table = self.table
        feasible = True
        for plugin in self.row_filters:
            if not plugin.filter_row(table, pod, row):
                feasible = False
                break
        shape.feasible[row] = feasible
        if shape.scores is None or shape.masked is None:
            return
        total = 0.0
        for scorer in self.row_scores:
            total += scorer.weight * scorer.score_row(table, pod, row)
        shape.scores[row] = total
        value = total if feasible else -math.inf
        shape.masked[row] = value
        best = shape.best
        if best is None:
            return
        if value > shape.top:
            shape.top, shape.best = value, np.array([row], dtype=np.intp)
        elif value == shape.top:
            if value > -math.inf and not _holds(best, row):
                shape.best = np.insert(best, bisect.bisect_left(best.tolist(), row), row)
        elif _holds(best, row):
            shape.best = best[best != row] if best.size > 1 else None

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


def _holds(best: Rows, row: int) -> bool:
    if best.size <= _FEW_ROWS:
        return row in best.tolist()
    return bool((best == row).any())


def _top(masked: Scores) -> tuple[float, Rows]:
    """The highest score and the nodes that have it (none when it is -inf)."""
    top = float(masked.max()) if masked.size else -math.inf
    if top == -math.inf:
        return top, _NONE
    return top, np.flatnonzero(masked == top)
