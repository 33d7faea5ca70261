"""Vectorised node label and taint matching.

Labels are dictionary-encoded per key: ``codes[key][n]`` is the code of node ``n``'s value for
``key`` (-1 when absent). A requirement becomes one ``np.isin`` over that column, so matching a
selector costs a few array operations whatever the number of nodes. Taints are a boolean matrix
``has[N, T]`` over the distinct taints of the cluster; a pod's tolerations are checked once per
distinct taint, never once per node.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from phalanx.api.specs import Placement, Requirement, SelectorTerm, Taint, TaintEffect, Toleration

Mask = npt.NDArray[np.bool_]

_INTEGER = re.compile(r"[+-]?[0-9]+")

_HARD_EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


class LabelIndex:
    def __init__(self, names: Sequence[str], labels: Sequence[dict[str, str]]) -> None:
        self.size = len(labels)
        self.names = np.array(names, dtype=object)
        self.vocab: dict[str, dict[str, int]] = {}
        self.codes: dict[str, npt.NDArray[np.int32]] = {}
        for node, node_labels in enumerate(labels):
            for key, value in node_labels.items():
                column = self.codes.get(key)
                if column is None:
                    column = self.codes[key] = np.full(self.size, -1, dtype=np.int32)
                    self.vocab[key] = {}
                column[node] = self.vocab[key].setdefault(value, len(self.vocab[key]))
        self._numeric: dict[str, tuple[npt.NDArray[np.int64], Mask]] = {}

    def equals(self, key: str, value: str) -> Mask:
        code = self.vocab.get(key, {}).get(value)
        if code is None:
            return np.zeros(self.size, dtype=bool)
        return np.asarray(self.codes[key] == code, dtype=bool)

    def isin(self, key: str, values: Sequence[str]) -> Mask:
        vocab = self.vocab.get(key, {})
        wanted = [vocab[v] for v in values if v in vocab]
        if not wanted:
            return np.zeros(self.size, dtype=bool)
        return np.isin(self.codes[key], wanted)

    def exists(self, key: str) -> Mask:
        column = self.codes.get(key)
        return np.zeros(self.size, dtype=bool) if column is None else column >= 0

    def numeric(self, key: str) -> tuple[npt.NDArray[np.int64], Mask]:
        """Label values as integers, and where they are integers (for Gt/Lt)."""
        cached = self._numeric.get(key)
        if cached is None:
            by_code = {code: _as_int(value) for value, code in self.vocab.get(key, {}).items()}
            values = np.zeros(self.size, dtype=np.int64)
            valid = np.zeros(self.size, dtype=bool)
            column = self.codes.get(key)
            if column is not None:
                for code, number in by_code.items():
                    if number is not None:
                        hit = column == code
                        values[hit] = number
                        valid |= hit
            cached = self._numeric[key] = (values, valid)
        return cached

    def requirement(self, req: Requirement) -> Mask:
        op = req.operator
        if op == "In":
            return self.isin(req.key, req.values)
        if op == "NotIn":
            return ~self.isin(req.key, req.values)
        if op == "Exists":
            return self.exists(req.key)
        if op == "DoesNotExist":
            return ~self.exists(req.key)
        values, valid = self.numeric(req.key)
        bound = int(req.values[0])
        return valid & (values > bound if op == "Gt" else values < bound)

    def field(self, req: Requirement) -> Mask:
        """matchFields: only ``metadata.name`` with In/NotIn, as in Kubernetes."""
        hit = np.isin(self.names, list(req.values))
        return hit if req.operator == "In" else ~hit

    def term(self, term: SelectorTerm) -> Mask:
        mask = np.ones(self.size, dtype=bool)
        for req in term.expressions:
            mask &= self.requirement(req)
        for req in term.fields:
            mask &= self.field(req)
        return mask

    def selector(self, placement: Placement) -> Mask:
        """nodeSelector ANDed with required node affinity (its terms ORed)."""
        mask = np.ones(self.size, dtype=bool)
        for key, value in placement.node_selector:
            mask &= self.equals(key, value)
        if placement.affinity_terms:
            any_term = np.zeros(self.size, dtype=bool)
            for term in placement.affinity_terms:
                if term.expressions or term.fields:  # an empty term matches nothing
                    any_term |= self.term(term)
            mask &= any_term
        return mask


def _as_int(value: str) -> int | None:
    """Base-10 integer as Go's strconv.ParseInt reads it (no underscores, no spaces)."""
    return int(value) if _INTEGER.fullmatch(value) else None


class TaintIndex:
    def __init__(self, taints: Sequence[Sequence[Taint]]) -> None:
        self.vocab: list[Taint] = sorted(
            {t for node in taints for t in node}, key=lambda t: (t.key, t.value, t.effect)
        )
        position = {taint: i for i, taint in enumerate(self.vocab)}
        self.has = np.zeros((len(taints), len(self.vocab)), dtype=bool)
        for node, node_taints in enumerate(taints):
            for taint in node_taints:
                self.has[node, position[taint]] = True
        self.hard = np.array([t.effect in _HARD_EFFECTS for t in self.vocab], dtype=bool)

    def tolerated(self, tolerations: Sequence[Toleration]) -> Mask:
        """Nodes whose every NoSchedule/NoExecute taint is tolerated."""
        if not self.vocab:
            return np.ones(self.has.shape[0], dtype=bool)
        untolerated = np.array(
            [
                hard and not any(tol.tolerates(t) for tol in tolerations)
                for t, hard in zip(self.vocab, self.hard, strict=True)
            ],
            dtype=bool,
        )
        if not untolerated.any():
            return np.ones(self.has.shape[0], dtype=bool)
        return np.asarray(~self.has[:, untolerated].any(axis=1), dtype=bool)
