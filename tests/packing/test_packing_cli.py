"""``phalanx packing``: the subcommand module on its own (cli/main.py wires it in)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from phalanx.api.errors import InputError
from phalanx.cli.packing import add_parser, packing_command, parse_workload
from phalanx.packing import trace_root


def run(argv: list[str]) -> tuple[int, str]:
    root = argparse.ArgumentParser(prog="phalanx")
    add_parser(root.add_subparsers(dest="command", required=True))
    args = root.parse_args(["packing", *argv])
    out = io.StringIO()
    code = packing_command(args, out)
    return code, out.getvalue()


def test_workload_names() -> None:
    assert parse_workload("openb:multigpu50") == "multigpu50"
    assert parse_workload("openb") == "default"
    with pytest.raises(InputError, match="'philly:x'"):
        parse_workload("philly:x")
    with pytest.raises(InputError, match="'gpushare30'"):
        parse_workload("openb:gpushare30")


def test_unknown_policy_is_an_input_error_naming_it() -> None:
    with pytest.raises(InputError, match="'tetris'") as err:
        run(["openb:default", "--policy", "tetris"])
    assert "\n" not in err.value.line()


def test_missing_traces_name_the_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PHALANX_TRACES", str(tmp_path))
    with pytest.raises(InputError, match=str(tmp_path / "openb")):
        run(["openb:default", "--policy", "bestfit"])


@pytest.fixture
def traces() -> Path:
    try:
        root = trace_root()
    except InputError as missing:
        pytest.skip(f"shared traces not found: {missing}")
    if not (root / "openb" / "csv").is_dir():
        pytest.skip(f"shared traces not found at {root}: openb/csv is missing")
    return root


def test_json_and_table_output(traces: Path) -> None:
    code, text = run(["openb:default", "--policy", "gpupacking", "--seed", "43", "-o", "json"])
    assert code == 0
    doc = json.loads(text)
    assert set(doc) == {"workload", "policy", "seed", "arrived_100", "arrived_130"}
    assert doc["policy"] == "gpupacking" and doc["seed"] == 43
    assert set(doc["arrived_130"]) == {"alloc_ratio", "frag_ratio"}
    assert 88 < doc["arrived_130"]["alloc_ratio"] < 95
    code, text = run(["openb:default", "--policy", "gpupacking", "--seed", "43"])
    assert code == 0
    assert "GPU ALLOC %" in text and "100%" in text and "130%" in text
    assert "92.00" in text  # the published GpuPacking mean at 130 %
