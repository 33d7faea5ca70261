"""``phalanx serve``: run the live secondary scheduler against a cluster.

Usage::

    phalanx serve [--config FILE] [--kubeconfig PATH] [--scheduler-name NAME]
                  [--period SECONDS] [--policy phalanx] [--leader-elect | --no-leader-elect]
                  [--metrics-port PORT] [--bind-concurrency N] ...

Pods that ask for ``schedulerName: NAME`` (default ``phalanx``) are placed gang by gang, all or
nothing, by the simulator's engine (:class:`phalanx.live.loop.LiveScheduler`).

- ``--config FILE``: YAML settings (:mod:`phalanx.live.settings`); flags override the file.
- ``--leader-elect`` (default in-cluster): only the holder of a ``coordination.k8s.io`` Lease
  (``$POD_NAMESPACE``/NAME) schedules; other replicas stand by (:mod:`phalanx.live.leader`).
- ``--metrics-port`` (default 8080, 0 = off): ``/healthz``, ``/readyz``, ``/metrics``
  (:mod:`phalanx.live.health`).

SIGINT or SIGTERM stops it cleanly: the current cycle ends, the Lease is released, the HTTP
server closes (at most ``timeouts.shutdown`` seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
from typing import IO

from phalanx.api.errors import InputError
from phalanx.cli.options import integer, positive
from phalanx.live import Backoff, ClusterConfig, KubeClient, LiveError, load_config
from phalanx.live.health import HealthServer, InstrumentedScheduler, Metrics
from phalanx.live.leader import LeaderElector
from phalanx.live.resources import DEFAULT_SCHEDULER_NAME
from phalanx.live.settings import MAX_CONCURRENCY, POLICIES, ServeSettings, load_settings

logger = logging.getLogger(__name__)


_port = integer(0, 65535, "a port")
_count = integer(1, MAX_CONCURRENCY)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run phalanx as a secondary scheduler in a Kubernetes cluster",
        description=(
            "Watch the cluster and bind pods whose schedulerName is NAME, gang by gang "
            "(all or nothing). Stops on SIGINT or SIGTERM. Flags override --config."
        ),
    )
    parser.add_argument("--config", metavar="FILE", help="YAML settings file")
    parser.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig file (default: in-cluster or ~/.kube)"
    )
    parser.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help=f"the schedulerName of the pods to place (default: {DEFAULT_SCHEDULER_NAME})",
    )
    parser.add_argument(
        "--period",
        type=positive,
        metavar="SECONDS",
        help="run a cycle at least this often (default: 1)",
    )
    parser.add_argument(
        "--policy", choices=sorted(POLICIES), help="scheduling policy (default: phalanx)"
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect a leader through a Lease (default: on in-cluster, off otherwise)",
    )
    parser.add_argument("--lease-name", metavar="NAME", help="the Lease (default: NAME)")
    parser.add_argument(
        "--lease-namespace",
        metavar="NS",
        help="the Lease's namespace (default: $POD_NAMESPACE, else the config's)",
    )
    parser.add_argument("--lease-duration", type=positive, metavar="SECONDS", help="default: 15")
    parser.add_argument("--renew-deadline", type=positive, metavar="SECONDS", help="default: 10")
    parser.add_argument("--retry-period", type=positive, metavar="SECONDS", help="default: 2")
    parser.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="/healthz, /readyz and /metrics on this port; 0 = off (default: 8080)",
    )
    parser.add_argument(
        "--metrics-address",
        metavar="IP",
        help="the address the metrics/health server listens on (default: 0.0.0.0, every one)",
    )
    parser.add_argument(
        "--bind-concurrency",
        type=_count,
        metavar="N",
        help="bind requests in flight at most (default: 16)",
    )
    parser.add_argument("--request-timeout", type=positive, metavar="SECONDS", help="default: 10")
    parser.add_argument("--shutdown-timeout", type=positive, metavar="SECONDS", help="default: 10")


def resolve_settings(args: argparse.Namespace) -> ServeSettings:
    """The file's settings (or the defaults) with the flags given on top; validated."""
    config_file = getattr(args, "config", None)
    base = load_settings(config_file) if config_file else ServeSettings()

    def flag(name: str) -> object:
        return getattr(args, name, None)

    top = {
        attr: flag(attr)
        for attr in (
            "scheduler_name",
            "period",
            "policy",
            "metrics_port",
            "metrics_address",
            "bind_concurrency",
        )
        if flag(attr) is not None
    }
    le = {
        attr: value
        for attr, value in (
            ("enabled", flag("leader_elect")),
            ("lease_name", flag("lease_name")),
            ("lease_namespace", flag("lease_namespace")),
            ("lease_duration", flag("lease_duration")),
            ("renew_deadline", flag("renew_deadline")),
            ("retry_period", flag("retry_period")),
        )
        if value is not None
    }
    timeouts = {
        attr: value
        for attr, value in (
            ("request", flag("request_timeout")),
            ("shutdown", flag("shutdown_timeout")),
        )
        if value is not None
    }
    settings = dataclasses.replace(
        base,
        **top,  # type: ignore[arg-type]
        leader_election=dataclasses.replace(base.leader_election, **le),  # type: ignore[arg-type]
        timeouts=dataclasses.replace(base.timeouts, **timeouts),  # type: ignore[arg-type]
    )
    return settings.validate(config_file or "command line")


class ServeRunner:
    """One ``phalanx serve`` process: optional election, scheduling, health server.

    Tests drive it directly (``await runner.run(stop)``) and look at :attr:`scheduler`,
    :attr:`elector` and :attr:`health`.
    """

    def __init__(
        self,
        settings: ServeSettings,
        config: ClusterConfig,
        *,
        in_cluster: bool = False,
        identity: str | None = None,
        metrics_host: str | None = None,
        health_port: int | None = None,
        backoff: Backoff | None = None,
        trust_env: bool = True,
    ) -> None:
        self.settings = settings
        self.config = config
        self.leader_elect = (
            settings.leader_election.enabled
            if settings.leader_election.enabled is not None
            else in_cluster
        )
        self.identity = identity
        #: None: ``settings.metrics_address``.
        self.metrics_host = metrics_host or settings.metrics_address
        #: None: ``settings.metrics_port`` (0 = off); a number (0 = any free port) overrides.
        self.health_port = health_port
        self.backoff = backoff
        self.trust_env = trust_env
        self.metrics = Metrics()
        self.scheduler: InstrumentedScheduler | None = None
        self.elector: LeaderElector | None = None
        self.health: HealthServer | None = None
        self.client: KubeClient | None = None
        self.started = asyncio.Event()  # health server up (its port known)

    def ready(self) -> bool:
        """Leader (or no election): informers synced and the state built. Standby: the API
        answered. Neither while the API server is unreachable."""
        if self.client is not None and not self.client.reachability.up:
            return False
        scheduler = self.scheduler
        if scheduler is not None:
            return scheduler.cache.started  # informers synced, the state built
        elector = self.elector
        return elector is not None and not elector.is_leader and elector.observed.is_set()

    async def _lead(self, client: KubeClient, stop: asyncio.Event) -> None:
        s = self.settings
        scheduler = InstrumentedScheduler(
            client,
            metrics=self.metrics,
            scheduler_name=s.scheduler_name,
            policy=s.policy,
            scorers=s.scoring,
            actions=s.actions,
            orderings=s.orderings,
            bind_concurrency=s.bind_concurrency,
            backoff=self.backoff,
            recovery=s.recovery,
            topology=s.topology,
        )
        self.scheduler = scheduler
        try:
            await scheduler.serve(stop, period=s.period)
        finally:
            self.scheduler = None

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        async with contextlib.AsyncExitStack() as stack:
            port = s.metrics_port if self.health_port is None else self.health_port
            if self.health_port is not None or port:
                self.health = HealthServer(
                    self.metrics, self.ready, port=port, host=self.metrics_host
                )
                await stack.enter_async_context(self.health)
            client = await stack.enter_async_context(
                KubeClient(self.config, timeout=s.timeouts.request, trust_env=self.trust_env)
            )
            self.client = client
            self.started.set()
            logger.info(
                "phalanx serve: scheduler %s on %s (leader election %s)",
                s.scheduler_name,
                self.config.source,
                "on" if self.leader_elect else "off",
            )
            if not self.leader_elect:
                self.metrics.set_leader(True)
                await self._lead(client, stop)
                return
            le = s.leader_election
            self.elector = LeaderElector(
                client,
                namespace=le.lease_namespace
                or os.environ.get("POD_NAMESPACE")
                or self.config.namespace,
                name=le.lease_name or s.scheduler_name,
                identity=self.identity,
                lease_duration=le.lease_duration,
                renew_deadline=le.renew_deadline,
                retry_period=le.retry_period,
                on_change=self.metrics.set_leader,
            )
            await self.elector.run(stop, lambda term_stop: self._lead(client, term_stop))


async def serve(args: argparse.Namespace) -> None:
    settings = resolve_settings(args)
    config = load_config(args.kubeconfig)
    in_cluster = args.kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    runner = ServeRunner(settings, config, in_cluster=in_cluster)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if not stop.is_set():
            logger.info("phalanx serve: %s, shutting down", sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    task = asyncio.create_task(runner.run(stop))
    try:
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), settings.timeouts.shutdown)
            except TimeoutError:
                logger.warning("phalanx serve: shutdown took too long; cancelling")
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return  # asked to stop, and stopped: not an error
        task.result()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def serve_command(args: argparse.Namespace, err: IO[str] | None = None) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    try:
        asyncio.run(serve(args))
    except LiveError as exc:
        print(f"phalanx: error: {exc}", file=err or sys.stderr)
        return 2
    except InputError as exc:
        print(f"phalanx: error: {exc.line()}", file=err or sys.stderr)
        return 2
    return 0
