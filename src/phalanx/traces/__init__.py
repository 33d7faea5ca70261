"""Real GPU-cluster traces (and a calibrated synthetic one) as phalanx workloads.

``load("NAME[:OPTIONS]")`` returns a :class:`~phalanx.api.workload.Workload`: nodes first
(submitted at 0), then pods and gangs with their arrival times and durations. Names and options:

- ``openb[:VARIANT][,timed=1][,nodes=yaml|gpu|all][,pods=N]`` — Alibaba's GPU-sharing cluster:
  1213 GPU nodes and one of 24 pod lists as lone pods (:mod:`.openb`). Untimed by default (FGD's
  arrival-only packing); ``timed=1`` replays creation times and lifetimes.
- ``philly[:vc=ID][,nodes=N][,jobs=N][,scale=F][,queues=1]`` — Microsoft Philly's 82,247 rigid
  jobs as gangs on 8-GPU nodes (:mod:`.philly`); ``queues=1`` makes each virtual cluster a queue
  deserving GPUs in proportion to its node count.
- ``sia[:SET][,workload=K][,seed=S][,jobs=N]`` — Sia/Pollux workloads as gangs of 1-GPU replicas
  on Sia's 64-GPU cluster, with modelled durations (:mod:`.sia`).
- ``synthetic[:jobs=N][,nodes=N][,gpus_per_node=G][,seed=S][,load=F][,share=F][,mix=philly|multi]
  [,gpus_per_pod=G][,max_duration=SECONDS][,queues=SPEC][,high=F]`` — seeded gangs calibrated to
  Philly and openb, no data needed (:mod:`.synthetic`); ``queues`` makes it multi-tenant
  (:mod:`.tenants`).
- ``tiresias[:nodes=N][,gpus_per_node=G]`` — Tiresias' 60-job sample (:mod:`.tiresias`).

``synthetic`` and ``philly`` also take ``cluster=lingjun[,topology=preferred|required]
[,level=rack|block][,min_gpus=G][,max_gpus=G]``: the same jobs on Alibaba Lingjun's 847-host
Clos network with a topology constraint on every gang (:mod:`.lingjun`; ``synthetic`` then sizes its
arrival rate for that cluster). ``synthetic``'s ``mix=large`` keeps Philly's gangs of 8 GPUs
and more.

Data come from :func:`trace_root` (override with ``root=``). Every problem — unknown trace,
option or value, missing or truncated file, unknown or missing column, malformed row — is a
one-line :class:`~phalanx.api.errors.InputError` naming the spec or file, row and column.

Layering: imports only :mod:`phalanx.api`, :mod:`phalanx.k8s`, the standard library, numpy, yaml.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from phalanx.api.errors import InputError
from phalanx.api.workload import Workload
from phalanx.traces._options import Options, split_spec
from phalanx.traces.lingjun import lingjun_nodes, on_lingjun
from phalanx.traces.openb import OPENB_VARIANTS, openb_nodes, openb_pods, openb_workload
from phalanx.traces.philly import philly_workload
from phalanx.traces.sia import SIA_SETS, sia_workload
from phalanx.traces.synthetic import DURATION_MAX, synthetic_workload
from phalanx.traces.tiresias import tiresias_workload

ENV_VAR = "PHALANX_TRACES"
TRACE_NAMES = ("openb", "philly", "sia", "synthetic", "tiresias")

__all__ = [
    "ENV_VAR",
    "OPENB_VARIANTS",
    "SIA_SETS",
    "TRACE_NAMES",
    "load",
    "openb_nodes",
    "openb_pods",
    "openb_workload",
    "philly_workload",
    "sia_workload",
    "synthetic_workload",
    "tiresias_workload",
    "trace_root",
]


def trace_root() -> Path:
    """Where the shared traces are: ``$PHALANX_TRACES``, else ``../shared/traces`` from the
    current directory, else a ``shared/traces`` beside a folder above this file (the repository's
    sibling), else the current-directory guess (which then does not exist)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    guess = Path.cwd().parent / "shared" / "traces"
    if guess.is_dir():
        return guess
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "traces"
        if candidate.is_dir():
            return candidate
    return guess


def _openb(root: Path, o: Options) -> Workload:
    return openb_workload(
        root / "openb",
        o.text("variant") or "default",
        timed=bool(o.flag("timed")),
        nodes=o.text("nodes") or "yaml",
        pods=o.integer("pods"),
    )


def _philly(root: Path, o: Options) -> Workload:
    scale = o.number("scale")
    workload = philly_workload(
        root / "philly",
        vc=o.text("vc"),
        nodes=o.integer("nodes"),
        jobs=o.integer("jobs"),
        scale=1.0 if scale is None else scale,
        queues=bool(o.flag("queues")),
    )
    return _cluster(root, o, workload)


LINGJUN = "lingjun-topology"
CLUSTER_OPTIONS = ("cluster", "topology", "level", "min_gpus", "max_gpus")


def _cluster(root: Path, o: Options, workload: Workload) -> Workload:
    """The workload moved onto the cluster named by ``cluster=`` (only ``lingjun``)."""
    cluster = o.text("cluster")
    if cluster is None:
        for key in CLUSTER_OPTIONS[1:]:
            if key in o.values:
                raise InputError("needs cluster=lingjun", source=o.spec, field=key)
        return workload
    if cluster != "lingjun":
        raise InputError(f"must be lingjun, not {cluster!r}", source=o.spec, field="cluster")
    min_gpus = o.integer("min_gpus", minimum=0)
    return on_lingjun(
        workload,
        root / LINGJUN,
        mode=o.text("topology") or "none",
        level=o.text("level") or "rack",
        min_gpus=0 if min_gpus is None else min_gpus,
        max_gpus=o.integer("max_gpus"),
    )


def _sia(root: Path, o: Options) -> Workload:
    workload = o.integer("workload")
    seed = o.integer("seed", minimum=0)
    return sia_workload(
        root / "sia-workloads",
        o.text("set") or "saturn",
        workload=1 if workload is None else workload,
        seed=0 if seed is None else seed,
        jobs=o.integer("jobs"),
    )


def _synthetic(root: Path, o: Options) -> Workload:
    jobs, nodes, per_node = o.integer("jobs"), o.integer("nodes"), o.integer("gpus_per_node")
    if o.text("cluster") == "lingjun":
        if nodes is not None or per_node is not None:
            raise InputError("cluster=lingjun sets the nodes", source=o.spec, field="nodes")
        nodes = len(lingjun_nodes(_data(root) / LINGJUN))
    seed, load_, share = o.integer("seed", minimum=0), o.number("load"), o.number("share", high=1)
    per_pod, cap = o.integer("gpus_per_pod"), o.number("max_duration")
    high = o.number("high", high=1)
    workload = synthetic_workload(
        queues=o.text("queues"),
        high=0.0 if high is None else high,
        mix=o.text("mix") or "philly",
        gpus_per_pod=per_pod,
        max_duration=DURATION_MAX if cap is None else cap,
        jobs=1000 if jobs is None else jobs,
        nodes=16 if nodes is None else nodes,
        gpus_per_node=8 if per_node is None else per_node,
        seed=0 if seed is None else seed,
        load=0.9 if load_ is None else load_,
        share=0.0 if share is None else share,
    )
    return _cluster(root, o, workload)


def _data(root: Path) -> Path:
    if not root.is_dir():
        raise InputError(f"traces folder not found (give root= or set {ENV_VAR})", source=str(root))
    return root


def _tiresias(root: Path, o: Options) -> Workload:
    nodes, per_node = o.integer("nodes"), o.integer("gpus_per_node")
    return tiresias_workload(
        root / "tiresias-60job",
        nodes=4 if nodes is None else nodes,
        gpus_per_node=4 if per_node is None else per_node,
    )


@dataclass(frozen=True, slots=True)
class _Trace:
    options: Sequence[str]
    variant_key: str | None
    build: Callable[[Path, Options], Workload]
    needs_data: bool = True


_TRACES = {
    "openb": _Trace(("variant", "timed", "nodes", "pods"), "variant", _openb),
    "philly": _Trace(("vc", "nodes", "jobs", "scale", "queues", *CLUSTER_OPTIONS), None, _philly),
    "sia": _Trace(("set", "workload", "seed", "jobs"), "set", _sia),
    "synthetic": _Trace(
        (
            "jobs",
            "nodes",
            "gpus_per_node",
            "seed",
            "load",
            "share",
            "mix",
            "gpus_per_pod",
            "max_duration",
            "queues",
            "high",
            *CLUSTER_OPTIONS,
        ),
        None,
        _synthetic,
        needs_data=False,
    ),
    "tiresias": _Trace(("nodes", "gpus_per_node"), None, _tiresias),
}


def load(spec: str, *, root: Path | None = None) -> Workload:
    """The workload of trace spec ``NAME[:OPTIONS]`` (see the module docstring)."""
    name, items = split_spec(spec)
    trace = _TRACES.get(name)
    if trace is None:
        raise InputError(
            f"unknown trace {name!r} (valid: {', '.join(TRACE_NAMES)})", source=spec, field="trace"
        )
    options = Options(spec, name, items, trace.options, variant_key=trace.variant_key)
    base = trace_root() if root is None else Path(root)
    if trace.needs_data and not base.is_dir():
        raise InputError(
            f"traces folder not found (give root= or set {ENV_VAR})", source=os.fspath(base)
        )
    try:
        return trace.build(base, options)
    except InputError as exc:
        raise exc.located(source=spec) from None
