"""Runtime estimates: how long a gang is expected to run, and where that figure comes from.

The first of these answers (Slurm's time limit, Kueue's maximum execution time, and a learned
figure where users give none):

1. the author's ``phalanx.dev/runtime-estimate`` (on the PodGroup, else on its pods);
2. ``activeDeadlineSeconds`` of its pods (an upper bound: the kubelet kills them past it);
3. Kueue's ``kueue.x-k8s.io/max-exec-time-seconds`` (an upper bound too);
4. learned online: the ``quantile`` (0.8 here; ``phalanx``'s reserve action, ``RESERVE`` in
   :mod:`phalanx.policies.registry`, uses the median) of the observed runtimes of the last
   ``window`` finished gangs of the same namespace, queue and shape (member count and
   total requests), once at least ``min_samples`` have finished; with ``pooled`` (``phalanx``'s
   default), a shape none of which has finished that often yet gets the same quantile of the
   last ``window`` runtimes of its namespace and queue, all shapes together (source
   ``learned (queue)``): the rare shapes are the big gangs, and without any estimate their
   reservations cannot be timed nor their room given back on the timeline;
5. the configured ``default`` (none by default: the estimate is then *unknown*).

A runtime is observed as the time from the gang's start (its members bound) to the first
cycle that finds it holding nothing: what a live scheduler can see. The true duration a
simulation ends a gang by is never read here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from phalanx.cluster.runtime import runtime_hints
from phalanx.cluster.workloads import GangInfo

Key = tuple[str, str, int, bytes]

LEARNED = "learned"
POOLED = "learned (queue)"
DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class Estimate:
    seconds: float
    source: str  # runtime-estimate | activeDeadlineSeconds | max-exec-time | learned | default


class Estimates:
    name = "estimates"

    def __init__(
        self,
        quantile: float = 0.8,
        default: float | None = None,
        *,
        window: int = 50,
        min_samples: int = 3,
        pooled: bool = False,
    ) -> None:
        self.quantile = quantile
        self.pooled = pooled  # a shape not learned yet: the quantile of its queue's runtimes
        self.default = default
        self.window = window
        self.min_samples = min_samples
        self._seen: dict[Key, deque[float]] = {}  # by shape, and by queue (``pool_of``)
        self._learned: dict[Key, float] = {}  # the quantile, until the next observation
        self._keys: dict[str, tuple[int, Key]] = {}  # gang ident → (members, its key)
        self._changes: dict[Key, int] = {}  # shape → how often its learned estimate changed
        #: gang ident → (its spec, its generation, its own best hint): hints are read from the
        #: spec and the members' specs, which change only with them
        self._hinted: dict[str, tuple[object, int, Estimate | None]] = {}

    def estimate(self, gang: GangInfo) -> Estimate | None:
        hinted = self._hint(gang)
        if hinted is not None:
            return hinted
        shape = self.key_of(gang)
        learned = self._learned.get(shape)
        if learned is not None:
            return Estimate(learned, LEARNED)
        pooled = self._learned.get(pool_of(shape)) if self.pooled else None
        if pooled is not None:
            return Estimate(pooled, POOLED)
        if self.default is not None:
            return Estimate(self.default, DEFAULT)
        return None

    def _hint(self, gang: GangInfo) -> Estimate | None:
        """The gang's own best runtime hint (None: it gives none)."""
        known = self._hinted.get(gang.ident)
        if known is None or known[0] is not gang.spec or known[1] != gang.generation:
            best = next(iter(hints(gang)), None)
            hint = None if best is None else Estimate(best[1], best[0])
            known = self._hinted[gang.ident] = (gang.spec, gang.generation, hint)
        return known[2]

    def observe(self, gang: GangInfo, runtime: float) -> bool:
        """A gang of this shape ran ``runtime`` seconds; True if its learned estimate (which
        gangs of its shape get) changed."""
        shape = self.key_of(gang)
        self._keys.pop(gang.ident, None)
        self._hinted.pop(gang.ident, None)
        moved = self._record(shape, runtime)
        if self.pooled:
            moved |= self._record(pool_of(shape), runtime)  # gangs of unlearned shapes get it
        return moved

    def _record(self, key: Key, runtime: float) -> bool:
        """Add a runtime to ``key``'s; True if the quantile learned for ``key`` changed."""
        runs = self._seen.setdefault(key, deque(maxlen=self.window))
        runs.append(max(runtime, 0.0))
        if len(runs) < self.min_samples:
            return False
        before = self._learned.get(key)
        self._learned[key] = quantile(sorted(runs), self.quantile)
        if before == self._learned[key]:
            return False
        self._changes[key] = self._changes.get(key, 0) + 1
        return True

    def beyond(self, gang: GangInfo, elapsed: float) -> float | None:
        """The ``quantile`` of the observed runtimes of ``gang``'s shape that ran longer than
        ``elapsed`` (how long a gang that has run ``elapsed`` is likely to run in all); None
        when fewer than ``min_samples - 1`` (at least two) did."""
        runs = self._seen.get(self.key_of(gang))
        if runs is None:
            return None
        longer = sorted(run for run in runs if run > elapsed)
        if len(longer) < max(self.min_samples - 1, 2):
            return None
        return quantile(longer, self.quantile)

    def version(self, gang: GangInfo) -> int:
        """Moves whenever the learned estimate ``gang``'s shape gets changes (pooled until
        its shape is learned: negative)."""
        shape = self.key_of(gang)
        if self.pooled and shape not in self._learned:
            return -1 - self._changes.get(pool_of(shape), 0)
        return self._changes.get(shape, 0)

    def key_of(self, gang: GangInfo) -> Key:
        """The gang's shape key: gangs with one key share a learned estimate."""
        known = self._keys.get(gang.ident)
        if known is None or known[0] != len(gang.members):
            known = self._keys[gang.ident] = (len(gang.members), key(gang))
        return known[1]


def quantile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) quantile of a sorted, non-empty list, without numpy's
    overhead on a list this short."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


hints = runtime_hints


def pool_of(shape: Key) -> Key:
    """The key under which every shape of ``shape``'s namespace and queue is pooled (no gang
    has -1 members)."""
    return (shape[0], shape[1], -1, b"")


def key(gang: GangInfo) -> Key:
    queue = gang.spec.queue if gang.spec is not None else ""
    requests = [pod.request for pod in gang.members]
    if len(requests) == 1:  # a lone pod: its own vector (np.sum of one is a copy of it)
        total = requests[0]
    else:
        total = np.sum(requests, axis=0) if requests else np.zeros(0, dtype=np.int64)
    return (gang.namespace, queue, gang.min_member, np.asarray(total, np.int64).tobytes())
