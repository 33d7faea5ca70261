"""At least 100,000 random engine operations per run, invariants checked after each.

The driver (:mod:`random_engine`) runs short episodes — a fresh random cluster, a few hundred
operations — under each policy, seeded, so a failure names its seed and replays exactly
(``EngineDriver(seed, policy).run(STEPS)``). The operation count is printed at the end of the
run (conftest.py).
"""

from __future__ import annotations

import pytest
from random_engine import POLICIES, EngineDriver, decisions

#: Operations per policy: four policies → at least 100,000 in all.
PER_POLICY = 25_000
STEPS = 300


@pytest.mark.parametrize("policy", POLICIES)
def test_random_operations_keep_every_invariant(policy: str) -> None:
    executed = 0
    seed = POLICIES.index(policy) * 100_000
    while executed < PER_POLICY:
        driver = EngineDriver(seed, policy)
        try:
            driver.run(STEPS)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, policy {policy}: {exc}") from exc
        executed += driver.operations
        seed += 1
    assert executed >= PER_POLICY


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_decisions(policy: str, seed: int) -> None:
    first = decisions(seed, policy, STEPS)
    assert first == decisions(seed, policy, STEPS)
    assert any(len(d) > 1 for d in first)  # something was bound
