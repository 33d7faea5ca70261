"""Waiting gangs as a reservation sees them: the pods still needed, where they may go, their
estimate, their rank, and how to say when and why they start.

A gang needs ``min_member`` placed members, role minimums first; a ready gang with extra
pending members (elastic growth) is not waiting. The rank orders reservations: gangs that have
waited past the aging threshold first (oldest first), then the session's own order (priority,
then FIFO). A placement may delay only the reservations that rank after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from phalanx.api.durations import format_duration
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import Vector
from phalanx.cluster.workloads import GangInfo, PodInfo
from phalanx.framework.session import Session
from phalanx.framework.unit import Unit
from phalanx.plugins.estimates import Estimate

Rank = tuple[float, ...]
#: Clock values above this are wall-clock seconds (live); below, simulated seconds.
WALL_CLOCK = 1e9


@dataclass(eq=False, slots=True)
class Candidate:
    gang: GangInfo
    requests: list[Vector]
    masks: list[Mask]
    estimate: Estimate | None
    rank: Rank
    aged: bool
    gpus: float  # GPUs the needed pods request, for the size threshold
    shape: bytes = field(default=b"")
    pods: list[PodInfo] = field(default_factory=list)  # the needed pods, as ``requests``
    #: where the reservation must lie, best first (topology: each holds all the pods; None:
    #: anywhere); empty: anywhere
    domains: list[Mask | None] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return math.inf if self.estimate is None else self.estimate.seconds

    @property
    def queue(self) -> str:
        return self.gang.spec.queue if self.gang.spec is not None else ""


def needed(gang: GangInfo, pending: list[PodInfo]) -> list[PodInfo]:
    """The pending pods that would make ``gang`` ready: role shortfalls first, then any."""
    missing = max(gang.min_member - gang.placed, 1 if gang.implicit else 0)
    chosen: list[PodInfo] = []
    for role, need in gang.role_minimums.items():
        short = need - gang.placed_by_role[role]
        chosen += [pod for pod in pending if pod.spec.role == role][: max(short, 0)]
    rest = [pod for pod in pending if pod not in chosen]
    return chosen + rest[: max(missing - len(chosen), 0)]


@dataclass(frozen=True, slots=True)
class Needs:
    """What a waiting gang needs, unchanged while its members, placed count and the node table's
    shape (nodes, resources) are."""

    version: tuple[int, ...]
    requests: list[Vector]
    masks: list[Mask]
    gpus: float
    shape: bytes
    pending: list[PodInfo]
    pods: list[PodInfo]
    domains: list[Mask | None]


def needs_of(session: Session, gang: GangInfo) -> Needs | None:
    names = session.config.scheduler_names
    pending = [pod for pod in gang.placeable() if pod.spec.scheduler_name in names]
    pods = needed(gang, pending)
    short = gang.min_member - gang.placed > len(pods)  # members missing: not waiting for room
    if not pods or short or any(pod.invalid for pod in pods):
        return None
    facts = session.table.facts
    masks = [
        facts.selector_mask(p.spec.placement)
        & facts.toleration_mask(p.spec.placement)
        & ~facts.unschedulable
        for p in pods
    ]
    requests = [pod.request for pod in pods]
    gpus = sum(int(r[session.table.gpu_col]) for r in requests) / 1000
    domains = session.reservation_domains(Unit.of_gang(gang, pods))  # topology
    shape = b"".join(r.tobytes() for r in requests) + b"".join(m.tobytes() for m in masks)
    shape += b"".join(b"*" if d is None else d.tobytes() for d in domains)
    return Needs(version(session, gang), requests, masks, gpus, shape, pending, pods, domains)


def version(session: Session, gang: GangInfo) -> tuple[int, ...]:
    table = session.table
    return (len(gang.members), gang.placed, *table.allocatable.shape, id(table.facts))


def candidate(
    session: Session,
    gang: GangInfo,
    needs: Needs,
    estimate: Estimate | None,
    aging: float | None,
) -> Candidate:
    """``gang`` as a candidate for a reservation this cycle."""
    aged = aging is not None and session.now - gang.created >= aging
    rank = ((0.0, gang.created) if aged else (1.0,)) + session.order_key(
        Unit.of_gang(gang, needs.pending)
    )
    return Candidate(
        gang,
        needs.requests,
        needs.masks,
        estimate,
        rank,
        aged,
        needs.gpus,
        needs.shape,
        needs.pods,
        needs.domains,
    )


def waiting(gang: GangInfo) -> bool:
    """Is ``gang`` waiting for room (not ready, valid, not held back)?"""
    return not (gang.ready() or gang.invalid or gang.hold is not None)


def clock(t: float, now: float) -> str:
    """A time for people: ``14:20 UTC`` live, ``t=1h30m`` in a simulation (no countdown: a
    condition message must not change while nothing else does)."""
    if t >= WALL_CLOCK:
        moment = datetime.fromtimestamp(t, UTC)
        today = datetime.fromtimestamp(now, UTC).date() == moment.date()
        return moment.strftime("%H:%M UTC" if today else "%Y-%m-%d %H:%M UTC")
    return f"t={format_duration(t)}"


def nodes_text(table: NodeTable, nodes: list[int]) -> str:
    names = [table.names[n] for n in sorted(set(nodes))]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}..{names[-1]} ({len(names)} nodes)"
