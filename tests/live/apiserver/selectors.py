"""Label and field selectors, parsed and matched as the real API server does.

Label selectors (``labels.Parse``): comma-separated requirements, ANDed —
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does
not exist). ``!=`` and ``notin`` also match objects without the key.

Field selectors (``fields.ParseSelector``): comma-separated ``f=v``, ``f==v``, ``f!=v`` over a
per-resource set of supported fields (anything else is a 400 "field label not supported", as on
the real server). A missing field reads as ``""``, so ``spec.nodeName=`` selects unbound pods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_KEY = re.compile(
    r"([a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?"
)
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_SET = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


class SelectorError(ValueError):
    """An unparsable selector (the server answers 400 BadRequest)."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=", "notin"


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parentheses in {text!r}")
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SelectorError(f"unbalanced parentheses in {text!r}")
    terms.append("".join(current))
    return [term.strip() for term in terms]


def _check_key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise SelectorError(f"invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not _VALUE.fullmatch(value):
        raise SelectorError(f"invalid label value {value!r}")
    return value


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    if not text or not text.strip():
        return ()
    requirements: list[Requirement] = []
    for term in _split_terms(text):
        if not term:
            raise SelectorError(f"empty requirement in {text!r}")
        if term.startswith("!"):
            requirements.append(Requirement(_check_key(term[1:].strip()), "!exists"))
            continue
        match = _SET.match(term)
        if match:
            key, op, inner = match.groups()
            if not inner.strip():
                raise SelectorError(f"{op} needs a non-empty value list in {term!r}")
            values = tuple(_check_value(v.strip()) for v in inner.split(","))
            requirements.append(Requirement(_check_key(key), op, values))
            continue
        for op, token in (("!=", "!="), ("=", "=="), ("=", "=")):
            if token in term:
                key, _, value = term.partition(token)
                requirements.append(
                    Requirement(_check_key(key.strip()), op, (_check_value(value.strip()),))
                )
                break
        else:
            requirements.append(Requirement(_check_key(term), "exists"))
    return tuple(requirements)


def labels_match(requirements: Sequence[Requirement], obj: Mapping[str, Any]) -> bool:
    if not requirements:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(req.matches(labels) for req in requirements)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str


def parse_field_selector(
    text: str | None, supported: frozenset[str]
) -> tuple[FieldRequirement, ...]:
    if not text or not text.strip():
        return ()
    requirements: list[FieldRequirement] = []
    for term in text.split(","):
        term = term.strip()
        for token, equal in (("!=", False), ("==", True), ("=", True)):
            if token in term:
                name, _, value = term.partition(token)
                name = name.strip()
                if name not in supported:
                    raise SelectorError(f'field label not supported: "{name}"')
                requirements.append(FieldRequirement(name, equal, value.strip()))
                break
        else:
            raise SelectorError(f"invalid field selector term {term!r}")
    return tuple(requirements)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def fields_match(requirements: Sequence[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    return all((field_value(obj, r.field) == r.value) == r.equal for r in requirements)
