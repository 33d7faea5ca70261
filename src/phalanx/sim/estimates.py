"""The error model of runtime estimates in simulations (documented in docs/traces.md).

A simulation knows each gang's true duration (``phalanx.dev/duration``, or a trace's runtime)
and ends the gang by it; the scheduler sees only runtime *hints*. ``--estimates`` decides
which hints gangs carry when they arrive:

- ``given`` (default): the hints written in the manifests, nothing added — trace gangs then
  have none, so estimates are learned online or unknown;
- ``none``: every hint removed (learned estimates only);
- ``perfect``: ``phalanx.dev/runtime-estimate`` equal to the true duration;
- ``noisy``: user estimates as HPC logs show them. Users mostly over-estimate: the accuracy
  ``duration / estimate`` of jobs in the CTC, KTH, SDSC and other logs is spread roughly
  uniformly (Tsafrir, Etsion & Feitelson, "Modeling user runtime estimates", JSSPP 2005;
  Mu'alem & Feitelson, IEEE TPDS 2001). Here ``NOISY_OVER`` of gangs get
  ``estimate = duration / a`` with ``a ~ Uniform(0.1, 1)`` (up to 10× too long); the rest
  run *longer* than estimated, ``estimate = duration × Uniform(0.5, 1)``, since on Kubernetes
  nothing kills a job at its estimate (Slurm would) and the scheduler must cope with overruns.

Draws are seeded by the run's seed and the object's key, so every policy of a comparison
sees the same estimates.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, PodSpec, RuntimeHints

MODELS = ("given", "none", "perfect", "noisy")
NOISY_OVER = 0.8
ANNOTATION = "runtime-estimate"


class EstimateModel:
    def __init__(self, model: str = "given", seed: int = 0) -> None:
        if model not in MODELS:
            raise InputError(
                f"unknown estimate model {model!r} (choose from {', '.join(MODELS)})",
                field="--estimates",
            )
        self.model = model
        self.seed = seed

    def gang(self, spec: GangSpec) -> GangSpec:
        if self.model == "given":
            return spec
        hints = self._hints(spec.key, spec.runtime_hints, spec.duration)
        return dataclasses.replace(spec, runtime_hints=hints)

    def pod(self, spec: PodSpec) -> PodSpec:
        """A pod's own duration (a lone pod's, or a gang's set on its pods) gets the same
        treatment; a gang's estimate is the longest of its members' where it has none."""
        if self.model == "given":
            return spec
        key = spec.gang_key or spec.key  # the members of one gang draw alike
        hints = self._hints(key, spec.runtime_hints, spec.duration)
        return dataclasses.replace(spec, runtime_hints=hints)

    def _hints(self, key: str, given: RuntimeHints, duration: float | None) -> RuntimeHints:
        if self.model == "none" or duration is None:
            return ()
        if self.model == "perfect":
            return ((ANNOTATION, duration),)
        rng = np.random.default_rng([self.seed, zlib.crc32(key.encode())])
        if rng.random() < NOISY_OVER:
            estimate = duration / rng.uniform(0.1, 1.0)
        else:
            estimate = duration * rng.uniform(0.5, 1.0)
        return ((ANNOTATION, round(estimate)),)
