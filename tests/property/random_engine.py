"""A seeded random driver over the engine: many operations, invariants checked after each.

Design: an :class:`EngineDriver` owns one ``ClusterState`` and one ``Scheduler`` and applies
random operations to them the way a backend does — add nodes, gangs and lone pods, remove
pending pods, run a cycle and carry it out through the shared applier
(``framework.backend.apply`` with a ``MemoryBackend``), finish running gangs, evict a whole
gang, delete one bound pod, jump the clock past scheduling timeouts, and open a Session whose
Statement makes random allocate/pipeline/evict moves and is then discarded. It uses only the
engine's public API. Each operation is counted (:attr:`EngineDriver.counts`).

Invariants (:meth:`EngineDriver.check`, after every operation):

- **no partial gang**: a gang scheduled by a gang policy has no bound member or at least
  ``minMember`` and every role minimum (unless the driver itself deleted one of its bound pods);
  within a cycle, binds complete a quorum;
- **no over-commit**: ``requested <= allocatable`` on every node and resource, and
  ``requested`` is exactly the sum of the requests of the pods that hold each node;
- **GPU devices**: every device between 0 and a whole GPU free, and the used share of a node's
  devices equals its requested GPU;
- **discard restores exactly**: a discarded Statement leaves table, pods and gangs as before;
- **a cycle changes nothing until applied**: between a cycle and the applier the state's
  :func:`footprint` (its fingerprint, every gang's and pod's history fields, the Permit
  waiters, held room and assumed binds) is as before the cycle, under every policy (see
  :func:`check_untouched` for the housekeeping a session may do when it opens);
- **same seed, same decisions**: :func:`decisions` of one seed twice are equal;
- **incremental equals rebuilt**: every ``rebuild_every`` operations the functions of
  :data:`REBUILD_CHECKS` run; :func:`check_rebuilt` builds a state from scratch from the same
  node, gang and pod specs and compares ``ClusterState.fingerprint``. New incremental
  operations (node update/removal, pod spec updates) belong in ``OPERATIONS``, kept under
  this check.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec
from phalanx.cluster import devices
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
from phalanx.framework.backend import MemoryBackend, apply
from phalanx.framework.session import Session
from phalanx.policies import Scheduler, get_policy

GPU = "nvidia.com/gpu"
API = "scheduling.x-k8s.io"
GiB = 2**30
#: Policies that place gangs all or nothing (the partial-gang invariant applies to them).
GANG_POLICIES = ("phalanx", "volcano")
POLICIES = ("phalanx", "volcano", "coscheduling", "kube-default")
#: Waiting gangs at most; an add beyond it removes one instead.
MAX_WAITING = 8
MAX_NODES = 10
HOLDING = (PodStatus.BOUND, PodStatus.RESERVED, PodStatus.RELEASING)
BOUND_LIKE = (PodStatus.BOUND, PodStatus.SUCCEEDED)

#: Every operation any driver of this process executed, by kind (reported by conftest.py).
TOTAL: Counter[str] = Counter()
#: Called with the driver every ``rebuild_every`` operations (see the module docstring).
REBUILD_CHECKS: list[Callable[[EngineDriver], None]] = []


class EngineDriver:
    def __init__(self, seed: int, policy: str = "phalanx", *, rebuild_every: int = 50) -> None:
        self.rng = random.Random(seed)
        self.policy = policy
        self.scheduler = Scheduler(get_policy(policy), seed=seed)
        self.node_specs = [self._node(i) for i in range(self.rng.randint(1, 6))]
        self.state = ClusterState(self.node_specs, ResourceIndex())
        self.now = 0.0
        self.serial = 0
        self.rebuild_every = rebuild_every
        self.counts: Counter[str] = Counter()
        self.decisions: list[tuple[str, ...]] = []
        self.degraded: set[str] = set()  # gangs a bound member of which the driver deleted
        self.specs: dict[str, GangSpec] = {}

    # -- objects ---------------------------------------------------------------------------
    def _node(self, i: int) -> NodeSpec:
        r = self.rng
        allocatable = {
            "cpu": r.choice([2000, 8000, 32000]),
            "memory": r.choice([16, 64, 256]) * GiB,
            "pods": r.choice([3, 8, 110]),
            GPU: 1000 * r.choice([0, 1, 2, 4, 8]),
        }
        return NodeSpec(f"n{i}", allocatable, unschedulable=r.random() < 0.1)

    def add_node(self) -> None:
        """A node joins the cluster (its resource names may be new to the index)."""
        if len(self.node_specs) < MAX_NODES:
            spec = self._node(len(self.node_specs))
            self.node_specs.append(spec)
            self.state.add_node(spec)
            self.counts["add node"] += 1

    def _name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def _requests(self) -> dict[str, int]:
        r = self.rng
        return {
            "cpu": r.choice([100, 1000, 4000]),
            "memory": r.choice([0, 1, 8]) * GiB,
            GPU: r.choice([0, 0, 250, 500, 1000, 2000, 4000]),
            "pods": 1,
        }

    def add_gang(self) -> None:
        if len(self.state.waiting) >= MAX_WAITING:  # keep the queue short: cycles stay cheap
            self.remove_gang()
            return
        r = self.rng
        name = self._name("g")
        size = r.randint(1, 6)
        roles = size >= 2 and r.random() < 0.3
        minimums = {"launcher": 1, "worker": r.randint(0, size - 1)} if roles else {}
        timeout = r.choice([None, None, None, 5.0, 30.0])
        spec = GangSpec(
            "ns",
            name,
            r.randint(1, size),
            API,
            role_minimums=minimums,
            priority=r.randint(0, 2),
            timeout_seconds=timeout,
        )
        self.specs[spec.key] = spec
        shape = self._requests()
        pods = []
        for i in range(size):
            role = ("launcher" if i == 0 else "worker") if roles else ""
            requests = {"cpu": 500, "pods": 1} if role == "launcher" else shape
            pods.append(PodSpec("ns", f"{name}-{i}", requests, gang=GangRef(name, API), role=role))
        first = r.random() < 0.5
        if first:
            self.state.add_gang(spec, self.now)
        for pod in pods:
            self.state.add_pod(pod, self.now)
            self.counts["add pod"] += 1
        if not first:
            self.state.add_gang(spec, self.now)
        self.counts["add gang"] += 1

    def add_lone_pod(self) -> None:
        if len(self.state.waiting) >= MAX_WAITING:
            self.remove_pending()
            return
        self.state.add_pod(PodSpec("ns", self._name("lone"), self._requests()), self.now)
        self.counts["add pod"] += 1

    def remove_gang(self) -> None:
        """A waiting gang deleted: its pending pods go (bound ones, if any, keep running)."""
        waiting = sorted(self.state.waiting)
        if waiting:
            gang = self.state.waiting[self.rng.choice(waiting)]
            for pod in gang.pending():
                self.state.remove_pod(pod.key)
                self.counts["remove"] += 1

    def remove_pending(self) -> None:
        pending = [p for p in self.state.pods.values() if p.status is PodStatus.PENDING]
        if pending:
            self.state.remove_pod(self.rng.choice(sorted(pending, key=_key)).key)
            self.counts["remove"] += 1

    # -- cycles and what the backend does with them -----------------------------------------
    def cycle(self, dt: float | None = None) -> None:
        self.now += self.rng.choice([0.5, 1.0, 3.0]) if dt is None else dt
        before = {g.ident: _bound(g) for g in self.state.gangs.values()}
        untouched = footprint(self.state)
        result = self.scheduler.cycle(self.state, self.now)
        check_untouched(untouched, footprint(self.state))
        self.counts["cycle"] += 1
        keys = [pod.key for pod, _ in result.binds]
        assert len(keys) == len(set(keys)), "a pod bound twice in one cycle"
        held = {hold.gang for hold in result.holds}
        for pod in result.evictions:  # preempt/reclaim: only for a preemptor planned whole
            assert result.disruptions[pod.key][1] in held, f"{pod.key} evicted for no hold"
        for pod, node in result.binds:
            assert pod.status in (PodStatus.PENDING, PodStatus.RESERVED), pod.key
            assert pod.status is PodStatus.PENDING or pod.node == node
        apply(result, self.state, MemoryBackend(self.state, self.now))  # the shared applier
        for pod in result.evictions:  # gone at once, re-created pending by its controller
            self.state.remove_pod(pod.key)
            self.state.add_pod(pod.spec, self.now)
            self.counts["evict"] += 1
        self.counts["bind"] += len(result.binds)
        for gang in result.timeouts:
            assert gang.timed_out
            self.counts["timeout"] += 1
        if self.policy in GANG_POLICIES:
            for ident in {pod.gang.ident for pod, _ in result.binds}:
                gang = self.state.gangs[ident]
                assert _bound(gang) >= min(gang.min_member, len(gang.members)) or ident in (
                    self.degraded
                ), f"{ident}: bound {before.get(ident)} → {_bound(gang)} < {gang.min_member}"
        self.decisions.append(
            (f"{self.now:g}", *sorted(f"{p.key}@{n}:{p.gpus}" for p, n in result.binds))
        )

    def finish_gang(self) -> None:
        running = self._running()
        if running:
            gang = self.rng.choice(running)
            for pod in list(gang.members):
                if pod.status is PodStatus.BOUND:
                    self.state.release(pod)
            self.counts["finish"] += 1

    def evict_gang(self) -> None:
        """A whole gang evicted (as preemption would): every bound member deleted."""
        running = self._running()
        if running:
            gang = self.rng.choice(running)
            for pod in list(gang.members):
                if pod.status in HOLDING:
                    self.state.evict(pod)  # releasing: still holds its node
                    self.state.remove_pod(pod.key)  # then gone
                    self.counts["evict"] += 1

    def delete_bound_pod(self) -> None:
        """One bound pod deleted under a running gang (a node drain, a user): the gang is left
        below quorum by the cluster, not by the scheduler."""
        bound = sorted(
            (p for p in self.state.pods.values() if p.status is PodStatus.BOUND), key=_key
        )
        if bound:
            pod = self.rng.choice(bound)
            if not pod.gang.implicit:
                self.degraded.add(pod.gang.ident)
            self.state.remove_pod(pod.key)
            self.counts["delete bound"] += 1

    def timeout_jump(self) -> None:
        """Jump the clock past every scheduling timeout, then cycle."""
        self.cycle(dt=60.0)

    def _running(self) -> list[GangInfo]:
        return sorted(
            (
                g
                for g in self.state.gangs.values()
                if not g.implicit and any(p.status is PodStatus.BOUND for p in g.members)
            ),
            key=lambda g: g.ident,
        )

    # -- statements -------------------------------------------------------------------------
    def statement_roundtrip(self) -> None:
        policy = get_policy(self.policy)
        session = Session(
            self.state,
            policy.plugins(),
            now=self.now,
            rng=np.random.default_rng(self.rng.randrange(2**32)),
            config=policy.config,
        )
        before = session_snapshot(session)
        stmt = session.statement()
        pods = sorted(self.state.pods.values(), key=_key)
        for _ in range(self.rng.randint(1, 12)):
            kind = self.rng.choice(["allocate", "allocate", "pipeline", "evict"])
            if kind == "evict":
                victims = [p for p in pods if p.status in (PodStatus.ALLOCATED, PodStatus.BOUND)]
                if victims:
                    stmt.evict(self.rng.choice(victims))
                    self.counts["statement op"] += 1
                continue
            pending = [p for p in pods if p.status is PodStatus.PENDING and not p.invalid]
            if not pending:
                continue
            pod = self.rng.choice(pending)
            if kind == "allocate":
                nodes = np.flatnonzero(session.feasible(pod)).tolist()
                if nodes:
                    stmt.allocate(pod, self.rng.choice(nodes))
                    self.counts["statement op"] += 1
            else:
                stmt.pipeline(pod, self.rng.randrange(len(session.table)))
                self.counts["statement op"] += 1
        assert (session.table.requested <= session.table.allocatable).all()
        stmt.discard()
        session.close()
        after = session_snapshot(session)
        assert _equal(before, after), "discard did not restore the session exactly"
        self.counts["discard"] += 1

    # -- the loop ---------------------------------------------------------------------------
    OPERATIONS: tuple[tuple[str, int], ...] = (
        ("add_gang", 14),
        ("add_lone_pod", 6),
        ("remove_pending", 4),
        ("cycle", 22),
        ("finish_gang", 10),
        ("evict_gang", 4),
        ("delete_bound_pod", 2),
        ("timeout_jump", 2),
        ("statement_roundtrip", 6),
        ("add_node", 1),
    )

    def run(self, steps: int) -> None:
        names = [name for name, _ in self.OPERATIONS]
        weights = [weight for _, weight in self.OPERATIONS]
        before = Counter(self.counts)
        try:
            for step in range(1, steps + 1):
                getattr(self, self.rng.choices(names, weights)[0])()
                self.check()
                if step % self.rebuild_every == 0:
                    for extra in REBUILD_CHECKS:
                        extra(self)
        finally:
            TOTAL.update(self.counts - before)

    @property
    def operations(self) -> int:
        return sum(self.counts.values())

    # -- invariants -------------------------------------------------------------------------
    def check(self) -> None:
        table = self.state.table
        assert (table.requested <= table.allocatable).all(), "over-commit"
        assert (table.requested >= 0).all()
        expected = np.zeros_like(table.requested)
        for pod in self.state.pods.values():
            if pod.status in HOLDING:
                expected[pod.node] += pod.request
            else:
                assert pod.status is not PodStatus.ALLOCATED, f"{pod.key} allocated outside"
                assert not pod.gpus or pod.status is not PodStatus.PENDING, pod.key
        assert np.array_equal(table.requested, expected), "requested != sum of holders"
        free = table.gpu_free
        assert ((free >= 0) & (free <= devices.WHOLE)).all(), "a GPU device out of range"
        whole = table.allocatable[:, table.gpu_col] // devices.WHOLE
        used = whole * devices.WHOLE - free.sum(axis=1)
        assert np.array_equal(used, table.requested[:, table.gpu_col]), "GPU devices drift"
        if self.policy in GANG_POLICIES:
            for gang in self.state.gangs.values():
                if gang.implicit or gang.ident in self.degraded:
                    continue
                bound = [p for p in gang.members if p.status in BOUND_LIKE]
                if not bound or gang.invalid:
                    continue
                assert len(bound) >= gang.min_member, f"{gang.ident}: partial gang"
                roles = Counter(p.spec.role for p in bound)
                for role, need in gang.role_minimums.items():
                    assert roles[role] >= need, f"{gang.ident}: role {role} below minimum"


def _key(pod: PodInfo) -> str:
    return pod.key


def footprint(state: ClusterState) -> dict[str, Any]:
    """Everything of ``state`` a cycle may change only through its result: the fingerprint
    (node usage and devices, pods' status, node and devices, gangs' counts), every gang's
    condition, timeout, backoff, attempt, Permit deadline and expected start, every pod's
    backoff, unschedulable mark and eviction reason, the gangs waiting at Permit, the room
    held for preemptors and the binds not yet confirmed."""
    gangs = {
        ident: (
            g.condition,
            g.timed_out,
            g.failures,
            g.backoff_until,
            g.attempted,
            g.permit_deadline,
            g.expected_start,
            g.expected_reason,
            g.invalid,
        )
        for ident, g in state.gangs.items()
    }
    pods = {
        key: (p.failures, p.backoff_until, p.blocked_at, p.evicted_for, p.bound_at)
        for key, p in state.pods.items()
    }
    holds = state.queues.holds
    return {
        "fingerprint": state.fingerprint(),
        "gangs": gangs,
        "pods": pods,
        "permits": list(state.permits),
        "holds": {g: (h.since, h.victims, tuple(sorted(h.pods.items()))) for g, h in holds.items()},
        "assumed": dict(state.assumed),
        "version": state.version,
        "freed": state.freed,
        "pipelined": state.table.pipelined.tolist(),
        "releasing": state.table.releasing.tolist(),
    }


def check_untouched(before: dict[str, Any], after: dict[str, Any]) -> None:
    """``after`` (the footprint once a cycle ran, its result not applied) equals ``before``,
    but for the housekeeping the queues plugin does when a session opens: holds whose gang
    went, is placed or waited too long are dropped (whichever cycle looks next drops them),
    and ``freed`` moves when queues become active (every parked gang is woken: more work,
    never a different decision)."""
    changed = [k for k in before if k not in ("holds", "freed") and before[k] != after[k]]
    assert not changed, f"a cycle changed the state before apply: {changed}"
    assert after["holds"].items() <= before["holds"].items(), "a cycle added or changed a hold"
    assert after["freed"] - before["freed"] in (0, 1)


def _bound(gang: GangInfo) -> int:
    return sum(p.status in BOUND_LIKE for p in gang.members)


def session_snapshot(session: Session) -> dict[str, Any]:
    state = session.state
    return {
        "requested": session.table.requested.copy(),
        "releasing": session.table.releasing.copy(),
        "pipelined": session.table.pipelined.copy(),
        "gpu_free": session.table.gpu_free.copy(),
        "pods": {k: (p.status, p.node, p.gpus) for k, p in state.pods.items()},
        "gangs": {
            i: (g.placed, g.pipelined, Counter(g.placed_by_role)) for i, g in state.gangs.items()
        },
    }


def _equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    arrays = ("requested", "releasing", "pipelined", "gpu_free")
    return all(np.array_equal(a[k], b[k]) for k in arrays) and all(
        a[k] == b[k] for k in ("pods", "gangs")
    )


def check_rebuilt(driver: EngineDriver) -> None:
    """A state rebuilt from scratch from the same objects equals the live, incrementally
    changed one (``ClusterState.fingerprint``: every node's usage and free GPU devices, every
    pod's status, node and devices, every gang's counts). Bound pods are added bound on the
    devices the live state chose."""
    live = driver.state
    fresh = ClusterState(driver.node_specs, ResourceIndex())
    for gang in live.gangs.values():
        if not gang.implicit and gang.key in driver.specs:
            fresh.add_gang(driver.specs[gang.key], gang.created)
    for pod in sorted(live.pods.values(), key=lambda p: p.seq):
        if pod.status in (PodStatus.BOUND, PodStatus.SUCCEEDED):  # a finished pod ran there
            node = fresh.node_index(live.table.names[pod.node])
            assert node is not None
            gpus = pod.gpus if pod.status is PodStatus.BOUND else None
            copy = fresh.add_bound_pod(pod.spec, node, pod.bound_at or 0.0, gpus)
            if pod.status is PodStatus.SUCCEEDED:
                fresh.release(copy, pod.status)
            continue
        copy = fresh.add_pod(pod.spec, pod.created)
        if pod.status is PodStatus.RESERVED:
            copy.node, copy.gpus = pod.node, pod.gpus
            copy.gang.move(copy, PodStatus.ALLOCATED)
            fresh.reserve(copy, pod.node)
    assert fresh.fingerprint() == live.fingerprint(), "incremental state != rebuilt state"
    driver.counts["rebuild check"] += 1


REBUILD_CHECKS.append(check_rebuilt)


def decisions(seed: int, policy: str, steps: int) -> list[tuple[str, ...]]:
    """The binds of a run, in order (for "same seed, same decisions")."""
    driver = EngineDriver(seed, policy)
    driver.run(steps)
    return driver.decisions
