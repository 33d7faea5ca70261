"""Pods and gangs at run time.

Every pod belongs to exactly one gang: its PodGroup, or an implicit gang of one for a pod that
names none. Status changes go through :meth:`GangInfo.move` so the gang's counters (placed
members, per role) are always exact; the Statement relies on that to undo cheaply. A gang
tracked by the queue book's tally notes there that it changed (``watcher``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from phalanx.api.specs import GangSpec, PodSpec
from phalanx.cluster.resources import Vector

#: Prefix of the identity of a lone pod's implicit gang (PodGroups use ``namespace/name``).
IMPLICIT_PREFIX = "pod:"


class PodStatus(Enum):
    PENDING = "Pending"  # exists, not placed
    ALLOCATED = "Allocated"  # placed in this session's statement, not yet committed
    PIPELINED = "Pipelined"  # claims a node's future free resources in this session
    RESERVED = "Reserved"  # assumed on a node, waiting at Permit for its gang (coscheduling)
    BOUND = "Bound"  # committed to a node; holds its resources
    RELEASING = "Releasing"  # being evicted; still holds resources
    SUCCEEDED = "Succeeded"  # finished; resources returned
    DELETED = "Deleted"

    #: members are singletons compared by identity: hash them as objects (Enum's own hash is a
    #: Python call, and status sets are tested for every pod that moves)
    __hash__ = object.__hash__


#: Statuses that count towards a gang's quorum ("placed").
PLACED = frozenset({PodStatus.ALLOCATED, PodStatus.RESERVED, PodStatus.BOUND, PodStatus.SUCCEEDED})
#: Statuses of pods that are over: they no longer count as members that exist.
GONE = frozenset({PodStatus.SUCCEEDED, PodStatus.DELETED})
#: Statuses that hold node resources.
HOLDING = frozenset({PodStatus.ALLOCATED, PodStatus.RESERVED, PodStatus.BOUND, PodStatus.RELEASING})


@dataclass(eq=False, slots=True)
class PodInfo:
    spec: PodSpec
    request: Vector
    created: float
    seq: int  # arrival order, for deterministic FIFO ties
    gang: GangInfo
    status: PodStatus = PodStatus.PENDING
    node: int = -1
    bound_at: float | None = None
    gpus: tuple[int, ...] = ()  # the GPU devices it holds on its node
    invalid: str | None = None  # why this pod can never be placed (bad input)
    backoff_until: float = 0.0  # per-pod backoff (pod-at-a-time baselines)
    failures: int = 0
    blocked_at: int = -1  # ``ClusterState.freed`` when it last found no node (-1: not blocked)
    evicted_for: tuple[str, str] | None = None  # (reason, gang) of a committed eviction

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def priority(self) -> int:
        return self.spec.priority


@dataclass(slots=True)
class Condition:
    """Why a gang waits, as data: a reason code and a message with numbers."""

    type: str  # "Unschedulable" | "Scheduled"
    reason: str  # e.g. NotEnoughResources, NotEnoughMembers, Timeout, Invalid
    message: str
    since: float


@dataclass(eq=False, slots=True)
class GangInfo:
    key: str
    spec: GangSpec | None  # None: the implicit gang of a lone pod
    min_member: int
    role_minimums: dict[str, int]
    created: float
    members: list[PodInfo] = field(default_factory=list)
    placed: int = 0
    pipelined: int = 0
    placed_by_role: Counter[str] = field(default_factory=Counter)
    waiting_members: int = 0  # members in status PENDING (kept by add/remove/move)
    invalid: str | None = None
    #: (reason, message) while something outside the gang holds it back (e.g. its queue)
    hold: tuple[str, str] | None = None
    condition: Condition | None = None
    timed_out: bool = False
    failures: int = 0
    backoff_until: float = 0.0
    attempted: int = -1  # cluster version at its last placement attempt
    blocked_at: int = -1  # ``ClusterState.freed`` when it last found no node (-1: not blocked)
    #: bumped when its members or their statuses change in a way validity depends on
    generation: int = 0
    #: bumped on every change of its members, their statuses or specs, or its own spec (what
    #: is made of them may be kept while it stays)
    changes: int = 0
    valid_memo: tuple[object, ...] | None = None  # the gang plugin's cached verdict
    permit_deadline: float | None = None  # coscheduling: when waiting members are rejected
    started: float | None = None  # when its work started (min members running)
    #: when it is expected to start (None: unknown) and why, while it waits for room
    expected_start: float | None = None
    expected_reason: str = ""
    finished: float | None = None
    #: the Kueue flavors it was admitted in, one per resource group (see cluster.flavors)
    flavors: tuple[str, ...] = ()
    #: (book, spec it was resolved from, book generation, queue): QueueBook.queue_of's memo
    queue_memo: tuple[object, object, int, str] | None = None
    #: the set of changed gangs of the queue tally tracking it (see ``touched``), or None
    watcher: set[str] | None = None
    #: unique among all gangs: a PodGroup's key, or ``pod:KEY`` for an implicit gang (its key
    #: and whether it is implicit never change)
    ident: str = field(init=False)
    namespace: str = field(init=False)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.ident = self.key if self.spec is not None else IMPLICIT_PREFIX + self.key
        self.namespace, _, self.name = self.key.partition("/")

    @property
    def implicit(self) -> bool:
        return self.spec is None

    @property
    def priority(self) -> int:
        if self.spec is not None and self.spec.priority is not None:
            return self.spec.priority
        members = self.members
        if len(members) == 1:  # a lone pod's gang
            return members[0].spec.priority
        return max((pod.priority for pod in members), default=0)

    @property
    def timeout(self) -> float | None:
        return None if self.spec is None else self.spec.timeout_seconds

    def touched(self) -> None:
        """Its members, their statuses or its spec changed: a tally tracking it recomputes
        its part (:mod:`phalanx.cluster.queuetally`)."""
        self.changes += 1
        if self.watcher is not None:
            self.watcher.add(self.ident)

    def add(self, pod: PodInfo) -> None:
        self.changes += 1
        if self.watcher is not None:
            self.watcher.add(self.ident)
        self.members.append(pod)
        self.waiting_members += pod.status is PodStatus.PENDING
        self.generation += 1
        if pod.status in PLACED:
            self.placed += 1
            self.placed_by_role[pod.spec.role] += 1

    def remove(self, pod: PodInfo) -> None:
        """``pod`` leaves the gang (deleted): its counters go with it."""
        self.changes += 1
        if self.watcher is not None:
            self.watcher.add(self.ident)
        if pod.status in PLACED:
            self.placed -= 1
            self.placed_by_role[pod.spec.role] -= 1
        self.pipelined -= pod.status is PodStatus.PIPELINED
        self.waiting_members -= pod.status is PodStatus.PENDING
        self.members.remove(pod)
        self.generation += 1

    def move(self, pod: PodInfo, status: PodStatus) -> None:
        """Change ``pod``'s status, keeping the gang's counters exact (and telling a tally
        that tracks it)."""
        self.changes += 1
        if self.watcher is not None:
            self.watcher.add(self.ident)
        before, after = pod.status in PLACED, status in PLACED
        if before != after:
            delta = 1 if after else -1
            self.placed += delta
            self.placed_by_role[pod.spec.role] += delta
        self.pipelined += (status is PodStatus.PIPELINED) - (pod.status is PodStatus.PIPELINED)
        self.waiting_members += (status is PodStatus.PENDING) - (pod.status is PodStatus.PENDING)
        if status in GONE and pod.status not in GONE:
            self.generation += 1
        pod.status = status

    def pending(self) -> list[PodInfo]:
        return [pod for pod in self.members if pod.status is PodStatus.PENDING]

    @property
    def max_member(self) -> int | None:
        return None if self.spec is None else self.spec.max_member

    def placeable(self) -> list[PodInfo]:
        """The pending members it may still place: all of them, or with ``max_member`` as
        many as keep its members placed, pipelined or running (releasing included) at most
        that many; the others wait until a member leaves."""
        pending = self.pending()
        limit = self.max_member
        if limit is None or not pending:
            return pending
        taken = sum(p.status in HOLDING or p.status is PodStatus.PIPELINED for p in self.members)
        return pending[: max(limit - taken, 0)]

    def alive(self) -> int:
        """Members that exist and have not finished or gone."""
        return sum(
            pod.status not in (PodStatus.SUCCEEDED, PodStatus.DELETED) for pod in self.members
        )

    def roles_ready(self, counts: Counter[str]) -> bool:
        return all(counts[role] >= need for role, need in self.role_minimums.items())

    def ready(self) -> bool:
        """At least ``min_member`` placed, and every role minimum met."""
        return self.placed >= self.min_member and self.roles_ready(self.placed_by_role)

    def holding(self) -> bool:
        return any(pod.status in HOLDING for pod in self.members)
