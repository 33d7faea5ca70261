"""The FGD artifact's published results (``fgd-expected-results/csv``), read for comparison.

Each file has one row per run (``workload, sc_policy, tune, seed``) and a column per arrived
percentage ``0..130``: ``analysis_allo_discrete.csv`` the GPU allocation ratio,
``analysis_frag_ratio_discrete.csv`` the fragmentation ratio (fragmented / idle GPU),
``analysis_frag_discrete.csv`` the fragmented GPU as % of capacity. :func:`published` gives the
mean over seeds of one (variant, policy) cell at one arrived percentage.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from phalanx.packing.data import (
    PUBLISHED_FILE,
    PUBLISHED_FRAG_FILE,
    PUBLISHED_FRAG_RATIO_FILE,
    data_file,
    trace_root,
)
from phalanx.packing.policies import published_label

SEEDS = tuple(range(42, 52))
METRICS = {
    "alloc_ratio": PUBLISHED_FILE,
    "frag_ratio": PUBLISHED_FRAG_RATIO_FILE,
    "frag_amount": PUBLISHED_FRAG_FILE,
}


@dataclass(frozen=True)
class Published:
    """``values[(variant, policy label, seed)][arrived]`` for one metric."""

    metric: str
    values: dict[tuple[str, str, int], dict[int, float]]

    def variants(self) -> list[str]:
        return sorted({v for v, _, _ in self.values})

    def seeds(self, variant: str, policy: str) -> list[int]:
        label = published_label(policy)
        return [s for v, p, s in self.values if v == variant and p == label and label]

    def mean(
        self, variant: str, policy: str, arrived: int, seeds: Iterable[int] = SEEDS
    ) -> float | None:
        label = published_label(policy)
        if label is None:
            return None
        cells = [self.values.get((variant, label, s), {}).get(arrived) for s in seeds]
        found = [c for c in cells if c is not None]
        return sum(found) / len(found) if found else None

    def value(self, variant: str, policy: str, arrived: int, seed: int) -> float | None:
        label = published_label(policy)
        if label is None:
            return None
        return self.values.get((variant, label, seed), {}).get(arrived)


def read_published(metric: str = "alloc_ratio", root: Path | None = None) -> Published:
    path = data_file(trace_root(root), METRICS[metric])
    values: dict[tuple[str, str, int], dict[int, float]] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            variant = row["workload"].removeprefix("openb_pod_list_")
            key = (variant, row["sc_policy"], int(row["seed"]))
            values[key] = {int(k): float(v) for k, v in row.items() if k.isdigit() and v != ""}
    return Published(metric, values)
