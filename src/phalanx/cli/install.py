"""``phalanx manifests``: print the install manifests for ``phalanx serve`` as multi-document YAML.

Usage: ``phalanx manifests [--namespace NS] [--image IMAGE] [--scheduler-name NAME] |
kubectl apply -f -``. The objects come from :func:`phalanx.live.manifests.install_manifests`.
``phalanx manifests --example`` prints the seed example instead (:mod:`phalanx.live.example`).
"""

from __future__ import annotations

import argparse
from typing import IO

import yaml

from phalanx.live.example import EXAMPLE_NAMESPACE, example_gang
from phalanx.live.manifests import (
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    install_manifests,
)
from phalanx.live.resources import DEFAULT_SCHEDULER_NAME


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "manifests",
        help="print the Kubernetes manifests that install phalanx serve",
        description=(
            "Print the PodGroup CRD, Namespace, ServiceAccount, least-privilege RBAC, metrics "
            "Service and Deployment of the phalanx scheduler as multi-document YAML, e.g. "
            "phalanx manifests | kubectl apply -f -"
        ),
    )
    parser.add_argument(
        "--namespace", default=DEFAULT_NAMESPACE, help="namespace to run in (default: %(default)s)"
    )
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help="container image (default: %(default)s)"
    )
    parser.add_argument(
        "--scheduler-name",
        default=DEFAULT_SCHEDULER_NAME,
        help="the schedulerName pods ask for (default: %(default)s)",
    )
    parser.add_argument(
        "--allow-evict",
        action="store_true",
        help="kept for compatibility: pods/eviction create is granted by default now (the "
        "default policy preempts through the Eviction API)",
    )
    parser.add_argument(
        "--example",
        action="store_true",
        help=(
            f"print the seed example instead: namespace {EXAMPLE_NAMESPACE}, a PodGroup with "
            "minMember 3 and a Job of 4 pods for the scheduler"
        ),
    )


def manifests_command(args: argparse.Namespace, out: IO[str]) -> int:
    if args.example:
        docs = example_gang(scheduler_name=args.scheduler_name)
    else:
        docs = install_manifests(
            namespace=args.namespace,
            image=args.image,
            scheduler_name=args.scheduler_name,
        )
    yaml.safe_dump_all(docs, out, sort_keys=False, default_flow_style=False)
    return 0
