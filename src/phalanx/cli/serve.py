"""``phalanx serve``: run the live secondary scheduler against a cluster.

Usage: ``phalanx serve [--kubeconfig PATH] [--scheduler-name NAME] [--period SECONDS]``. Pods
that ask for ``schedulerName: NAME`` (default ``phalanx``) are placed gang by gang, all or
nothing, by the simulator's engine (:class:`phalanx.live.loop.LiveScheduler`). SIGINT or
SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import IO

from phalanx.live import KubeClient, LiveError, load_config
from phalanx.live.loop import DEFAULT_SCHEDULER_NAME, LiveScheduler

logger = logging.getLogger(__name__)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run phalanx as a secondary scheduler in a Kubernetes cluster",
        description=(
            "Watch the cluster and bind pods whose schedulerName is NAME, gang by gang "
            "(all or nothing). Stops on SIGINT or SIGTERM."
        ),
    )
    parser.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig file (default: in-cluster or ~/.kube)"
    )
    parser.add_argument(
        "--scheduler-name",
        default=DEFAULT_SCHEDULER_NAME,
        metavar="NAME",
        help="the schedulerName of the pods to place (default: %(default)s)",
    )
    parser.add_argument(
        "--period",
        type=_positive,
        default=1.0,
        metavar="SECONDS",
        help="run a cycle at least this often (default: %(default)s)",
    )


async def serve(args: argparse.Namespace) -> None:
    config = load_config(args.kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with KubeClient(config) as client:
            scheduler = LiveScheduler(client, scheduler_name=args.scheduler_name)
            logger.info("phalanx serve: scheduler %s on %s", args.scheduler_name, config.source)
            await scheduler.serve(stop, period=args.period)
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
    return 0
