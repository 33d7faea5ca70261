"""Trace specs ``NAME[:OPTIONS]`` parsed into a name, an optional variant and typed options.

Design: ``OPTIONS`` is a comma-separated list of ``key=value``; where a trace has variants
(openb pod lists, Sia sets) the first item may be a bare variant name, shorthand for
``variant=…``/``set=…``. Keys are checked against the trace's valid options before any value is
used, and each value is converted by the typed getter the trace asks for, so every mistake is a
one-line :class:`InputError` naming the spec, the option and the valid choices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from phalanx.api.errors import InputError

#: The largest count a trace option may ask for (jobs, nodes, GPUs per node, pods): each is
#: held in memory, and a million is far beyond any published trace.
MAX_COUNT = 1_000_000
MAX_SEED = 2**63 - 1
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def split_spec(spec: str) -> tuple[str, list[str]]:
    """``NAME`` and the raw option items of ``NAME:ITEM,ITEM``."""
    name, _, rest = spec.partition(":")
    items = [item.strip() for item in rest.split(",")] if rest.strip() else []
    return name.strip(), items


class Options:
    """The options of one trace spec, checked against ``valid`` keys."""

    def __init__(
        self,
        spec: str,
        trace: str,
        items: Sequence[str],
        valid: Sequence[str],
        *,
        variant_key: str | None = None,
    ) -> None:
        self.spec = spec
        self.values: dict[str, str] = {}
        for position, item in enumerate(items):
            key, equals, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not equals:
                if position == 0 and variant_key is not None and item:
                    key, value = variant_key, item
                else:
                    expected = f"{variant_key} name or key=value" if position == 0 else "key=value"
                    if position == 0 and variant_key is None:
                        expected = "key=value (this trace has no variants)"
                    raise InputError(
                        f"option {item!r} is not {expected} (valid: {', '.join(valid)})",
                        source=spec,
                    )
            if key not in valid:
                raise InputError(
                    f"unknown option {key!r} of {trace} (valid: {', '.join(valid)})",
                    source=spec,
                    field=key,
                )
            if key in self.values:
                raise InputError("option given twice", source=spec, field=key)
            self.values[key] = value

    def _bad(self, key: str, value: str, wanted: str) -> InputError:
        return InputError(f"{value!r} is not {wanted}", source=self.spec, field=key)

    def text(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is not None and not value:
            raise self._bad(key, value, "a value")
        return value

    def integer(self, key: str, *, minimum: int = 1, maximum: int | None = None) -> int | None:
        """An integer in ``minimum..maximum``; the default maximum is :data:`MAX_COUNT`, or
        2^63-1 for a ``seed``."""
        value = self.values.get(key)
        if value is None:
            return None
        if maximum is None:
            maximum = MAX_SEED if key == "seed" else MAX_COUNT
        try:
            number = int(value)
        except ValueError:
            number = minimum - 1
        if number < minimum:
            wanted = "a positive integer" if minimum == 1 else f"an integer ≥ {minimum}"
            raise self._bad(key, value, wanted)
        if number > maximum:
            raise self._bad(key, value[:40], f"at most {maximum:,} (phalanx's limit)")
        return number

    def number(self, key: str, *, low: float = 0.0, high: float = math.inf) -> float | None:
        """A finite number with ``low < x ≤ high`` (``low ≤ x`` when ``high`` is finite)."""
        value = self.values.get(key)
        if value is None:
            return None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(high):
            ok = low <= number <= high
            wanted = f"a number in {low:g}..{high:g}"
        else:
            ok = low < number < high
            wanted = "a positive number" if low == 0 else f"a number above {low:g}"
        if not ok:
            raise self._bad(key, value, wanted)
        return number

    def flag(self, key: str) -> bool | None:
        value = self.values.get(key)
        if value is None:
            return None
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise self._bad(key, value, "1 or 0 (true/false)")
