"""Preemption inside the network domain the preemptor will use, through ``phalanx simulate``.

Two racks of two 4-GPU nodes (a Kueue ``Topology``: rack, then hostname). A high-priority
gang of two 4-GPU pods that requires one rack may only evict gangs in the rack it will use:
victims chosen anywhere would free room it cannot use (kueue#5243).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import yaml
from test_queue_scenarios import Obj, gang, node, priority

from phalanx.cli.main import main

RACK = "ex.com/rack"
HOST = "kubernetes.io/hostname"
TOPOLOGY: Obj = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Topology",
    "metadata": {"name": "default"},
    "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]},
}
RACK_REQUIRED = {"kueue.x-k8s.io/podset-required-topology": RACK}
RACK_PREFERRED = {"kueue.x-k8s.io/podset-preferred-topology": RACK}


def racks() -> list[Obj]:
    return [
        node(name, 4, **{RACK: name[0], HOST: name})
        for name in ("a1", "a2", "b1", "b2")  # racks a and b
    ]


def on(host: str) -> dict[str, str]:
    return {HOST: host}


CLASSES = {"lowest": 5, "low": 10, "pre": 50, "mid": 100, "over": 200, "high": 1000}


def simulate(
    tmp_path: Path, objects: list[Obj], *options: str, until: str = "2h"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``phalanx simulate`` on the objects (with ``options``); its JSON output and event
    log."""
    classes = [priority(name, value) for name, value in CLASSES.items()]
    path, log = tmp_path / "w.yaml", tmp_path / "events.jsonl"
    path.write_text(yaml.safe_dump_all([TOPOLOGY, *classes, *objects]))
    out = tmp_path / "out.json"
    argv = ["simulate", str(path), "--until", until, "--events", str(log), "-o", "json"]
    argv += options
    with out.open("w") as sink, contextlib.redirect_stdout(sink):
        assert main(argv) == 0
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return json.loads(out.read_text()), events


def evictions(events: list[dict[str, Any]]) -> set[str]:
    return {e["gang"] for e in events if e["type"] == "evict"}


def binds(events: list[dict[str, Any]], gang_key: str) -> list[tuple[float, str]]:
    return [(e["t"], e["node"]) for e in events if e["type"] == "bind" and e["gang"] == gang_key]


def test_victims_are_taken_in_the_rack_the_preemptor_will_use(tmp_path: Path) -> None:
    objects = [
        *racks(),
        *gang("keep-b2", 1, 4, cls="high", selector=on("b2")),
        *gang("lowest-b1", 1, 4, cls="lowest", selector=on("b1")),
        *gang("low-a1", 1, 4, selector=on("a1")),
        *gang("low-a2", 1, 4, selector=on("a2")),
        *gang("urgent", 2, 4, cls="high", at="10s", annotations=RACK_REQUIRED),
    ]
    _, events = simulate(tmp_path, objects)
    # rack b cannot hold it (keep-b2 outranks it): both victims come from rack a, and the
    # lowest-priority gang, in the other rack, is left alone
    assert evictions(events) == {"default/low-a1", "default/low-a2"}
    assert sorted(binds(events, "default/urgent")) == [(10.0, "a1"), (10.0, "a2")]


def test_nothing_is_evicted_when_no_rack_can_hold_the_preemptor(tmp_path: Path) -> None:
    objects = [
        *racks(),
        *gang("keep-a2", 1, 4, cls="high", selector=on("a2")),
        *gang("keep-b2", 1, 4, cls="high", selector=on("b2")),
        *gang("low-a1", 1, 4, selector=on("a1")),
        *gang("low-b1", 1, 4, selector=on("b1")),
        *gang("urgent", 2, 4, cls="high", at="10s", annotations=RACK_REQUIRED),
    ]
    result, events = simulate(tmp_path, objects)
    assert evictions(events) == set()  # freeing a1 and b1 would split it over two racks
    assert result["preemptions"] == 0
    urgent = next(g for g in result["gangs"] if g["name"] == "urgent")
    assert urgent["start"] == 3600.0  # when the keepers end and one rack is whole again


def test_a_preferred_rack_takes_its_victims_in_one_rack_when_one_can_hold_it(
    tmp_path: Path,
) -> None:
    objects = [
        *racks(),
        *gang("keep-b2", 1, 4, cls="high", selector=on("b2")),
        *gang("lowest-b1", 1, 4, cls="lowest", selector=on("b1")),
        *gang("low-a1", 1, 4, selector=on("a1")),
        *gang("low-a2", 1, 4, selector=on("a2")),
        *gang("urgent", 2, 4, cls="high", at="10s", annotations=RACK_PREFERRED),
    ]
    _, events = simulate(tmp_path, objects)
    assert evictions(events) == {"default/low-a1", "default/low-a2"}
    assert {node for _, node in binds(events, "default/urgent")} == {"a1", "a2"}
