"""Topology objects and every topology-constraint form, read from manifests (and raw dicts for
the PodGroup APIs this branch does not load yet)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from phalanx.api.errors import InputError
from phalanx.api.specs import (
    ControllerSpec,
    GangSpec,
    PodSpec,
    Requirement,
    SubgroupTopology,
    TopologyConstraint,
)
from phalanx.api.topology import HyperNodeSpec, MemberSelector, TopologySpec
from phalanx.k8s.load import load_documents
from phalanx.k8s.topology import gang_topology, pod_topology


def load(text: str) -> list[Any]:
    return [
        item.spec
        for item in load_documents([("t.yaml", d) for d in yaml.safe_load_all(text)]).items
    ]


def error(text: str) -> str:
    with pytest.raises(InputError) as caught:
        load(text)
    return str(caught.value)


@pytest.mark.parametrize(
    ("api", "kind"),
    [("kueue.x-k8s.io/v1beta1", "Kueue Topology"), ("kai.scheduler/v1alpha1", "KAI Topology")],
)
def test_topology_levels_top_first(api: str, kind: str) -> None:
    (spec,) = load(
        f"apiVersion: {api}\nkind: Topology\nmetadata: {{name: net}}\n"
        "spec: {levels: [{nodeLabel: ex.com/block}, {nodeLabel: ex.com/rack}, "
        "{nodeLabel: kubernetes.io/hostname}]}\n"
    )
    assert spec == TopologySpec(
        "net", ("ex.com/block", "ex.com/rack", "kubernetes.io/hostname"), kind
    )


def test_hypernode_members_by_name_regex_and_label() -> None:
    (spec,) = load(
        """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: s0}
spec:
  tier: 1
  tierName: leaf
  members:
  - {type: Node, selector: {exactMatch: {name: n0}}}
  - {type: Node, selector: {regexMatch: {pattern: "^n-[0-3]$"}}}
  - {type: Node, selector: {labelMatch: {matchLabels: {rack: r1}}}}
  - {type: HyperNode, selector: {exactMatch: {name: s1}}}
"""
    )
    assert spec == HyperNodeSpec(
        "s0",
        1,
        (
            MemberSelector("Node", exact="n0"),
            MemberSelector("Node", regex="^n-[0-3]$"),
            MemberSelector("Node", labels=(("rack", "r1"),)),
            MemberSelector("HyperNode", exact="s1"),
        ),
        tier_name="leaf",
    )


TOPOLOGY = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {name: t}\n"
HYPER = "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: h}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TOPOLOGY + "spec: {levels: []}\n", "Topology t: spec.levels: must list 1 to 16 levels"),
        (
            TOPOLOGY + "spec: {levels: [{nodeLabel: a}, {nodeLabel: a}]}\n",
            "spec.levels[1].nodeLabel: level 'a' is listed twice",
        ),
        (
            TOPOLOGY + "spec: {levels: [{nodeLabel: 'bad key!'}]}\n",
            "spec.levels[0].nodeLabel: invalid node label key",
        ),
        (HYPER + "spec: {members: []}\n", "HyperNode h: spec.tier: tier is required"),
        (HYPER + "spec: {tier: 1, members: []}\n", "spec.members: at least one member"),
        (
            HYPER + "spec: {tier: 1, members: [{type: Rack, selector: {}}]}\n",
            "spec.members[0].type: must be Node or HyperNode",
        ),
        (
            HYPER + "spec: {tier: 1, members: [{type: Node, selector: {}}]}\n",
            "spec.members[0].selector: exactly one of exactMatch, regexMatch or labelMatch",
        ),
        (
            HYPER + "spec: {tier: 1, members: [{type: Node, selector: "
            "{regexMatch: {pattern: '('}}}]}\n",
            "spec.members[0].selector.regexMatch.pattern: not a valid regular expression",
        ),
        (
            HYPER + "spec: {tier: 1, members: [{type: HyperNode, selector: "
            "{labelMatch: {matchLabels: {a: b}}}}]}\n",
            "labelMatch selects Node members only",
        ),
    ],
)
def test_bad_topology_objects_are_one_located_line(text: str, expected: str) -> None:
    message = error(text)
    assert message.startswith("t.yaml: ") and expected in message, message


PG = (
    "apiVersion: {api}\nkind: PodGroup\nmetadata: {{name: pg{annotations}}}\n"
    "spec:\n  minMember: 2\n"
)


def gang(api: str, spec: str = "", annotations: str = "") -> GangSpec:
    meta = f", annotations: {{{annotations}}}" if annotations else ""
    (result,) = load(PG.format(api=api, annotations=meta) + spec)
    assert isinstance(result, GangSpec)
    return result


def test_workload_api_scheduling_constraints_is_required() -> None:
    spec = gang(
        "scheduling.x-k8s.io/v1alpha1",
        "  schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}\n",
    )
    assert spec.topology == TopologyConstraint(required="topology.kubernetes.io/rack")


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        ("{mode: hard, highestTierAllowed: 1}", TopologyConstraint(required="tier:1")),
        ("{highestTierAllowed: 2}", TopologyConstraint(required="tier:2")),  # hard by default
        ("{mode: soft}", TopologyConstraint(preferred="tier:1")),
        ("{mode: soft, highestTierName: spine}", TopologyConstraint(preferred="spine")),
    ],
)
def test_volcano_network_topology(network: str, expected: TopologyConstraint) -> None:
    spec = gang("scheduling.volcano.sh/v1beta1", f"  networkTopology: {network}\n")
    assert spec.topology == expected


def test_volcano_network_topology_annotations() -> None:
    spec = gang(
        "scheduling.volcano.sh/v1beta1",
        annotations="volcano.sh/network-topology-mode: soft, "
        "volcano.sh/network-topology-highest-tier: '2'",
    )
    assert spec.topology == TopologyConstraint(preferred="tier:2")


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        (
            "{mode: strict, highestTierAllowed: 1}",
            "spec.networkTopology.mode: must be hard or soft",
        ),
        ("{mode: hard}", "hard mode needs highestTierAllowed or highestTierName"),
        (
            "{highestTierAllowed: 1, highestTierName: a}",
            "highestTierAllowed and highestTierName are mutually exclusive",
        ),
    ],
)
def test_bad_volcano_network_topology(network: str, expected: str) -> None:
    text = PG.format(api="scheduling.volcano.sh/v1beta1", annotations="")
    message = error(text + f"  networkTopology: {network}\n")
    assert "PodGroup default/pg" in message and expected in message, message


def test_kai_podgroup_constraint_and_subgroups() -> None:
    obj: dict[str, Any] = {
        "spec": {
            "minMember": 5,
            "topologyConstraint": {
                "topology": "cluster-topology",
                "requiredTopologyLevel": "ex.com/block",
                "preferredTopologyLevel": "ex.com/rack",
            },
            "subGroups": [
                {
                    "name": "decode",
                    "minMember": 4,
                    "topologyConstraint": {"requiredTopologyLevel": "ex.com/rack"},
                },
                {"name": "prefill", "minMember": 1},
            ],
        }
    }
    found = gang_topology(obj, {})
    assert found.constraint == TopologyConstraint(
        required="ex.com/block", preferred="ex.com/rack", topology="cluster-topology"
    )
    assert found.roles == {"decode": TopologyConstraint(required="ex.com/rack")}


def test_kai_annotations() -> None:
    found = gang_topology(
        {"spec": {}},
        {"kai.scheduler/topology": "net", "kai.scheduler/topology-preferred-placement": "rack"},
    )
    assert found.constraint == TopologyConstraint(preferred="rack", topology="net")


def test_two_forms_on_one_podgroup_is_an_error() -> None:
    with pytest.raises(InputError, match="more than one topology constraint"):
        gang_topology(
            {
                "spec": {
                    "networkTopology": {"mode": "soft"},
                    "topologyConstraint": {"requiredTopologyLevel": "rack"},
                }
            },
            {},
        )


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations: ANN
spec:
  containers: [{name: c, image: x}]
"""


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            "{kueue.x-k8s.io/podset-required-topology: ex.com/rack}",
            TopologyConstraint(required="ex.com/rack"),
        ),
        (
            "{kueue.x-k8s.io/podset-preferred-topology: ex.com/rack}",
            TopologyConstraint(preferred="ex.com/rack"),
        ),
        (
            "{kueue.x-k8s.io/podset-slice-required-topology: ex.com/rack, "
            "kueue.x-k8s.io/podset-slice-size: '4'}",
            TopologyConstraint(slice_level="ex.com/rack", slice_size=4),
        ),
        ("{kueue.x-k8s.io/podset-unconstrained-topology: 'true'}", None),
    ],
)
def test_kueue_pod_set_annotations(annotations: str, expected: TopologyConstraint | None) -> None:
    (pod,) = load(POD.replace("ANN", annotations))
    assert isinstance(pod, PodSpec) and pod.topology == expected


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            "{kueue.x-k8s.io/podset-required-topology: a, "
            "kueue.x-k8s.io/podset-preferred-topology: b}",
            "are mutually exclusive",
        ),
        (
            "{kueue.x-k8s.io/podset-slice-required-topology: a}",
            "kueue.x-k8s.io/podset-slice-size]: is required",
        ),
        (
            "{kueue.x-k8s.io/podset-slice-required-topology: a, "
            "kueue.x-k8s.io/podset-slice-size: '0'}",
            "must be at least 1",
        ),
        ("{kueue.x-k8s.io/podset-slice-size: '2'}", "needs kueue.x-k8s.io/podset-slice-required"),
    ],
)
def test_bad_kueue_annotations(annotations: str, expected: str) -> None:
    message = error(POD.replace("ANN", annotations))
    assert "Pod default/p: metadata.annotations" in message and expected in message, message


def test_pod_without_annotations_has_no_constraint() -> None:
    assert pod_topology({}) is None


def test_kai_podgroup_manifest_carries_its_constraints() -> None:
    (spec,) = load(
        """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: serve, namespace: default}
spec:
  minMember: 5
  topologyConstraint: {topology: net, requiredTopologyLevel: ex.com/block}
  subGroups:
  - {name: decode, minMember: 4, topologyConstraint: {requiredTopologyLevel: ex.com/rack}}
  - {name: prefill, minMember: 1}
"""
    )
    assert isinstance(spec, GangSpec)
    assert spec.topology == TopologyConstraint(required="ex.com/block", topology="net")
    assert spec.role_topology == {"decode": TopologyConstraint(required="ex.com/rack")}


def test_workload_api_podgroup_manifest_carries_its_constraint() -> None:
    (spec,) = load(
        """
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: train-0, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 4}}
  schedulingConstraints: {topology: [{key: topology.kubernetes.io/rack}]}
"""
    )
    assert isinstance(spec, GangSpec)
    assert spec.topology == TopologyConstraint(required="topology.kubernetes.io/rack")


def test_volcano_job_network_topology_reaches_its_gang() -> None:
    (job,) = load(
        """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vj, namespace: default}
spec:
  networkTopology: {mode: soft, highestTierAllowed: 2}
  tasks:
  - name: worker
    replicas: 2
    template: {spec: {containers: [{name: c, image: x}]}}
"""
    )
    assert isinstance(job, ControllerSpec)
    assert [g.topology for g in job.gangs] == [TopologyConstraint(preferred="tier:2")]


# -- subgroup and template forms -----------------------------------------------------------
VOLCANO_SUBGROUPS = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: vc, namespace: default}
spec:
  minMember: 4
  subGroupPolicy:
  - name: shards
    subGroupSize: 2
    minSubGroups: 1
    networkTopology: {mode: hard, highestTierAllowed: 1}
    labelSelector:
      matchLabels: {app: train}
      matchExpressions: [{key: tier, operator: NotIn, values: [cpu]}]
    matchLabelKeys: [shard]
  - {name: rest, networkTopology: {mode: soft, highestTierName: spine}}
"""


def test_volcano_subgroup_policy() -> None:
    (spec,) = load(VOLCANO_SUBGROUPS)
    assert isinstance(spec, GangSpec)
    shards, rest = spec.subgroups
    assert shards == SubgroupTopology(
        "shards",
        TopologyConstraint(required="tier:1"),
        (("app", "train"),),
        (Requirement("tier", "NotIn", ("cpu",)),),
        ("shard",),
        2,
    )
    assert rest == SubgroupTopology("rest", TopologyConstraint(preferred="spine"))


PARTITIONED = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: llm, namespace: default}
spec:
  tasks:
  - name: worker
    replicas: 6
    partitionPolicy:
      totalPartitions: 3
      partitionSize: 2
      minPartitions: 2
      networkTopology: {mode: hard, highestTierAllowed: 1}
    template: {spec: {containers: [{name: c, image: x}]}}
"""


def test_volcano_partition_policy_labels_pods_and_makes_a_subgroup() -> None:
    (job,) = load(PARTITIONED)
    assert isinstance(job, ControllerSpec)
    (gang,) = job.gangs
    assert gang.subgroups == (
        SubgroupTopology(
            "worker",
            TopologyConstraint(required="tier:1"),
            (("volcano.sh/task-spec", "worker"),),
            keys=("volcano.sh/partition-id",),
            size=2,
        ),
    )
    assert gang.min_member == 4 and gang.role_minimums == {"worker": 4}  # minPartitions × size
    assert [
        (s.count, s.start, s.template.labels["volcano.sh/partition-id"]) for s in job.pod_sets
    ] == [
        (2, 0, "0"),
        (2, 2, "1"),
        (2, 4, "2"),
    ]


WORKLOAD = """
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: wl, namespace: default}
spec:
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {gang: {minCount: 2}}
    schedulingConstraints: {topology: [{key: ex.com/rack}]}
  - {name: free, schedulingPolicy: {gang: {minCount: 1}}}
"""


def test_workload_template_constraints_are_read_and_copied_to_its_podgroups() -> None:
    group = """
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: wl-workers-0, namespace: default}
spec:
  podGroupTemplateRef: {workload: {workloadName: wl, podGroupTemplateName: workers}}
  schedulingPolicy: {gang: {minCount: 2}}
"""
    specs = load(WORKLOAD + group)
    (gang,) = [s for s in specs if isinstance(s, GangSpec)]
    assert gang.topology == TopologyConstraint(required="ex.com/rack")
    # its own constraint wins over the template's
    own = group.replace(
        "  schedulingPolicy:",
        "  schedulingConstraints: {topology: [{key: ex.com/block}]}\n  schedulingPolicy:",
    )
    (gang,) = [s for s in load(WORKLOAD + own) if isinstance(s, GangSpec)]
    assert gang.topology == TopologyConstraint(required="ex.com/block")
    assert "has no pod group template 'nope'" in error(
        WORKLOAD + group.replace("workers}", "nope}")
    )


def test_bad_workload_template_constraint() -> None:
    bad = WORKLOAD.replace("[{key: ex.com/rack}]", "[{key: a}, {key: b}]")
    assert "spec.podGroupTemplates[0].schedulingConstraints.topology" in error(bad)


KAI_TREE = """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: serve, namespace: default}
spec:
  minMember: 3
  subgroups:
  - {name: pd, topologyConstraint: {requiredTopologyLevel: ex.com/block}}
  - name: prefill
    parent: pd
    minMember: 1
    topologyConstraint: {requiredTopologyLevel: ex.com/rack}
  - {name: decode, parent: pd, minMember: 2}
"""


def test_kai_parent_subgroups() -> None:
    (spec,) = load(KAI_TREE)
    assert isinstance(spec, GangSpec)
    assert spec.role_parents == {"prefill": "pd", "decode": "pd"}
    assert spec.role_topology == {
        "pd": TopologyConstraint(required="ex.com/block"),
        "prefill": TopologyConstraint(required="ex.com/rack"),
    }
    assert spec.role_minimums == {"prefill": 1, "decode": 2}


@pytest.mark.parametrize(
    ("base", "edit", "expected"),
    [
        ("VOLCANO_SUBGROUPS", ("Size: 2", "Size: 0"), "spec.subGroupPolicy[0].subGroupSize"),
        ("VOLCANO_SUBGROUPS", ("name: rest", "name: shards"), "duplicate subGroupPolicy 'shards'"),
        ("VOLCANO_SUBGROUPS", ("[shard]", "['bad key!']"), "subGroupPolicy[0].matchLabelKeys[0]"),
        ("VOLCANO_SUBGROUPS", ("NotIn, values: [cpu]", "Gt, values: ['1']"), "[0].operator"),
        ("VOLCANO_SUBGROUPS", ("mode: hard", "mode: firm"), "[0].networkTopology.mode"),
        ("PARTITIONED", ("replicas: 6", "replicas: 5"), "must equal replicas (5)"),
        ("PARTITIONED", ("partitionSize: 2", "partitionSize: 0"), "partitionPolicy.partitionSize"),
        ("PARTITIONED", ("minPartitions: 2", "minPartitions: 4"), "exceed totalPartitions (3)"),
        ("PARTITIONED", ("replicas: 6", "replicas: 6\n    minAvailable: 3"), "minAvailable must"),
        ("KAI_TREE", ("parent: pd, minMember: 2", "parent: px, minMember: 2"), "'px' does not"),
        ("KAI_TREE", ("{name: pd,", "{name: pd, parent: decode,"), "is in a parent cycle"),
    ],
)
def test_bad_subgroup_forms_are_one_located_line(
    base: str, edit: tuple[str, str], expected: str
) -> None:
    assert expected in error(globals()[base].replace(*edit))
