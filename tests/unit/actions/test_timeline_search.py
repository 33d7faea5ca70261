"""Timeline.earliest skips windows by necessary checks only: on random timelines (overdrawn
rows, whole and shared GPUs, gangs of several shapes and pods, placement masks, topology
domains, ``after`` and ``until``) it finds what placing every window in turn finds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from phalanx.actions.timeline import Found, Timeline
from phalanx.cluster.labels import Mask
from phalanx.cluster.resources import Vector

GPU_COL = 2
DEVICES = 4


def _timeline(rng: np.random.Generator, nodes: int) -> Timeline:
    rows = int(rng.integers(1, 9))
    times = sorted({0.0, *(float(t) for t in rng.integers(1, 100, size=rows - 1))})
    free = np.zeros((len(times), nodes, 3), dtype=np.int64)
    free[:, :, 0] = rng.integers(-1_000, 8_000, size=(len(times), nodes))  # cpu, overdrawn too
    free[:, :, 1] = rng.integers(0, 3, size=(len(times), nodes))  # pods
    gpus = rng.choice([0, 250, 500, 1_000], size=(len(times), nodes, DEVICES)).astype(np.int64)
    free[:, :, GPU_COL] = gpus.sum(axis=2)
    return Timeline(times, free, gpus, GPU_COL)


def _gang(rng: np.random.Generator, nodes: int) -> tuple[list[Vector], list[Mask]]:
    shapes = []
    for _ in range(int(rng.integers(1, 3))):
        request = np.array(
            [rng.integers(0, 3_000), rng.integers(0, 2), rng.choice([0, 250, 1_000, 2_000])],
            dtype=np.int64,
        )
        shapes.append((request, rng.random(nodes) < 0.8))
    requests, masks = [], []
    for _ in range(int(rng.integers(1, 5))):
        request, mask = shapes[int(rng.integers(len(shapes)))]
        requests.append(request)
        masks.append(mask)
    return requests, masks


def _every_window(
    line: Timeline,
    requests: list[Vector],
    masks: list[Mask],
    duration: float,
    until: float,
    after: float,
    domains: list[Mask | None],
) -> Found:
    """Each start in turn, placed on the window's minimum: no check before placing."""
    need = np.sum(requests, axis=0)
    for k, at in enumerate(line.times):
        if not after < at <= until:
            continue
        last = k + 1
        while last < len(line.times) and line.times[last] < at + duration:
            last += 1
        free = line.free[k:last].min(axis=0)
        gpus = line.gpus[k:last].min(axis=0)
        plan = line._place_in(free, gpus, requests, masks, domains, need)
        if plan is not None:
            return at, plan
    return None


@pytest.mark.parametrize("seed", range(300))
def test_earliest_finds_what_placing_every_window_finds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 6))
    line = _timeline(rng, nodes)
    requests, masks = _gang(rng, nodes)
    duration = float(rng.choice([1.0, 10.0, 40.0, math.inf]))
    until = float(rng.choice([math.inf, 50.0]))
    after = float(rng.choice([-math.inf, 0.0, 20.0]))
    domains: list[Mask | None] = []
    if rng.random() < 0.3:
        domains = [rng.random(nodes) < 0.5, None]
    found = line.earliest(requests, masks, duration, until=until, after=after, domains=domains)
    expected = _every_window(line, requests, masks, duration, until, after, domains)
    assert (found is None) == (expected is None)
    if found is not None and expected is not None:
        assert found[0] == expected[0]
        assert [(s.node, s.gpus) for s in found[1]] == [(s.node, s.gpus) for s in expected[1]]
