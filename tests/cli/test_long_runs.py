"""A large run says so before it starts, and Ctrl-C stops any command with one line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from phalanx.cli import main as cli
from phalanx.k8s import load_files

JOB = """
apiVersion: batch/v1
kind: Job
metadata: {{name: j}}
spec:
  parallelism: {pods}
  template:
    spec:
      containers: [{{name: c, resources: {{requests: {{cpu: 1m}}}}}}]
"""


@pytest.mark.parametrize(("pods", "said"), [(1_000, False), (200_000, True)])
def test_a_large_run_is_announced(tmp_path: Path, pods: int, said: bool) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(JOB.format(pods=pods))
    err = io.StringIO()
    cli.announce_size(load_files([path]), err)
    assert (f"simulating {pods:,} pods" in err.getvalue()) is said
    assert err.getvalue().count("\n") == (1 if said else 0)


def test_ctrl_c_is_one_line_and_status_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*_: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "compare_command", interrupted)
    assert cli.main(["compare", "synthetic:jobs=5"]) == 130
    assert capsys.readouterr().err == "phalanx: interrupted\n"
