"""The report as a person sees it: rendered by headless Chromium (skipped without it).

Chromium writes a screenshot and the DOM after layout. The DOM must hold every plot with its
paths; the screenshot must be a real picture: large, and showing the policies' colors (the
PNG is decoded here with zlib, no imaging library).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from phalanx.cli.main import main
from phalanx.policies import POLICIES as REGISTRY
from phalanx.report.plots import styles

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
POLICIES = ["kube-default", "phalanx"]
PLOTS = {"gpu-allocation", "gpu-utilization", "queue-length", "jct-cdf", "gantt", "wait-by-size"}


def chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
    )
    if found is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    return found


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_rows(data: bytes, limit: int) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, the first ``limit`` rows unfiltered) of an 8-bit
    RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    width = height = bpp = 0
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
    stride = width * bpp
    count = min(height, limit)
    raw = zlib.decompressobj().decompress(b"".join(idat), (stride + 1) * count)
    rows, prev = [], bytearray(stride)
    for r in range(count):
        method, line = (
            raw[r * (stride + 1)],
            bytearray(raw[r * (stride + 1) + 1 : (r + 1) * (stride + 1)]),
        )
        if method == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif method == 2:
            line = bytearray((x + y) & 255 for x, y in zip(line, prev, strict=True))
        elif method == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + (left + prev[i]) // 2) & 255
        elif method == 4:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                corner = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + _paeth(left, prev[i], corner)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, int] = {}  # data-plot → paths and rects with geometry
        self.current: str | None = None
        self.rows: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg":
            self.current = a.get("data-plot") or ""
            self.plots[self.current] = 0
        elif self.current is not None and (
            (tag == "path" and len(a.get("d") or "") > 10) or (tag == "rect" and a.get("class"))
        ):
            self.plots[self.current] += 1
        elif tag == "tr" and a.get("data-policy"):
            self.rows.append(a["data-policy"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.current = None


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    binary = chromium()
    work = tmp_path_factory.mktemp("browser")
    report = work / "report.html"
    workload = str(EXAMPLES / "04-starvation.yaml")
    args = ["compare", workload, "--policies", ",".join(POLICIES), "--until", "2h"]
    assert main([*args, "--report", str(report), "-o", "json"]) == 0
    png = work / "report.png"
    shot = run_chromium(
        binary,
        work / "profile-1",
        f"--screenshot={png}",
        "--window-size=1400,3000",
        report.as_uri(),
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    dom = run_chromium(binary, work / "profile-2", "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    return report, png, dom.stdout


def test_dom_after_layout_has_every_plot_with_its_marks(rendered: tuple[Path, Path, str]) -> None:
    _, _, dom_text = rendered
    dom = Dom()
    dom.feed(dom_text)
    assert set(dom.plots) == PLOTS
    for plot, marks in dom.plots.items():
        assert marks >= (10 if plot == "gantt" else len(POLICIES)), (plot, marks)
    assert dom.rows == POLICIES


def test_screenshot_is_a_real_picture_in_the_policy_colors(
    rendered: tuple[Path, Path, str],
) -> None:
    _, png, _ = rendered
    data = png.read_bytes()
    assert len(data) > 40_000, f"screenshot only {len(data)} bytes: blank page?"
    width, height, bpp, rows = png_rows(data, 700)  # title, table and the first plots
    assert (width, height) == (1400, 3000)
    colors = {row[i : i + 3] for row in rows for i in range(0, len(row), bpp)}
    assert len(colors) > 50, f"only {len(colors)} colors"
    for style in styles(POLICIES, list(REGISTRY)).values():
        assert bytes.fromhex(style.color[1:]) in colors, style.color
    assert bytes.fromhex("dff3dc") in colors  # a best value is highlighted
