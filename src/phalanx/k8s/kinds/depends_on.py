"""JobSet's ``dependsOn`` (JobSet v0.8 on), read for a JobSet and for a Kubeflow training
runtime's JobSet template: the order in which the JobSet controller creates its Jobs.

``replicatedJobs[].dependsOn: [{name, status}]``: the replicated job's Jobs are created only
once every Job of the replicated job ``name`` is ``Complete`` (all its pods succeeded) or
``Ready`` (all the pods it runs at once are running, or done). A replicated job may name
several. Checked: ``name`` names another replicated job of the same object, listed before it
(JobSet's webhook refuses the others, which also rules out cycles: a cycle is named as such),
``status`` is ``Ready`` or ``Complete``. The simulator's Job controller waits
(:mod:`phalanx.sim.controller`).

A replicated job that another one waits for runs before that one exists, so it cannot be in a
gang with it: :func:`waited_for` names them, and the gang a controller makes of every pod
(Kueue's admission of the whole object, a TrainJob's PodGroup) leaves their pods out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from phalanx.api.specs import JobDependency, JobSpec
from phalanx.k8s.fields import Obj, as_mapping, child, fail, get_list, get_str

READY = "Ready"
COMPLETE = "Complete"
STATUSES = (READY, COMPLETE)
#: replicated job → what it waits for: (replicated job, status)
Dependencies = Mapping[str, tuple[tuple[str, str], ...]]


def read_depends_on(
    items: Sequence[tuple[str, Obj, str]],
) -> dict[str, tuple[tuple[str, str], ...]]:
    """The ``dependsOn`` of each replicated job ``(name, item, path)``, checked (see the
    module's docstring)."""
    names = [name for name, _, _ in items]
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for name, item, path in items:
        where = child(path, "dependsOn")
        deps: list[tuple[str, str]] = []
        for i, raw in enumerate(get_list(item, "dependsOn", path)):
            entry_path = child(where, i)
            entry = as_mapping(raw, entry_path)
            other = get_str(entry, "name", entry_path)
            status = get_str(entry, "status", entry_path)
            if not other:
                fail(child(entry_path, "name"), "is required")
            if other not in names:
                known = ", ".join(names)
                fail(child(entry_path, "name"), f"no replicated job {other!r} (there are: {known})")
            if status not in STATUSES:
                fail(child(entry_path, "status"), f"must be Ready or Complete, not {status!r}")
            deps.append((other, status))
        out[name] = tuple(deps)
    _check_order(items, out)
    return out


def _check_order(items: Sequence[tuple[str, Obj, str]], deps: Dependencies) -> None:
    paths = {name: path for name, _, path in items}
    order = {name: i for i, (name, _, _) in enumerate(items)}
    for name, _, path in items:
        for i, (other, _) in enumerate(deps[name]):
            if order[other] < order[name]:
                continue
            field = child(child(child(path, "dependsOn"), i), "name")
            cycle = _cycle_through(name, other, deps)
            if cycle:
                fail(field, f"a cycle: {' → '.join(cycle)}")
            where = paths[other]
            fail(field, f"{other!r} ({where}) is listed after {name!r}; JobSet needs it before")


def _cycle_through(start: str, first: str, deps: Dependencies) -> list[str]:
    """``start → first → … → start`` when waiting on ``first`` leads back to ``start``."""
    if first == start:
        return [start, start]
    trail, seen = [start, first], {first}
    stack = [(first, iter(deps.get(first, ())))]
    while stack:
        _, rest = stack[-1]
        nxt = next(rest, None)
        if nxt is None:
            stack.pop()
            trail.pop()
            continue
        other = nxt[0]
        if other == start:
            return [*trail, start]
        if other not in seen:
            seen.add(other)
            trail.append(other)
            stack.append((other, iter(deps.get(other, ()))))
    return []


def waited_for(jobs: Iterable[tuple[str, JobSpec]]) -> set[str]:
    """The replicated jobs that another one of ``jobs`` (replicated job, Job) waits for."""
    return {dep.replicated_job for _, job in jobs for dep in job.depends_on}


def job_dependencies(
    deps: tuple[tuple[str, str], ...], job_names: Mapping[str, Sequence[str]]
) -> tuple[JobDependency, ...]:
    """``deps`` (replicated job, status) as the Jobs they name (``job_names``: replicated job →
    its Jobs)."""
    return tuple(JobDependency(rj, tuple(job_names[rj]), status) for rj, status in deps)
