"""The registry: policies are lists of actions named in one table, configurable by name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from phalanx.actions.allocate import Allocate
from phalanx.actions.book import Settings
from phalanx.actions.coscheduling import Coscheduling
from phalanx.actions.preempt import Preempt
from phalanx.actions.reclaim import Reclaim
from phalanx.actions.reserve import Reserve
from phalanx.api.errors import InputError
from phalanx.api.specs import NodeSpec, PodSpec
from phalanx.cli.main import main
from phalanx.cluster.fragmentation import target_workload, task_type
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.framework.plugin import BuildContext, Score
from phalanx.framework.session import Session
from phalanx.live.settings import load_settings
from phalanx.packing.data import OpenbData, OpenbPod
from phalanx.packing.experiment import replay
from phalanx.packing.policies import published_label
from phalanx.plugins.predicates import Predicates
from phalanx.policies import ACTIONS, POLICIES, SCORINGS, Scheduler, get_policy
from phalanx.policies.registry import RESERVE, build_scoring

GPU = "nvidia.com/gpu"

EXAMPLE = Path(__file__).parents[3] / "examples" / "01-deadlock.yaml"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_names_only_registered_actions(name: str) -> None:
    policy = get_policy(name)
    assert policy.actions, "a policy runs at least one action"
    assert all(action in ACTIONS for action in policy.actions)


def test_the_scheduler_builds_the_actions_in_the_order_named() -> None:
    scheduler = Scheduler(get_policy("phalanx"), actions=["coscheduling", "allocate"])
    assert [type(a) for a in scheduler.actions] == [Coscheduling, Allocate]
    for name in ("phalanx", "phalanx-reserve"):
        actions = Scheduler(get_policy(name)).actions
        assert [type(a) for a in actions] == [Reserve, Allocate, Preempt, Reclaim]
    default, easy = (Scheduler(get_policy(n)).actions[0] for n in ("phalanx", "phalanx-reserve"))
    assert isinstance(default, Reserve) and default.settings == RESERVE
    assert default.estimates.quantile == RESERVE.quantile  # learned estimates: its quantile
    assert isinstance(easy, Reserve) and easy.settings == Settings("easy")


def test_reserve_takes_its_settings_after_colons() -> None:
    spec = "reserve:mode=conservative:aging=off:min-gpus=16:depth=2:min-share=0.25"
    (action,) = Scheduler(get_policy("phalanx"), actions=[spec]).actions
    assert isinstance(action, Reserve)
    expected = replace(
        RESERVE, mode="conservative", depth=2, aging=None, min_gpus=16.0, min_share=0.25
    )
    assert action.settings == expected
    spec = "reserve:aging-cap=2d:head-wait=30m:quantile=0.8:aging-factor=2:max-aged=all:min-gpus=0"
    spec += ":big-first=false:slack=0.5:pooled=false"
    (action,) = Scheduler(get_policy("phalanx"), actions=[spec]).actions
    assert isinstance(action, Reserve)
    assert action.settings == replace(
        RESERVE,
        aging_factor=2.0,
        max_aged=None,
        min_gpus=0.0,
        aging_cap=2 * 86400.0,
        head_wait=1800.0,
        quantile=0.8,
        big_first=False,
        slack=0.5,
        pooled=False,
    )
    assert not action.estimates.pooled and Reserve(RESERVE).estimates.pooled
    bad_specs = ("reserve:mode=lazy", "reserve:depth=0", "reserve:aging=soon", "reserve:x=1")
    more = ("reserve:quantile=0", "reserve:head-wait=off", "reserve:big-first=1")
    learned = ("reserve:slack=-1", "reserve:slack=nan", "reserve:pooled=yes")
    for bad in (*bad_specs, *more, *learned, "reserve:min-share=1.5"):
        with pytest.raises(InputError, match="reserve"):
            Scheduler(get_policy("phalanx"), actions=[bad])
    with pytest.raises(InputError, match="takes no options"):
        Scheduler(get_policy("phalanx"), actions=["allocate:x=1"])


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


# --- scoring plugins -------------------------------------------------------------------


def gpu_cluster() -> ClusterState:
    """Two 4-GPU nodes; node 0 has half a GPU taken by a bound share."""
    specs = [
        NodeSpec(f"n{i}", {"cpu": 32000, "memory": 2**37, "pods": 110, GPU: 4000}) for i in range(2)
    ]
    state = ClusterState(specs, ResourceIndex())
    state.bind(state.add_pod(PodSpec("ns", "held", {"cpu": 1000, GPU: 500, "pods": 1}), 0), 0, 0)
    return state


TARGET = target_workload([task_type(1000, 500), task_type(1000, 1000), task_type(1000, 1000)])


@pytest.mark.parametrize("name", list(SCORINGS))
def test_every_scoring_plugin_builds_from_a_context_and_places_a_share(name: str) -> None:
    plugin = build_scoring(name, BuildContext(weight=3, seed=1, target=TARGET))
    assert isinstance(plugin, Score) and plugin.weight == 3
    assert getattr(plugin, "name", None) == name
    state = gpu_cluster()
    session = Session(state, [Predicates(), plugin], now=0.0, rng=np.random.default_rng(0))
    pod = state.add_pod(PodSpec("ns", "share", {"cpu": 1000, GPU: 500, "pods": 1}), 0)
    scores = session.scores(pod, session.feasible(pod)) / 3
    assert scores.shape == (2,) and ((scores >= 0) & (scores <= 100)).all()
    node = session.select_node(pod)
    assert node is not None
    statement = session.statement()
    statement.allocate(pod, node)
    statement.commit()
    assert len(pod.gpus) == 1 and session.table.gpu_free[node, pod.gpus[0]] >= 0
    assert session.table.gpu_free.sum() == 8000 - 1000


def test_every_scoring_plugin_is_a_command_line_choice(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("simulate", "compare"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert all(name in text for name in SCORINGS)


def test_per_resource_weights_only_where_a_plugin_has_them(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"scoring\.fgd\.resources: fgd takes no"):
        build_scoring("fgd", BuildContext(resources={"cpu": 1}))
    assert build_scoring("binpack", BuildContext(resources={"cpu": 1})).weight == 1
    path = tmp_path / "settings.yaml"
    path.write_text("scoring: {fgd: 2, random: 1, bestfit: {weight: 1}}\n")
    assert [s.name for s in load_settings(str(path)).scoring or ()] == ["fgd", "random", "bestfit"]


def test_packing_replays_any_scoring_plugin_by_its_registry_name() -> None:
    nodes = [
        NodeSpec(f"n{i}", {"cpu": 64000, "memory": 2**38, "pods": 1001, GPU: 8000})
        for i in range(2)
    ]
    pods = [OpenbPod(f"p{i:03d}", 1000, 1024, 1, 300, "") for i in range(20)]
    data = OpenbData("synthetic", nodes, pods)
    for name in SCORINGS:
        result = replay(data, name, 1)
        # 130 % of 16 GPUs arrives (69 pods); three 0.3-GPU shares fill each of the 16 devices
        assert (result.pods, result.placed) == (69, 48)
    assert published_label("binpack") is None and published_label("fgd") == "06-FGD"
