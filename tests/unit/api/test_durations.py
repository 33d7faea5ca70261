"""Durations in annotations: ``90``, ``30s``, ``2h``, ``1h30m``, ``1.5d``."""

from __future__ import annotations

import pytest

from phalanx.api.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        (90, 90.0),
        (1.5, 1.5),
        ("0", 0.0),
        ("2.5", 2.5),
        ("30s", 30.0),
        ("250ms", 0.25),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1m30s", 90.0),
        ("1.5d", 129600.0),
        (" 10s ", 10.0),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["", "abc", "-5", "5 s", "1h 30m", "1x", "h", "1.2.3s", "30S", True, None, [30]],
)
def test_malformed_durations_raise(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_negative_number_raises() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_duration(-1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (59.6, "1m00s"), (750, "12m30s"), (3 * 3600 + 300, "3h05m")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
