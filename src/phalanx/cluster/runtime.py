"""A gang's own runtime hints (what its author or its controller says it will run), best
source first: read by the estimator and by orderings that need a runtime (least slack)."""

from __future__ import annotations

from phalanx.cluster.workloads import GangInfo

ORDER = ("runtime-estimate", "activeDeadlineSeconds", "max-exec-time")


def runtime_hints(gang: GangInfo) -> list[tuple[str, float]]:
    """The gang's own hints, then its members' (the longest per source), best source first."""
    own = dict(gang.spec.runtime_hints) if gang.spec is not None else {}
    found = dict(own)
    for pod in gang.members:
        for source, seconds in pod.spec.runtime_hints:
            if source not in own:
                found[source] = max(found.get(source, 0.0), seconds)
    return [(source, found[source]) for source in ORDER if source in found]
