"""The synthetic trace's demo options: mix, pod size and duration cap."""

from __future__ import annotations

import pytest

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, PodSpec
from phalanx.traces import load


def test_multi_mix_one_gpu_pods_and_duration_cap() -> None:
    workload = load("synthetic:jobs=50,nodes=4,mix=multi,gpus_per_pod=1,max_duration=3600,seed=2")
    gangs = list(workload.of(GangSpec))
    pods = list(workload.of(PodSpec))
    assert len(gangs) == 50
    assert all(g.min_member >= 2 for g in gangs)  # multi: distributed jobs only
    assert all(p.requests["nvidia.com/gpu"] == 1000 for p in pods)  # one GPU per worker
    assert sum(g.min_member for g in gangs) == len(pods)
    assert max(g.duration or 0 for g in gangs) <= 3600


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("synthetic:mix=huge", "mix"),
        ("synthetic:gpus_per_pod=9", "gpus_per_pod"),
        ("synthetic:max_duration=0.5", "max_duration"),
    ],
)
def test_bad_demo_options(spec: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        load(spec)
    assert field in str(err.value)
