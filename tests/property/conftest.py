"""Reports how many random engine operations the run executed (:mod:`random_engine`)."""

from __future__ import annotations

import pytest
from random_engine import TOTAL


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TOTAL:
        kinds = ", ".join(f"{kind} {count:,}" for kind, count in TOTAL.most_common())
        terminalreporter.write_line(f"random engine operations: {sum(TOTAL.values()):,} ({kinds})")
