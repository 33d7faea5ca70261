"""The HTML report: structure (parsed with html.parser), plots with data, helpers."""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from phalanx.compare import html_report, metrics_of, run_policies
from phalanx.compare.summary import COLUMNS
from phalanx.policies import POLICIES
from phalanx.report.format import Column, best_rows, format_value, human_time
from phalanx.report.plots import step_d, styles, tint
from phalanx.report.svg import Axis, Frame, log_time_axis, nice_ticks, time_axis

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
LINE_PLOTS = ("gpu-allocation", "gpu-utilization", "queue-length", "jct-cdf")


def workload_yaml(jobs: int) -> str:
    """Two 4-GPU nodes and ``jobs`` gangs of 1–4 one-GPU pods arriving over time."""
    docs = [
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\n"
        f'status: {{allocatable: {{cpu: "32", memory: 256Gi, nvidia.com/gpu: "4"}}}}\n'
        for i in range(2)
    ]
    for j in range(jobs):
        size, at, minutes = 1 + (j * 7) % 4, j * 90, 5 + (j * 13) % 30
        docs.append(
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
            f'metadata: {{name: job-{j}, annotations: {{phalanx.dev/submit-after: "{at}"}}}}\n'
            f"spec: {{minMember: {size}}}\n"
        )
        for k in range(size):
            docs.append(
                f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: job-{j}-{k}\n"
                f"  labels: {{scheduling.x-k8s.io/pod-group: job-{j}}}\n"
                f'  annotations: {{phalanx.dev/submit-after: "{at + 3 * k}", '
                f"phalanx.dev/duration: {minutes}m}}\n"
                "spec:\n  containers:\n  - name: c\n"
                '    resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}}\n'
            )
    return "---\n".join(docs)


class Page(HTMLParser):
    """Elements with their attributes and the svg each one sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None]] = []
        self.svg: str | None = None
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.svg = attributes.get("data-plot", "")
        self.elements.append((tag, attributes, self.svg))
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.svg = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, plot: str | None = "*") -> Iterator[dict[str, str]]:
        for name, attrs, svg in self.elements:
            if name == tag and (plot == "*" or svg == plot):
                yield attrs


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    path = tmp_path_factory.mktemp("w") / "jobs.yaml"
    path.write_text(workload_yaml(14))
    results = run_policies(str(path), ["kube-default", "phalanx"], seed=2)
    return html_report("jobs.yaml", 2, results, gantt_limit=10), results


def test_title_names_workload_and_seed(report: tuple[str, dict[str, Any]]) -> None:
    page, _ = report
    assert "<title>phalanx compare — jobs.yaml (seed 2)</title>" in page
    assert "seed 2" in " ".join(parse(page).text)


def test_metrics_table_one_row_per_policy_with_best_values(
    report: tuple[str, dict[str, Any]],
) -> None:
    page, results = report
    doc = parse(page)
    rows = [a["data-policy"] for a in doc.find("tr") if "data-policy" in a]
    assert rows == ["kube-default", "phalanx"]
    headers = [a.get("title", "") for a in doc.find("th")]
    assert len(headers) == len(COLUMNS) + 1
    best = {a["data-key"] for a in doc.find("td") if a.get("class") == "best"}
    metrics = metrics_of(results)
    assert (
        metrics["phalanx"]["idle_gpu_hours"] == 0 < (metrics["kube-default"]["idle_gpu_hours"] or 0)
    )
    assert "idle_gpu_hours" in best and "gpu_alloc_ratio" not in best


def test_one_svg_per_plot_each_with_title_axes_legend_and_data(
    report: tuple[str, dict[str, Any]],
) -> None:
    page, _ = report
    doc = parse(page)
    plots = [a["data-plot"] for a in doc.find("svg")]
    assert plots == [*LINE_PLOTS, "wait-by-size", "gantt"]
    bars = [a for a in doc.find("rect", "wait-by-size") if a.get("fill")]
    assert {b["fill"] for b in bars} and all(float(b["height"]) >= 0 for b in bars)
    for plot in plots:
        assert list(doc.find("title", plot)), plot
        groups = {a.get("class") for a in doc.find("g", plot)}
        assert {"x-axis", "y-axis", "legend"} <= groups, plot
    for plot in LINE_PLOTS:
        series = [a for a in doc.find("path", plot) if a.get("class") == "series"]
        assert [s["data-policy"] for s in series] == ["kube-default", "phalanx"], plot
        for s in series:
            assert int(s["data-points"]) >= 2 and s["d"].startswith("M") and len(s["d"]) > 10
    # two styles: colors differ between policies and are the same in every plot
    colors = {a["data-policy"]: a["stroke"] for a in doc.find("path") if a.get("class") == "series"}
    assert len(set(colors.values())) == 2
    assert all(a["stroke"] == colors[a["data-policy"]] for a in doc.find("path") if "stroke" in a)


def test_gantt_draws_waiting_and_running_bars_capped_and_says_so(
    report: tuple[str, dict[str, Any]],
) -> None:
    page, _ = report
    doc = parse(page)
    assert "showing the first 10 of 14 gangs by submit time" in page
    running = [a for a in doc.find("rect", "gantt") if a.get("class") == "running"]
    waiting = [a for a in doc.find("rect", "gantt") if a.get("class") == "waiting"]
    assert 10 <= len(running) <= 20 and waiting  # ≤ 10 gangs × 2 policies
    colors = styles(["kube-default", "phalanx"], list(POLICIES))
    assert {a["fill"] for a in running} == {colors["kube-default"].color, colors["phalanx"].color}


def test_self_contained_and_deterministic(report: tuple[str, dict[str, Any]]) -> None:
    page, results = report
    for needle in ("http:", "https:", "<script", "<link", "<img", "url("):
        assert needle not in page, needle
    assert html_report("jobs.yaml", 2, results, gantt_limit=10) == page


def test_report_of_a_deadlock_marks_deadlocked_bars() -> None:
    results = run_policies(str(EXAMPLES / "01-deadlock.yaml"), ["kube-default"], workers=1)
    doc = parse(html_report("01-deadlock.yaml", 0, results))
    fills = {a["fill"] for a in doc.find("rect", "gantt") if a.get("class") == "waiting"}
    assert fills == {"#f3b3b3"}
    assert "all 2 gangs, by submit time" in " ".join(doc.text)


# -- helpers ---------------------------------------------------------------------------------
def test_human_time_and_formats() -> None:
    assert [human_time(s) for s in (0.25, 45, 750, 11100, 3 * 86400 + 7200)] == [
        "0.2s",
        "45s",
        "12m30s",
        "3h05m",
        "3d02h",
    ]
    assert format_value("percent", 12.345) == "12.3%"
    assert format_value("dollars", 1234.5) == "$1,234.50"
    assert format_value("time", None) == "-"
    assert format_value("count", 3) == "3"


def test_best_rows_lower_higher_ties_and_unranked() -> None:
    low = Column("k", "K", "time", "lower", "")
    assert best_rows(low, [3.0, 1.0, None, 1.0]) == {1, 3}
    assert best_rows(Column("k", "K", "count", "higher", ""), [3, 1, 5]) == {2}
    assert best_rows(low, [2.0, 2.0]) == set()  # all tie: nothing to point at
    assert best_rows(Column("k", "K", "percent", None, ""), [1.0, 2.0]) == set()


def test_nice_ticks_and_time_axis() -> None:
    assert nice_ticks(37) == (40.0, [0.0, 10.0, 20.0, 30.0, 40.0])
    assert nice_ticks(1.0)[0] == 1.0
    assert nice_ticks(121, 4) == (125.0, [0.0, 25.0, 50.0, 75.0, 100.0, 125.0])  # least waste
    axis = time_axis(7.2 * 3600, "time")
    assert axis.title == "time (h)" and axis.labels[-1] == "8" and axis.hi == 8 * 3600
    assert time_axis(90, "t").title == "t (s)"
    assert time_axis(1800, "t").title == "t (min)"


def test_step_path_thins_to_pixel_columns() -> None:
    frame = Frame(0, 0, 100, 100, Axis(1000.0, [], [], ""), Axis(10.0, [], [], ""))
    points = [(t / 10, float(t % 10)) for t in range(10_000)]  # 10,000 points in 100 px
    d = step_d(frame, points, 1000.0)
    assert d.startswith("M0,100") and d.count("H") <= 201 and len(d) < 8000
    assert step_d(frame, [(0.0, 5.0)], 500.0) == "M0,50H50"


def test_a_policy_keeps_its_color_whatever_the_selection() -> None:
    everyone = styles(list(POLICIES), list(POLICIES))
    some = styles(["phalanx", "kube-default"], list(POLICIES))
    assert (
        some["phalanx"] == everyone["phalanx"] and some["kube-default"] == everyone["kube-default"]
    )
    assert len({s.color for s in everyone.values()}) == len(POLICIES)
    assert styles(["x", "y"])["y"].color != styles(["x", "y"])["x"].color


def test_jct_axis_turns_logarithmic_for_a_heavy_tail() -> None:
    assert log_time_axis([60.0, 120.0, 600.0], "t") is None
    axis = log_time_axis([0.0, 30.0, 500.0, 4 * 86400.0], "jct")
    assert axis is not None and axis.log and axis.title == "jct (log scale)"
    assert axis.labels == ["10s", "1m", "10m", "1h", "10h", "1d", "10d"]
    assert axis.fraction(10.0) == 0.0 and axis.fraction(864000.0) == 1.0
    assert axis.fraction(0.0) == 0.0 and 0.4 < axis.fraction(3600.0) < 0.6


def test_tint_is_lighter() -> None:
    assert tint("#000000", 0.5) == "#808080" and tint("#4e79a7", 0.0) == "#4e79a7"


def test_a_run_with_nothing_in_it_still_renders_every_plot() -> None:
    empty = {
        "policy": "phalanx",
        "seed": 0,
        "end": 0.0,
        "gangs": [],
        "gpu_capacity": 0.0,
        "gpu_allocation": [[0.0, 0.0]],
        "gpu_running": [[0.0, 0.0]],
        "queue_length": [[0.0, 0]],
    }
    page = html_report("empty.yaml", 0, {"phalanx": empty})
    plots = [a["data-plot"] for a in parse(page).find("svg")]
    assert plots == [*LINE_PLOTS, "wait-by-size", "gantt"]
    assert "all 0 gangs" in page
