"""Kubernetes quantities → integer units (milli for CPU and GPUs, whole units otherwise)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from phalanx.api.quantity import format_units, is_milli, parse_quantity, to_units


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1", 1000),
        ("cpu", 2, 2000),
        ("cpu", 0.5, 500),
        ("cpu", "0.5", 500),
        ("cpu", "1.5", 1500),
        ("cpu", 1.5, 1500),
        ("cpu", ".5", 500),
        ("cpu", "1e3", 1_000_000),
        ("cpu", "0.1m", 1),  # rounded up like MilliValue, never shrinks
        ("cpu", "+1", 1000),
        ("memory", "1e3", 1000),
        ("memory", "1E3", 1000),
        ("memory", "100M", 100_000_000),
        ("memory", "1k", 1000),
        ("memory", "1Ki", 1024),
        ("memory", "1Gi", 2**30),
        ("memory", "1.5Gi", 3 * 2**29),
        ("memory", 1.5, 2),  # a fractional byte rounds up
        ("memory", 0, 0),
        ("memory", "0", 0),
        ("ephemeral-storage", "10G", 10 * 10**9),
        ("nvidia.com/gpu", 1, 1000),
        ("nvidia.com/gpu", "2", 2000),
        ("amd.com/gpu", "500m", 500),
        ("example.com/foo", 3, 3),
        ("pods", "110", 110),
    ],
)
def test_to_units(resource: str, value: object, expected: int) -> None:
    assert to_units(resource, value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "1.2.3",
        "abc",
        "5 Gi",
        "1Gb",
        "1K",
        "",
        "1e",
        "m",
        "1m1",
        True,
        None,
        [1],
        {"a": 1},
        float("nan"),
        float("inf"),
    ],
)
def test_malformed_quantities_raise(value: object) -> None:
    with pytest.raises(ValueError, match="quantity"):
        to_units("memory", value)


@pytest.mark.parametrize("value", ["-1", -1, "-500m", -0.5])
def test_negative_quantities_raise(value: object) -> None:
    with pytest.raises(ValueError, match="negative"):
        to_units("cpu", value)


def test_parse_quantity_is_exact() -> None:
    assert parse_quantity("0.1") == Fraction(1, 10)
    assert parse_quantity(0.1) == Fraction(1, 10)
    assert parse_quantity("1Mi") == 2**20
    assert parse_quantity("-2") == -2


@pytest.mark.parametrize(
    ("resource", "milli"),
    [("cpu", True), ("nvidia.com/gpu", True), ("memory", False), ("pods", False)],
)
def test_is_milli(resource: str, milli: bool) -> None:
    assert is_milli(resource) is milli


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1.5"),
        ("nvidia.com/gpu", 1000, "1"),
        ("memory", 2**30, "1Gi"),
        ("memory", 3 * 2**29, "1.5Gi"),
        ("memory", 512, "512"),
        ("pods", 110, "110"),
    ],
)
def test_format_units(resource: str, amount: int, text: str) -> None:
    assert format_units(resource, amount) == text
