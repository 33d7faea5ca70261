"""Who places which pods in a simulation, and why a run placed none.

``simulate`` asks "what if this scheduler placed my workload?", so by default the policy under
test places every pod whatever its ``schedulerName`` (a ``kubectl get -o yaml`` export says
``default-scheduler``; peers' examples say ``volcano``, ``kai-scheduler``, ``yunikorn``...).
With ``--scheduler-name NAME`` it places only the pods naming ``NAME``, and a ``kube-default``
baseline places the others, as the default scheduler would; the baseline runs first in each
cycle. :func:`nothing_placed` says in one line why a run placed no pod at all.
:func:`tell_lazily` lets a run that writes no events tell passed expected starts only when
something reads them (:mod:`phalanx.actions.expect`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from phalanx.actions.reserve import Reserve
from phalanx.api.specs import ControllerSpec, JobSpec, PodSpec
from phalanx.api.workload import Workload
from phalanx.cluster.fragmentation import TargetWorkload
from phalanx.cluster.workloads import GangInfo
from phalanx.policies import Scheduler, get_policy

if TYPE_CHECKING:
    from phalanx.sim.simulator import SimOptions

#: The hold reason of a gang with a scheduling-gated member.
GATED = "SchedulingGated"
BASELINE = "kube-default"


def pod_templates(workload: Workload) -> Iterator[PodSpec]:
    """Every pod and pod template of ``workload`` (once per template, not per replica)."""
    yield from workload.of(PodSpec)
    for job in workload.of(JobSpec):
        yield job.template
    for owner in workload.of(ControllerSpec):
        yield from (pod_set.template for pod_set in owner.pod_sets)
        yield from (job.template for job in owner.jobs)


def schedulers_for(
    workload: Workload, options: SimOptions, target: TargetWorkload | None = None
) -> list[Scheduler]:
    """The schedulers of one cycle, in the order they run; the last is the policy under test
    (``target``: FGD's target workload, the run's own pod shapes)."""
    names = {pod.scheduler_name for pod in pod_templates(workload)} | {"", "phalanx"}
    main = Scheduler(
        get_policy(options.policy),
        seed=options.seed,
        scoring=options.scoring,
        actions=options.actions,
        target=target,
        orderings=options.orderings,
    )
    chosen = options.scheduler_name
    if chosen is None:
        main.config = dataclasses.replace(main.config, scheduler_names=frozenset(names))
        return [main]
    main.config = dataclasses.replace(main.config, scheduler_names=frozenset({chosen}))
    baseline = Scheduler(get_policy(BASELINE), seed=options.seed)
    others = frozenset(names - {chosen})
    baseline.config = dataclasses.replace(baseline.config, scheduler_names=others)
    return [baseline, main]


def tell_lazily(schedulers: Iterable[Scheduler]) -> None:
    """No event stream: a re-told expected start is read only through what the run reports
    (deadlines, first estimates, waiting conditions), so the tellers re-tell only those."""
    for scheduler in schedulers:
        for action in scheduler.actions:
            if isinstance(action, Reserve):
                action.teller.lazy = True


def nothing_placed(gangs: Iterable[GangInfo], scheduler_name: str | None) -> str:
    """Why no pod was placed, in one line."""
    waiting = [g for g in gangs if g.members]
    if not waiting:
        return "no pod was placed: the workload has no pods"
    reasons = Counter(g.condition.reason if g.condition else "NotScheduled" for g in waiting)
    reason, count = reasons.most_common(1)[0]
    example = next(
        (g.condition.message for g in waiting if g.condition and g.condition.reason == reason),
        "",
    )
    pods = sum(len(g.members) for g in waiting)
    hint = ""
    if reason == GATED:
        hint = "; lift the gates with the annotation phalanx.dev/ungate-after"
    elif reason == "OtherScheduler":
        named = Counter(p.spec.scheduler_name for g in waiting for p in g.members)
        other, n = named.most_common(1)[0]
        hint = (
            f"; {n} pods name scheduler {other!r}: run with --scheduler-name {other} "
            "or without --scheduler-name"
        )
    line = f"no pod was placed: {count} of {len(waiting)} gangs ({pods} pods) wait, {reason}"
    line += f" ({example})" if example else ""
    if scheduler_name is not None and reason != "OtherScheduler":
        line += f"; only pods naming {scheduler_name!r} were placed by the policy"
    return line + hint
