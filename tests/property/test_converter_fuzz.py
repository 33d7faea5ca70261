"""Fuzzing the converter: a mutated manifest gives a result or an InputError, nothing else.

Seeds are the valid manifests phalanx ships (``phalanx/examples``). Each example draws one
document and applies one to three mutations at random paths: a field removed, a value replaced
by another type, a number out of range (negative, 2^64, NaN, infinity, 5,000 digits), a
quantity out of range, a value nested 2,000 levels deep, a list item duplicated. The mutated
workload goes through :func:`load_documents` (``simulate``'s path) and the document alone
through the per-object converters the live scheduler calls. Any exception other than
:class:`InputError` fails the test; so does an InputError that is not one line.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phalanx.api.errors import InputError
from phalanx.k8s import (
    PriorityTable,
    gang_from_dict,
    load_documents,
    node_from_dict,
    pod_from_dict,
    priority_class_from_dict,
    spec_from_dict,
    workload_from_dict,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "phalanx" / "examples"
SEEDS: list[list[Any]] = [
    [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for path in sorted(EXAMPLES.glob("*.yaml"))
]


def deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


REPLACEMENTS: list[Any] = [
    None,
    0,
    -1,
    1.5,
    2**31,
    2**64,
    -(2**63),
    math.nan,
    math.inf,
    -math.inf,
    True,
    "",
    "x" * 300,
    "100P",
    "100E",
    "9999999999999999999999Gi",
    "1e999",
    "-5",
    "1.5",
    "0.0005",
    "nan",
    "10m",
    "-1s",
    "9" * 400,
    int("9" * 4000),
    [],
    [1, "a"],
    {},
    {"a": {"b": 1}},
    {"nvidia.com/gpu": "1.5"},
    "\x00\ufffd",
]

CONVERTERS = (
    node_from_dict,
    priority_class_from_dict,
    lambda obj: pod_from_dict(obj, PriorityTable()),
    lambda obj: gang_from_dict(obj, PriorityTable()),
    lambda obj: spec_from_dict(obj, PriorityTable()),
    workload_from_dict,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (map keys and list indexes), 30 levels at most."""
    found = [prefix] if prefix else []
    if len(prefix) >= 30:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(paths(item, (*prefix, i)))
    return found


def mutate(doc: Any, data: st.DataObject) -> None:
    every = paths(doc)
    if not every:
        return
    path = data.draw(st.sampled_from(every), label="path")
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    how = data.draw(st.sampled_from(["remove", "replace", "deep", "duplicate"]), label="how")
    if how == "remove":
        del parent[last]
    elif how == "replace":
        # a copy: a later mutation may change it in place
        parent[last] = copy.deepcopy(data.draw(st.sampled_from(REPLACEMENTS), label="value"))
    elif how == "deep":
        parent[last] = deep(2000)
    elif isinstance(parent, list):
        parent.append(parent[last])
    else:
        parent[last] = [parent[last], parent[last]]


def outcome(call: Any) -> None:
    try:
        call()
    except InputError as exc:
        assert "\n" not in exc.line(), exc.line()


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_mutated_manifests_give_a_result_or_an_input_error(data: st.DataObject) -> None:
    docs = copy.deepcopy(data.draw(st.sampled_from(SEEDS), label="example"))
    index = data.draw(st.integers(0, len(docs) - 1), label="document")
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        mutate(docs[index], data)
    outcome(lambda: load_documents([("fuzz.yaml", d) for d in docs]))
    for convert in CONVERTERS:
        outcome(lambda convert=convert: convert(docs[index]))


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_any_value_as_a_document_gives_a_result_or_an_input_error(value: Any) -> None:
    outcome(lambda: load_documents([("fuzz.yaml", value)]))
    for convert in CONVERTERS:
        outcome(lambda convert=convert: convert(value))
