"""Option types and the argument parser shared by every ``phalanx`` command.

Design: a bad option value is one line, ``phalanx CMD: error: MESSAGE``, and exit status 2 — no
usage block (``--help`` shows it). Every numeric option is checked as finite and in range here,
so no NaN, infinity or negative value reaches the engine.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from phalanx.api.durations import parse_duration

#: Seeds are non-negative 64-bit integers (numpy's generators refuse negative seeds).
MAX_SEED = 2**63 - 1
_LONG_QUOTED = re.compile(r"'([^']{60})[^']{20,}'")


def shorten(message: str) -> str:
    """``message`` on one line, with any quoted value cut to about 60 characters."""
    flat = " ".join(message.split())
    return _LONG_QUOTED.sub(r"'\1...'", flat)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (the usage block is left to ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {shorten(message)}\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise SystemExit(status)


def _text(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {_text(text)!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2^63-1, not {_text(text)}")
    return value


def number(text: str, *, positive: bool = False) -> float:
    """A finite number, at least 0 (above 0 when ``positive``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_text(text)!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {_text(text)}")
    if value < 0 or (positive and value == 0):
        raise argparse.ArgumentTypeError(f"must be {'positive' if positive else 'at least 0'}")
    return value


def non_negative(text: str) -> float:
    return number(text)


def positive(text: str) -> float:
    return number(text, positive=True)


def seconds(text: str) -> float:
    """A duration (``90``, ``30s``, ``2h``) within Kubernetes' duration range."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def integer(low: int, high: int, what: str = "an integer") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {_text(text)!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}")
        return value

    return parse
