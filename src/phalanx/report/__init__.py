"""Human-readable reports of simulation runs: value formatting and a self-contained HTML report.

This package works on plain data — ``SimResult.to_json()`` dicts and metric dicts — and never
imports the simulator.
"""

from phalanx.report.format import Column, format_value, human_time, table_rows
from phalanx.report.html import render_report

__all__ = ["Column", "format_value", "human_time", "render_report", "table_rows"]
