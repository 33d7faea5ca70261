"""The per-cluster resource index: resource name → column of every resource matrix."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from phalanx.api.quantity import format_units, is_gpu
from phalanx.api.specs import Resources

Vector = npt.NDArray[np.int64]

#: Columns every cluster has, in this order, so tests and reports can rely on them.
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu")


class ResourceIndex:
    """Maps resource names to columns; built once per cluster from every name in the input."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: list[str] = []
        self.position: dict[str, int] = {}
        for name in (*BASE_RESOURCES, *sorted(set(names) - set(BASE_RESOURCES))):
            self.position[name] = len(self.names)
            self.names.append(name)

    def __len__(self) -> int:
        return len(self.names)

    def grow(self, names: Iterable[str]) -> int:
        """Add names first seen at run time, as new last columns; how many were added. The
        owner pads every matrix and vector built on the index (``ClusterState`` does)."""
        added = 0
        for name in sorted(set(names) - set(self.position)):
            self.position[name] = len(self.names)
            self.names.append(name)
            added += 1
        return added

    def pad(self, vector: Vector) -> Vector:
        """``vector`` with zeros for the columns added since it was built."""
        if vector.size == len(self.names):
            return vector
        out = np.zeros(len(self.names), dtype=np.int64)
        out[: vector.size] = vector
        return out

    def __contains__(self, name: object) -> bool:
        return name in self.position

    def vector(self, resources: Resources) -> Vector:
        """The resources as an int64 vector; raises KeyError for a name the index lacks."""
        out = np.zeros(len(self.names), dtype=np.int64)
        for name, amount in resources.items():
            out[self.position[name]] = amount
        return out

    def unknown(self, resources: Resources) -> list[str]:
        """Names in ``resources`` with a non-zero amount that the index lacks."""
        return sorted(
            name for name, amount in resources.items() if amount and name not in self.position
        )

    def mapping(self, vector: Vector) -> Resources:
        """Non-zero entries of ``vector`` as a dict."""
        return {self.names[i]: int(vector[i]) for i in np.flatnonzero(vector)}

    def gpu_columns(self) -> list[int]:
        return [i for i, name in enumerate(self.names) if is_gpu(name)]

    def describe(self, vector: Vector, *, skip_pods: bool = True) -> str:
        """``{cpu: 2, nvidia.com/gpu: 1}`` in human units."""
        parts = [
            f"{name}: {format_units(name, amount)}"
            for name, amount in self.mapping(vector).items()
            if not (skip_pods and name == "pods")
        ]
        return "{" + ", ".join(parts) + "}"


def smallest_total(requests: npt.NDArray[np.int64], count: int) -> Vector:
    """Per resource, the sum of the ``count`` smallest of ``requests`` (one row per pod): a
    lower bound on what any ``count`` of those pods need together, so a gang is called too
    big for the cluster only when it truly is."""
    if requests.size == 0:
        return np.zeros(0, dtype=np.int64)
    if len(requests) == 1 and count >= 1:  # one pod (most gangs of a trace): its request
        return np.array(requests[0], dtype=np.int64)
    first = requests[0]
    if count >= 1 and (requests == first).all():  # one template: count times its request
        taken = min(count, len(requests))
        if int(first.max()) * taken < 2**62:  # exact in int64, as saturating_sum's sum
            return np.asarray(first * taken, dtype=np.int64)
    return saturating_sum(np.sort(requests, axis=0)[:count])


#: The largest amount of a resource in any vector (int64).
MAX_AMOUNT = int(np.iinfo(np.int64).max)


def saturating_sum(rows: npt.NDArray[np.int64]) -> Vector:
    """Column sums of non-negative int64 rows, capped at 2^63-1 instead of wrapping around
    (each amount fits int64, as quantities are range-checked, but two nodes of ``5E`` bytes
    together do not). Exact below the cap; columns that could overflow are summed in Python."""
    total = np.asarray(rows.sum(axis=0), dtype=np.int64)
    if rows.size == 0:
        return total
    for col in np.flatnonzero(rows.sum(axis=0, dtype=np.float64) >= 2.0**62):
        total[col] = min(sum(int(v) for v in rows[:, col]), MAX_AMOUNT)
    return total
