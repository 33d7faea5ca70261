"""The registry: policies are lists of actions named in one table, configurable by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.actions.allocate import Allocate
from phalanx.actions.coscheduling import Coscheduling
from phalanx.api.errors import InputError
from phalanx.cli.main import main
from phalanx.live.settings import load_settings
from phalanx.policies import ACTIONS, POLICIES, Scheduler, get_policy

EXAMPLE = Path(__file__).parents[3] / "examples" / "01-deadlock.yaml"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_names_only_registered_actions(name: str) -> None:
    policy = get_policy(name)
    assert policy.actions, "a policy runs at least one action"
    assert all(action in ACTIONS for action in policy.actions)


def test_the_scheduler_builds_the_actions_in_the_order_named() -> None:
    scheduler = Scheduler(get_policy("phalanx"), actions=["coscheduling", "allocate"])
    assert [type(a) for a in scheduler.actions] == [Coscheduling, Allocate]
    assert [type(a) for a in Scheduler(get_policy("phalanx")).actions] == [Allocate]


def test_an_unknown_action_is_an_input_error_naming_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"unknown action 'preemptt' \(choose from allocate"):
        Scheduler(get_policy("phalanx"), actions=["preemptt"])


def test_simulate_takes_actions_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLE), "--actions", "allocate", "-o", "json"]) == 0
    assert '"deadlocked": 0' in capsys.readouterr().out
    assert main(["simulate", str(EXAMPLE), "--actions", "nope"]) == 2
    assert "unknown action 'nope'" in capsys.readouterr().err


def test_serve_settings_take_a_list_of_live_actions(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("actions: [allocate]\n")
    assert load_settings(str(path)).actions == ("allocate",)
    path.write_text("actions: coscheduling\n")
    with pytest.raises(InputError, match="simulation-only action 'coscheduling'"):
        load_settings(str(path))
    path.write_text("actions: []\n")
    with pytest.raises(InputError, match="name at least one action"):
        load_settings(str(path))
