"""What the peer-kind CLI tests (test_trainjob.py, test_ray.py) share: running `phalanx` and
reading its JSON."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from phalanx.cli.main import main


def run(args: list[str]) -> tuple[int, str]:
    """``phalanx ARGS``: its exit status, and what it printed (stdout, then stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue() + err.getvalue()


def gang(result: dict[str, Any], name: str) -> dict[str, Any]:
    """The gang ``name`` of a ``simulate -o json`` result."""
    return next(g for g in result["gangs"] if g["name"] == name)
