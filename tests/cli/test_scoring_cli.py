"""``--scoring`` with the registry's plugins through the CLI: the FGD paper's placement
policies in ``simulate`` and ``compare`` on an openb-like GPU-sharing manifest.

``manifests/openb-sharing.yaml`` (see its header): after the pinned pods, binpack breaks node
0001's last whole GPU with a half-GPU pod so the last whole-GPU pod never fits; FGD, whose
target workload is the run's own pod shapes, puts the half-GPU pod on node 0002's shared
device and places every pod.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phalanx.cli.main import main
from phalanx.packing.policies import POLICIES as PACKING_POLICIES
from phalanx.policies import SCORINGS

SHARING = str(Path(__file__).parent / "manifests" / "openb-sharing.yaml")


def simulate(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main(["simulate", SHARING, "-o", "json", "--until", "30m", *flags]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_simulate_scoring_fgd_places_every_pod(capsys: pytest.CaptureFixture[str]) -> None:
    fgd = simulate(capsys, "--scoring", "fgd")
    assert (fgd["running"], fgd["waiting"]) == (17, 0)
    binpack = simulate(capsys)  # the policy's own scoring
    assert (binpack["running"], binpack["waiting"]) == (16, 1)
    (last,) = [g for g in binpack["gangs"] if g["name"] == "openb-pod-0017"]
    assert last["state"] == "waiting"


def test_every_packing_policy_is_a_scoring_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(PACKING_POLICIES) <= set(SCORINGS)
    for name in PACKING_POLICIES:
        result = simulate(capsys, "--scoring", name, "--seed", "3")
        assert result["running"] + result["waiting"] == 17
        assert result["running"] >= 16
    # the same seed, the same decisions: random draws from a generator seeded by --seed
    assert simulate(capsys, "--scoring", "random", "--seed", "3") == simulate(
        capsys, "--scoring", "random", "--seed", "3"
    )


def test_compare_scoring_fgd_applies_to_every_policy(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", SHARING, "--policies", "phalanx,volcano", "--until", "1m", "-o", "json"]
    assert main([*argv, "--scoring", "fgd"]) == 0
    fgd = json.loads(capsys.readouterr().out)["policies"]
    assert main(argv) == 0
    binpack = json.loads(capsys.readouterr().out)["policies"]
    for policy in ("phalanx", "volcano"):
        # 16.5 of 16 GPUs for the last 30 s with FGD, 15.5 with binpack's stranded pod
        assert fgd[policy]["gpu_alloc_ratio"] > binpack[policy]["gpu_alloc_ratio"] + 2.0
        assert fgd[policy]["frag_ratio"] < 5.0 < 50.0 < binpack[policy]["frag_ratio"]
    assert main(["compare", SHARING, "--policies", "phalanx", "--scoring", "fgd"]) == 0
    assert "· scoring fgd" in capsys.readouterr().out.splitlines()[0]


def test_an_unknown_scoring_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["compare", SHARING, "--scoring", "tetris"])
    assert exited.value.code == 2
    assert "invalid choice: 'tetris'" in capsys.readouterr().err
