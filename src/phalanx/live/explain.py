"""``phalanx explain``'s engine side: why do gangs wait, and where would they go now?

Design: list Nodes, Pods, PriorityClasses and every gang API once (an API missing from the
cluster is an empty list; the Workload API in the newest version the server serves), build
the state with the same :class:`~phalanx.live.cache.ClusterCache` the live scheduler starts
from (its gangs, orphans and rejections), and run **one engine cycle in memory**. Nothing is
bound and nothing is written: the cycle's binds are only read, as the placement each gang
would get right now.

Every gang with pending members of this scheduler gets a :class:`GangReport`: what it needs
(``minMember``, role minimums, the pending members' summed requests), and either the placement
(node → pods) the engine would commit now, or the engine's explanation of why it waits. Pods
whose PodGroup/Workload is missing are reported too, as a gang waiting for its object.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from phalanx.api.quantity import format_units
from phalanx.api.specs import Resources
from phalanx.cluster.workloads import GangInfo, PodInfo, PodStatus
from phalanx.live.cache import ClusterCache, Obj, orphan_message
from phalanx.live.client import KubeClient
from phalanx.live.discovery import newest_served
from phalanx.live.errors import ApiError
from phalanx.live.resources import (
    DEFAULT_SCHEDULER_NAME,
    KAI_PODGROUPS,
    NODES,
    PDBS,
    POD_GROUP_VERSIONS,
    PODGROUPS,
    PODGROUPS_SIGS,
    PODS,
    PRIORITY_CLASSES,
    QUEUE_OBJECT_VERSIONS,
    QUEUE_OBJECTS,
    TOPOLOGY_RESOURCES,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_VERSIONS,
    Resource,
)
from phalanx.policies import Scheduler, Scorer, get_policy


@dataclass
class GangReport:
    """One waiting gang: what it needs, and where it would go now or why it cannot."""

    namespace: str
    name: str
    api: str  # "" for a lone pod
    min_member: int
    role_minimums: dict[str, int]
    members: int
    bound: int
    pending: list[str]  # pod names
    needs: Resources  # summed requests of the pending members
    fits: bool
    reason: str
    message: str
    #: node → pod names the engine would bind now (empty when it does not fit).
    placement: dict[str, list[str]] = field(default_factory=dict)
    #: gangs the engine would evict to place this one: "ns/name (preempt|reclaim|shrink)"
    preempts: list[str] = field(default_factory=list)
    #: the nodes it would then use (its room is held for it while the victims go)
    preempt_nodes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


async def _list(client: KubeClient, resource: Resource) -> list[Obj]:
    return await _list_served(client, resource) or []


async def _list_served(client: KubeClient, resource: Resource) -> list[Obj] | None:
    """The objects, or None when the API is not served (a CRD or alpha API not installed)."""
    try:
        return (await client.list(resource)).items
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


def _needs(pods: list[PodInfo]) -> Resources:
    total: Resources = {}
    for pod in pods:
        for name, amount in pod.spec.requests.items():
            total[name] = total.get(name, 0) + amount
    return total


def format_resources(resources: Resources) -> str:
    return ", ".join(f"{name}={format_units(name, n)}" for name, n in sorted(resources.items()))


async def explain(
    client: KubeClient,
    *,
    namespace: str | None = None,
    name: str | None = None,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    policy: str = "phalanx",
    scorers: Sequence[Scorer] | None = None,
    now: float | None = None,
    topology: Sequence[str] = (),
    orderings: Sequence[str] | None = None,
) -> list[GangReport]:
    """Reports for the waiting gangs (of ``namespace``, named ``name``, when given);
    ``topology``: the settings' topology levels; ``orderings``: the settings' ordering
    plugins (None: the policy's own)."""
    now = time.time() if now is None else now
    nodes = await _list(client, NODES)
    pods = await _list(client, PODS)
    classes = await _list(client, PRIORITY_CLASSES)
    groups = {r: await _list(client, r) for r in (PODGROUPS, PODGROUPS_SIGS, VOLCANO_PODGROUPS)}
    more = {KAI_PODGROUPS: await _list(client, KAI_PODGROUPS)}
    workload_api = await newest_served(client, WORKLOAD_VERSIONS)
    workloads = await _list(client, workload_api) if workload_api else []
    pod_groups = await newest_served(client, POD_GROUP_VERSIONS)
    if pod_groups is not None:
        more[pod_groups] = await _list(client, pod_groups)
    topologies = {r: await _list_served(client, r) or [] for r in TOPOLOGY_RESOURCES}
    queue_objects = {r: await _list(client, r) for r in QUEUE_OBJECTS}
    for family in QUEUE_OBJECT_VERSIONS:
        served = await newest_served(client, family)
        if served is not None:
            queue_objects[served] = await _list(client, served)
    cache = ClusterCache(scheduler_name, topology=topology)
    snapshot = cache.build(
        nodes=nodes,
        pods=pods,
        podgroups=groups[PODGROUPS],
        podgroups_sigs=groups[PODGROUPS_SIGS],
        volcano_podgroups=groups[VOLCANO_PODGROUPS],
        workloads=workloads,
        priority_classes=classes,
        volcano_queues=await _list_served(client, VOLCANO_QUEUES),
        queue_objects=queue_objects,
        budgets=await _list_served(client, PDBS) or [],
        topologies=[
            o for r, objs in topologies.items() if r is not VOLCANO_HYPERNODES for o in objs
        ],
        hypernodes=topologies[VOLCANO_HYPERNODES],
        groups=more,
        now=now,
    )
    state = snapshot.state
    scheduler = Scheduler(get_policy(policy), scorers=scorers, orderings=orderings)
    scheduler.config = dataclasses.replace(
        scheduler.config, scheduler_names=frozenset({scheduler_name})
    )
    # Gangs' pending members, read before the cycle (its in-memory binds are never applied).
    candidates: list[tuple[GangInfo, list[PodInfo], int]] = []
    for gang in state.gangs.values():
        pending = [
            p
            for p in gang.members
            if p.status is PodStatus.PENDING and p.spec.scheduler_name == scheduler_name
        ]
        if pending:
            bound = sum(p.status is PodStatus.BOUND for p in gang.members)
            candidates.append((gang, pending, bound))
    result = scheduler.cycle(state, now)
    node_names = state.table.names
    placements: dict[str, dict[str, list[str]]] = {}
    for pod, node in result.binds:
        where = placements.setdefault(pod.gang.ident, {})
        where.setdefault(node_names[node], []).append(pod.spec.name)

    victims: dict[str, set[str]] = {}
    for pod in result.evictions:
        reason, by = result.disruptions.get(pod.key, ("preempt", ""))
        victims.setdefault(by, set()).add(f"{pod.gang.key} ({reason})")
    held = {h.gang: sorted(node_names[row] for row in h.rows) for h in result.holds}

    reports: list[GangReport] = []
    for gang, pending, bound in candidates:
        spec = gang.spec
        gang_ns, _, gang_name = gang.key.partition("/")
        placement = placements.get(gang.ident, {})
        condition = result.waiting.get(gang.ident) or gang.condition
        if placement:
            reason, message = "Fits", "would be bound now: every pending member fits"
        elif condition is not None:
            reason, message = condition.reason, condition.message
        else:
            reason, message = "Unknown", "the engine did not consider this gang in this cycle"
        reports.append(
            GangReport(
                namespace=gang_ns,
                name=gang_name,
                api=spec.api if spec is not None else "",
                min_member=gang.min_member,
                role_minimums=dict(gang.role_minimums),
                members=len(gang.members),
                bound=bound,
                pending=sorted(p.spec.name for p in pending),
                needs=_needs(pending),
                fits=bool(placement),
                reason=reason,
                message=message,
                placement={n: sorted(ps) for n, ps in sorted(placement.items())},
                preempts=sorted(victims.get(gang.ident, ())),
                preempt_nodes=held.get(gang.ident, []),
            )
        )
    for key, orphans in state.orphans.items():
        pending = [p for p in orphans if p.status is PodStatus.PENDING]
        if not pending:
            continue
        gang_ns, _, gang_name = key.partition("/")
        ref = pending[0].spec.gang
        api = ref.api if ref is not None else ""
        reports.append(
            GangReport(
                namespace=gang_ns,
                name=gang_name,
                api=api,
                min_member=0,
                role_minimums={},
                members=len(orphans),
                bound=sum(p.status is PodStatus.BOUND for p in orphans),
                pending=sorted(p.spec.name for p in pending),
                needs=_needs(pending),
                fits=False,
                reason="GroupMissing",
                message=orphan_message(key, orphans, cache.rejected),
            )
        )
    reports = [
        r
        for r in reports
        if (namespace is None or r.namespace == namespace) and (name is None or r.name == name)
    ]
    reports.sort(key=lambda r: (r.namespace, r.name))
    return reports


def render(reports: list[GangReport]) -> str:
    """The human-readable text ``phalanx explain`` prints."""
    if not reports:
        return "no waiting gangs\n"
    lines: list[str] = []
    for r in reports:
        kind = f"gang {r.key} ({r.api})" if r.api else f"pod {r.key}"
        lines.append(kind)
        roles = "".join(f", {role} >= {n}" for role, n in sorted(r.role_minimums.items()))
        lines.append(
            f"  needs: minMember {r.min_member}{roles}; {r.members} members, {r.bound} bound, "
            f"{len(r.pending)} pending ({format_resources(r.needs)})"
        )
        lines.append(f"  status: {r.reason}: {r.message}")
        if r.placement:
            lines.append("  best placement now:")
            for node, pods in r.placement.items():
                lines.append(f"    {node} <- {', '.join(pods)}")
        elif r.preempts:
            lines.append(
                f"  would preempt: {', '.join(r.preempts)}; then placed on "
                f"{', '.join(r.preempt_nodes)}"
            )
        else:
            lines.append("  best placement now: none (see status)")
    return "\n".join(lines) + "\n"
