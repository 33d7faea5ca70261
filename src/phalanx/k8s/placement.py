"""Node selectors, required node affinity, tolerations and taints, validated as Kubernetes does.

Design: each parser takes the enclosing map and its path and returns the hashable
:mod:`phalanx.api.specs` value. Only *required* node affinity restricts placement; preferred
affinity and inter-pod (anti-)affinity are not modelled and are ignored. Validation mirrors
``k8s.io/kubernetes/pkg/apis/core/validation``:

- ``matchExpressions``: ``In``/``NotIn`` need at least one value, ``Exists``/``DoesNotExist``
  none, ``Gt``/``Lt`` exactly one integer value.
- ``matchFields``: key ``metadata.name`` only, operator ``In``/``NotIn`` with exactly one value.
- A required node affinity needs at least one term. An empty term matches no node.
- Tolerations: operator ``Equal`` (default) or ``Exists``; an empty key requires ``Exists``
  (and then tolerates every taint, ``key=None``); ``Exists`` takes no value; an empty effect
  matches all effects; ``tolerationSeconds`` only with ``NoExecute``.
- Taints: key and a valid effect are required; (key, effect) pairs must be unique.
"""

from __future__ import annotations

import re

from phalanx.api.specs import Placement, Requirement, SelectorTerm, Taint, TaintEffect, Toleration
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    as_str,
    child,
    fail,
    get_int,
    get_list,
    get_mapping,
    get_str,
    get_string_map,
    require_str,
)

_OPERATORS = "In, NotIn, Exists, DoesNotExist, Gt, Lt"
_EFFECTS = ", ".join(e.value for e in TaintEffect)


def placement_from(spec: Obj, path: str) -> Placement:
    """The placement constraints of a pod ``spec`` found at ``path``."""
    selector = get_string_map(spec, "nodeSelector", path)
    return Placement(
        node_selector=tuple(sorted(selector.items())),
        affinity_terms=affinity_terms(spec, path),
        tolerations=tolerations(spec, path),
    )


def affinity_terms(spec: Obj, path: str) -> tuple[SelectorTerm, ...]:
    affinity_path = child(path, "affinity")
    node_path = child(affinity_path, "nodeAffinity")
    node_affinity = get_mapping(get_mapping(spec, "affinity", path), "nodeAffinity", affinity_path)
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    if node_affinity.get(key) is None:
        return ()
    required_path = child(node_path, key)
    required = get_mapping(node_affinity, key, node_path)
    terms_path = child(required_path, "nodeSelectorTerms")
    raw_terms = get_list(required, "nodeSelectorTerms", required_path)
    if not raw_terms:
        fail(terms_path, "must have at least one node selector term")
    return tuple(_term(raw, child(terms_path, i)) for i, raw in enumerate(raw_terms))


def _term(raw: object, path: str) -> SelectorTerm:
    term = as_mapping(raw, path)
    exprs_path = child(path, "matchExpressions")
    fields_path = child(path, "matchFields")
    expressions = tuple(
        _requirement(item, child(exprs_path, i))
        for i, item in enumerate(get_list(term, "matchExpressions", path))
    )
    fields = tuple(
        _field_requirement(item, child(fields_path, i))
        for i, item in enumerate(get_list(term, "matchFields", path))
    )
    return SelectorTerm(expressions=expressions, fields=fields)


def _values(req: Obj, path: str) -> tuple[str, ...]:
    values_path = child(path, "values")
    return tuple(
        as_str(v, child(values_path, i)) for i, v in enumerate(get_list(req, "values", path))
    )


def _requirement(raw: object, path: str) -> Requirement:
    req = as_mapping(raw, path)
    key = require_str(req, "key", path)
    operator = require_str(req, "operator", path)
    values = _values(req, path)
    values_path = child(path, "values")
    if operator in ("In", "NotIn"):
        if not values:
            fail(values_path, f"must be specified when operator is {operator!r}")
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            fail(values_path, f"may not be specified when operator is {operator!r}")
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            fail(values_path, f"must have exactly one value when operator is {operator!r}")
        if re.fullmatch(r"[+-]?[0-9]+", values[0]) is None:
            fail(child(values_path, 0), f"must be an integer for operator {operator!r}")
    else:
        fail(child(path, "operator"), f"unknown operator {operator!r} (one of {_OPERATORS})")
    return Requirement(key=key, operator=operator, values=values)


def _field_requirement(raw: object, path: str) -> Requirement:
    req = as_mapping(raw, path)
    key = require_str(req, "key", path)
    operator = require_str(req, "operator", path)
    values = _values(req, path)
    if key != "metadata.name":
        fail(child(path, "key"), f"unsupported field {key!r} (only 'metadata.name')")
    if operator not in ("In", "NotIn"):
        fail(
            child(path, "operator"),
            f"operator must be 'In' or 'NotIn' for a field, not {operator!r}",
        )
    if len(values) != 1:
        fail(child(path, "values"), f"must have exactly one value for operator {operator!r}")
    return Requirement(key=key, operator=operator, values=values)


def _effect(obj: Obj, path: str) -> TaintEffect | None:
    text = get_str(obj, "effect", path)
    if not text:
        return None
    try:
        return TaintEffect(text)
    except ValueError:
        fail(child(path, "effect"), f"unknown effect {text!r} (one of {_EFFECTS})")


def tolerations(spec: Obj, path: str) -> tuple[Toleration, ...]:
    list_path = child(path, "tolerations")
    return tuple(
        _toleration(raw, child(list_path, i))
        for i, raw in enumerate(get_list(spec, "tolerations", path))
    )


def _toleration(raw: object, path: str) -> Toleration:
    tol = as_mapping(raw, path)
    key = get_str(tol, "key", path)
    operator = get_str(tol, "operator", path) or "Equal"
    value = get_str(tol, "value", path)
    effect = _effect(tol, path)
    if operator not in ("Equal", "Exists"):
        fail(child(path, "operator"), f"unknown operator {operator!r} (one of 'Equal', 'Exists')")
    if not key and operator != "Exists":
        fail(child(path, "operator"), "must be 'Exists' when key is empty")
    if operator == "Exists" and value:
        fail(child(path, "value"), "must be empty when operator is 'Exists'")
    seconds = get_int(tol, "tolerationSeconds", path, minimum=-(2**63), maximum=2**63 - 1)
    if seconds is not None and effect is not TaintEffect.NO_EXECUTE:
        fail(child(path, "effect"), "must be 'NoExecute' when tolerationSeconds is set")
    return Toleration(key=key or None, operator=operator, value=value, effect=effect)


def taints(spec: Obj, path: str, key: str = "taints") -> tuple[Taint, ...]:
    list_path = child(path, key)
    result: list[Taint] = []
    seen: set[tuple[str, TaintEffect]] = set()
    for i, raw in enumerate(get_list(spec, key, path)):
        item_path = child(list_path, i)
        taint = as_mapping(raw, item_path)
        key = require_str(taint, "key", item_path)
        effect = _effect(taint, item_path)
        if effect is None:
            fail(child(item_path, "effect"), "effect is required")
        if (key, effect) in seen:
            fail(item_path, f"duplicate taint {key}:{effect.value} (key and effect must be unique)")
        seen.add((key, effect))
        result.append(Taint(key=key, value=get_str(taint, "value", item_path), effect=effect))
    return tuple(result)
