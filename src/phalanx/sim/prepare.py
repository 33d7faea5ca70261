"""Checks a workload before a run and builds the cluster's resource index.

Errors found here are input errors the CLI reports in one line: a gang whose ``minMember``
members need more than the whole cluster has, nodes that appear late (the simulated cluster
is fixed for a run), a workload without nodes. A gang a snapshot shows running (a member with
``spec.nodeName``) is not checked: it runs, perhaps on nodes now cordoned, which "the whole
cluster" (its schedulable nodes) leaves out.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from phalanx.api.errors import InputError
from phalanx.api.quantity import format_units
from phalanx.api.specs import GangSpec, JobSpec, NodeSpec, PodSpec, QuotaSpec
from phalanx.api.workload import Item, Workload
from phalanx.cluster.resources import ResourceIndex, Vector, saturating_sum, smallest_total
from phalanx.sim.schedulers import pod_templates


def resource_index(workload: Workload) -> ResourceIndex:
    names: set[str] = set()
    for spec in workload.of(NodeSpec):
        names.update(spec.allocatable)
    for pod in pod_templates(workload):
        names.update(pod.requests)
    for quota in workload.of(QuotaSpec):
        names.update(quota.hard)
    return ResourceIndex(names)


def check(workload: Workload, index: ResourceIndex) -> None:
    """Raise InputError for what makes a run meaningless."""
    nodes = list(workload.items_of(NodeSpec))
    if not nodes:
        raise InputError("the workload has no Node: a simulation needs a cluster", obj="Node")
    for item in nodes:
        if item.timing.submit_after or item.timing.delete_after is not None:
            node = item.spec
            assert isinstance(node, NodeSpec)
            late = "submit-after" if item.timing.submit_after else "delete-after"
            raise InputError(
                "nodes are fixed for a simulation run; remove this annotation",
                source=item.source,
                obj=f"Node {node.name}",
                field=f"metadata.annotations[phalanx.dev/{late}]",
            )
    rows = [index.vector(n.allocatable) for n in workload.of(NodeSpec) if not n.unschedulable]
    total = saturating_sum(np.array(rows)) if rows else np.zeros(len(index), dtype=np.int64)
    _check_gangs(workload, index, total)


def _check_gangs(workload: Workload, index: ResourceIndex, total: Vector) -> None:
    members: dict[str, list[dict[str, int]]] = defaultdict(list)  # gang key → requests
    gangs: list[tuple[Item, GangSpec]] = []
    running: set[str] = set()  # gangs a snapshot shows running, wholly or in part
    for item in workload.items:  # one pass: a trace has a gang per pod
        spec = item.spec
        if isinstance(spec, PodSpec):
            key = spec.gang_key
            if key is not None:
                members[key].append(spec.requests)
                if spec.node_name:
                    running.add(key)
        elif isinstance(spec, GangSpec):
            gangs.append((item, spec))
        elif isinstance(spec, JobSpec) and spec.template.gang_key is not None:
            members[spec.template.gang_key].extend([spec.template.requests] * spec.parallelism)
    fits: set[tuple[object, ...]] = set()  # gangs of these shapes fit (traces repeat them)
    for item, gang in gangs:
        requests = members.get(gang.key, [])
        shape = (gang.min_member, *(tuple(r.items()) for r in requests))
        if not requests or shape in fits or gang.key in running:
            continue
        need = smallest_total(np.array([index.vector(r) for r in requests]), gang.min_member)
        over = np.flatnonzero(need > total)
        if over.size:
            name = index.names[int(over[0])]
            kind, field = gang.origin
            raise InputError(
                f"a minimum of {gang.min_member} pods needs {name} "
                f"{format_units(name, int(need[over[0]]))} but the whole cluster has "
                f"{format_units(name, int(total[over[0]]))}",
                source=item.source,
                obj=kind if " " in kind else f"{kind} {gang.key}",
                field=field,
            )
        fits.add(shape)
