"""Run several policies on the same workload, in parallel processes where cores allow.

A workload is named by a string so that it can cross a process boundary: an existing manifest
file (or several, comma-separated) is read with :func:`phalanx.k8s.load_files`; anything else of
the form ``NAME[:OPTIONS]`` (``synthetic:jobs=200,seed=1``) goes to ``phalanx.traces.load``.
Each worker loads the workload itself and returns the run's ``SimResult.to_json()`` dict, so
nothing but strings, numbers and dicts is pickled. Every run is seeded by ``--seed`` alone, so
the results do not depend on which process ran which policy or in what order they finished.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any

from phalanx.api.errors import InputError
from phalanx.api.workload import Workload
from phalanx.k8s import load_files
from phalanx.policies import POLICIES, SCORINGS
from phalanx.policies.registry import unknown
from phalanx.sim.simulator import SimOptions, simulate


def workload_files(spec: str) -> list[str] | None:
    """The manifest files or directories ``spec`` names, or None when it does not name
    existing ones."""
    parts = [part.strip() for part in spec.split(",")]
    if parts and all(part and (os.path.isfile(part) or os.path.isdir(part)) for part in parts):
        return parts
    return None


def _file_like(part: str) -> bool:
    """Does ``part`` name a file rather than a trace (a path, or a manifest's suffix)?"""
    return os.sep in part or part.lower().endswith((".yaml", ".yml", ".json"))


def load_workload(spec: str, seed: int = 0) -> Workload:
    """The workload named by ``spec``: manifest file(s), or ``NAME[:OPTIONS]`` for a trace;
    ``seed`` completes manifests' ``generateName``."""
    files = workload_files(spec)
    if files is not None:
        return load_files(files, seed=seed)
    parts = [part.strip() for part in spec.split(",")]
    missing = [part for part in parts if not os.path.isfile(part)]
    if ":" not in spec and (len(missing) < len(parts) or all(map(_file_like, parts))):
        raise InputError(f"workload file {missing[0]!r} not found", source=spec)
    from phalanx import traces  # lazily: the trace loaders are optional for this module

    loader = getattr(traces, "load", None)
    names: Sequence[str] | None = getattr(traces, "TRACE_NAMES", None)
    name = spec.split(":", 1)[0].strip()
    if loader is None or not name or (names is not None and name not in names):
        hint = (
            f"traces: {', '.join(names)}"
            if names
            else "give manifest FILE[,FILE...] or a trace NAME:OPTIONS"
        )
        raise InputError(f"workload {spec!r} is neither a file nor a known trace ({hint})")
    try:
        workload = loader(spec)
    except InputError:
        raise
    except (KeyError, ValueError) as err:
        raise InputError(f"workload {spec!r}: {err}") from None
    if not isinstance(workload, Workload):
        raise TypeError(f"phalanx.traces.load({spec!r}) returned {type(workload).__name__}")
    return workload


def check_policies(names: Sequence[str]) -> list[str]:
    """``names`` without duplicates, each one a known policy; raise InputError otherwise."""
    chosen: list[str] = []
    for name in names:
        if name not in POLICIES:
            known = ", ".join(POLICIES)
            raise InputError(f"unknown policy {name!r} (choose from {known})", field="--policies")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise InputError("no policy given", field="--policies")
    return chosen


class Progress:
    """``[##########----------] 2/4 policies  kube-default done in 1.2s`` on a stream.

    On a terminal the line is rewritten in place; elsewhere (``--progress`` into a pipe) each
    update is its own line.
    """

    WIDTH = 20

    def __init__(self, total: int, stream: IO[str], *, live: bool) -> None:
        self.total = total
        self.stream = stream
        self.live = live
        self.done = 0
        self._last = 0

    def _write(self, text: str) -> None:
        if self.live:
            pad = " " * max(0, self._last - len(text))
            self.stream.write("\r" + text + pad)
            self._last = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _bar(self) -> str:
        filled = round(self.WIDTH * self.done / self.total) if self.total else self.WIDTH
        return f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {self.done}/{self.total} policies"

    def start(self, what: str) -> None:
        self._write(f"{self._bar()}  {what}")

    def finished(self, policy: str, seconds: float) -> None:
        self.done += 1
        self._write(f"{self._bar()}  {policy} done in {seconds:.1f}s")

    def close(self) -> None:
        if self.live and self._last:
            self.stream.write("\n")
            self.stream.flush()


def progress_for(stream: IO[str], total: int, *, force: bool = False) -> Progress | None:
    """A progress bar when ``stream`` is a terminal or ``force`` is set; None otherwise."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not (tty or force):
        return None
    return Progress(total, stream, live=tty)


@dataclass(frozen=True, slots=True)
class Run:
    """What one worker returns: the policy, its SimResult JSON and the wall time it took."""

    policy: str
    result: dict[str, Any]
    seconds: float


@lru_cache(maxsize=2)
def _cached_workload(spec: str, seed: int) -> Workload:
    return load_workload(spec, seed)


def run_one(spec: str, options: SimOptions, workload: Workload | None = None) -> Run:
    """Simulate ``options.policy`` on the workload ``spec`` (loaded here unless given)."""
    began = time.perf_counter()
    loaded = workload if workload is not None else _cached_workload(spec, options.seed)
    result = simulate(loaded, options).to_json()
    return Run(options.policy, result, time.perf_counter() - began)


def workers_for(count: int) -> int:
    return max(1, min(count, os.cpu_count() or 1))


def run_policies(
    spec: str,
    policies: Sequence[str],
    *,
    seed: int = 0,
    until: float | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    scoring: str | None = None,
    scheduler_name: str | None = None,
    default_duration: float | None = None,
    estimates: str = "given",
) -> dict[str, dict[str, Any]]:
    """Each policy's ``SimResult.to_json()`` on the workload ``spec``, in ``policies`` order.

    ``scoring`` replaces every policy's scoring plugin (a name in the registry's SCORINGS).
    ``workers`` defaults to ``min(len(policies), os.cpu_count())``; with one worker the runs
    happen in this process. Bad input (unknown policy, unknown workload, bad manifests) raises
    :class:`InputError` before any process starts.
    """
    names = check_policies(policies)
    workload = load_workload(spec, seed)
    if scoring is not None and scoring not in SCORINGS:
        raise unknown("scoring", scoring, SCORINGS, "--scoring")
    options = [
        SimOptions(
            policy=name,
            seed=seed,
            until=until,
            scoring=scoring,
            scheduler_name=scheduler_name,
            default_duration=default_duration,
            estimates=estimates,
        )
        for name in names
    ]
    count = workers_for(len(names)) if workers is None else max(1, min(workers, len(names)))
    runs: dict[str, Run] = {}
    if progress is not None:
        progress.start(f"running {', '.join(names)} on {count} process{'es' * (count > 1)}")
    try:
        if count == 1:
            for option in options:
                run = run_one(spec, option, workload)
                runs[run.policy] = run
                if progress is not None:
                    progress.finished(run.policy, run.seconds)
        else:
            with ProcessPoolExecutor(max_workers=count) as pool:
                pending: set[Future[Run]] = {pool.submit(run_one, spec, o) for o in options}
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for future in done:
                        if future.exception() is not None:
                            for other in pending:
                                other.cancel()
                        run = future.result()
                        runs[run.policy] = run
                        if progress is not None:
                            progress.finished(run.policy, run.seconds)
    finally:
        if progress is not None:
            progress.close()
    return {name: runs[name].result for name in names}
