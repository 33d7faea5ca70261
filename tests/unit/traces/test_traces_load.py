"""``load(spec)``: spec parsing, option errors and where the traces folder is found."""

from __future__ import annotations

from pathlib import Path

import pytest

import phalanx.traces
from phalanx.api.errors import InputError
from phalanx.traces import ENV_VAR, TRACE_NAMES, load, trace_root


def error_of(spec: str, root: Path | None = None) -> str:
    with pytest.raises(InputError) as info:
        load(spec, root=root)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_trace_names() -> None:
    assert TRACE_NAMES == ("openb", "philly", "sia", "synthetic", "tiresias")


def test_unknown_trace_lists_the_valid_ones() -> None:
    assert error_of("alibaba:x=1") == (
        "alibaba:x=1: trace: unknown trace 'alibaba' "
        "(valid: openb, philly, sia, synthetic, tiresias)"
    )


def test_unknown_option_lists_the_valid_ones() -> None:
    assert error_of("philly:vcs=1") == (
        "philly:vcs=1: vcs: unknown option 'vcs' of philly (valid: vc, nodes, jobs, scale, "
        "queues, cluster, topology, level, min_gpus, max_gpus)"
    )
    assert "valid: jobs, nodes, gpus_per_node, seed, load, share" in error_of("synthetic:gpus=4")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("synthetic:jobs=x", "synthetic:jobs=x: jobs: 'x' is not a positive integer"),
        ("synthetic:jobs=0", "synthetic:jobs=0: jobs: '0' is not a positive integer"),
        ("synthetic:seed=-1", "synthetic:seed=-1: seed: '-1' is not an integer ≥ 0"),
        ("synthetic:load=0", "synthetic:load=0: load: '0' is not a positive number"),
        ("synthetic:load=inf", "synthetic:load=inf: load: 'inf' is not a positive number"),
        ("synthetic:share=1.5", "synthetic:share=1.5: share: '1.5' is not a number in 0..1"),
        ("philly:scale=-2", "philly:scale=-2: scale: '-2' is not a positive number"),
        ("philly:vc=", "philly:vc=: vc: '' is not a value"),
        ("openb:default,timed=maybe", "timed: 'maybe' is not 1 or 0 (true/false)"),
        ("synthetic:jobs=1,jobs=2", "synthetic:jobs=1,jobs=2: jobs: option given twice"),
    ],
)
def test_bad_option_values(spec: str, message: str, tmp_path: Path) -> None:
    assert message in error_of(spec, root=tmp_path)


def test_variants_only_where_a_trace_has_them(tmp_path: Path) -> None:
    assert "option '6214e9' is not key=value (this trace has no variants)" in error_of(
        "philly:6214e9", root=tmp_path
    )
    assert "option 'timed' is not key=value" in error_of("openb:default,timed", root=tmp_path)


def test_unknown_variants_are_named(tmp_path: Path) -> None:
    (tmp_path / "openb").mkdir()
    message = error_of("openb:gpushare30", root=tmp_path)
    assert message.startswith("openb:gpushare30: variant: unknown openb variant 'gpushare30'")
    assert "gpushare20" in message and "multigpu50" in message
    (tmp_path / "sia-workloads").mkdir()
    assert "unknown sia set 'rate_60' (valid: philly, saturn, newtrace, rate_10" in error_of(
        "sia:rate_60", root=tmp_path
    )
    assert "unknown node list 'cpu' (valid: yaml, gpu, all)" in error_of(
        "openb:nodes=cpu", root=tmp_path
    )


def test_missing_root_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert error_of("philly", root=missing) == (
        f"{missing}: traces folder not found (give root= or set {ENV_VAR})"
    )
    assert load("synthetic:jobs=3", root=missing).items  # needs no data


def test_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert trace_root() == tmp_path


def test_root_beside_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "shared" / "traces").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert trace_root() == tmp_path / "shared" / "traces"


def test_root_beside_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    root = trace_root()
    package = Path(phalanx.traces.__file__).resolve()
    if root.is_dir():
        assert root.parts[-2:] == ("shared", "traces")
        assert any(parent / "shared" / "traces" == root for parent in package.parents)
    else:
        assert root == tmp_path.parent / "shared" / "traces"
