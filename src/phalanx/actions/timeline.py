"""Timeline: free resources per node over time, as Slurm's backfill scheduler sees them.

Rows are breakpoints ``times[0] = now < times[1] < ...``; row ``k`` holds what is free on every
node (``free[k, N, R]``, and per GPU device ``gpus[k, N, G]``) from ``times[k]`` until the next
breakpoint. Running gangs *release* their pods' resources at their estimated end (never, when
the estimate is unknown); reservations and starts *take* resources over ``[start, end)``.
Breakpoints are added where needed, each a copy of the row before it.

The timeline lives as long as the reservation action and changes with events, each in
O(rows × pods changed): a start takes its room until its estimated end, an end gives back what
its estimated future held, an overrun takes the room again until the new estimated end, and
``advance`` drops the rows time has passed. ``matches`` checks the first row against the
cluster's free resources now, so anything the events missed (pods of other schedulers, a node
change) makes its owner rebuild it with ``of``.

``earliest`` finds the first breakpoint from which a gang's pods fit for the whole of its
estimated runtime: the window's free resources are the minimum over its rows (a GPU device is
free in the window only if it is free in every row), and the pods are placed greedily, best fit
by GPUs, on nodes their static placement allows — and, given ``domains`` (topology: see
:meth:`phalanx.framework.session.Session.reservation_domains`), all inside the first domain
where they fit in that window. Necessary checks, vectorised over every window at once, skip
windows that cannot fit before any placement is tried: each distinct pod needs a node it may use
with room for it in every row, and a gang of several pods needs them all in the cluster's totals
(and per domain, domains that cannot hold them are skipped). Being necessary, the checks never
change which window is found, only how many are placed on the way (mostly one).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from phalanx.cluster import devices
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import Vector

Cube = npt.NDArray[np.int64]

_SERIALS = itertools.count()


@dataclass(frozen=True, slots=True)
class Slot:
    """One pod's place in a plan: its node, its request and the GPU devices it would use."""

    node: int
    request: Vector
    gpus: tuple[int, ...]


Plan = tuple[Slot, ...]


class Timeline:
    def __init__(self, times: list[float], free: Cube, gpus: Cube, gpu_col: int) -> None:
        self.times = times
        self.free = free
        self.gpus = gpus
        self.gpu_col = gpu_col
        self._totals: Cube | None = None  # [K, R] positive free per row (a necessary bound)
        self._at: npt.NDArray[np.float64] | None = None  # times as an array
        self._serial, self._changes = next(_SERIALS), 0

    @property
    def version(self) -> tuple[int, int]:
        """Equal while this timeline holds what it held (time passing aside): an answer of
        :meth:`earliest` found at or after ``now`` is then still the answer."""
        return self._serial, self._changes

    @classmethod
    def of(
        cls, table: NodeTable, now: float, releases: Sequence[tuple[float, Slot]] = ()
    ) -> Timeline:
        """What is free now, and each ``(at, slot)`` of ``releases`` back from ``at`` on
        (built in one pass: a row per distinct finite time, then a cumulative sum)."""
        finite = [(max(at, now), slot) for at, slot in releases if not math.isinf(at)]
        times = sorted({now, *(at for at, _ in finite)})
        free = np.zeros((len(times), *table.allocatable.shape), dtype=np.int64)
        gpus = np.zeros((len(times), *table.gpu_free.shape), dtype=np.int64)
        free[0] = table.allocatable - table.requested
        gpus[0] = table.gpu_free
        if finite:
            rows = np.searchsorted(times, [at for at, _ in finite])
            nodes = np.array([slot.node for _, slot in finite])
            np.add.at(free, (rows, nodes), np.array([slot.request for _, slot in finite]))
            shared = [(k, s) for k, (_, s) in zip(rows.tolist(), finite, strict=True) if s.gpus]
            if shared:
                share = [devices.per_device(int(s.request[table.gpu_col])) for _, s in shared]
                counts = [len(s.gpus) for _, s in shared]
                index = (
                    np.repeat([k for k, _ in shared], counts),
                    np.repeat([s.node for _, s in shared], counts),
                    np.concatenate([s.gpus for _, s in shared]).astype(np.int64),
                )
                np.add.at(gpus, index, np.repeat(share, counts))
        return cls(times, np.cumsum(free, axis=0), np.cumsum(gpus, axis=0), table.gpu_col)

    @property
    def now(self) -> float:
        return self.times[0]

    def copy(self) -> Timeline:
        return Timeline(list(self.times), self.free.copy(), self.gpus.copy(), self.gpu_col)

    def matches(self, table: NodeTable) -> bool:
        """Does the first row hold exactly what is free on ``table`` now?"""
        first = self.free[0]
        return (
            first.shape == table.allocatable.shape
            and self.gpus[0].shape == table.gpu_free.shape
            and np.array_equal(first, table.allocatable - table.requested)
            and np.array_equal(self.gpus[0], table.gpu_free)
        )

    def advance(self, now: float) -> None:
        """Time moved to ``now``: the row holding ``now`` becomes the first."""
        if now <= self.times[0]:
            return
        k = bisect.bisect_right(self.times, now) - 1
        if k > 0:
            del self.times[:k]
            self.free = self.free[k:]
            self.gpus = self.gpus[k:]
            self._totals = None
        self.times[0] = now
        self._at = None

    def compact(self) -> None:
        """Drop breakpoints where nothing changes (left by ends that moved)."""
        changes = np.any(self.free[1:] != self.free[:-1], axis=(1, 2)) | np.any(
            self.gpus[1:] != self.gpus[:-1], axis=(1, 2)
        )
        keep = np.concatenate(([True], changes))
        if keep.all():
            return
        self.times = [t for t, kept in zip(self.times, keep.tolist(), strict=True) if kept]
        self.free, self.gpus = self.free[keep], self.gpus[keep]
        self._totals = self._at = None
        self._changes += 1

    def row(self, at: float) -> int:
        """The row starting at ``at`` (added if needed); ``len(times)`` for ``at`` = ∞."""
        if math.isinf(at):
            return len(self.times)
        at = max(at, self.now)
        k = bisect.bisect_left(self.times, at)
        if k < len(self.times) and self.times[k] == at:
            return k
        self.times.insert(k, at)
        self.free = np.concatenate((self.free[:k], self.free[k - 1 :]))
        self.gpus = np.concatenate((self.gpus[:k], self.gpus[k - 1 :]))
        self._totals = self._at = None
        return k

    def take(self, start: float, end: float, plan: Plan, *, check: bool = True) -> bool:
        """Take the plan's room over ``[start, end)``; with ``check``, True if that overdrew
        a node (some resource or device below zero where the plan takes it)."""
        first, last = self.row(start), self.row(end)
        nodes = self._add(first, last, plan, -1)
        if not check or not plan or first >= last:
            return False
        if len(nodes) == 1:  # a gang on one node: plain slices
            free, gpus = self.free[first:last, nodes[0]], self.gpus[first:last, nodes[0]]
        else:
            free, gpus = self.free[first:last, nodes], self.gpus[first:last, nodes]
        return bool(free.min() < 0 or (gpus.size and gpus.min() < 0))

    def give_back(self, start: float, end: float, plan: Plan) -> None:
        first, last = self.row(start), self.row(end)
        self._add(first, last, plan, +1)

    def _add(self, first: int, last: int, plan: Plan, sign: int) -> list[int]:
        """Add ``sign`` × each slot's request (and device shares) over rows ``[first, last)``
        in a few vector operations (a gang's slots often share a node, and its pods a request
        vector); the distinct nodes touched, in order."""
        self._totals = None
        self._changes += 1
        if not plan:
            return []
        nodes = [slot.node for slot in plan]
        distinct = list(dict.fromkeys(nodes)) if len(nodes) > 1 else nodes
        rows = self.free[first:last]
        if len(distinct) == 1:
            column = rows[:, nodes[0]]  # a view: added in place
            column += sign * (plan[0].request if len(plan) == 1 else _total(plan))
        elif len(distinct) == len(nodes):
            rows[:, nodes] += sign * np.array([slot.request for slot in plan])
        else:
            for node in distinct:
                rows[:, node] += sign * _total([slot for slot in plan if slot.node == node])
        shares: dict[tuple[int, int], int] = {}
        for slot in plan:
            if slot.gpus:
                share = sign * devices.per_device(int(slot.request[self.gpu_col]))
                for device in slot.gpus:
                    shares[slot.node, device] = shares.get((slot.node, device), 0) + share
        runs = _runs(shares)
        if len(runs) <= 4:  # a few runs of devices: plain slices
            for node, device, stop, share in runs:
                shared = self.gpus[first:last, node, device:stop]  # a view
                shared += share
        else:
            where = np.array(list(shares), dtype=np.intp)
            self.gpus[first:last, where[:, 0], where[:, 1]] += np.array(list(shares.values()))
        return distinct

    def earliest(
        self,
        requests: Sequence[Vector],
        masks: Sequence[Mask],
        duration: float,
        *,
        until: float = math.inf,
        after: float = -math.inf,
        domains: Sequence[Mask | None] = (),
    ) -> tuple[float, Plan] | None:
        """The first time (later than ``after``, no later than ``until``) from which the pods
        fit for ``duration`` seconds, and where (inside one of ``domains``, the first that
        holds them then, if any are given); ``None`` if they never do on this timeline."""
        lo = bisect.bisect_right(self.times, after)
        hi = bisect.bisect_right(self.times, until)
        if lo >= hi:
            return None
        times = self._times()
        starts = np.arange(lo, hi)
        ends = np.maximum(np.searchsorted(times, times[lo:hi] + duration), starts + 1)
        need = _need(requests, self.free.shape[2])
        if len(requests) > 1:  # one pod: the node check below implies this one
            bad = np.zeros(len(times) + 1, dtype=np.int64)
            np.cumsum(np.logical_or.reduce(self.totals() < need, axis=1), out=bad[1:])
            fit = bad[ends] == bad[starts]
            starts, ends = starts[fit], ends[fit]
        if len(starts) > 1:
            fit = self._with_a_node(starts, ends, requests, masks)
            starts, ends = starts[fit], ends[fit]
        for k, last in zip(starts.tolist(), ends.tolist(), strict=True):
            free = self.free[k:last].min(axis=0)
            gpus = self.gpus[k:last].min(axis=0)
            plan = self._place_in(free, gpus, requests, masks, domains, need)
            if plan is not None:
                return self.times[k], plan
        return None

    def earliest_from(
        self,
        at: float,
        requests: Sequence[Vector],
        masks: Sequence[Mask],
        duration: float,
        *,
        domains: Sequence[Mask | None] = (),
    ) -> tuple[float, Plan] | None:
        """:meth:`earliest` at ``at`` or later (a row is made there); None when ``at`` is ∞."""
        if math.isinf(at) and at > 0:
            return None
        self.row(at)
        after = math.nextafter(at, -math.inf)
        return self.earliest(requests, masks, duration, after=after, domains=domains)

    def totals(self) -> Cube:
        """``[K, R]``: the positive free resources of each row summed over nodes (kept until
        the rows change)."""
        if self._totals is None:
            self._totals = np.ones(self.free.shape[1], np.int64) @ np.maximum(self.free, 0)
        return self._totals

    def _times(self) -> npt.NDArray[np.float64]:
        """``times`` as an array (kept until a breakpoint is added or dropped)."""
        if self._at is None:
            self._at = np.array(self.times)
        return self._at

    def _with_a_node(
        self,
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        requests: Sequence[Vector],
        masks: Sequence[Mask],
    ) -> npt.NDArray[np.bool_]:
        """Which of the windows (rows ``starts[i]`` to before ``ends[i]``) give each distinct
        pod a node it may use with room for it in every row: a necessary condition for a
        placement, checked for every window at once."""
        last = int(ends[-1])  # ends never decrease
        rows = self.free[:last]
        first = int(starts[0])
        if int(starts[-1]) - first + 1 == len(starts):  # consecutive rows: a slice
            at: slice | npt.NDArray[np.int64] = slice(first, first + len(starts))
        else:
            at = starts
        keep = np.ones(len(starts), dtype=bool)
        seen: set[tuple[bytes, int]] = set()
        for request, mask in zip(requests, masks, strict=True):
            shape = (request.tobytes(), id(mask))
            if shape in seen:
                continue
            seen.add(shape)
            cols = request.nonzero()[0]
            short = np.logical_or.reduce(rows[:, :, cols] < request[cols], axis=2)
            short |= ~mask
            misses = np.zeros((last + 1, short.shape[1]), dtype=np.int32)  # up to each row
            np.cumsum(short, axis=0, out=misses[1:])
            fit = np.logical_or.reduce(misses[ends] == misses[at], axis=1)
            keep &= fit
        return keep

    def _place_in(
        self,
        free: Cube,
        gpus: Cube,
        requests: Sequence[Vector],
        masks: Sequence[Mask],
        domains: Sequence[Mask | None],
        need: Vector,
    ) -> Plan | None:
        """The pods placed inside the first of ``domains`` that holds them (anywhere, if none
        is given)."""
        if not domains:
            return self._place(free, gpus, requests, masks)
        room = np.maximum(free, 0)
        for domain in domains:
            if domain is not None and np.any(room[domain].sum(axis=0) < need):
                continue
            inside = masks if domain is None else [mask & domain for mask in masks]
            plan = self._place(free, gpus, requests, inside)
            if plan is not None:
                return plan
        return None

    def _place(
        self, free: Cube, gpus: Cube, requests: Sequence[Vector], masks: Sequence[Mask]
    ) -> Plan | None:
        plan: list[Slot] = []
        for request, mask in zip(requests, masks, strict=True):
            cols = request.nonzero()[0]
            fits = np.logical_and.reduce(free[:, cols] >= request[cols], axis=1)
            fits &= mask
            milli = int(request[self.gpu_col])
            if milli:
                fits &= devices.fits(gpus, milli)
            candidates = fits.nonzero()[0]
            if candidates.size == 0:
                return None
            left = free[candidates, self.gpu_col] - milli  # best fit: fewest GPUs left over
            node = int(candidates[np.argmin(left)])
            slot = Slot(node, request, devices.pick(gpus[node], milli))
            plan.append(slot)
            if len(plan) == len(requests):
                break  # the last pod: nothing placed after it
            free[node] -= request
            if slot.gpus:
                gpus[node, list(slot.gpus)] -= devices.per_device(milli)
        return tuple(plan)


Found = tuple[float, Plan] | None


class Memo:
    """Earliest starts found on a timeline, by a key naming what was searched for: while the
    timeline's :attr:`Timeline.version` is unchanged (nothing taken or given back, only time
    passed) an answer not in the past is still the answer."""

    LIMIT = 4096  # keys remembered at most (cleared past it)

    def __init__(self) -> None:
        self._known: dict[Hashable, tuple[tuple[int, int], Found]] = {}

    def earliest(
        self, key: Hashable, version: tuple[int, int], now: float, search: Callable[[], Found]
    ) -> Found:
        known = self._known.get(key)
        if known is not None and known[0] == version and (known[1] is None or known[1][0] >= now):
            return known[1]
        if len(self._known) >= self.LIMIT:
            self._known.clear()
        found = search()
        self._known[key] = (version, found)
        return found


def _runs(shares: dict[tuple[int, int], int]) -> list[tuple[int, int, int, int]]:
    """``(node, device, stop, share)``: the shares as runs of adjacent devices of one node
    taking the same share (a gang's whole GPUs are mostly the first free ones of a node)."""
    runs: list[tuple[int, int, int, int]] = []
    for (node, device), share in sorted(shares.items()) if len(shares) > 1 else shares.items():
        if runs and runs[-1][0] == node and runs[-1][2] == device and runs[-1][3] == share:
            runs[-1] = (node, runs[-1][1], device + 1, share)
        else:
            runs.append((node, device, device + 1, share))
    return runs


def _need(requests: Sequence[Vector], width: int) -> Vector:
    """The sum of the pods' requests."""
    if len(requests) == 1:
        return requests[0]
    if not requests:
        return np.zeros(width, np.int64)
    return np.asarray(np.add.reduce(requests), dtype=np.int64)


def _total(plan: Sequence[Slot]) -> Vector:
    """The sum of the slots' requests (one multiplication when their pods share a vector)."""
    first = plan[0].request
    if all(slot.request is first for slot in plan):
        return first * len(plan) if len(plan) > 1 else first
    return np.asarray(np.add.reduce([slot.request for slot in plan]), dtype=np.int64)
