"""Seeded chaos against the running ``serve`` loop: the scheduler's promises hold under faults.

For each seed, :func:`make_plan` draws (with ``random.Random(seed)`` only) a small cluster, a
set of gangs and a fault schedule; the test runs :meth:`LiveScheduler.serve` while the schedule
plays, stops the faults, lets the scheduler settle and checks:

- no gang is left partially bound (bound members below ``minMember``, none started — pods
  never start here) once settled, nor at any time for longer than ``partial_bind_limit`` plus
  a margin (:data:`MAX_PARTIAL`, explained there), watched every :data:`POLL` seconds;
- no pod incarnation (uid) is bound twice: successful binds are counted where the server
  commits them (:class:`Ledger`);
- no node is over-committed (cpu and ``nvidia.com/gpu``), watched every :data:`POLL` seconds;
- every gang that can fit binds whole once the faults stop; a gang that can never fit never
  has a member bound, at any time; once settled, further cycles bind and delete nothing.

Faults: bind failures (500, 503, 504, 429, 409), binds that commit and still answer 504, slow
binds, watches dropped (closed or aborted), 410 Gone on the next watches, the pods watch down
for a while, undo DELETEs failing (500), bound pods deleted and re-created (a controller's bare
re-create: same name, new uid), pending pods re-created under a scheduler's decision (409 on
the uid precondition), gangs that finish (deleted) and one or two scheduler restarts: the
serving task cancelled in the middle of a gang's bind (one bind in flight or failing), sometimes
with the room taken while no scheduler runs, then a new :class:`LiveScheduler` with its own
client carries on from the API alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from apiserver import ApiFailure, FakeApiServer
from apiserver.harness import connected, eventually
from test_live_outage import DEBOUNCE, PERIOD
from test_live_restart import fresh, hog
from test_live_serve import NS, node, pod, podgroup

from phalanx.live.loop import LiveScheduler, RecoveryConfig

#: The seeds run; ``PHALANX_CHAOS_SEEDS="1 2 3"`` runs others (e.g. to search more widely).
#: 136 caught a failed undo retried after its gang was whole again (most runs, before 235ebaf).
SEEDS = [int(s) for s in os.environ.get("PHALANX_CHAOS_SEEDS", "11 23 37 59 136").split()]

#: How long the fault schedule plays (seconds); gangs arrive in its first 70 %.
CHAOS = 1.0
#: The partial-bind limit under test; quick retries and a short requeue backoff, so that a
#: gang undone several times still binds soon after the faults stop.
LIMIT = 0.3
RECOVERY = RecoveryConfig(
    partial_bind_limit=LIMIT, retry_delay=0.01, requeue_initial=0.05, requeue_max=0.2
)
#: The slowest a bind gets under the injected latency (seconds).
MAX_LATENCY = 0.1
#: The longest the pods watch is down at a time (seconds): the scheduler sees nothing new.
OUTAGE = 0.2
#: At most this many undo DELETEs fail (500), each retried at the start of the next cycle.
UNDO_FAILURES = 3
#: The longest a cycle takes: a gang's binds get up to LIMIT / 2 (each attempt has that
#: deadline), then one read-back, the undo and the rest of the cycle (generous: an idle cycle
#: here takes a few milliseconds).
CYCLE = LIMIT / 2 + MAX_LATENCY + 0.1
#: A restart: the wait for the bind to interrupt (up to 0.35 s, while the doomed instance holds
#: the gang partially bound), up to 60 ms with no scheduler, the new instance's lists.
RESTART = 0.5
#: At least this long from one restart to the next (seconds).
SPACING = 0.6
#: The longest a gang may be seen partially bound on the server. The promise is
#: ``partial_bind_limit`` from when the scheduler *sees* the gang so; from the server's side add
#: seeing it (the next cycle: up to PERIOD away, after a cycle in progress; later by a pods
#: watch outage), acting on it (the first cycle past the limit: the same again), the undo's
#: failed DELETEs (each retried a cycle later: twice PERIOD, generously) and one restart (the
#: killed instance's clock is lost; restarts are SPACING apart, so no episode spans two).
#: Observed: up to ~0.7 s (a restart with the room taken). The bound, 2.5 s, is loose on
#: purpose (a loaded 2-core machine): it is there to catch a gang left partially bound.
MAX_PARTIAL = LIMIT + 2 * (PERIOD + CYCLE) + UNDO_FAILURES * 2 * PERIOD + RESTART + OUTAGE
#: Poll the server's state this often for the continuous checks (seconds).
POLL = 0.02
#: The most one poll counts toward a partial episode (seconds). Scheduler, server and monitor
#: share one process: on a machine so loaded that the process is starved (a POLL sleep coming
#: back after 0.3 s, a whole run 10 times slower) all of them stall alike, and partial episodes
#: stretched by that stall are the machine's, not the scheduler's (observed: 2.6–3.9 s of wall
#: time on seed 23 at a load average of 14). So episodes are timed on the monitor's clock, which
#: advances by each poll's wall time up to MAX_TICK; on a machine that keeps up, a poll takes
#: about POLL and counts in full, and a gang left partially bound still fails the check (every
#: poll adds at least POLL).
MAX_TICK = 3 * POLL
#: Wait at most this long for the cluster to settle once the faults stop (seconds).
SETTLE = 8.0


@dataclass(frozen=True)
class Member:
    name: str
    gpus: int
    cpu: int


@dataclass(frozen=True)
class Gang:
    name: str
    min_member: int
    members: tuple[Member, ...]
    #: "fits": binds whole in the end; "never": cannot fit even in an empty cluster;
    #: "finishes": deleted (its job done) at ``until``, contending for room until then.
    kind: str
    #: when it is submitted (None: by a restart fault, which binds it and kills the scheduler)
    at: float | None
    until: float | None = None


@dataclass(frozen=True)
class Fault:
    at: float
    what: str
    #: what the fault needs, all drawn from the seed: status, times, targets, durations...
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    nodes: dict[str, int]  # name → GPUs (and twice as many cores)
    gangs: tuple[Gang, ...]
    faults: tuple[Fault, ...]

    def gang(self, name: str) -> Gang:
        return next(g for g in self.gangs if g.name == name)


def make_plan(seed: int) -> Plan:
    """Cluster, gangs and faults of ``seed``, from ``random.Random(seed)`` alone.

    The gangs that fit ("fits") take at most the cluster's GPUs minus one per node, so that
    whatever the scheduler placed before, a 1- or 2-GPU pod always finds a node: were none to
    fit it, each node would have at most 1 GPU free, N in all — fewer than the room left. A pod
    asks for at most 2 cores a GPU and a node has 2 cores a GPU, so GPUs decide. Gangs that
    finish and the hogs of a restart take the rest, only during the chaos.
    """
    rng = random.Random(seed)
    nodes = {f"node-{i}": rng.randint(2, 6) for i in range(rng.randint(3, 6))}
    capacity = sum(nodes.values())
    room = capacity - len(nodes)

    def members(name: str, size: int, gpus: Callable[[], int]) -> tuple[Member, ...]:
        return tuple(Member(f"{name}-{i}", gpus(), rng.randint(1, 2)) for i in range(size))

    def arrival(until: float) -> float:
        return round(rng.uniform(0, until) * CHAOS, 3)

    gangs: list[Gang] = []
    for _ in range(12):
        size = rng.randint(1, 6)
        name = f"fit{len(gangs)}"
        group = members(name, size, lambda: rng.randint(1, 2))
        need = sum(m.gpus for m in group)
        if need > room:
            continue
        room -= need
        low = rng.choice([size, size, rng.randint(1, size)])
        gangs.append(Gang(name, low, group, "fits", arrival(0.7)))
    for i in range(rng.randint(1, 2)):
        size = rng.randint(1, 6)
        at = arrival(0.3)
        until = round(at + rng.uniform(0.2, 0.6) * CHAOS, 3)
        group = members(f"done{i}", size, lambda: rng.randint(1, 2))
        gangs.append(Gang(f"done{i}", rng.randint(1, size), group, "finishes", at, until))
    # Never fits: a gang of 2-GPU pods bigger than the cluster (each pod alone fits), or pods
    # asking for more GPUs than any node has.
    if capacity < 12:
        gangs.append(Gang("never0", 6, members("never0", 6, lambda: 2), "never", arrival(0.5)))
    else:
        size = rng.randint(1, 4)
        group = members("never0", size, lambda: max(nodes.values()) + 1)
        gangs.append(Gang("never0", rng.randint(1, size), group, "never", arrival(0.5)))

    movable = [m.name for g in gangs if g.kind != "never" for m in g.members]
    faults: list[Fault] = []

    def at() -> float:
        return round(rng.uniform(0.05, 0.95) * CHAOS, 3)

    for _ in range(rng.randint(3, 5)):
        target = rng.choice(
            [r"/binding$", rf"/pods/{rng.choice(movable)}/binding$"]
            + [rf"/pods/{g.name}-\d+/binding$" for g in gangs if g.kind != "never"]
        )
        status = rng.choice([500, 503, 504, 429, 409])
        args = {"path": target, "status": status, "times": rng.randint(1, 4)}
        faults.append(Fault(at(), "fail-binds", args))
    for _ in range(rng.randint(1, 3)):
        faults.append(Fault(at(), "commit-then-504", {"pod": rng.choice(movable)}))
    for _ in range(rng.randint(1, 2)):
        args = {"seconds": rng.uniform(0.02, MAX_LATENCY), "lasts": rng.uniform(0.1, 0.3)}
        faults.append(Fault(at(), "slow-binds", args))
    for _ in range(rng.randint(1, 3)):
        faults.append(Fault(at(), "drop-watches", {"abort": rng.random() < 0.5}))
    for _ in range(rng.randint(1, 2)):
        faults.append(Fault(at(), "gone", {"times": rng.randint(1, 8)}))
    for _ in range(rng.randint(2, 5)):
        faults.append(Fault(at(), "delete-bound", {"pick": rng.random()}))
    faults.append(Fault(at(), "undo-fails", {"times": rng.randint(1, UNDO_FAILURES)}))
    for _ in range(rng.randint(0, 2)):
        faults.append(Fault(at(), "pods-watch-down", {"lasts": rng.uniform(0.05, OUTAGE)}))
    for _ in range(rng.randint(1, 2)):
        faults.append(Fault(at(), "recreate-pending", {"pick": rng.random()}))
    for gang in gangs:  # the scheduler's decision lands on a re-created pod: 409 (uid)
        if gang.at is not None and rng.random() < 0.3:
            args = {"pick": rng.random(), "gang": gang.name}
            faults.append(Fault(gang.at + 0.015, "recreate-pending", args))

    # One or two restarts, SPACING apart; each kills the scheduler while a gang that has not
    # arrived yet (at least two pods, minMember all of them) is bound but for one member, whose
    # bind is in flight or failing; sometimes the room left is taken while no scheduler runs
    # (the new instance must undo the gang).
    first = round(rng.uniform(0.1, 0.3) * CHAOS, 3)
    times = [first] + ([round(first + SPACING, 3)] if rng.random() < 0.5 else [])
    chosen = [g for g in gangs if g.kind == "fits" and len(g.members) >= 2]
    for moment in times:
        args: dict[str, Any] = {
            "gap": rng.uniform(0, 0.05),
            "stuck": rng.choice(["in-flight", "failing"]),
            "hogs": rng.uniform(0.2, 0.4) if rng.random() < 0.5 else None,
            "gang": None,
        }
        if chosen:
            gang = chosen.pop(rng.randrange(len(chosen)))
            size = len(gang.members)  # all or nothing: one member short is partial
            gangs[gangs.index(gang)] = Gang(gang.name, size, gang.members, "fits", None)
            args["gang"] = gang.name
        faults.append(Fault(moment, "restart", args))
    faults.sort(key=lambda f: f.at)
    return Plan(nodes, tuple(gangs), tuple(faults))


def member_pod(gang: Gang, member: Member) -> dict[str, Any]:
    obj = pod(member.name, group=gang.name, gpus=member.gpus)
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(member.cpu)
    obj["status"] = {"phase": "Pending"}  # what admission sets; nothing ever starts
    return obj


def requests(obj: dict[str, Any]) -> tuple[int, int]:
    """(GPUs, cores) a pod asks for (whole numbers here)."""
    wanted = obj["spec"]["containers"][0]["resources"]["requests"]
    return int(wanted.get("nvidia.com/gpu", 0)), int(wanted["cpu"])


def pods_now(server: FakeApiServer) -> dict[str, tuple[str, str | None]]:
    """Pod name → (uid, node): a bind or a delete (the controller re-creates) changes it."""
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], p["spec"].get("nodeName"))
        for p in server.objects("v1", "pods")
    }


def pick(items: list[str], fraction: float) -> str | None:
    return sorted(items)[int(fraction * len(items))] if items else None


class Ledger:
    """Successful binds per pod uid, counted where the server commits them; the pods named in
    ``late`` have their next bind commit and still answer 504 (the answer timed out)."""

    def __init__(self, server: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commits: Counter[str] = Counter()  # uid → successful binds
        self.names: dict[str, str] = {}  # uid → pod name
        self.outcomes: Counter[str] = Counter()
        self.late: set[str] = set()
        commit = server.store.bind

        def bind(namespace: str, name: str | None, binding: Any) -> Any:
            name = name or binding["metadata"]["name"]
            try:
                result = commit(namespace, name, binding)
            except ApiFailure as failure:
                self.outcomes[f"{failure.code} {failure.reason}"] += 1
                raise
            stored = server.get("v1", "pods", name, namespace)
            assert stored is not None
            uid = stored["metadata"]["uid"]
            self.commits[uid] += 1
            self.names[uid] = name
            self.outcomes["bound"] += 1
            if name in self.late:
                self.late.discard(name)
                self.outcomes["bound, answered 504"] += 1
                raise ApiFailure(504, "Timeout", "the bind was written, the answer timed out")
            return result

        monkeypatch.setattr(server.store, "bind", bind)


class Monitor:
    """The continuous checks, on the server's state every :data:`POLL` seconds."""

    def __init__(self, server: FakeApiServer, plan: Plan) -> None:
        self.server = server
        self.plan = plan
        self.violations: set[str] = set()
        self.since: dict[str, float] = {}  # gang → start of its current partial episode
        self.longest = 0.0  # the longest partial episode seen (seconds, monitor clock)
        self.clock = 0.0  # the monitor's clock (see MAX_TICK)
        self.stalled = 0.0  # wall time not counted on it (seconds): the machine's stalls
        self.last: float | None = None

    def bound(self) -> dict[str, dict[str, Any]]:
        """Pod name → pod, of the bound pods."""
        return {
            p["metadata"]["name"]: p
            for p in self.server.objects("v1", "pods")
            if (p.get("spec") or {}).get("nodeName")
        }

    def unsettled(self) -> list[str]:
        """The gangs that fit not bound whole, the others with members bound."""
        bound = self.bound()
        out = []
        for gang in self.plan.gangs:
            count = sum(m.name in bound for m in gang.members)
            if count != (len(gang.members) if gang.kind == "fits" else 0):
                out.append(f"{gang.name} ({gang.kind}): {count} of {len(gang.members)} bound")
        return out

    def tick(self) -> float:
        """The monitor's clock now (see :data:`MAX_TICK`)."""
        wall = time.monotonic()
        if self.last is not None:
            step = wall - self.last
            self.clock += min(step, MAX_TICK)
            self.stalled += max(0.0, step - MAX_TICK)
        self.last = wall
        return self.clock

    def check(self) -> None:
        now = self.tick()
        bound = self.bound()
        for gang in self.plan.gangs:
            count = sum(m.name in bound for m in gang.members)
            if gang.kind == "never" and count:
                self.violations.add(f"{gang.name} can never fit, yet {count} members are bound")
            if 0 < count < gang.min_member:
                since = self.since.setdefault(gang.name, now)
                self.longest = max(self.longest, now - since)
                if now - since > MAX_PARTIAL:
                    self.violations.add(
                        f"{gang.name} partially bound ({count} of min {gang.min_member}) "
                        f"for over {MAX_PARTIAL:.2f} s"
                    )
            else:
                self.since.pop(gang.name, None)
        used: dict[str, list[int]] = {where: [0, 0] for where in self.plan.nodes}
        for obj in bound.values():
            gpus, cpu = requests(obj)
            used[obj["spec"]["nodeName"]][0] += gpus
            used[obj["spec"]["nodeName"]][1] += cpu
        for where, allocatable in self.plan.nodes.items():
            gpus, cpu = used[where]
            if gpus > allocatable or cpu > 2 * allocatable:
                pods = sorted(n for n, p in bound.items() if p["spec"]["nodeName"] == where)
                self.violations.add(
                    f"{where} over-committed: {gpus}/{allocatable} GPUs, "
                    f"{cpu}/{2 * allocatable} cores: {pods}"
                )

    async def run(self) -> None:
        while True:
            self.check()
            await asyncio.sleep(POLL)


class Life:
    """One scheduler process: its own client (``fresh``), scheduler and ``serve`` task."""

    def __init__(self, server: FakeApiServer) -> None:
        self.server = server
        self.stack = contextlib.AsyncExitStack()
        self.stop = asyncio.Event()
        self.scheduler: LiveScheduler | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Life:
        self.scheduler = await self.stack.enter_async_context(fresh(self.server, RECOVERY))
        self.task = asyncio.create_task(
            self.scheduler.serve(self.stop, period=PERIOD, debounce=DEBOUNCE)
        )
        return self

    async def kill(self) -> None:
        """As a killed process stops: no retry, no undo; its connections close."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.stack.aclose()

    async def shutdown(self) -> None:
        assert self.task is not None
        self.stop.set()
        await asyncio.wait_for(self.task, 5.0)
        await self.stack.aclose()


class Chaos:
    """Plays a plan: gangs arrive, their controller re-creates deleted pods, faults fire."""

    def __init__(self, server: FakeApiServer, plan: Plan, ledger: Ledger) -> None:
        self.server = server
        self.plan = plan
        self.ledger = ledger
        self.submitted: set[str] = set()
        self.finished: set[str] = set()
        self.hogs: list[str] = []
        self.life: Life | None = None
        self.recovered: list[str] = []  # gangs undone, by every scheduler instance
        self.restarts: list[str] = []  # what each restart interrupted
        self.restarted = -SPACING  # loop time of the last restart

    # -- the workload and its controller ----------------------------------------------------
    def submit(self, gang: Gang) -> None:
        group = podgroup(gang.name, gang.min_member)
        self.server.put(group["apiVersion"], "podgroups", group)
        self.submitted.add(gang.name)
        self.controller()

    def controller(self) -> None:
        """Create the missing pods of the submitted gangs (a Job controller's re-create)."""
        for gang in self.plan.gangs:
            if gang.name not in self.submitted or gang.name in self.finished:
                continue
            for member in gang.members:
                if self.server.get("v1", "pods", member.name, NS) is None:
                    self.server.put("v1", "pods", member_pod(gang, member))

    async def control(self) -> None:
        while True:
            self.controller()
            await asyncio.sleep(0.01)

    def remove(self, name: str) -> None:
        if self.server.get("v1", "pods", name, NS) is not None:
            self.server.remove("v1", "pods", name, NS)

    def finish(self, gang: Gang) -> None:
        self.finished.add(gang.name)
        for member in gang.members:
            self.remove(member.name)

    def pods(self, *, bound: bool, gang: str | None = None) -> list[str]:
        """Names of the plan's pods, bound or pending (of ``gang`` only, if given)."""
        names = {m.name: g for g in self.plan.gangs for m in g.members}
        return [
            name
            for p in self.server.objects("v1", "pods")
            if (name := p["metadata"]["name"]) in names
            and bool(p["spec"].get("nodeName")) == bound
            and names[name].kind != "never"
            and (gang is None or names[name].name == gang)
        ]

    # -- faults -------------------------------------------------------------------------------
    async def fire(self, fault: Fault) -> None:
        server, args = self.server, fault.args
        if fault.what == "fail-binds":
            server.fail("POST", args["path"], args["status"], times=args["times"])
        elif fault.what == "commit-then-504":
            self.ledger.late.add(args["pod"])
        elif fault.what == "slow-binds":
            rule = server.add_latency(args["seconds"], "POST", r"/binding$")
            asyncio.get_running_loop().call_later(args["lasts"], self.drop_latency, rule)
        elif fault.what == "drop-watches":
            server.drop_watches(abort=args["abort"])
        elif fault.what == "gone":
            server.force_gone(times=args["times"])
            server.drop_watches()
        elif fault.what == "undo-fails":
            server.fail("DELETE", r"/pods/", 500, times=args["times"])
        elif fault.what == "pods-watch-down":  # the pods informer stands still meanwhile
            down = server.fail("GET", r"^/api/v1/pods$", 503, watch=True, times=1_000_000)
            server.drop_watches()
            asyncio.get_running_loop().call_later(args["lasts"], self.end_fault, down)
        elif fault.what == "delete-bound":
            target = pick(self.pods(bound=True), args["pick"])
            if target:
                self.remove(target)
        elif fault.what == "recreate-pending":
            target = pick(self.pods(bound=False, gang=args.get("gang")), args["pick"])
            if target:
                self.remove(target)
                self.controller()
        elif fault.what == "restart":
            await self.restart(args)
        else:  # pragma: no cover
            raise AssertionError(fault.what)

    def end_fault(self, rule: Any) -> None:
        if rule in self.server.faults:
            self.server.faults.remove(rule)

    def drop_latency(self, rule: Any) -> None:
        if rule in self.server.latency:
            self.server.latency.remove(rule)

    async def restart(self, args: dict[str, Any]) -> None:
        """Kill the scheduler in the middle of a gang's bind, then start a new one."""
        assert self.life is not None and self.life.scheduler is not None
        server = self.server
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self.restarted + SPACING - loop.time()))
        what = "nothing"
        if args["gang"] is not None:
            gang = self.plan.gang(args["gang"])
            *others, last = (m.name for m in gang.members)
            path = rf"/pods/{last}/binding$"
            if args["stuck"] == "in-flight":  # dies with the connection
                stuck: Any = server.add_latency(5.0, "POST", path)
            else:  # the scheduler waits to retry it
                stuck = server.fail("POST", path, 500, times=1_000_000)
            self.submit(gang)
            with contextlib.suppress(AssertionError):  # no room, or in backoff: kill anyway
                await eventually(lambda: server.count("POST", path) >= 1, timeout=0.3)
                await eventually(lambda: set(others) <= set(self.pods(bound=True)), timeout=0.05)
            what = f"{gang.name}: {len(set(others) & set(self.pods(bound=True)))} bound"
        self.recovered += self.life.scheduler.recovered
        await self.life.kill()
        if args["gang"] is not None:
            self.drop_latency(stuck)
            self.end_fault(stuck)
        # No scheduler runs (the server has seen the killed one's connections close).
        await asyncio.sleep(0.01 + args["gap"])
        if args["hogs"] is not None:  # someone else takes the room left
            self.take_the_room(args["hogs"])
            what += ", room taken"
        self.restarts.append(what)
        self.life = await Life(server).start()
        self.restarted = loop.time()

    def take_the_room(self, lasts: float) -> None:
        bound = [p for p in self.server.objects("v1", "pods") if p["spec"].get("nodeName")]
        for where, allocatable in self.plan.nodes.items():
            free = allocatable - sum(
                requests(p)[0] for p in bound if p["spec"]["nodeName"] == where
            )
            if free > 0:
                self.server.put("v1", "pods", hog(f"hog-{where}", where, free))
                self.hogs.append(f"hog-{where}")
        asyncio.get_running_loop().call_later(lasts, self.release)

    def release(self) -> None:
        for name in self.hogs:
            self.remove(name)
        self.hogs.clear()

    async def play(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        timeline: list[tuple[float, int, Any]] = []
        for gang in self.plan.gangs:
            if gang.at is not None:
                timeline.append((gang.at, 0, gang))
            if gang.until is not None:
                timeline.append((gang.until, 1, gang))
        timeline += [(f.at, 2, f) for f in self.plan.faults]
        timeline.sort(key=lambda item: (item[0], item[1]))
        for moment, kind, item in timeline:
            await asyncio.sleep(max(0.0, start + moment - loop.time()))
            if kind == 0:
                self.submit(item)
            elif kind == 1:
                self.finish(item)
            else:
                await self.fire(item)
        await asyncio.sleep(max(0.0, start + CHAOS - loop.time()))

    def calm(self) -> None:
        """The faults stop."""
        self.server.clear_faults()
        self.server.clear_latency()
        self.ledger.late.clear()
        self.release()


@pytest.mark.parametrize("seed", SEEDS)
async def test_under_chaos_gangs_bind_whole_once_and_never_over_a_node(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(seed)
    async with connected() as (server, _client):
        for name, gpus in plan.nodes.items():
            server.put("v1", "nodes", node(name, gpus=gpus, cpu=str(2 * gpus)))
        ledger = Ledger(server, monkeypatch)
        chaos = Chaos(server, plan, ledger)
        monitor = Monitor(server, plan)
        chaos.life = await Life(server).start()
        helpers = [asyncio.create_task(chaos.control()), asyncio.create_task(monitor.run())]

        def summary() -> str:
            return (
                f"seed {seed}: violations {sorted(monitor.violations)}, longest partial "
                f"{monitor.longest:.2f} s (stalls not counted: {monitor.stalled:.2f} s), "
                f"restarts {chaos.restarts}, undone {chaos.recovered}, "
                f"binds {dict(ledger.outcomes)}"
            )

        try:
            await chaos.play()
            chaos.calm()
            try:
                await eventually(lambda: not monitor.unsettled(), timeout=SETTLE)
            except AssertionError:
                raise AssertionError(f"not settled: {monitor.unsettled()}; {summary()}") from None
            # Settled for good: more cycles bind and delete nothing.
            scheduler = chaos.life.scheduler
            assert scheduler is not None
            before = pods_now(server)
            cycles = scheduler.cycles
            await eventually(lambda: scheduler.cycles >= cycles + 3, what="cycles after")
            assert pods_now(server) == before, f"pods changed after settling; {summary()}"
            assert monitor.unsettled() == [], summary()
            assert scheduler.undo_pending == {}, summary()
            monitor.check()
            chaos.recovered += scheduler.recovered
        finally:
            for task in helpers:
                task.cancel()
            await chaos.life.shutdown()
        assert monitor.violations == set(), summary()
        assert [uid for uid, n in ledger.commits.items() if n > 1] == [], summary()
        never = {m.name for g in plan.gangs if g.kind == "never" for m in g.members}
        assert set(ledger.names.values()) & never == set(), summary()
