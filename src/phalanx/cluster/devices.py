"""GPU devices: which GPUs of a node a pod takes, and how much of each.

A node's GPUs are columns of ``gpu_free[N, G]`` (milli-GPU free per device; devices a node
does not have stay at 0, so they never fit). A pod's ``nvidia.com/gpu`` request ``r`` in
milli-GPU means:

- ``r`` a multiple of 1000: ``r / 1000`` whole GPUs, each fully free;
- ``r`` below 1000: a share of one GPU (Alibaba-style GPU sharing) on a device with at least
  ``r`` free;
- anything else (e.g. 1500) is not a valid request.

The aggregate ``nvidia.com/gpu`` column of the node table always equals the sum over devices,
so quota, scores and reports keep working on the aggregate.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from phalanx.cluster.labels import Mask

GPU = "nvidia.com/gpu"
WHOLE = 1000

Devices = npt.NDArray[np.int64]


def shape(milli: int) -> tuple[int, int]:
    """``(devices, milli per device)`` for a request, ``(0, 0)`` for none."""
    if milli <= 0:
        return (0, 0)
    if milli < WHOLE:
        return (1, milli)
    return (milli // WHOLE, WHOLE)


def invalid(milli: int) -> str | None:
    if milli > WHOLE and milli % WHOLE:
        return f"requests {milli / 1000:g} GPUs: above one GPU, requests must be whole GPUs"
    return None


def build(allocatable_milli: npt.NDArray[np.int64]) -> Devices:
    """All GPUs free: ``WHOLE`` on each device a node has, 0 on the padding. A node whose
    allocatable is not a whole number of GPUs gets a last, partial device, so the devices
    always add up to the node's ``nvidia.com/gpu`` allocatable."""
    full, rest = np.divmod(allocatable_milli, WHOLE)
    count = full + (rest > 0)
    width = int(count.max()) if count.size else 0
    columns = np.arange(width)[None, :]
    devices = np.where(columns < full[:, None], WHOLE, 0)
    devices = np.where(columns == full[:, None], rest[:, None], devices)
    return np.asarray(devices, dtype=np.int64)


def fits(free: Devices, milli: int) -> Mask:
    count, each = shape(milli)
    if count == 0:
        return np.ones(free.shape[0], dtype=bool)
    if each == WHOLE:
        return np.asarray((free == WHOLE).sum(axis=1) >= count, dtype=bool)
    return np.asarray((free >= each).any(axis=1), dtype=bool)


def capacity(free: Devices, milli: int) -> npt.NDArray[np.int64]:
    """How many pods of this GPU request each node's devices could take."""
    count, each = shape(milli)
    if count == 0:
        return np.full(free.shape[0], np.iinfo(np.int64).max // 4, dtype=np.int64)
    if each == WHOLE:
        return np.asarray((free == WHOLE).sum(axis=1) // count, dtype=np.int64)
    return np.asarray((free // each).sum(axis=1), dtype=np.int64)


def pick(free_row: npt.NDArray[np.int64], milli: int) -> tuple[int, ...]:
    """Devices for the request on one node: the first fully free GPUs for whole GPUs, the
    fullest GPU that still has room (best fit; the first of equals) for a share; ``()`` if it
    does not fit. In Python integers: a node has a handful of devices."""
    count, each = shape(milli)
    if count == 0:
        return ()
    free = free_row.tolist()
    if each == WHOLE:
        whole = [device for device, left in enumerate(free) if left == WHOLE]
        return tuple(whole[:count]) if len(whole) >= count else ()
    best = -1
    for device, left in enumerate(free):
        if left >= each and (best < 0 or left < free[best]):
            best = device
    return () if best < 0 else (best,)


def per_device(milli: int) -> int:
    return shape(milli)[1]
