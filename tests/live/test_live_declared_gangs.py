"""The live cache reads pod-level gang declarations through the shared converter and state:
Kueue, Koordinator and YuniKorn pods that name phalanx form their gang with no PodGroup."""

from __future__ import annotations

from typing import Any

from test_live_serve import NS, node, pod

from phalanx.live.cache import ClusterCache


def declared(name: str, labels: dict[str, str], annotations: dict[str, str]) -> Any:
    obj = pod(name, gpus=1)
    obj["metadata"]["labels"] = labels
    obj["metadata"]["annotations"] = annotations
    return obj


def test_pod_level_declarations_make_gangs_in_the_live_cache() -> None:
    kueue = [
        declared(
            f"k-{i}",
            {"kueue.x-k8s.io/pod-group-name": "sim", "kueue.x-k8s.io/queue-name": "lq"},
            {"kueue.x-k8s.io/pod-group-total-count": "3"},
        )
        for i in range(3)
    ]
    koordinator = [
        declared(
            f"{gang}-{i}",
            {},
            {
                "gang.scheduling.koordinator.sh/name": gang,
                "gang.scheduling.koordinator.sh/min-available": str(minimum),
                "gang.scheduling.koordinator.sh/groups": f'["{NS}/ps", "{NS}/workers"]',
            },
        )
        for gang, minimum, count in (("ps", 1, 1), ("workers", 2, 2))
        for i in range(count)
    ]
    snapshot = ClusterCache().build(nodes=[node("node-a")], pods=kueue + koordinator, now=0.0)
    gangs = snapshot.state.gangs
    sim = gangs[f"{NS}/sim"]
    assert (sim.min_member, len(sim.members), sim.spec and sim.spec.queue) == (3, 3, "lq")
    group = gangs[f"{NS}/ps+workers"]
    assert (group.min_member, group.role_minimums) == (3, {"ps": 1, "workers": 2})
    assert len(group.members) == 3 and group.invalid is None
