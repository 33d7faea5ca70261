"""``phalanx serve --config FILE``: the scheduler's settings as a YAML file.

Every field is optional; command-line flags override the file, the file overrides the
defaults below. Example::

    schedulerName: phalanx
    period: 1.0            # seconds between cycles (at least)
    policy: phalanx        # phalanx | phalanx-reserve | volcano (the engine's gang-aware ones)
    actions: [reserve, allocate, preempt, reclaim]   # the policy's actions, in order
                           # (default: the policy's own list; these are phalanx's)
    orderings: [queues, priority, least-slack, gang]   # the policy's ordering plugins, in
                           # tier order (default: the policy's own; phalanx's: queues,
                           # priority, gang); least-slack runs gangs of equal priority
                           # closest to their phalanx.dev/deadline first
    scoring:               # node-scoring plugins and their weights (default: binpack: 1)
      binpack: 1           # a weight, or {weight: N, resources: {nvidia.com/gpu: 10, cpu: 1}}
      spread: 0            # weight 0 leaves a plugin out
      fgd: 0               # any name of the registry's SCORINGS: also random, dotproduct,
                           # gpuclustering, gpupacking, bestfit (the FGD paper's policies;
                           # per-resource weights are for binpack and spread only)
    topology:              # node labels of the network levels, top first, for clusters
      - example.com/block  # with no Kueue/KAI Topology or Volcano HyperNode (docs/topology.md)
      - example.com/rack
    metricsPort: 8080      # /healthz, /readyz, /metrics; 0 turns the server off
    metricsAddress: 0.0.0.0   # the address it listens on (127.0.0.1: this host only)
    bindConcurrency: 16
    recovery:              # gangs whose binds fail part-way (see phalanx.live.recovery)
      bindRetries: 3
      retryDelay: 0.05     # seconds, doubled per retry
      partialBindLimit: 30 # longest a gang may stay bound below its minimum
      undo: delete         # delete | evict (evict: phalanx manifests --allow-evict)
      requeueInitial: 1    # backoff of an undone gang, doubled up to requeueMax
      requeueMax: 60
    leaderElection:
      enabled: true        # default: on in-cluster, off otherwise
      leaseName: phalanx   # default: the scheduler name
      leaseNamespace: kube-system   # default: $POD_NAMESPACE, else the config's namespace
      leaseDuration: 15
      renewDeadline: 10
      retryPeriod: 2
    timeouts:
      request: 10          # one API request
      shutdown: 10         # grace after SIGTERM before the process gives up

A bad file or field raises :class:`~phalanx.api.errors.InputError` with a one-line message,
``FILE: FIELD: MESSAGE``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phalanx.api.errors import InputError, short_repr
from phalanx.k8s.topology import topology_from_dict
from phalanx.k8s.yamlio import load_one, read_text
from phalanx.live.recovery import RecoveryConfig
from phalanx.policies import ACTIONS, ORDERINGS, SCORINGS, Scorer

#: The engine's gang-aware policies (the per-pod baselines make no sense live).
POLICIES = frozenset({"phalanx", "phalanx-reserve", "volcano"})
#: Actions whose decisions the live scheduler applies (coscheduling's Permit holds are a
#: baseline of the simulator: a live scheduler that holds pods at Permit is what phalanx
#: replaces).
LIVE_ACTIONS = frozenset(ACTIONS) - {"coscheduling"}
#: Upper bounds of the numeric settings: seconds, binds in flight, retries, plugin weights.
DAY = 86400.0
MAX_CONCURRENCY = 10_000
MAX_RETRIES = 100
MAX_WEIGHT = 1_000_000
RECOVERY_FIELDS = {
    "bindRetries": "bind_retries",
    "retryDelay": "retry_delay",
    "partialBindLimit": "partial_bind_limit",
    "undo": "undo",
    "requeueInitial": "requeue_initial",
    "requeueMax": "requeue_max",
}
#: (lowest, lowest allowed itself), highest of the numeric recovery settings.
RECOVERY_BOUNDS: dict[str, tuple[tuple[float, bool], float]] = {
    "bindRetries": ((0.0, True), MAX_RETRIES),
    "retryDelay": ((0.0, True), DAY),
    "partialBindLimit": ((0.0, False), DAY),
    "requeueInitial": ((0.0, True), DAY),
    "requeueMax": ((0.0, True), DAY),
}


@dataclass(frozen=True, slots=True)
class LeaderElection:
    enabled: bool | None = None  # None: on in-cluster, off otherwise
    lease_name: str | None = None  # None: the scheduler name
    lease_namespace: str | None = None  # None: $POD_NAMESPACE or the config's namespace
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True, slots=True)
class Timeouts:
    request: float = 10.0
    shutdown: float = 10.0


@dataclass(frozen=True, slots=True)
class ServeSettings:
    scheduler_name: str = "phalanx"
    period: float = 1.0
    policy: str = "phalanx"
    #: None: the policy's own list of actions.
    actions: tuple[str, ...] | None = None
    #: None: the policy's own ordering plugins (names in the registry's ORDERINGS).
    orderings: tuple[str, ...] | None = None
    metrics_port: int = 8080
    #: where the metrics/health server listens (default: every interface).
    metrics_address: str = "0.0.0.0"
    bind_concurrency: int = 16
    leader_election: LeaderElection = dataclasses.field(default_factory=LeaderElection)
    timeouts: Timeouts = dataclasses.field(default_factory=Timeouts)
    #: None: the policy's own scoring (binpack, weight 1).
    scoring: tuple[Scorer, ...] | None = None
    #: Node labels of the topology levels, top first (used after any declared topology).
    topology: tuple[str, ...] = ()
    recovery: RecoveryConfig = dataclasses.field(default_factory=RecoveryConfig)

    def validate(self, source: str = "") -> ServeSettings:
        """Range and cross-field checks (every number finite and in range); returns ``self``."""

        def fail(field: str, message: str) -> InputError:
            return InputError(message, source=source, field=field)

        if not self.scheduler_name:
            raise fail("schedulerName", "must not be empty")
        if self.policy not in POLICIES:
            known = ", ".join(sorted(POLICIES))
            raise fail("policy", f"unknown policy {self.policy!r} (known: {known})")
        for action in self.actions or ():
            if action.split(":")[0] not in LIVE_ACTIONS:
                known = ", ".join(sorted(LIVE_ACTIONS))
                raise fail("actions", f"unknown or simulation-only action {action!r} ({known})")
        if self.actions is not None and not self.actions:
            raise fail("actions", "name at least one action")
        for i, name in enumerate(self.orderings or ()):
            if name not in ORDERINGS:
                known = ", ".join(ORDERINGS)
                raise fail(f"orderings[{i}]", f"unknown ordering {short_repr(name)} ({known})")
        if self.orderings is not None and not self.orderings:
            raise fail("orderings", "name at least one ordering plugin")
        if self.scoring is not None and not any(s.weight > 0 for s in self.scoring):
            raise fail("scoring", "at least one plugin needs a positive weight")
        for scorer in self.scoring or ():
            try:
                scorer.build()  # e.g. per-resource weights given to a plugin that has none
            except InputError as err:
                raise err.located(source=source) from None
        if self.period <= 0:
            raise fail("period", "must be positive")
        if not 0 <= self.metrics_port <= 65535:
            raise fail("metricsPort", "must be between 0 and 65535")
        if self.bind_concurrency < 1:
            raise fail("bindConcurrency", "must be at least 1")
        check_address(self.metrics_address, "metricsAddress", source)
        for field, value, low, high in self._numbers():
            check_range(value, field, source, low, high)
        le = self.leader_election
        if le.renew_deadline >= le.lease_duration:
            raise fail("leaderElection.renewDeadline", "must be less than leaseDuration")
        if le.retry_period >= le.renew_deadline:
            raise fail("leaderElection.retryPeriod", "must be less than renewDeadline")
        if self.recovery.requeue_max < self.recovery.requeue_initial:
            raise fail("recovery.requeueMax", "must be at least recovery.requeueInitial")
        return self

    def _numbers(self) -> list[tuple[str, float, tuple[float, bool], float]]:
        """(field, value, (lowest, lowest allowed itself), highest) for every number."""
        le, t, r = self.leader_election, self.timeouts, self.recovery
        positive, non_negative = (0.0, False), (0.0, True)
        numbers = [
            ("period", self.period, positive, DAY),
            ("metricsPort", self.metrics_port, non_negative, 65535),
            ("bindConcurrency", self.bind_concurrency, (1, True), MAX_CONCURRENCY),
            ("leaderElection.leaseDuration", le.lease_duration, positive, DAY),
            ("leaderElection.renewDeadline", le.renew_deadline, positive, DAY),
            ("leaderElection.retryPeriod", le.retry_period, positive, DAY),
            ("timeouts.request", t.request, positive, DAY),
            ("timeouts.shutdown", t.shutdown, positive, DAY),
        ]
        for key, attr in RECOVERY_FIELDS.items():
            if key in RECOVERY_BOUNDS:
                numbers.append((f"recovery.{key}", getattr(r, attr), *RECOVERY_BOUNDS[key]))
        for scorer in self.scoring or ():
            field = f"scoring.{scorer.name}"
            numbers.append((field, scorer.weight, non_negative, MAX_WEIGHT))
            for name, weight in (scorer.resources or {}).items():
                numbers.append((f"{field}.resources.{name}", weight, non_negative, MAX_WEIGHT))
        return numbers


def check_range(
    value: float, field: str, source: str, low: tuple[float, bool], high: float
) -> None:
    """An InputError unless ``value`` is finite, above ``low`` (or equal, when allowed) and at
    most ``high``."""
    lowest, inclusive = low
    if not math.isfinite(value):
        raise InputError(f"must be a finite number, not {value}", source=source, field=field)
    if value < lowest or (value == lowest and not inclusive):
        bound = f"at least {lowest:g}" if inclusive else f"greater than {lowest:g}"
        bound = "positive" if (lowest, inclusive) == (0, False) else bound
        raise InputError(f"must be {bound}, not {value:g}", source=source, field=field)
    if value > high:
        bound = f"between {lowest:g} and {high:g}" if inclusive else f"at most {high:g}"
        raise InputError(f"must be {bound}, not {value:g}", source=source, field=field)


def check_address(value: str, field: str, source: str) -> None:
    """An IPv4 or IPv6 address to listen on (``0.0.0.0``: every interface)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise InputError(
            f"must be an IP address such as 0.0.0.0 or 127.0.0.1, not {short_repr(value)}",
            source=source,
            field=field,
        ) from None


def _number(source: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"expected a number, got {short_repr(value)}", source=source, field=field)
    if isinstance(value, int) and abs(value) > 2**53:
        raise InputError(f"out of range: {short_repr(value)}", source=source, field=field)
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"must be a finite number, not {value}", source=source, field=field)
    return number


def _integer(source: str, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(
            f"expected an integer, got {short_repr(value)}", source=source, field=field
        )
    return value


def _string(source: str, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(
            f"expected a non-empty string, got {short_repr(value)}", source=source, field=field
        )
    return value


def _boolean(source: str, field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(
            f"expected true or false, got {short_repr(value)}", source=source, field=field
        )
    return value


def _mapping(source: str, field: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError("expected a mapping", source=source, field=field)
    return value


def _check_keys(source: str, prefix: str, data: Mapping[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            where = f"{prefix}.{key}" if prefix else str(key)
            raise InputError(
                f"unknown field (known: {', '.join(sorted(known))})", source=source, field=where
            )


def parse_settings(data: Any, source: str = "") -> ServeSettings:
    """Settings from a decoded YAML document (validated)."""
    if data is not None and not isinstance(data, Mapping):
        raise InputError("expected a mapping at the top level", source=source)
    top = _mapping(source, "", data)
    _check_keys(
        source,
        "",
        top,
        {
            "schedulerName",
            "period",
            "policy",
            "actions",
            "orderings",
            "metricsPort",
            "metricsAddress",
            "bindConcurrency",
            "leaderElection",
            "timeouts",
            "scoring",
            "recovery",
            "topology",
        },
    )
    out = ServeSettings()
    changes: dict[str, Any] = {}
    if "schedulerName" in top:
        changes["scheduler_name"] = _string(source, "schedulerName", top["schedulerName"])
    if "period" in top:
        changes["period"] = _number(source, "period", top["period"])
    if "policy" in top:
        changes["policy"] = _string(source, "policy", top["policy"])
    if "actions" in top:
        changes["actions"] = _names(source, "actions", top["actions"])
    if "orderings" in top:
        changes["orderings"] = _names(source, "orderings", top["orderings"])
    if "metricsPort" in top:
        changes["metrics_port"] = _integer(source, "metricsPort", top["metricsPort"])
    if "metricsAddress" in top:
        changes["metrics_address"] = _string(source, "metricsAddress", top["metricsAddress"])
    if "bindConcurrency" in top:
        changes["bind_concurrency"] = _integer(source, "bindConcurrency", top["bindConcurrency"])

    le_data = _mapping(source, "leaderElection", top.get("leaderElection"))
    _check_keys(
        source,
        "leaderElection",
        le_data,
        {
            "enabled",
            "leaseName",
            "leaseNamespace",
            "leaseDuration",
            "renewDeadline",
            "retryPeriod",
        },
    )
    le: dict[str, Any] = {}
    if "enabled" in le_data:
        le["enabled"] = _boolean(source, "leaderElection.enabled", le_data["enabled"])
    for key, attr in (("leaseName", "lease_name"), ("leaseNamespace", "lease_namespace")):
        if key in le_data:
            le[attr] = _string(source, f"leaderElection.{key}", le_data[key])
    for key, attr in (
        ("leaseDuration", "lease_duration"),
        ("renewDeadline", "renew_deadline"),
        ("retryPeriod", "retry_period"),
    ):
        if key in le_data:
            le[attr] = _number(source, f"leaderElection.{key}", le_data[key])
    changes["leader_election"] = LeaderElection(**le)

    t_data = _mapping(source, "timeouts", top.get("timeouts"))
    _check_keys(source, "timeouts", t_data, {"request", "shutdown"})
    changes["timeouts"] = Timeouts(
        **{key: _number(source, f"timeouts.{key}", value) for key, value in t_data.items()}
    )
    if "scoring" in top:
        changes["scoring"] = _scoring(source, top["scoring"])
    if "recovery" in top:
        changes["recovery"] = _recovery(source, top["recovery"])
    if "topology" in top:
        changes["topology"] = _topology(source, top["topology"])
    return dataclasses.replace(out, **changes).validate(source)


def _topology(source: str, value: Any) -> tuple[str, ...]:
    """Level labels, validated as a Kueue Topology's ``spec.levels`` would be."""
    levels = _names(source, "topology", value)
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "settings"},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }
    try:
        return topology_from_dict(obj).levels
    except InputError as exc:
        field = exc.field.replace("spec.levels", "topology") or "topology"
        raise InputError(exc.message, source=source, field=field) from None


def _names(source: str, field: str, value: Any) -> tuple[str, ...]:
    """A list of names, or one comma-separated string (``allocate, backfill``)."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise InputError("expected a list of names", source=source, field=field)
    return tuple(_string(source, f"{field}[{i}]", item) for i, item in enumerate(value))


def _weight(source: str, field: str, value: Any) -> int:
    weight = _integer(source, field, value)
    if weight < 0:
        raise InputError("must not be negative", source=source, field=field)
    return weight


def _scoring(source: str, value: Any) -> tuple[Scorer, ...]:
    data = _mapping(source, "scoring", value)
    if not data:
        raise InputError("name at least one plugin", source=source, field="scoring")
    _check_keys(source, "scoring", data, set(SCORINGS))
    scorers = []
    for name, entry in data.items():
        field = f"scoring.{name}"
        if not isinstance(entry, Mapping):
            scorers.append(Scorer(name, _weight(source, field, entry)))
            continue
        _check_keys(source, field, entry, {"weight", "resources"})
        weight = _weight(source, f"{field}.weight", entry.get("weight", 1))
        resources = None
        if "resources" in entry:
            given = _mapping(source, f"{field}.resources", entry["resources"])
            resources = {
                str(k): _weight(source, f"{field}.resources.{k}", v) for k, v in given.items()
            }
        scorers.append(Scorer(name, weight, resources))
    return tuple(scorers)


def _recovery(source: str, value: Any) -> RecoveryConfig:
    data = _mapping(source, "recovery", value)
    _check_keys(source, "recovery", data, set(RECOVERY_FIELDS))
    fields: dict[str, Any] = {}
    for key, attr in RECOVERY_FIELDS.items():
        if key not in data:
            continue
        field = f"recovery.{key}"
        if key == "undo":
            fields[attr] = _string(source, field, data[key])
        elif key == "bindRetries":
            fields[attr] = _integer(source, field, data[key])
        else:
            fields[attr] = _number(source, field, data[key])
        if key != "undo":
            check_range(fields[attr], field, source, *RECOVERY_BOUNDS[key])
    try:
        return RecoveryConfig(**fields)
    except ValueError as exc:
        raise InputError(str(exc), source=source, field="recovery") from None


def load_settings(path: str | Path) -> ServeSettings:
    """Read and validate ``path``; :class:`InputError` names the file and the field."""
    source = str(path)
    return parse_settings(load_one(read_text(source), source), source)
