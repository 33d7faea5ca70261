"""``make demo``'s comparison shows what reservations buy (README, "What the demo prints").

The workload and estimate model are read from the Makefile, as ``make demo`` passes them to
``phalanx compare``; only ``volcano`` and ``phalanx`` run (the README's claim is about them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from phalanx.cli.main import main

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def make_variable(name: str) -> str:
    found = re.search(rf"^{name}\s*=\s*(\S+)\s*$", MAKEFILE.read_text(), re.MULTILINE)
    assert found is not None, f"Makefile: no {name}"
    return found.group(1)


def test_the_demo_runs_what_the_makefile_says() -> None:
    recipe = MAKEFILE.read_text().split("\ndemo:", 1)[1]
    assert "compare $(DEMO_WORKLOAD) --estimates $(DEMO_ESTIMATES) --report report.html" in recipe


def test_phalanx_bounds_the_big_gangs_wait_where_volcano_starves_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    workload, estimates = make_variable("DEMO_WORKLOAD"), make_variable("DEMO_ESTIMATES")
    args = ["compare", workload, "--estimates", estimates, "--policies", "volcano,phalanx"]
    assert main([*args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["estimates"] == estimates
    volcano, phalanx = doc["policies"]["volcano"], doc["policies"]["phalanx"]
    jobs = re.search(r"jobs=(\d+)", workload)
    assert jobs is not None
    assert volcano["completed"] == phalanx["completed"] == int(jobs.group(1))
    # the 64-GPU gang: volcano lets smaller gangs take every GPU that frees up for days
    assert volcano["max_wait_big"] > 48 * 3600
    assert phalanx["max_wait_big"] < volcano["max_wait_big"] / 5
    # and no gang of any size waits as long under phalanx as the longest under volcano
    assert phalanx["max_wait"] < volcano["max_wait"] / 2
    # backfill keeps the cluster about as busy: the batch ends within two hours of volcano's
    assert phalanx["makespan"] < volcano["makespan"] + 2 * 3600
