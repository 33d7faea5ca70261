"""The Lingjun cluster: nodes and racks from topo.csv, constraints and gang-size filters."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, NodeSpec, PodSpec, TopologyConstraint
from phalanx.api.topology import TopologySpec
from phalanx.cluster.labels import LabelIndex
from phalanx.cluster.topology import build
from phalanx.traces import load
from phalanx.traces.lingjun import BLOCK_LABEL, RACK_LABEL, lingjun_nodes

GPU = "nvidia.com/gpu"


def test_hosts_blocks_and_racks_as_the_readme_counts_them(traces: Path) -> None:
    nodes = lingjun_nodes(traces / "lingjun-topology")
    assert len(nodes) == 847 and all(n.allocatable[GPU] == 8000 for n in nodes)
    assert Counter(n.labels[BLOCK_LABEL] for n in nodes) == {"P10": 362, "P12": 306, "P8": 179}
    assert len({n.labels[RACK_LABEL] for n in nodes}) == 48  # ToR ids repeat across PSWs
    names = [n.name for n in nodes]
    labels = LabelIndex(names, [n.labels for n in nodes])
    spec = TopologySpec("lingjun", (BLOCK_LABEL, RACK_LABEL, "kubernetes.io/hostname"))
    (topology,) = build(names, labels, [spec]).items
    racks = topology.levels[1]
    assert len(racks) == 119  # distinct (PSW, ASW) pairs
    sizes = Counter(Counter(racks.codes.tolist()).values())
    assert sizes[8] == 68 and sizes[7] == 23 and sizes[2] == 3


def test_a_trace_moves_onto_lingjun_with_a_constraint_on_every_gang(traces: Path) -> None:
    spec = "synthetic:jobs=200,mix=large,cluster=lingjun,topology=required,level=block"
    workload = load(spec, root=traces)
    assert sum(1 for _ in workload.of(NodeSpec)) == 847
    (topology,) = workload.of(TopologySpec)
    assert topology.levels == (BLOCK_LABEL, RACK_LABEL, "kubernetes.io/hostname")
    gangs = list(workload.of(GangSpec))
    assert len(gangs) == 200
    assert {g.topology for g in gangs} == {TopologyConstraint(required=BLOCK_LABEL)}


def test_gang_size_filters(traces: Path) -> None:
    workload = load("philly:jobs=3000,cluster=lingjun,min_gpus=16,max_gpus=64", root=traces)
    totals: Counter[str] = Counter()
    for pod in workload.of(PodSpec):
        assert pod.gang_key is not None
        totals[pod.gang_key] += pod.requests[GPU]
    assert totals and all(16_000 <= t <= 64_000 for t in totals.values())
    assert set(totals) == {g.key for g in workload.of(GangSpec)}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("synthetic:topology=preferred", "topology: needs cluster=lingjun"),
        ("synthetic:cluster=mars", "cluster: must be lingjun"),
        ("synthetic:cluster=lingjun,nodes=4", "nodes: cluster=lingjun sets the nodes"),
        ("philly:cluster=lingjun,topology=maybe", "topology: must be one of none, preferred"),
        ("philly:cluster=lingjun,level=row", "level: must be one of block, rack"),
    ],
)
def test_bad_cluster_options(traces: Path, spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load(spec, root=traces)
