"""Durations written the way people write them: ``90``, ``30s``, ``2h``, ``1h30m``, ``1.5d``.

Range: at most :data:`MAX_SECONDS`, the longest Kubernetes duration (``time.Duration`` is int64
nanoseconds, about 292 years); longer is an error, not a float that overflows the clock.
"""

from __future__ import annotations

import re

#: 2^63-1 nanoseconds, the longest duration Kubernetes (Go's ``time.Duration``) can express.
MAX_SECONDS = (2**63 - 1) / 1e9

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: object) -> float:
    """Seconds in ``text``; raise ValueError when it is not a non-negative duration."""
    seconds = _parse(text)
    if seconds > MAX_SECONDS:
        shown = str(text) if len(str(text)) <= 40 else str(text)[:37] + "..."
        raise ValueError(f"duration {shown!r} is out of range (at most about 292 years)")
    return seconds


def _parse(text: object) -> float:
    if isinstance(text, bool):
        raise ValueError(f"duration {text!r} is not a number")
    if isinstance(text, int | float):
        if text != text or text in (float("inf"), float("-inf")):
            raise ValueError(f"duration {text!r} is not finite")
        if text < 0:
            raise ValueError(f"negative duration {text!r}")
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"duration of type {type(text).__name__} is not a string")
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
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"malformed duration {shown!r} (use e.g. 90, 30s, 2h, 1h30m)")
    return total


def format_duration(seconds: float) -> str:
    """Compact form: ``45s``, ``12m30s``, ``3h05m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
