"""Tenants for generated workloads: queue specs from a compact option, and queue objects.

``queues=`` in a trace spec lists queues separated by ``/``, each
``NAME[:WEIGHT[:DESERVED[:TRAFFIC]]]``: ``WEIGHT`` (default 1) shares what is left over,
``DESERVED`` is the queue's entitlement in percent of the cluster's GPUs (default none:
weight only), ``TRAFFIC`` the relative share of the jobs submitted to it (default 1: equal).
``queues=4`` is shorthand for four equal queues ``team-a`` … ``team-d``. Jobs are assigned to
queues by a seeded draw on its own random stream, so the jobs themselves (sizes, durations,
arrivals) are the same with or without queues.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

from phalanx.api.errors import InputError
from phalanx.api.quantity import is_gpu
from phalanx.api.queues import QueueBindingSpec, QueueSpec
from phalanx.api.workload import Item, Timing

GPU = "nvidia.com/gpu"
assert is_gpu(GPU)


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    weight: int = 1
    deserved_pct: float | None = None
    traffic: float = 1.0


def parse_tenants(text: str, source: str) -> list[Tenant]:
    def bad(message: str) -> InputError:
        return InputError(message, source=source, field="queues")

    if text.isdigit():
        count = int(text)
        if not 1 <= count <= 26:
            raise bad(f"must be 1..26 queues, not {count}")
        return [Tenant(f"team-{string.ascii_lowercase[i]}") for i in range(count)]
    tenants: list[Tenant] = []
    for part in text.split("/"):
        fields = part.split(":")
        name = fields[0].strip()
        if not name or len(fields) > 4:
            raise bad(f"{part!r} is not NAME[:WEIGHT[:DESERVED%[:TRAFFIC]]]")
        try:
            weight = int(fields[1]) if len(fields) > 1 and fields[1] else 1
            deserved = float(fields[2].rstrip("%")) if len(fields) > 2 and fields[2] else None
            traffic = float(fields[3]) if len(fields) > 3 and fields[3] else 1.0
        except ValueError:
            raise bad(
                f"{part!r}: weight must be an integer, deserved and traffic numbers"
            ) from None
        if weight < 0 or traffic < 0 or (deserved is not None and not 0 <= deserved <= 100):
            raise bad(f"{part!r}: weight and traffic ≥ 0, deserved in 0..100")
        tenants.append(Tenant(name, weight, deserved, traffic))
    if len({t.name for t in tenants}) != len(tenants):
        raise bad("queue names must differ")
    if sum(t.traffic for t in tenants) <= 0:
        raise bad("at least one queue needs traffic > 0")
    return tenants


def queue_items(tenants: list[Tenant], capacity_gpus: int, source: str) -> list[Item]:
    """One QueueSpec per tenant (deserved in milli-GPU of ``capacity_gpus``)."""
    items = []
    for tenant in tenants:
        deserved = {}
        if tenant.deserved_pct is not None:
            deserved = {GPU: round(tenant.deserved_pct / 100 * capacity_gpus * 1000)}
        spec = QueueSpec(tenant.name, deserved=deserved, weight=tenant.weight, api=source)
        items.append(Item(spec, Timing(), source))
    return items


def assign(tenants: list[Tenant], jobs: int, seed: int) -> list[str]:
    """The queue of each job, drawn in proportion to traffic on a stream of its own."""
    traffic = np.array([t.traffic for t in tenants], dtype=np.float64)
    rng = np.random.default_rng([seed, 11])
    picks = rng.choice(len(tenants), size=jobs, p=traffic / traffic.sum())
    return [tenants[i].name for i in picks.tolist()]


def high_priority(jobs: int, fraction: float, seed: int) -> list[bool]:
    rng = np.random.default_rng([seed, 12])
    return [bool(x) for x in (rng.random(jobs) < fraction)]


def namespace_queues(deserved: dict[str, int], source: str) -> list[Item]:
    """A queue per namespace with ``deserved`` milli-GPU, and the namespace bound to it."""
    items: list[Item] = []
    for name, milli in deserved.items():
        items.append(Item(QueueSpec(name, deserved={GPU: milli}, api=source), Timing(), source))
        items.append(Item(QueueBindingSpec(name, "", name), Timing(), source))
    return items
