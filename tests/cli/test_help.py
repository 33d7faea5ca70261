"""``phalanx COMMAND --help``: the text a user reads is printed as written."""

from __future__ import annotations

import pytest

from phalanx.cli.main import main

COMMANDS = ("simulate", "compare", "packing", "manifests", "serve", "explain")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_prints_no_doubled_percent_sign(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse formats ``%`` only in help strings and usage, not in a description."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert "%%" not in capsys.readouterr().out


def test_packing_help_names_the_two_arrival_points(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["packing", "--help"])
    assert "100% and 130%" in " ".join(capsys.readouterr().out.split())
