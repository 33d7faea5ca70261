"""ResourceQuota admission, as the API server does it: a pod whose requests would take its
namespace over any ``hard`` limit is refused at creation. Usage counts every pod that exists
and has not finished; it goes down when a pod succeeds or is deleted, and a deleted quota
stops limiting at once. Only the resources a quota lists are checked. A pod that the input
shows running (``spec.nodeName``) was admitted when it was created: it counts, but is never
refused (the simulator does not ask).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from phalanx.api.quantity import format_units
from phalanx.api.specs import PodSpec, QuotaSpec


class QuotaTracker:
    def __init__(self) -> None:
        self.quotas: dict[str, dict[str, QuotaSpec]] = defaultdict(dict)
        self.used: dict[str, Counter[str]] = defaultdict(Counter)

    def add(self, quota: QuotaSpec) -> None:
        self.quotas[quota.namespace][quota.name] = quota

    def remove(self, quota: QuotaSpec) -> None:
        self.quotas[quota.namespace].pop(quota.name, None)

    def refusal(self, pod: PodSpec) -> str | None:
        """Why the API server would refuse ``pod``, or None if it is admitted."""
        used = self.used[pod.namespace]
        for quota in self.quotas[pod.namespace].values():
            for name, limit in sorted(quota.hard.items()):
                want = pod.requests.get(name, 0)
                if want and used[name] + want > limit:
                    return (
                        f"exceeded quota: {quota.name}, requested: {name}="
                        f"{format_units(name, want)}, used: {name}="
                        f"{format_units(name, used[name])}, limited: {name}="
                        f"{format_units(name, limit)}"
                    )
        return None

    def charge(self, pod: PodSpec) -> None:
        used = self.used[pod.namespace]
        for name, amount in pod.requests.items():  # Counter.update, without its overhead
            used[name] += amount

    def refund(self, pod: PodSpec) -> None:
        self.used[pod.namespace].subtract(pod.requests)
