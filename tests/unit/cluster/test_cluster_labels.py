"""Label, node-affinity and taint matching (phalanx.cluster.labels), as Kubernetes defines it."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.api.specs import (
    NodeSpec,
    Placement,
    Requirement,
    SelectorTerm,
    Taint,
    TaintEffect,
    Toleration,
)
from phalanx.cluster.labels import LabelIndex, TaintIndex
from phalanx.cluster.nodes import NodeFacts

NO_SCHEDULE = TaintEffect.NO_SCHEDULE
NO_EXECUTE = TaintEffect.NO_EXECUTE
PREFER = TaintEffect.PREFER_NO_SCHEDULE

NAMES = ["n0", "n1", "n2", "n3"]
LABELS = [
    {"zone": "a", "gen": "3", "accel": "a100"},
    {"zone": "b", "gen": "10"},
    {"zone": "c", "gen": "x"},  # gen is not an integer here
    {},
]


def R(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, op, tuple(values))


def term(*expressions: Requirement, fields: tuple[Requirement, ...] = ()) -> SelectorTerm:
    return SelectorTerm(expressions=tuple(expressions), fields=fields)


def mask(bits: str) -> list[bool]:
    return [b == "1" for b in bits]


@pytest.fixture(scope="module")
def index() -> LabelIndex:
    return LabelIndex(NAMES, LABELS)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ((), "1111"),
        ((("zone", "a"),), "1000"),
        ((("zone", "b"), ("gen", "10")), "0100"),
        ((("zone", "a"), ("gen", "10")), "0000"),  # ANDed
        ((("zone", "z"),), "0000"),  # unknown value
        ((("rack", "1"),), "0000"),  # unknown key
    ],
)
def test_node_selector(index: LabelIndex, selector, expected: str) -> None:
    assert index.selector(Placement(node_selector=selector)).tolist() == mask(expected)


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (R("zone", "In", "a"), "1000"),
        (R("zone", "In", "a", "c"), "1010"),
        (R("zone", "In", "z"), "0000"),
        (R("rack", "In", "1"), "0000"),
        (R("zone", "NotIn", "a"), "0111"),  # a node without the label matches NotIn
        (R("zone", "NotIn", "a", "b", "c"), "0001"),
        (R("rack", "NotIn", "1"), "1111"),
        (R("accel", "Exists"), "1000"),
        (R("zone", "Exists"), "1110"),
        (R("rack", "Exists"), "0000"),
        (R("accel", "DoesNotExist"), "0111"),
        (R("rack", "DoesNotExist"), "1111"),
        (R("gen", "Gt", "5"), "0100"),
        (R("gen", "Gt", "3"), "0100"),  # strictly greater
        (R("gen", "Gt", "-1"), "1100"),  # "x" and a missing label never match
        (R("gen", "Lt", "5"), "1000"),
        (R("gen", "Lt", "3"), "0000"),  # strictly less
        (R("gen", "Lt", "100"), "1100"),
        (R("rack", "Gt", "0"), "0000"),
        (R("zone", "Lt", "1000"), "0000"),  # no integer values at all
    ],
)
def test_affinity_operators(index: LabelIndex, requirement: Requirement, expected: str) -> None:
    assert index.requirement(requirement).tolist() == mask(expected)
    placement = Placement(affinity_terms=(term(requirement),))
    assert index.selector(placement).tolist() == mask(expected)


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ((term(R("zone", "In", "a")), term(R("zone", "In", "c"))), "1010"),  # terms ORed
        ((term(R("zone", "In", "a", "b"), R("gen", "Gt", "5")),), "0100"),  # expressions ANDed
        ((term(R("zone", "Exists"), R("gen", "Lt", "5"), R("accel", "In", "a100")),), "1000"),
        ((term(R("zone", "In", "a"), R("zone", "In", "b")),), "0000"),
        ((term(fields=(R("metadata.name", "In", "n1"),)),), "0100"),
        ((term(fields=(R("metadata.name", "NotIn", "n1"),)),), "1011"),
        ((term(fields=(R("metadata.name", "In", "nope"),)),), "0000"),
        (
            (term(R("zone", "In", "b", "c"), fields=(R("metadata.name", "In", "n0", "n1"),)),),
            "0100",
        ),
        ((term(),), "0000"),  # an empty term matches nothing
        ((term(), term(R("zone", "In", "b"))), "0100"),  # ...but does not poison the others
        ((term(), term()), "0000"),
    ],
)
def test_affinity_terms(index: LabelIndex, terms, expected: str) -> None:
    assert index.selector(Placement(affinity_terms=terms)).tolist() == mask(expected)


def test_node_selector_and_affinity_are_anded(index: LabelIndex) -> None:
    both = Placement(node_selector=(("zone", "a"),), affinity_terms=(term(R("zone", "In", "b")),))
    assert not index.selector(both).any()
    agree = Placement(node_selector=(("zone", "b"),), affinity_terms=(term(R("gen", "Gt", "4")),))
    assert index.selector(agree).tolist() == mask("0100")


@pytest.mark.parametrize("value", ["1_0", "1_000"])
def test_gt_lt_never_match_non_decimal_label_values(value: str) -> None:
    index = LabelIndex(["n0"], [{"gen": value}])
    assert not index.requirement(R("gen", "Gt", "5")).any()
    assert not index.requirement(R("gen", "Lt", "100000")).any()


def test_selector_masks_are_cached_per_placement() -> None:
    facts = NodeFacts([NodeSpec(n, {}, labels=lab) for n, lab in zip(NAMES, LABELS, strict=True)])
    placement = Placement(node_selector=(("zone", "a"),))
    first = facts.selector_mask(placement)
    assert first.tolist() == mask("1000")
    assert facts.selector_mask(Placement(node_selector=(("zone", "a"),))) is first


# -- taints and tolerations ------------------------------------------------------------------
GPU_NS = Taint("gpu", "true", NO_SCHEDULE)
GPU_NE = Taint("gpu", "true", NO_EXECUTE)
GPU_PREFER = Taint("gpu", "true", PREFER)
DEDICATED = Taint("dedicated", "ml", NO_SCHEDULE)
NODE_TAINTS = [(), (GPU_NS,), (GPU_NE,), (GPU_PREFER,), (DEDICATED,), (GPU_NS, DEDICATED)]


def T(key: str | None, op: str, value: str = "", effect: TaintEffect | None = None) -> Toleration:
    return Toleration(key, op, value, effect)


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ((), "100100"),  # NoSchedule and NoExecute filter, PreferNoSchedule does not
        ((T("gpu", "Equal", "true", NO_SCHEDULE),), "110100"),
        ((T("gpu", "Equal", "true", NO_EXECUTE),), "101100"),
        ((T("gpu", "Equal", "true"),), "111100"),  # effect None matches every effect
        ((T("gpu", "Equal", "false"),), "100100"),  # Equal needs the same value
        ((T("gpu", "Equal", ""),), "100100"),
        ((T("gpu", "Exists"),), "111100"),
        ((T("gpu", "Exists", effect=NO_EXECUTE),), "101100"),
        ((T(None, "Exists"),), "111111"),  # empty key with Exists tolerates everything
        ((T(None, "Exists", effect=NO_SCHEDULE),), "110111"),
        ((T("dedicated", "Equal", "ml"),), "100110"),
        ((T("dedicated", "Equal", "ml"), T("gpu", "Exists", effect=NO_SCHEDULE)), "110111"),
        ((T("other", "Exists"),), "100100"),
    ],
)
def test_toleration_masks(tolerations, expected: str) -> None:
    index = TaintIndex(NODE_TAINTS)
    assert index.tolerated(tolerations).tolist() == mask(expected)


def test_no_taints_tolerates_every_node() -> None:
    assert TaintIndex([(), ()]).tolerated(()).tolist() == [True, True]
    # Only soft taints in the cluster: nothing filters.
    assert TaintIndex([(GPU_PREFER,), ()]).tolerated(()).tolist() == [True, True]


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (T("gpu", "Equal", "true", NO_SCHEDULE), GPU_NS, True),
        (T("gpu", "Equal", "true", NO_SCHEDULE), GPU_NE, False),
        (T("gpu", "Equal", "true"), GPU_NE, True),
        (T("gpu", "Equal", "TRUE"), GPU_NS, False),  # values are case-sensitive
        (T("gpu", "Exists", "ignored"), GPU_NS, True),  # Exists ignores the value
        (T("GPU", "Exists"), GPU_NS, False),  # keys are case-sensitive
        (T(None, "Exists"), DEDICATED, True),
        (T(None, "Exists", effect=NO_EXECUTE), DEDICATED, False),
        (T(None, "Equal", "ml"), DEDICATED, False),  # no key needs Exists
    ],
)
def test_toleration_tolerates(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration.tolerates(taint) is expected


def test_taint_vocabulary_is_deduplicated() -> None:
    index = TaintIndex([(GPU_NS,), (GPU_NS, DEDICATED), ()])
    assert len(index.vocab) == 2
    assert index.has.shape == (3, 2)
    assert np.array_equal(index.has.sum(axis=0), [1, 2])  # sorted: dedicated, gpu
