"""Durations written the way people write them: ``90``, ``30s``, ``2h``, ``1h30m``, ``1.5d``."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: object) -> float:
    """Seconds in ``text``; raise ValueError when it is not a non-negative duration."""
    if isinstance(text, bool):
        raise ValueError(f"duration {text!r} is not a number")
    if isinstance(text, int | float):
        if text != text or text in (float("inf"), float("-inf")):
            raise ValueError(f"duration {text!r} is not finite")
        if text < 0:
            raise ValueError(f"negative duration {text!r}")
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"duration {text!r} is not a string")
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    pos, total = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != pos:
            break
        total += float(match[1]) * _UNITS[match[2]]
        pos = match.end()
    if pos != len(value) or not value:
        raise ValueError(f"malformed duration {text!r} (use e.g. 90, 30s, 2h, 1h30m)")
    return total


def format_duration(seconds: float) -> str:
    """Compact form: ``45s``, ``12m30s``, ``3h05m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
