"""The bad-input catalog (:mod:`badinput_cases`), run through ``phalanx``'s entry point.

Every case must exit 2 with at most two lines on stderr, name the file (document, kind, name)
and the field, echo no more than ~80 characters of a bad value, and print no traceback. Cases
run in-process (``main(argv)``), so 300 of them take seconds; a few run as real processes too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from badinput_cases import BASE, CASES, Case, base_yaml

from phalanx.cli.main import main


def materialise(case: Case, tmp_path: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """Write the case's files; return argv, the expected fragments and env with paths filled."""

    def fill(text: str) -> str:
        for name in sorted(case.files, key=len, reverse=True):
            text = text.replace(f"@{name}", str(tmp_path / name))
        return text.replace("@traces", str(tmp_path / "traces"))

    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    (tmp_path / "traces").mkdir(exist_ok=True)
    env = {key: fill(value) for key, value in case.env.items()}
    return [fill(a) for a in case.argv], [fill(e) for e in case.expect], env


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return code, capsys.readouterr().err


def check(code: int, err: str, expect: list[str]) -> None:
    lines = err.splitlines()
    assert code == 2, err
    assert 1 <= len(lines) <= 2, err
    assert "Traceback" not in err, err
    assert lines[-1].startswith("phalanx"), err
    for fragment in expect:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    assert max(len(line) for line in lines) < 2000, err  # (unknown kinds list every kind)


def test_the_catalog_is_large_and_its_cases_distinct() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    inputs = {
        (case.argv, tuple(sorted((k, str(v)) for k, v in case.files.items()))) for case in CASES
    }
    assert len(inputs) == len(CASES) >= 200


def test_the_base_workload_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(base_yaml())
    assert main(["simulate", str(path)]) == 0, capsys.readouterr().err
    assert len(BASE) == 9


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(
    case: Case,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv, expect, env = materialise(case, tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, err = run_in_process(argv, capsys)
    check(code, err, expect)


SUBPROCESS = [
    "yaml deep flow nesting",
    "pod cpu 100P",
    "sim seed -1",
    "serve kubeconfig a list",
    "settings period nan",
]


@pytest.mark.parametrize("name", SUBPROCESS)
def test_as_a_real_process(name: str, tmp_path: Path) -> None:
    (case,) = [c for c in CASES if c.id == name]
    argv, expect, _ = materialise(case, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    check(done.returncode, done.stderr, expect)
