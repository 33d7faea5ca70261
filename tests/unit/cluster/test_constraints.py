"""Volcano subgroup assignment and constraint resolution (cluster.constraints)."""

from __future__ import annotations

import pytest

from phalanx.api.specs import Requirement, SubgroupTopology, TopologyConstraint
from phalanx.cluster.constraints import resolve, subgroup_of
from phalanx.cluster.topology import Topologies

RACK = TopologyConstraint(required="tier:1")
POLICIES = (
    SubgroupTopology(
        "gpu",
        RACK,
        (("app", "train"),),
        (Requirement("tier", "NotIn", ("cpu",)), Requirement("shard", "Exists")),
        ("shard",),
    ),
    SubgroupTopology("rest", TopologyConstraint(preferred="tier:2")),
)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"app": "train", "shard": "3"}, ("gpu", "3")),
        ({"app": "train", "shard": "3", "tier": "cpu"}, ("rest",)),  # NotIn fails: next policy
        ({"app": "train"}, ("rest",)),  # no shard label: not in the first policy
        ({"app": "serve", "shard": "1"}, ("rest",)),
    ],
)
def test_the_first_selecting_policy_and_its_key(
    labels: dict[str, str], expected: tuple[str, ...]
) -> None:
    found = subgroup_of(POLICIES, labels)
    assert found is not None and found[1] == expected


def test_a_pod_no_policy_selects_is_in_no_subgroup() -> None:
    assert subgroup_of(POLICIES[:1], {"app": "serve"}) is None


def test_an_unknown_level_names_the_known_ones() -> None:
    with pytest.raises(LookupError, match="no Topology or HyperNode declared"):
        resolve(Topologies(), RACK)
