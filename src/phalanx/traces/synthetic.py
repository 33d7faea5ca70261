"""A seeded synthetic gang workload calibrated to Philly and openb: demos need no data files.

Design. Job ``i`` (``i`` = 0 … ``jobs`` − 1) draws, from ``numpy.random.default_rng(seed)``
(five arrays in a fixed order, whatever the options, so a seed always gives the same jobs):

- **Gang size** in GPUs from Philly's ``num_gpus`` distribution (82,247 jobs; mean 1.3038),
  computed in the shared traces folder with::

      python -c "import csv, collections; print(sorted(collections.Counter(int(r['num_gpus'])
          for r in csv.DictReader(open('philly/philly.csv'))).items()))"

      GPUs  1      2     4     8     12  16   24  32  64  128
      jobs  76627  1818  1870  1643  7   199  7   67  6   3

  Sizes larger than the cluster (``nodes`` × ``gpus_per_node``) are left out and the rest
  renormalised. A job of ``G`` GPUs is a gang of ``G // gpus_per_node`` full-node pods plus a
  remainder pod (see :mod:`phalanx.traces._gangs`), all required.
- **Duration**: lognormal fitted to Philly's ``duration`` (maximum likelihood: mean and standard
  deviation of ln seconds): ``mu = 6.7909``, ``sigma = 2.1555`` (median 889 s; Philly's is
  1144 s), clipped to Philly's range [1 s, 4,628,226 s] and rounded to whole seconds. Command::

      python -c "import csv, numpy as np; x = np.log([float(r['duration'])
          for r in csv.DictReader(open('philly/philly.csv'))]); print(x.mean(), x.std())"

  Sizes and durations are drawn independently (in Philly they correlate: GPU-weighted mean
  duration 32,835 s against 13,136 s per job).
- **Arrivals**: Poisson. The first job arrives at 0, then exponential gaps at rate
  ``λ = load × capacity_GPUs / E[GPUs × duration]``, so that ``load`` is the offered GPU-time over
  the cluster's GPU-time during the arrival span. ``E[GPUs × duration]`` is
  :func:`mean_gpu_seconds`: the exact mean of the clipped lognormal (≈ 8,932 s) times the mean
  GPU request (after the size cut-off and sharing).
- **Sharing** (``share``, default 0: gangs do not share GPUs): the fraction of 1-GPU jobs that
  become lone GPU-sharing pods (no gang) asking a share of one GPU drawn from openb's
  ``gpu_milli`` of its 3078 sharing pods (table below, ``openb_pod_list_default.csv``). openb's own
  fraction is :data:`OPENB_SHARE_FRACTION` = 3078 / 6989 1-GPU pods = 0.440.
- **Mix** (``mix``): ``philly`` draws every size above; ``multi`` only Philly's distributed
  jobs (2 GPUs and more, 5,622 jobs, renormalised) — the jobs gang scheduling is for;
  ``large`` only its jobs of 8 GPUs and more (1,935 jobs) — the topology figures' gangs.
- **Pod size** (``gpus_per_pod``, default ``gpus_per_node``): a job of ``G`` GPUs becomes pods
  of at most this many GPUs; ``1`` makes one pod per GPU, as data-parallel training with one
  worker per GPU does, so a gang spreads over nodes and gangs can interleave.
- **Duration cap** (``max_duration``, seconds, default Philly's longest job): a shorter cap keeps
  a demo's horizon short; the arrival rate accounts for it.
- **Cluster**: ``nodes`` nodes of ``gpus_per_node`` GPUs with the assumed SKU of
  :mod:`phalanx.traces._gangs` (6 vCPU and 64 GiB per GPU); pods request the same per GPU
  (a sharing pod in proportion to its share).

- **Tenants** (``queues``, see :mod:`phalanx.traces.tenants`): queues declared as objects and
  each job submitted to one of them; ``high`` (default 0) is the fraction of jobs submitted
  with priority 100 (the rest 0), both drawn on streams of their own.

Names: gang ``job-NNNNN`` in namespace ``default``, pods ``job-NNNNN-K``; a sharing pod is
``job-NNNNN``. Nodes ``synthetic-node-NNNN``.
"""

from __future__ import annotations

import math

import numpy as np

from phalanx.api.errors import InputError
from phalanx.api.specs import PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.traces._gangs import GangMaker, homogeneous_nodes, node_items, paused_gc
from phalanx.traces.tenants import assign, high_priority, parse_tenants, queue_items

#: The label a lone pod names its queue with (read by the queue book).
KAI_LABEL = "kai.scheduler/queue"

#: Philly ``num_gpus`` → jobs (see the module docstring).
PHILLY_GPU_COUNTS: dict[int, int] = {
    1: 76_627,
    2: 1818,
    4: 1870,
    8: 1643,
    12: 7,
    16: 199,
    24: 7,
    32: 67,
    64: 6,
    128: 3,
}
#: ln(duration seconds) of Philly jobs: mean and standard deviation.
DURATION_MU = 6.7909
DURATION_SIGMA = 2.1555
DURATION_MIN = 1.0
DURATION_MAX = 4_628_226.0
#: openb ``gpu_milli`` of the 3078 GPU-sharing pods of ``openb_pod_list_default.csv`` → pods.
OPENB_SHARE_MILLI: dict[int, int] = {
    810: 1078,
    470: 750,
    320: 328,
    650: 253,
    230: 140,
    460: 128,
    590: 75,
    160: 74,
    550: 72,
    220: 62,
    370: 47,
    110: 24,
    480: 19,
    50: 7,
    330: 7,
    350: 6,
    270: 4,
    440: 2,
    140: 1,
    290: 1,
}
#: openb: sharing pods / 1-GPU pods of the default list.
OPENB_SHARE_FRACTION = 3078 / 6989

NAMESPACE = "default"
SOURCE = "synthetic"


#: Gang-size mixes: all of Philly's jobs, only its distributed (multi-GPU) ones, or only its
#: gangs of 8 GPUs and more (the topology figures).
MIXES = ("philly", "multi", "large")
_SMALLEST = {"philly": 1, "multi": 2, "large": 8}


def size_table(capacity_gpus: int, mix: str = "philly") -> tuple[np.ndarray, np.ndarray]:
    """Gang sizes that fit ``capacity_gpus`` and their probabilities."""
    smallest = _SMALLEST[mix]
    sizes = [size for size in PHILLY_GPU_COUNTS if smallest <= size <= capacity_gpus]
    counts = np.array([PHILLY_GPU_COUNTS[size] for size in sizes], dtype=np.float64)
    return np.array(sizes, dtype=np.int64), counts / counts.sum()


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def mean_duration(max_duration: float = DURATION_MAX) -> float:
    """The exact mean of the clipped lognormal duration, in seconds."""
    mu, sigma = DURATION_MU, DURATION_SIGMA
    a, b = math.log(DURATION_MIN), math.log(max_duration)
    below = _normal_cdf((a - mu) / sigma)
    above = 1.0 - _normal_cdf((b - mu) / sigma)
    inside = math.exp(mu + sigma**2 / 2) * (
        _normal_cdf((b - mu - sigma**2) / sigma) - _normal_cdf((a - mu - sigma**2) / sigma)
    )
    return DURATION_MIN * below + inside + max_duration * above


def mean_share() -> float:
    """Mean GPU share of a sharing pod, in GPUs."""
    total = sum(OPENB_SHARE_MILLI.values())
    return sum(milli * n for milli, n in OPENB_SHARE_MILLI.items()) / total / 1000


def mean_gpus(capacity_gpus: int, share: float = 0.0, mix: str = "philly") -> float:
    """Mean GPUs a job requests, sharing pods counted by their share."""
    sizes, probs = size_table(capacity_gpus, mix)
    mean = float((sizes * probs).sum())
    p_one = float(probs[sizes == 1].sum())
    return mean - p_one * share * (1.0 - mean_share())


def mean_gpu_seconds(
    capacity_gpus: int,
    share: float = 0.0,
    mix: str = "philly",
    max_duration: float = DURATION_MAX,
) -> float:
    """E[GPUs × duration] of a job (sizes and durations independent)."""
    return mean_gpus(capacity_gpus, share, mix) * mean_duration(max_duration)


def arrival_rate(
    load: float,
    capacity_gpus: int,
    share: float = 0.0,
    mix: str = "philly",
    max_duration: float = DURATION_MAX,
) -> float:
    """Jobs per second that offer ``load`` × the cluster's GPU-time."""
    return load * capacity_gpus / mean_gpu_seconds(capacity_gpus, share, mix, max_duration)


def synthetic_workload(
    *,
    jobs: int = 1000,
    nodes: int = 16,
    gpus_per_node: int = 8,
    seed: int = 0,
    load: float = 0.9,
    share: float = 0.0,
    mix: str = "philly",
    gpus_per_pod: int | None = None,
    max_duration: float = DURATION_MAX,
    queues: str | None = None,
    high: float = 0.0,
) -> Workload:
    """The synthetic workload (see the module docstring)."""
    if mix not in MIXES:
        raise InputError(
            f"must be one of {', '.join(MIXES)}, not {mix!r}", source=SOURCE, field="mix"
        )
    per_pod = gpus_per_node if gpus_per_pod is None else gpus_per_pod
    if not 1 <= per_pod <= gpus_per_node:
        raise InputError(
            f"must be in 1..gpus_per_node, not {per_pod}", source=SOURCE, field="gpus_per_pod"
        )
    if not max_duration >= DURATION_MIN:
        raise InputError(
            f"must be at least 1 s, not {max_duration}", source=SOURCE, field="max_duration"
        )
    for name, value in (("jobs", jobs), ("nodes", nodes), ("gpus_per_node", gpus_per_node)):
        if value < 1:
            raise InputError(f"must be at least 1, not {value}", source=SOURCE, field=name)
    if not load > 0 or not math.isfinite(load):
        raise InputError(f"must be a positive number, not {load}", source=SOURCE, field="load")
    if not 0.0 <= share <= 1.0:
        raise InputError(f"must be in 0..1, not {share}", source=SOURCE, field="share")
    capacity = nodes * gpus_per_node
    rng = np.random.default_rng(seed)
    sizes, probs = size_table(capacity, mix)
    gpus = rng.choice(sizes, size=jobs, p=probs)
    log_durations = rng.normal(DURATION_MU, DURATION_SIGMA, size=jobs)
    durations = np.rint(np.clip(np.exp(log_durations), DURATION_MIN, max_duration))
    rate = arrival_rate(load, capacity, share, mix, max_duration)
    gaps = rng.exponential(1.0 / rate, size=jobs)
    arrivals = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
    shared = rng.random(jobs) < share
    milli_values = np.array(list(OPENB_SHARE_MILLI), dtype=np.int64)
    milli_weights = np.array(list(OPENB_SHARE_MILLI.values()), dtype=np.float64)
    millis = rng.choice(milli_values, size=jobs, p=milli_weights / milli_weights.sum())

    items: list[Item] = node_items(
        homogeneous_nodes("synthetic-node", nodes, gpus_per_node), SOURCE
    )
    maker = GangMaker(per_pod, SOURCE)
    tenants = parse_tenants(queues, SOURCE) if queues else []
    items += queue_items(tenants, capacity, SOURCE)
    queue_of = assign(tenants, jobs, seed) if tenants else ["default"] * jobs
    urgent = high_priority(jobs, high, seed)
    with paused_gc():
        columns = (gpus, durations, arrivals, shared, millis)
        rows = zip(*(column.tolist() for column in columns), strict=True)
        for index, (size, duration, arrival, is_shared, milli) in enumerate(rows):
            name = f"job-{index:05d}"
            queue, priority = queue_of[index], 100 if urgent[index] else 0
            if is_shared and size == 1:
                pod = PodSpec(
                    namespace=NAMESPACE,
                    name=name,
                    requests=maker.requests(milli),
                    duration=duration,
                    priority=priority,
                    labels={KAI_LABEL: queue} if tenants else {},
                )
                items.append(Item(pod, Timing(submit_after=arrival), SOURCE))
            else:
                maker.add(
                    items, NAMESPACE, name, size, duration, arrival, queue=queue, priority=priority
                )
    return Workload(items=items)
