"""Compare scheduling policies on one workload: run them, summarize, report.

:func:`~phalanx.compare.runner.run_policies` runs the policies (in parallel processes where
cores allow) and returns each run's ``SimResult.to_json()``; :func:`summarize` turns one into the
comparison metrics (defined in :mod:`phalanx.compare.summary`); :func:`comparison_json` is the
``phalanx compare -o json`` document and :func:`html_report` the ``--report`` file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.compare.runner import (
    Progress,
    check_policies,
    load_workload,
    progress_for,
    run_policies,
)
from phalanx.compare.summary import COLUMNS, METRICS, summarize
from phalanx.policies import POLICIES
from phalanx.report.format import Value
from phalanx.report.html import render_report


def metrics_of(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Value]]:
    """Each policy's metrics, in the order of ``results``."""
    return {name: summarize(result) for name, result in results.items()}


def comparison_json(
    workload: str,
    seed: int,
    results: Mapping[str, Mapping[str, Any]],
    *,
    estimates: str = "given",
) -> dict[str, Any]:
    """``{"workload", "seed", "estimates", "policies": {NAME: {metric: value}}}`` (seconds,
    percent; ``estimates``: the ``--estimates`` model the runs had); each
    policy also carries ``gangs_in_one_domain``, ``mean_domains_per_gang`` and
    ``fragmentation_by_domain`` per topology level (empty without a topology), its run's
    ``eta_error``, ``max_wait_by_size`` and deadline counts, and ``queues``: the run's
    per-queue shares and waits."""
    policies: dict[str, dict[str, Any]] = {}
    for name, metrics in metrics_of(results).items():
        run = results[name]
        queues = {
            queue: {key: value for key, value in figures.items() if key != "share"}
            for queue, figures in dict(run.get("queues", {})).items()
        }
        policies[name] = {
            **metrics,
            "gangs_in_one_domain": run.get("gangs_in_one_domain", {}),
            "mean_domains_per_gang": run.get("mean_domains_per_gang", {}),
            "fragmentation_by_domain": run.get("fragmentation_by_domain", {}),
            **{key: run.get(key) for key in WAIT_KEYS},
            "queues": queues,
        }
    return {"workload": workload, "seed": seed, "estimates": estimates, "policies": policies}


#: Per-run figures ``compare -o json`` copies as they are (see phalanx.sim.waits).
WAIT_KEYS = (
    "eta_error",
    "max_wait_by_size",
    "deadlines_met",
    "deadlines_missed",
    "livelocks",
    "retry_loop",
)


def html_report(
    workload: str,
    seed: int,
    results: Mapping[str, Mapping[str, Any]],
    *,
    until: float | None = None,
    gantt_limit: int = 200,
    estimates: str = "given",
) -> str:
    return render_report(
        workload=workload,
        seed=seed,
        estimates=estimates,
        results=results,
        metrics=metrics_of(results),
        columns=COLUMNS,
        until=until,
        gantt_limit=gantt_limit,
        color_order=list(POLICIES),
    )


__all__ = [
    "COLUMNS",
    "METRICS",
    "WAIT_KEYS",
    "Progress",
    "check_policies",
    "comparison_json",
    "html_report",
    "load_workload",
    "metrics_of",
    "progress_for",
    "run_policies",
    "summarize",
]
