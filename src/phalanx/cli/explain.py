"""``phalanx explain``: why do gangs wait in the cluster, and where would they go now?

Usage: ``phalanx explain [--kubeconfig PATH] [--config FILE] [-n NAMESPACE]
[--scheduler-name NAME] [podgroup/NAME]``. Connects like ``phalanx serve``, lists the cluster
once, runs one scheduling cycle in memory (nothing is bound or written) and prints, for each
waiting gang, the engine's explanation, what the gang needs and the best placement available
now (:mod:`phalanx.live.explain`). ``--config`` reads ``phalanx serve``'s settings file, so the
cycle uses the same scheduler name, policy and scoring weights as the running scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import IO

from phalanx.live import KubeClient, LiveError, TransportError, load_config
from phalanx.live.explain import GangReport, explain, render
from phalanx.live.resources import DEFAULT_SCHEDULER_NAME
from phalanx.live.settings import ServeSettings, load_settings

_KINDS = ("podgroup", "podgroups", "pg", "gang", "workload")


def _target(text: str) -> str:
    kind, slash, name = text.partition("/")
    if not slash:
        return text
    if kind.lower() not in _KINDS or not name:
        raise argparse.ArgumentTypeError(f"expected podgroup/NAME, not {text!r}")
    return name


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="explain why gangs wait in a cluster (read-only, one in-memory cycle)",
        description=(
            "List the cluster once, run one scheduling cycle in memory without binding, and "
            "print for each waiting gang why it waits, what it needs and where it would go now."
        ),
    )
    parser.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig file (default: in-cluster or ~/.kube)"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="phalanx serve's settings file (policy, scoring, name)"
    )
    parser.add_argument("-n", "--namespace", metavar="NAMESPACE", help="only this namespace")
    parser.add_argument(
        "--scheduler-name",
        metavar="NAME",
        help=f"the schedulerName of the pods phalanx places (default: {DEFAULT_SCHEDULER_NAME})",
    )
    parser.add_argument(
        "target",
        nargs="?",
        type=_target,
        metavar="podgroup/NAME",
        help="only this gang (a Workload gang is WORKLOAD-PODGROUP[-REPLICAKEY])",
    )


async def run_explain(args: argparse.Namespace) -> list[GangReport]:
    settings = load_settings(args.config) if args.config else ServeSettings()
    config = load_config(args.kubeconfig)
    try:
        async with KubeClient(config, timeout=settings.timeouts.request) as client:
            return await explain(
                client,
                namespace=args.namespace,
                name=args.target,
                scheduler_name=args.scheduler_name or settings.scheduler_name,
                policy=settings.policy,
                scorers=settings.scoring,
                topology=settings.topology,
                orderings=settings.orderings,
            )
    except TransportError as exc:
        raise TransportError(
            f"cannot reach the API server {config.server} ({config.source}): {exc}"
        ) from None


def explain_command(
    args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None
) -> int:
    try:
        reports = asyncio.run(run_explain(args))
    except LiveError as exc:
        print(f"phalanx: error: {exc}", file=err or sys.stderr)
        return 2
    (out or sys.stdout).write(render(reports))
    return 0
