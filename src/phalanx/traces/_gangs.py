"""Shared building blocks of the trace loaders: GPU nodes and rigid gangs as specs.

Design:

- Units follow the engine: ``cpu`` in milli-CPU, ``memory`` in bytes, ``nvidia.com/gpu`` in
  milli-GPU (one GPU = 1000; a request below 1000 is a share of one GPU). Every pod requests
  ``pods: 1``.
- A rigid job of ``G`` GPUs on nodes of ``P`` GPUs becomes ``G // P`` pods of ``P`` GPUs plus
  one pod of ``G % P`` GPUs when that is not zero (20 GPUs on 8-GPU nodes: 8, 8, 4). All pods
  are required: the gang's ``min_member`` is the number of pods. The gang (a
  ``scheduling.x-k8s.io`` PodGroup) and its pods arrive together and carry the job's duration.
- Homogeneous GPU nodes have an *assumed* SKU where a trace gives no CPU or memory (Philly,
  Tiresias, synthetic): :data:`CPU_PER_GPU` and :data:`MEMORY_PER_GPU` per GPU, i.e. an 8-GPU
  node of 48 vCPU and 512 GiB. This is phalanx's assumption, not trace data, picked in the range
  of 2017-era 8-GPU servers (e.g. 2 × 12-core Xeon with hyper-threading). Their pods request the
  same amounts per GPU they use, so CPU and memory never bind before GPUs do.
- Loading 80,000 jobs must take a few seconds, so :class:`GangMaker` caches, per GPU count, the
  tuple of per-pod request dicts and shares them between pods (specs are never mutated; labels
  stay per pod), and every pod uses the one default :class:`Placement`. One :class:`Timing` is
  shared by a gang and its pods. Building runs inside :func:`paused_gc`: the hundreds of
  thousands of acyclic objects otherwise trigger collections that double the load time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from phalanx.api.specs import GangRef, GangSpec, NodeSpec, PodSpec, Resources
from phalanx.api.workload import Item, Timing

GPU = "nvidia.com/gpu"
MILLI_PER_GPU = 1000
GANG_API = "scheduling.x-k8s.io"
GIB = 2**30
MIB = 2**20
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Label with the GPU model of nodes of traces other than openb (NVIDIA GPU feature discovery).
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Assumed node SKU per GPU where a trace has no CPU/memory: 6 vCPU and 64 GiB per GPU.
CPU_PER_GPU = 6000
MEMORY_PER_GPU = 64 * GIB
#: ``allocatable.pods`` of generated nodes (kubelet's default ``--max-pods``).
MAX_PODS = 110
NODE_TIMING = Timing()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def split_gpus(gpus: int, per_node: int) -> list[int]:
    """GPUs of each pod of a ``gpus``-GPU job on ``per_node``-GPU nodes: full nodes, then rest."""
    whole, rest = divmod(gpus, per_node)
    return [per_node] * whole + ([rest] if rest else [])


def gpu_node(
    name: str,
    gpus: int,
    *,
    cpu: int,
    memory: int,
    labels: dict[str, str] | None = None,
    pods: int = MAX_PODS,
) -> NodeSpec:
    """A node with ``gpus`` whole GPUs (``nvidia.com/gpu`` omitted when 0)."""
    allocatable: Resources = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpus:
        allocatable[GPU] = gpus * MILLI_PER_GPU
    node_labels = {HOSTNAME_LABEL: name}
    if labels:
        node_labels.update(labels)
    return NodeSpec(name=name, allocatable=allocatable, labels=node_labels)


def homogeneous_nodes(
    prefix: str,
    count: int,
    gpus_per_node: int,
    *,
    start: int = 0,
    cpu_per_gpu: int = CPU_PER_GPU,
    memory_per_gpu: int = MEMORY_PER_GPU,
    labels: dict[str, str] | None = None,
) -> list[NodeSpec]:
    """``count`` identical nodes ``PREFIX-SSSS``… (from ``start``) with the assumed SKU."""
    return [
        gpu_node(
            f"{prefix}-{i:04d}",
            gpus_per_node,
            cpu=cpu_per_gpu * gpus_per_node,
            memory=memory_per_gpu * gpus_per_node,
            labels=labels,
        )
        for i in range(start, start + count)
    ]


def node_items(nodes: list[NodeSpec], source: str) -> list[Item]:
    return [Item(spec=node, timing=NODE_TIMING, source=source) for node in nodes]


class GangMaker:
    """Rigid jobs → a GangSpec item followed by its PodSpec items (see the module docstring).

    ``cpu_per_gpu`` / ``memory_per_gpu`` of 0 leave CPU and memory out of the requests.
    """

    __slots__ = ("_cpu", "_memory", "_per_node", "_shapes", "source")

    def __init__(
        self,
        gpus_per_node: int,
        source: str,
        *,
        cpu_per_gpu: int = CPU_PER_GPU,
        memory_per_gpu: int = MEMORY_PER_GPU,
    ) -> None:
        self._per_node = gpus_per_node
        self._cpu = cpu_per_gpu
        self._memory = memory_per_gpu
        self._shapes: dict[int, tuple[Resources, ...]] = {}
        self.source = source

    def requests(self, gpu_milli: int) -> Resources:
        """A pod's requests for ``gpu_milli`` milli-GPU (CPU/memory proportional)."""
        requests: Resources = {"pods": 1, GPU: gpu_milli}
        if self._cpu:
            requests["cpu"] = self._cpu * gpu_milli // MILLI_PER_GPU
        if self._memory:
            requests["memory"] = self._memory * gpu_milli // MILLI_PER_GPU
        return requests

    def shape(self, gpus: int) -> tuple[Resources, ...]:
        """The (shared, cached) requests of each pod of a ``gpus``-GPU job."""
        shape = self._shapes.get(gpus)
        if shape is None:
            shape = tuple(
                self.requests(n * MILLI_PER_GPU) for n in split_gpus(gpus, self._per_node)
            )
            self._shapes[gpus] = shape
        return shape

    def add(
        self,
        items: list[Item],
        namespace: str,
        name: str,
        gpus: int,
        duration: float | None,
        submit: float,
        labels: dict[str, str] | None = None,
        *,
        queue: str = "default",
        priority: int = 0,
    ) -> None:
        """Append the gang ``namespace/name`` and its pods ``NAME-0``, ``NAME-1``… to ``items``."""
        shape = self.shape(gpus)
        timing = Timing(submit_after=submit)
        source = self.source
        items.append(
            Item(
                GangSpec(
                    namespace=namespace,
                    name=name,
                    min_member=len(shape),
                    api=GANG_API,
                    duration=duration,
                    queue=queue,
                    priority=priority or None,
                ),
                timing,
                source,
            )
        )
        ref = GangRef(name, GANG_API)
        for index, requests in enumerate(shape):
            pod = PodSpec(
                namespace=namespace,
                name=f"{name}-{index}",
                requests=requests,
                gang=ref,
                labels={} if labels is None else dict(labels),
                duration=duration,
                priority=priority,
            )
            items.append(Item(pod, timing, source))
