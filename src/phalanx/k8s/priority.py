"""PriorityClasses and the table pods and PodGroups resolve ``priorityClassName`` against.

Design: :class:`PriorityTable` is a read-only ``Mapping[str, int]`` (class name → value) that
also knows the ``globalDefault`` value (0 when no class is the global default). It always
contains Kubernetes' two built-in classes, ``system-cluster-critical`` and
``system-node-critical``, which the API server creates itself; a manifest may redefine them.
Resolution follows the Priority admission plugin: an unknown class name is an error, because
admission would refuse the object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from phalanx.api.errors import InputError
from phalanx.api.specs import PREEMPT_LOWER, PREEMPT_NEVER, PriorityClassSpec
from phalanx.k8s.fields import check_int, child, fail, get_bool, get_str
from phalanx.k8s.meta import describing, name_of, object_label, root

#: Kubernetes' reserved classes (pkg/apis/scheduling/types.go).
SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
#: Highest value a user-defined class may have (``HighestUserDefinablePriority``).
HIGHEST_USER_PRIORITY = 1_000_000_000


class PriorityTable(Mapping[str, int]):
    """Class name → priority value, plus the global default."""

    def __init__(self, classes: Iterable[PriorityClassSpec] = ()) -> None:
        self._values: dict[str, int] = dict(SYSTEM_CLASSES)
        self._policies: dict[str, str] = {}  # class name → preemptionPolicy (when not default)
        self._defined: set[str] = set()
        self._default_class: str | None = None
        self._default = 0
        for spec in classes:
            self.add(spec)

    def add(self, spec: PriorityClassSpec) -> None:
        """Register one class; a second class of the same name or globalDefault is an error."""
        label = f"PriorityClass {spec.name}"
        if spec.name in self._defined:
            raise InputError("duplicate PriorityClass", obj=label, field="metadata.name")
        if spec.global_default:
            if self._default_class is not None:
                raise InputError(
                    f"only one PriorityClass may be globalDefault ({self._default_class} is)",
                    obj=label,
                    field="globalDefault",
                )
            self._default_class = spec.name
            self._default = spec.value
        self._defined.add(spec.name)
        self._values[spec.name] = spec.value
        self._policies[spec.name] = spec.preemption_policy

    @property
    def default(self) -> int:
        """The globalDefault class's value, or 0."""
        return self._default

    @property
    def default_class(self) -> str | None:
        return self._default_class

    def policy(self, class_name: str | None) -> str:
        """The ``preemptionPolicy`` of ``class_name`` (None: the globalDefault class's);
        ``PreemptLowerPriority`` for an unknown class or none."""
        name = self._default_class if class_name is None else class_name
        return self._policies.get(name or "", PREEMPT_LOWER)

    def resolve(self, class_name: str, path: str) -> int:
        """The value of ``class_name``; an InputError on ``path`` when no such class exists."""
        value = self._values.get(class_name)
        if value is None:
            fail(path, f"unknown PriorityClass {class_name!r} (admission would refuse it)")
        return value

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PriorityTable({self._values!r}, default={self._default})"


def priority_class_from_dict(obj: Mapping[str, Any]) -> PriorityClassSpec:
    """``scheduling.k8s.io/v1 PriorityClass``: ``value`` (required), ``globalDefault`` and
    ``preemptionPolicy``."""
    with describing(object_label(obj, "PriorityClass", namespaced=False)):
        pc = root(obj)
        name = name_of(pc)
        if pc.get("value") is None:
            fail("value", "value is required")
        value = check_int(pc["value"], "value")
        if value > HIGHEST_USER_PRIORITY and not name.startswith("system-"):
            fail("value", f"must be at most {HIGHEST_USER_PRIORITY} for a user-defined class")
        return PriorityClassSpec(
            name=name,
            value=value,
            global_default=get_bool(pc, "globalDefault", ""),
            preemption_policy=preemption_policy(pc, ""),
        )


def preemption_policy(obj: Mapping[str, Any], path: str) -> str:
    """``preemptionPolicy`` of a PriorityClass or pod spec at ``path`` (default
    ``PreemptLowerPriority``); anything else than that or ``Never`` is an error."""
    policy = get_str(obj, "preemptionPolicy", path, PREEMPT_LOWER)
    if policy not in (PREEMPT_LOWER, PREEMPT_NEVER):
        fail(child(path, "preemptionPolicy"), "must be PreemptLowerPriority or Never")
    return policy
