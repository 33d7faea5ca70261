"""``/healthz``, ``/readyz`` and ``/metrics`` for ``phalanx serve`` (``--metrics-port``).

- ``/healthz``: 200 while the process's event loop answers.
- ``/readyz``: 200 when the ``ready`` callback says so — for ``phalanx serve``: the leader's
  informers have synced, or a standby has reached the API (both are ready; only the leader
  binds). 503 otherwise.
- ``/metrics``: Prometheus text format from :class:`Metrics`' own registry (one per process
  or per test, never the global one).

:class:`Metrics` holds the scheduler's metrics and small ``record_*`` functions the loop (or a
wrapper around it, see :class:`InstrumentedScheduler`) calls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from phalanx.framework.session import CycleResult
from phalanx.live.client import KubeClient
from phalanx.live.loop import LiveScheduler

logger = logging.getLogger(__name__)

_CYCLE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0)


class Metrics:
    """The scheduler's Prometheus metrics, in their own :class:`CollectorRegistry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.cycle_duration = Histogram(
            "phalanx_cycle_duration_seconds",
            "Duration of one scheduling cycle (schedule, bind, explain, statuses).",
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.gangs_waiting = Gauge(
            "phalanx_gangs_waiting",
            "Gangs waiting after the last cycle, by reason.",
            ["reason"],
            registry=r,
        )
        self.binds = Counter("phalanx_binds", "Pods bound.", registry=r)
        self.bind_failures = Counter("phalanx_bind_failures", "Pod binds that failed.", registry=r)
        self.gang_wait = Histogram(
            "phalanx_gang_wait_seconds",
            "Time from a gang's creation to its (first) bind.",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.partial_bind_recoveries = Counter(
            "phalanx_partial_bind_recoveries",
            "Partially bound gangs that were completed or rolled back.",
            registry=r,
        )
        self.attempts = Counter(
            "phalanx_placement_attempts", "Placement attempts made by cycles.", registry=r
        )
        self.is_leader = Gauge(
            "phalanx_leader", "1 while this replica holds the leader Lease.", registry=r
        )
        self.expected_start = Gauge(
            "phalanx_gang_expected_start_seconds",
            "When a waiting gang is expected to start (Unix time; -1: unknown), by gang.",
            ["gang"],
            registry=r,
        )
        self.evictions = Counter(
            "phalanx_evictions",
            "Pods evicted (accepted by the API), by reason: preempt, reclaim, shrink.",
            ["reason"],
            registry=r,
        )
        self.preemptions = Counter(
            "phalanx_preemptions",
            "Gangs stopped by preemption or reclaim (evicted below their minimum).",
            registry=r,
        )
        self.reclaims = Counter(
            "phalanx_reclaims",
            "Gangs stopped by reclaim (also counted as preemptions).",
            registry=r,
        )
        self.lost_gpu_hours = Counter(
            "phalanx_lost_gpu_hours",
            "GPU-hours of work lost with stopped gangs (since their last checkpoint).",
            registry=r,
        )
        self.deadline_misses = Counter(
            "phalanx_deadline_misses_foreseen",
            "Waiting gangs found to miss their phalanx.dev/deadline (expected finish too late).",
            registry=r,
        )
        self._reasons: set[str] = set()
        self._expected: set[str] = set()

    # -- functions the loop calls ------------------------------------------------------------
    def observe_cycle(self, seconds: float) -> None:
        self.cycle_duration.observe(seconds)

    def set_waiting(self, counts: dict[str, int]) -> None:
        """Gangs waiting by reason; reasons absent from ``counts`` drop to 0."""
        for reason in self._reasons - counts.keys():
            self.gangs_waiting.labels(reason=reason).set(0)
        for reason, count in counts.items():
            self.gangs_waiting.labels(reason=reason).set(count)
        self._reasons |= counts.keys()

    def set_expected(
        self, changed: dict[str, tuple[float | None, str]], waiting: set[str] | None = None
    ) -> None:
        """One series per waiting gang: ``changed`` holds the expected starts a cycle told
        (only those that changed); given ``waiting`` (every waiting gang), a gang no longer
        waiting loses its series."""
        for gang, (at, _) in changed.items():
            self.expected_start.labels(gang=gang).set(-1 if at is None else at)
        self._expected |= changed.keys()
        if waiting is not None:
            for gang in self._expected - waiting:
                self.expected_start.remove(gang)
            self._expected &= waiting

    def record_bind(self, ok: bool = True) -> None:
        (self.binds if ok else self.bind_failures).inc()

    def record_gang_wait(self, seconds: float) -> None:
        self.gang_wait.observe(max(0.0, seconds))

    def record_disruption(
        self, reason: str, pods: int, stopped: bool, lost_gpu_hours: float
    ) -> None:
        """A victim gang's accepted evictions (see ``LiveScheduler.on_disruption``)."""
        self.evictions.labels(reason=reason).inc(pods)
        if stopped:
            self.preemptions.inc()
            if reason == "reclaim":
                self.reclaims.inc()
            self.lost_gpu_hours.inc(max(0.0, lost_gpu_hours))

    def record_partial_bind_recovery(self) -> None:
        self.partial_bind_recoveries.inc()

    def set_leader(self, leading: bool) -> None:
        self.is_leader.set(1 if leading else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class InstrumentedScheduler(LiveScheduler):
    """:class:`LiveScheduler` feeding :class:`Metrics` from around its steps.

    Cycle duration and waiting gangs wrap :meth:`run_once`; binds and failures wrap the
    per-pod bind; a gang's wait is observed when a cycle commits it; evictions, preemptions,
    reclaims and lost GPU-hours come from the disruption hook once the API accepted them.
    """

    def __init__(self, client: KubeClient, *, metrics: Metrics, **options: Any) -> None:
        super().__init__(client, **options)
        self.metrics = metrics
        self._counted = -1  # the state's version when waiting gangs were last counted

    async def run_once(
        self, now: float | None = None, *, flush_events: bool = True, wait_binds: bool = True
    ) -> CycleResult:
        now = time.time() if now is None else now
        started = time.perf_counter()
        try:
            result = await super().run_once(now, flush_events=flush_events, wait_binds=wait_binds)
        finally:
            self.metrics.observe_cycle(time.perf_counter() - started)
        state = self.cache.state
        waiting: set[str] | None = None
        if state.version != self._counted or result.waiting:  # parked gangs wait too
            self._counted = state.version
            counts: dict[str, int] = {}
            waiting = set()
            for gang in [*state.waiting.values(), *state.blocked.values()]:
                reason = gang.condition.reason if gang.condition is not None else "Pending"
                counts[reason] = counts.get(reason, 0) + 1
                if not gang.ready():
                    waiting.add(gang.ident)
            self.metrics.set_waiting(counts)
        self.metrics.set_expected(result.expected, waiting)
        gangs = {pod.gang.ident: pod.gang for pod, _ in result.binds}
        for gang in gangs.values():
            self.metrics.record_gang_wait(now - gang.created)
        return result

    def on_partial_bind_recovered(self, ident: str) -> None:
        self.metrics.record_partial_bind_recovery()

    def on_attempts(self, count: int) -> None:
        super().on_attempts(count)
        self.metrics.attempts.inc(count)

    def on_bind(self, ok: bool) -> None:
        self.metrics.record_bind(ok)

    def on_disruption(self, reason: str, pods: int, stopped: bool, lost_gpu_hours: float) -> None:
        self.metrics.record_disruption(reason, pods, stopped, lost_gpu_hours)

    def on_deadline_miss(self, ident: str, late: float) -> None:
        self.metrics.deadline_misses.inc()


class HealthServer:
    """An aiohttp server for the three endpoints; ``port=0`` picks a free port (tests)."""

    def __init__(
        self,
        metrics: Metrics,
        ready: Callable[[], bool],
        *,
        port: int = 8080,
        host: str = "0.0.0.0",
    ) -> None:
        self.metrics = metrics
        self.ready = ready
        self.host = host
        self.port = port
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="not ready\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self.metrics.render())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        logger.info("health and metrics on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
