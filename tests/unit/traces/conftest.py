"""Fixtures of the trace tests: the shared traces folder (or a skip naming where it was sought)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.api.workload import Workload
from phalanx.traces import load, trace_root


@pytest.fixture(scope="session")
def traces() -> Path:
    """The real traces; tests that need them skip when the folder is absent."""
    root = trace_root()
    for needed in ("openb", "philly", "sia-workloads", "tiresias-60job"):
        if not (root / needed).is_dir():
            pytest.skip(f"shared traces not found at {root}: {needed}/ is missing")
    return root


@pytest.fixture(scope="session")
def philly_all(traces: Path) -> Workload:
    return load("philly", root=traces)


@pytest.fixture(scope="session")
def openb_default(traces: Path) -> Workload:
    return load("openb", root=traces)
