"""Deserved shares: hierarchical water-filling over dominant resources.

Per level of the queue tree, the siblings share their parent's deserved vector ``T`` (the
root level shares the cluster's allocatable). For sibling ``c`` with demand ``d`` (what it
holds plus what its waiting gangs ask), capped by its capability, its explicit entitlement
``e = max(deserved, guarantee)`` and its weight ``w``:

1. **entitlement first**: ``base = min(e, cap)``; if the bases of siblings over-commit a
   resource they are scaled down on that resource in proportion (over-committed quotas);
2. **the rest by weight, along each sibling's demand** (weighted DRF progressive filling):
   every unsatisfied sibling grows along ``dir = d / dominant_share(d)`` at speed ``w`` (so
   dominant shares grow in proportion to weights) until it reaches its cap — then it is
   frozen — or a resource runs out — then every sibling that needs it is frozen. Each round
   freezes at least one sibling or exhausts one resource, so at most ``siblings + resources``
   rounds (vector operations over the siblings).

A sibling's deserved vector is ``base + filled``; its children then share that vector. Higher
``priority`` siblings are served first: the filling runs per priority level, highest first,
on what the levels above left. Demand never exceeds cap, so nothing deserves more than it can
use: leftover stays with the parent (idle).

Dominant shares ignore the ``pods`` column (a count, not a capacity anybody competes for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Claim:
    """One sibling's claim on its parent's share."""

    demand: Floats  # capped by capability already
    entitlement: Floats  # max(deserved, guarantee); zeros for none
    weight: float
    priority: int


def water_fill(total: Floats, claims: Sequence[Claim], mask: Floats) -> list[Floats]:
    """Each claim's deserved vector out of ``total`` (``mask``: 1 for resources that count in
    dominant shares, 0 for the rest)."""
    n = len(claims)
    out = [np.zeros_like(total) for _ in range(n)]
    if n == 0:
        return out
    left = total.astype(np.float64).copy()
    for level in sorted({c.priority for c in claims}, reverse=True):
        members = [i for i, c in enumerate(claims) if c.priority == level]
        given = _fill_level(left, [claims[i] for i in members], mask)
        for i, vector in zip(members, given, strict=True):
            out[i] = vector
            left = np.maximum(left - vector, 0.0)
    return out


def _fill_level(total: Floats, claims: Sequence[Claim], mask: Floats) -> list[Floats]:
    demand = np.array([c.demand for c in claims], dtype=np.float64)
    base = np.minimum(np.array([c.entitlement for c in claims], dtype=np.float64), demand)
    committed = base.sum(axis=0)
    over = committed > total + _EPS
    if over.any():
        scale = np.where(over, total / np.maximum(committed, _EPS), 1.0)
        base *= scale
    left = np.maximum(total - base.sum(axis=0), 0.0)
    weights = np.array([max(c.weight, 0.0) for c in claims], dtype=np.float64)
    need = demand - base
    denom = np.where(total > 0, total, np.inf)
    dominant = ((need * mask) / denom).max(axis=1)
    direction = np.where(dominant[:, None] > _EPS, need / np.maximum(dominant, _EPS)[:, None], 0)
    active = (dominant > _EPS) & (weights > 0)
    filled = np.zeros_like(base)
    for _ in range(len(claims) + total.size + 1):
        if not active.any():
            break
        speed = direction * (weights * active)[:, None]  # per unit of "time"
        rate = speed.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            to_cap = np.where(speed > _EPS, (need - filled) / speed, np.inf).min(axis=1)
            to_out = np.where(rate > _EPS, left / rate, np.inf)
        step = min(float(to_cap[active].min(initial=np.inf)), float(to_out.min(initial=np.inf)))
        if not np.isfinite(step):
            break
        filled += speed * step
        left = np.maximum(left - rate * step, 0.0)
        capped = active & (to_cap <= step + _EPS)
        exhausted = (left <= _EPS * np.maximum(total, 1.0)) & (rate > _EPS)
        starved = (
            (direction[:, exhausted] > _EPS).any(axis=1) if exhausted.any() else capped & False
        )
        active &= ~(capped | starved)
    return list(np.minimum(base + filled, demand))


def dominant_ratios(usages: Floats, deserved: Floats, mask: Floats) -> list[float]:
    """:func:`dominant_ratio` of each row of ``usages`` (one vector operation)."""
    counted = (mask > 0) & (usages > 0)
    with np.errstate(divide="ignore"):
        ratios = np.where(deserved > _EPS, usages / np.maximum(deserved, _EPS), 1e6 + usages)
    best = np.where(counted, ratios, -np.inf).max(axis=1, initial=-np.inf)
    return np.where(counted.any(axis=1), best, 0.0).tolist()  # type: ignore[no-any-return]


def dominant_ratio(usage: Floats, deserved: Floats, mask: Floats) -> float:
    """How far ``usage`` is into ``deserved`` on its dominant resource: ``max_r u_r / d_r``
    over counted resources (a resource used but not deserved counts as far over)."""
    counted = (mask > 0) & (usage > 0)
    if not counted.any():
        return 0.0
    d = deserved[counted]
    u = usage[counted]
    with np.errstate(divide="ignore"):
        ratios = np.where(d > _EPS, u / np.maximum(d, _EPS), 1e6 + u)
    return float(ratios.max())
