"""Reservations and backfill through the simulator: EASY vs conservative on a hand-computed
example, overruns moving a reservation, estimates hidden from the scheduler, the JSON fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phalanx.actions.book import Book
from phalanx.compare import load_workload
from phalanx.k8s import load_files
from phalanx.sim.metrics import SimResult
from phalanx.sim.simulator import SimOptions, simulate
from phalanx.sim.waits import wait_floor

EASY = ("reserve:mode=easy:aging=off:min-gpus=0", "allocate")
CONSERVATIVE = ("reserve:mode=conservative:aging=off", "allocate")


def nodes(count: int) -> str:
    return "".join(
        f"""---
apiVersion: v1
kind: Node
metadata: {{name: n{i}}}
status: {{allocatable: {{cpu: "8", memory: 32Gi, nvidia.com/gpu: "1", pods: "110"}}}}
"""
        for i in range(count)
    )


def gang(
    name: str,
    gpus: int,
    *,
    at: float,
    runs: float,
    estimate: float | None,
    deadline: str | None = None,
) -> str:
    """A PodGroup of ``gpus`` one-GPU pods submitted at ``at`` that runs ``runs`` seconds."""
    hint = "" if estimate is None else f", phalanx.dev/runtime-estimate: '{estimate:g}'"
    hint += "" if deadline is None else f", phalanx.dev/deadline: '{deadline}'"
    text = f"""---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: {name}
  annotations: {{phalanx.dev/submit-after: '{at:g}', phalanx.dev/duration: '{runs:g}'{hint}}}
spec: {{minMember: {gpus}}}
"""
    for i in range(gpus):
        text += f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}-{i}
  labels: {{scheduling.x-k8s.io/pod-group: {name}}}
  annotations: {{phalanx.dev/submit-after: '{at:g}'}}
spec:
  schedulerName: phalanx
  containers:
  - name: c
    resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}
"""
    return text


def run(
    tmp_path: Path, text: str, actions: tuple[str, ...], **options: Any
) -> tuple[SimResult, list[dict[str, Any]]]:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    events: list[dict[str, Any]] = []
    result = simulate(load_files([path]), SimOptions(actions=actions, **options), events.append)
    return result, events


def starts(result: SimResult) -> dict[str, float | None]:
    return {g.name: g.start for g in result.gangs}


#: 4 one-GPU nodes. r (2 GPUs) runs 0-100 (estimated 100). Then, in FIFO order: a needs 3
#: GPUs (est. 100), b needs 4 (est. 100), c needs 1 (est. 300).
#: - both modes: a is reserved at 100 (r's 2 GPUs + 1 free).
#: - EASY: only a is reserved; c fits now and leaves 3 GPUs for a at 100 → c starts at 3.
#:   a runs 100-200; b needs all 4, c holds one until 303 → b starts at 303.
#: - conservative: b is reserved too, at 200 (after a) on all 4 GPUs; c until 303 would delay
#:   it → c waits. b runs 200-300; c starts at 300.
SLURM_EXAMPLE = (
    nodes(4)
    + gang("r", 2, at=0, runs=100, estimate=100)
    + gang("a", 3, at=1, runs=100, estimate=100)
    + gang("b", 4, at=2, runs=100, estimate=100)
    + gang("c", 1, at=3, runs=300, estimate=300)
)


def test_easy_backfills_what_conservative_holds_for_the_second_reservation(
    tmp_path: Path,
) -> None:
    easy, _ = run(tmp_path, SLURM_EXAMPLE, EASY)
    assert starts(easy) == {"r": 0.0, "a": 100.0, "b": 303.0, "c": 3.0}
    conservative, _ = run(tmp_path, SLURM_EXAMPLE, CONSERVATIVE)
    assert starts(conservative) == {"r": 0.0, "a": 100.0, "b": 200.0, "c": 300.0}


def test_without_reservations_the_big_gangs_wait_for_the_small(tmp_path: Path) -> None:
    plain, _ = run(tmp_path, SLURM_EXAMPLE, ("allocate",))
    assert starts(plain)["c"] == 3.0 and starts(plain)["a"] == 100.0


#: 4 one-GPU nodes. r (2 GPUs) runs 0-100; a needs 3 GPUs (est. 100); c needs 2 (est. 300).
#: Reserved at once, a starts at 100 when r ends and c (until 303 it would hold 2 of a's 3) waits
#: for a's end; reserved only once it has waited 50 s, a lets c start at 3 and waits for c.
HEAD_WAIT_EXAMPLE = (
    nodes(4)
    + gang("r", 2, at=0, runs=100, estimate=100)
    + gang("a", 3, at=1, runs=100, estimate=100)
    + gang("c", 2, at=3, runs=300, estimate=300)
)


def test_head_wait_reserves_for_a_big_gang_only_once_it_has_waited(tmp_path: Path) -> None:
    now, _ = run(tmp_path, HEAD_WAIT_EXAMPLE, EASY)
    assert starts(now) == {"r": 0.0, "a": 100.0, "c": 200.0}
    later, _ = run(tmp_path, HEAD_WAIT_EXAMPLE, (EASY[0] + ":head-wait=50s", "allocate"))
    assert starts(later) == {"r": 0.0, "a": 303.0, "c": 3.0}


def test_the_next_head_is_reserved_when_the_reserved_one_starts(tmp_path: Path) -> None:
    """4 GPUs. r (2) ends at 100, q (1) at 150, q2 (1) at 400. a (1 GPU) is reserved at 100;
    when it starts there, b (3 GPUs) becomes the head and is reserved at 200 (a's, r's other
    and q's GPU): c (1 GPU until 1100), backfilled at 100 or 150, would delay it, so it waits
    for b's end. (With perfect estimates no early end re-plans; the start itself must.)"""
    text = (
        nodes(4)
        + gang("r", 2, at=0, runs=100, estimate=100)
        + gang("q", 1, at=0, runs=150, estimate=150)
        + gang("q2", 1, at=0, runs=400, estimate=400)
        + gang("a", 1, at=1, runs=100, estimate=100)
        + gang("b", 3, at=2, runs=100, estimate=100)
        + gang("c", 1, at=3, runs=1000, estimate=1000)
    )
    result, _ = run(tmp_path, text, EASY)
    assert starts(result) == {"r": 0, "q": 0, "q2": 0, "a": 100, "b": 200, "c": 300}


def test_a_head_parked_for_room_is_reserved_when_room_comes_back(tmp_path: Path) -> None:
    """4 GPUs. At 100 r's 3 GPUs free: a (1 GPU, reserved) and u (2 GPUs until 400) start;
    h0..h4 (2 GPUs each, the same shape as u) stay parked for room, and while u is admitted
    the room it takes still looks free for them. The head h0 is reserved when room comes
    back, at 250 (a's GPU from 150, q's from 250), so d (1 GPU until 1150, arriving behind
    five waiting gangs) is not backfilled onto a's GPU at 150."""
    text = (
        nodes(4)
        + gang("r", 3, at=0, runs=100, estimate=100)
        + gang("q", 1, at=0, runs=250, estimate=250)
        + gang("a", 1, at=1, runs=50, estimate=50)
        + gang("u", 2, at=2, runs=300, estimate=300)
        + "".join(gang(f"h{i}", 2, at=3 + i, runs=100, estimate=100) for i in range(5))
        + gang("d", 1, at=120, runs=1000, estimate=1000)
    )
    result, _ = run(tmp_path, text, EASY)
    got = starts(result)
    assert got["h0"] == 250 and got["d"] == 550
    assert [got[f"h{i}"] for i in range(1, 5)] == [350, 400, 450, 500]


def test_big_first_keeps_an_older_backlog_off_a_big_gangs_reservation(tmp_path: Path) -> None:
    """4 GPUs held by r until 100; s1..s3 (1 GPU, 300 s each) wait, then the big gang b (4 GPUs,
    50 s) arrives and is reserved at 100. The older s's rank ahead of b: without ``big-first``
    they start at 100 and b waits for them (400); with it b ranks first, starts at its
    reservation and the s's follow at 150."""
    text = (
        nodes(4)
        + gang("r", 4, at=0, runs=100, estimate=100)
        + "".join(gang(f"s{i}", 1, at=i, runs=300, estimate=300) for i in (1, 2, 3))
        + gang("b", 4, at=5, runs=50, estimate=50)
    )
    heads = "reserve:mode=easy:aging=off:min-gpus=4"
    plain, _ = run(tmp_path, text, (heads + ":big-first=false", "allocate"))
    assert starts(plain) == {"r": 0, "s1": 100, "s2": 100, "s3": 100, "b": 400}
    first, _ = run(tmp_path, text, (heads + ":big-first=true", "allocate"))
    assert starts(first) == {"r": 0, "s1": 150, "s2": 150, "s3": 150, "b": 100}


def test_strict_order_starts_gangs_in_submission_order() -> None:
    """fifo-reserve with exact estimates and one priority: nothing starts before an older gang
    (the head is reserved again whenever the one before it starts, also when the gangs the plan
    looked at all fitted at once and started as intents). It once let 112 of these 300 gangs
    start before older ones."""
    workload = load_workload("synthetic:jobs=300,nodes=4,mix=philly,load=1.5,seed=3")
    result = simulate(workload, SimOptions(policy="fifo-reserve", estimates="perfect"))
    gangs = sorted(result.gangs, key=lambda g: (g.submit, g.name))
    begun = [g.start for g in gangs if g.start is not None]
    assert len(begun) == len(gangs) and begun == sorted(begun)


def whole_cluster_head(running_estimate: float | None) -> str:
    """r (2 GPUs, until 100) runs; h needs all 4 GPUs from 1; s (1 GPU, 500 s) arrives at 2."""
    return (
        nodes(4)
        + gang("r", 2, at=0, runs=100, estimate=running_estimate)
        + gang("h", 4, at=1, runs=50, estimate=50)
        + gang("s", 1, at=2, runs=500, estimate=500)
    )


def test_strict_order_holds_behind_a_head_whose_start_is_unknown(tmp_path: Path) -> None:
    """r runs with no estimate, so the head h has no reserved start; strict FIFO still starts
    nothing behind it (s once started at 2 and delayed h to 502)."""
    text = whole_cluster_head(None)
    path = tmp_path / "w.yaml"
    path.write_text(text)
    result = simulate(load_files([path]), SimOptions(policy="fifo-reserve"))
    assert starts(result) == {"r": 0, "h": 100, "s": 150}
    easy, _ = run(tmp_path, text, EASY)
    assert starts(easy) == {"r": 0, "h": 502, "s": 2}  # EASY cannot reserve: it backfills


def test_min_share_reserves_for_a_gang_large_for_its_cluster(tmp_path: Path) -> None:
    """h needs the whole 4-GPU cluster but is far below ``min-gpus``: a head reservation only
    with ``min-share`` (more than half the cluster's GPUs), and then s no longer starts at 2."""
    text = whole_cluster_head(100)
    heads = "reserve:mode=easy:aging=off:min-gpus=33"
    absolute, _ = run(tmp_path, text, (heads, "allocate"))
    assert starts(absolute) == {"r": 0, "h": 502, "s": 2}
    relative, _ = run(tmp_path, text, (heads + ":min-share=0.5", "allocate"))
    assert starts(relative) == {"r": 0, "h": 100, "s": 150}


def test_aging_cap_ages_a_long_gang_at_the_cap(tmp_path: Path) -> None:
    """a ages after max(10 s, 100 × its 100 s estimate): never, unless the relative part is
    capped at 50 s; aged at 51 it is reserved at 100, so c (until 360) no longer starts at 60."""
    text = (
        nodes(4)
        + gang("r", 2, at=0, runs=100, estimate=100)
        + gang("a", 3, at=1, runs=100, estimate=100)
        + gang("c", 2, at=60, runs=300, estimate=300)
    )
    aging = "reserve:mode=easy:min-gpus=1e9:aging=10s:aging-factor=100:max-aged=1"
    never, _ = run(tmp_path, text, (aging, "allocate"))
    assert starts(never) == {"r": 0.0, "a": 360.0, "c": 60.0}
    capped, _ = run(tmp_path, text, (aging + ":aging-cap=50s", "allocate"))
    assert starts(capped) == {"r": 0.0, "a": 100.0, "c": 200.0}


def test_max_aged_reserves_for_that_many_aged_gangs_of_a_queue(tmp_path: Path) -> None:
    """4 GPUs; r holds 3 until 100. a (3 GPUs) and b (4) age at 11 and 12. One aged
    reservation: a's at 100 (the 4th GPU and r's 3), which c (1 GPU, 60-360) leaves room for,
    so c starts at 60 and b, reserved when a starts, waits for c: 360. Two: b is reserved too,
    at 200 after a, and c (until 360 or later) would delay it: c waits for b's end, 300."""
    text = (
        nodes(4)
        + gang("r", 3, at=0, runs=100, estimate=100)
        + gang("a", 3, at=1, runs=100, estimate=100)
        + gang("b", 4, at=2, runs=100, estimate=100)
        + gang("c", 1, at=60, runs=300, estimate=300)
    )
    aging = "reserve:mode=easy:min-gpus=1e9:aging=10s:aging-factor=0:big-first=false"
    one, _ = run(tmp_path, text, (aging + ":max-aged=1", "allocate"))
    assert starts(one) == {"r": 0.0, "a": 100.0, "b": 360.0, "c": 60.0}
    two, _ = run(tmp_path, text, (aging + ":max-aged=2", "allocate"))
    assert starts(two) == {"r": 0.0, "a": 100.0, "b": 200.0, "c": 300.0}


def test_the_default_reserves_for_the_two_oldest_aged_gangs_of_a_queue(tmp_path: Path) -> None:
    """``phalanx``'s default (``max-aged=2``, aging max(1 h, 3 × the estimate)): r holds 3 of
    4 GPUs until 5000; a (3 GPUs) and b (4), estimated 1000 s, age at 3601 and 3602. Both are
    reserved, a at 5000 and b at 6000, so c (1 GPU, 4000-7000) would delay b and waits for b's
    end (7000). With one aged reservation c starts at 4000 beside a's, and b waits for c."""
    text = (
        nodes(4)
        + gang("r", 3, at=0, runs=5000, estimate=5000)
        + gang("a", 3, at=1, runs=1000, estimate=1000)
        + gang("b", 4, at=2, runs=1000, estimate=1000)
        + gang("c", 1, at=4000, runs=3000, estimate=3000)
    )
    default, _ = run(tmp_path, text, ("reserve", "allocate"))
    assert starts(default) == {"r": 0.0, "a": 5000.0, "b": 6000.0, "c": 7000.0}
    one, _ = run(tmp_path, text, ("reserve:max-aged=1", "allocate"))
    assert starts(one) == {"r": 0.0, "a": 5000.0, "b": 7000.0, "c": 4000.0}


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each plan of reservations is made (the book's clock)."""
    made: list[float] = []
    make = Book.plan

    def counted(book: Book) -> None:
        made.append(book.now)
        make(book)

    monkeypatch.setattr(Book, "plan", counted)
    return made


def test_a_gang_aging_behind_the_aged_reservations_makes_no_new_plan(
    tmp_path: Path, plans: list[float]
) -> None:
    """The default reserves for the two oldest aged gangs of a queue. r holds all 4 GPUs until
    10000; a, b, c and d (4 GPUs each, estimated 100 s) age at 3601-3604; e, older than all of
    them but estimated 2000 s, ages at 6000.5. Each aging wakes a cycle, but only a gang that
    lands among the two oldest aged (a, b, then e) changes the plan of reservations."""
    text = nodes(4) + gang("r", 4, at=0, runs=10000, estimate=10000)
    text += gang("e", 4, at=0.5, runs=100, estimate=2000)
    for i, name in enumerate("abcd"):
        text += gang(name, 4, at=i + 1, runs=100, estimate=100)
    result, _ = run(tmp_path, text, ("reserve", "allocate"))
    aging = [at for at in plans if 3600 < at < 10000]
    assert aging == [3601.0, 3602.0, 6000.5]
    assert starts(result) == dict(r=0.0, e=10000.0, a=10100.0, b=10200.0, c=10300.0, d=10400.0)


def test_the_first_gang_starts_on_a_stale_plan_without_planning_again(
    tmp_path: Path, plans: list[float]
) -> None:
    """6 GPUs; s holds 2 until 300, r holds 4 and ends at 50, before its estimate (100): the
    plan (a, 4 GPUs, reserved at 100; c, 4 GPUs, at 200) is stale. a ranks first, so no
    fresher plan could put a reservation ahead of it: it starts at 50 on the stale plan, and
    one plan follows its start (c now reserved at 150, when a ends). Before, the gate first
    made the stale plan again without a (its pods allocated, it looked started), and a's start
    then overdrew that plan: two plans."""
    text = nodes(6) + gang("r", 4, at=0, runs=50, estimate=100)
    text += gang("s", 2, at=0, runs=300, estimate=300)
    text += gang("a", 4, at=1, runs=100, estimate=100)
    text += gang("c", 4, at=2, runs=100, estimate=100)
    result, events = run(tmp_path, text, EASY)
    assert plans.count(50.0) == 1
    assert starts(result) == {"r": 0.0, "s": 0.0, "a": 50.0, "c": 150.0}
    told = [e["expected_start"] for e in events if e["type"] == "expect" and "/c" in e["gang"]]
    assert told == [200.0, 150.0]  # when it arrived, and after a started


def test_an_expected_start_names_every_gang_it_waits_for(tmp_path: Path) -> None:
    """h waits for three gangs that end together: "a, b and 1 more end" (it once said
    "a, b ends" and left the third out)."""
    text = nodes(6) + gang("h", 5, at=1, runs=50, estimate=50)
    for name in ("r1", "r2", "r3"):
        text += gang(name, 2, at=0, runs=100, estimate=100)
    _, events = run(tmp_path, text, EASY)
    said = {e["gang"]: e["message"] for e in events if e["type"] == "expect"}
    estimate = "(estimate: runtime-estimate)"
    assert said["default/h"].endswith(
        f"when default/r1 {estimate}, default/r2 {estimate} and 1 more end"
    )


def test_expected_starts_are_the_reservations(tmp_path: Path) -> None:
    result, events = run(tmp_path, SLURM_EXAMPLE, CONSERVATIVE)
    first = {g.name: g.expected_start_first for g in result.gangs}
    assert first["a"] == 100.0 and first["b"] == 200.0 and first["c"] == 300.0
    expect = [e for e in events if e["type"] == "expect" and e["gang"] == "default/b"]
    assert expect[0]["message"].startswith("reserved: n0..n3 (4 nodes) free at t=3m20s")
    assert "when default/a (reserved, estimate: runtime-estimate) ends" in expect[0]["message"]
    doc = result.to_json()
    assert doc["eta_error"] == {"mean": 0.0, "p90": 0.0, "gangs": 3, "unknown": 0}
    assert doc["max_wait"] == 297.0
    assert doc["max_wait_by_size"] == {"1": 297.0, "2-8": 198.0}


def test_an_overrun_moves_the_reservation_later_until_the_gang_really_ends(
    tmp_path: Path,
) -> None:
    text = (
        nodes(2)
        + gang("r", 2, at=0, runs=250, estimate=100)
        + gang("a", 2, at=1, runs=50, estimate=50)
    )
    result, events = run(tmp_path, text, EASY)
    moves = [e["expected_start"] for e in events if e["type"] == "expect"]
    # r overruns at 100: expected to end half its run so far later, re-checked each time
    assert moves == [100.0, 160.0, 240.0, 360.0]  # 100 + max(60 s, 50), 160 + 80, 240 + 120
    assert starts(result)["a"] == 250.0


def test_an_overrun_is_expected_to_run_as_long_as_its_shape_ran_beyond_it(
    tmp_path: Path,
) -> None:
    """One GPU; no hints, so estimates are learned (the median). a1..a5 run 100, 900, 1000,
    100, 100 s one after another: the median is 100. x (started 2200) is estimated 100 s and
    runs 950. When it overruns, the runtimes of its shape that went on longer than 100 s were
    900 and 1000: it is expected to run their median, 950, so y's reservation moves once, to
    x's real end, instead of by half x's time so far at each re-check (2360, 2440, ...)."""
    text = nodes(1)
    for i, runs in enumerate((100, 900, 1000, 100, 100)):
        text += gang(f"a{i + 1}", 1, at=i, runs=runs, estimate=None)
    text += gang("x", 1, at=5, runs=950, estimate=None)
    text += gang("y", 1, at=2250, runs=10, estimate=None)
    result, events = run(
        tmp_path, text, ("reserve:mode=easy:aging=off:min-gpus=0:quantile=0.5", "allocate")
    )
    told = [e["expected_start"] for e in events if e["type"] == "expect" and "/y" in e["gang"]]
    assert told == [2300.0, 3150.0]
    assert starts(result)["y"] == 3150.0


def test_a_gang_that_finishes_early_moves_the_reservation_earlier(tmp_path: Path) -> None:
    text = (
        nodes(2)
        + gang("r", 2, at=0, runs=40, estimate=100)
        + gang("a", 2, at=1, runs=50, estimate=50)
    )
    result, events = run(tmp_path, text, EASY)
    assert [e["expected_start"] for e in events if e["type"] == "expect"] == [100.0]
    assert starts(result)["a"] == 40.0
    assert result.to_json()["eta_error"]["mean"] == 60.0


def test_the_scheduler_never_sees_the_true_duration(tmp_path: Path) -> None:
    """Without any estimate the first gangs' ends are unknown; the expected start says so."""
    text = nodes(2) + gang("r", 2, at=0, runs=100, estimate=None)
    text += gang("a", 2, at=1, runs=50, estimate=None)
    _, events = run(tmp_path, text, EASY)
    (expect,) = [e for e in events if e["type"] == "expect"]
    assert expect["expected_start"] is None
    assert expect["message"].startswith("unknown: no estimate")
    assert "default/r (no estimate)" in expect["message"]


@pytest.mark.parametrize(("model", "first"), [("perfect", 100.0), ("none", None)])
def test_estimate_models_replace_what_the_manifests_say(
    tmp_path: Path, model: str, first: float | None
) -> None:
    text = (
        nodes(2) + gang("r", 2, at=0, runs=100, estimate=7) + gang("a", 2, at=1, runs=5, estimate=7)
    )
    result, _ = run(tmp_path, text, EASY, estimates=model)
    assert {g.name: g.expected_start_first for g in result.gangs}["a"] == first


def test_noisy_estimates_are_seeded_and_the_same_for_every_policy(tmp_path: Path) -> None:
    text = nodes(2) + gang("r", 2, at=0, runs=1000, estimate=None)
    text += gang("a", 2, at=1, runs=50, estimate=None)
    one, _ = run(tmp_path, text, EASY, estimates="noisy", seed=3)
    two, _ = run(tmp_path, text, CONSERVATIVE, estimates="noisy", seed=3)
    other, _ = run(tmp_path, text, EASY, estimates="noisy", seed=4)
    first = {g.name: g.expected_start_first for g in one.gangs}["a"]
    assert first == {g.name: g.expected_start_first for g in two.gangs}["a"]
    assert first != {g.name: g.expected_start_first for g in other.gangs}["a"]
    assert first is not None and first != 1000.0


#: No hints, so estimates are learned (the median). Two one-GPU nodes. l1..l3 (one GPU) run
#: 100 s each: the one-GPU shape learns 100 s. At 300 r (one GPU, estimated 100, runs 1000)
#: starts; at 301 a (two GPUs) waits for it, reserved at r's estimated end, 400; at 302 c (one
#: GPU, estimated 100) would end at 402, 2 s past that start.
LEARNED_DRAIN = (
    nodes(2)
    + "".join(gang(f"l{i}", 1, at=0, runs=100, estimate=None) for i in (1, 2, 3))
    + gang("r", 1, at=300, runs=1000, estimate=None)
    + gang("a", 2, at=301, runs=50, estimate=None)
    + gang("c", 1, at=302, runs=100, estimate=None)
)
LEARNED_EASY = "reserve:mode=easy:aging=off:min-gpus=0:quantile=0.5:pooled=false:big-first=false"


def test_relaxed_backfill_lets_a_gang_delay_a_learned_reservation_a_little(
    tmp_path: Path,
) -> None:
    """Strict EASY holds c's GPU idle for a's reservation (c would delay it by 2 s) while r
    overruns its learned estimate: the reservation moves to 460, then 540, when c at last
    ends in time (r's overrun grows by half its time run). With ``slack=0.25`` c may delay a
    start that rests on a learned estimate by a quarter of the time until it (24.5 s at 302)
    and runs at once."""
    strict, _ = run(tmp_path, LEARNED_DRAIN, (f"{LEARNED_EASY}:slack=0", "allocate"))
    assert starts(strict)["c"] == 540.0
    relaxed, _ = run(tmp_path, LEARNED_DRAIN, (f"{LEARNED_EASY}:slack=0.25", "allocate"))
    assert starts(relaxed)["c"] == 302.0
    assert starts(relaxed)["a"] == 1300.0  # r's real end: c ended long before


def test_relaxed_backfill_leaves_a_big_heads_reservation_strict(tmp_path: Path) -> None:
    """The same gangs with a ranked first as a big head (``big-first``, every head big at
    ``min-gpus=0``): its reservation is what keeps big gangs from starving, and the slack
    gives c nothing."""
    actions = (f"{LEARNED_EASY}:slack=0.25:big-first=true", "allocate")
    result, _ = run(tmp_path, LEARNED_DRAIN, actions)
    assert starts(result)["c"] == 540.0


def test_relaxed_backfill_leaves_reservations_on_hints_alone(tmp_path: Path) -> None:
    """The same gangs with runtime hints (r's 100 s too): a's start rests on no learned
    estimate, so the slack gives c nothing and it waits as under strict EASY (perfect and
    noisy estimates are hints: the slack never moves them)."""
    hinted = LEARNED_DRAIN.replace(
        "phalanx.dev/duration", "phalanx.dev/runtime-estimate: '100', phalanx.dev/duration"
    )
    result, _ = run(tmp_path, hinted, (f"{LEARNED_EASY}:slack=0.25", "allocate"))
    assert starts(result)["c"] == 540.0


def test_a_shape_not_learned_yet_gets_its_queues_learned_estimate(tmp_path: Path) -> None:
    """b (two GPUs) is the first of its shape: without ``pooled`` it has no estimate, holds
    both GPUs forever on the timeline, and d waiting behind it has no expected start; with
    it, b is expected to run the median of its queue's runtimes (100 s), and d is told 400."""
    text = (
        nodes(2)
        + "".join(gang(f"l{i}", 1, at=0, runs=100, estimate=None) for i in (1, 2, 3))
        + gang("b", 2, at=300, runs=500, estimate=None)
        + gang("d", 1, at=301, runs=10, estimate=None)
    )
    told = {}
    for pooled in ("false", "true"):
        actions = (f"reserve:mode=easy:aging=off:min-gpus=0:quantile=0.5:pooled={pooled}",)
        _, events = run(tmp_path, text, (*actions, "allocate"))
        expect = [e for e in events if e["type"] == "expect" and e["gang"] == "default/d"]
        told[pooled] = (expect[0]["expected_start"], expect[0]["message"])
    assert told["false"][0] is None
    assert told["true"][0] == 400.0
    assert "default/b (estimate: learned (queue))" in told["true"][1]


def test_a_big_gang_ranked_first_starts_at_the_floor_set_before_it_arrived(
    tmp_path: Path,
) -> None:
    """4 GPUs: ``long`` (1 GPU) runs 0-5000 and a stream of 1-GPU gangs (1000 s each, one
    every 333 s) keeps the other GPUs busy. The 4-GPU b arrives at 100, when ``long`` and s0
    run: its floor (``wait_floor``: the least wait what already ran left it) is 4900 s, until
    ``long`` ends. Reserved and ranked first, b starts there, the stream backfilling before;
    without reservations the stream keeps taking the GPUs one by one and b waits for its end
    (7660).
    On issue 12's ee9e8c trace the worst 33+-GPU wait is such a floor (benchmarks/README.md,
    "Session 10")."""
    text = (
        nodes(4)
        + gang("long", 1, at=0, runs=5000, estimate=5000)
        + "".join(gang(f"s{i}", 1, at=333 * i, runs=1000, estimate=1000) for i in range(21))
        + gang("b", 4, at=100, runs=100, estimate=100)
    )
    big = ("reserve:min-gpus=4", "allocate", "preempt", "reclaim")  # phalanx's rule, scaled
    for actions, start in ((big, 5000.0), (("allocate",), 7660.0)):
        result, _ = run(tmp_path, text, actions)
        b = next(g for g in result.gangs if g.name == "b")
        assert (b.start, wait_floor(b, result.gangs, result.gpu_capacity)) == (start, 4900.0)
