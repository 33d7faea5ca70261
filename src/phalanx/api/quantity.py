"""Kubernetes quantities, parsed exactly.

Grammar (k8s.io/apimachinery resource.Quantity)::

    quantity  ::= signed-number suffix
    suffix    ::= Ki | Mi | Gi | Ti | Pi | Ei | m | "" | k | M | G | T | P | E | (e|E) signed-int

Values are kept as :class:`fractions.Fraction` until they are turned into the integer unit of a
resource: milli-units for ``cpu`` and GPUs, whole units (bytes, counts) for everything else.
Like Kubernetes' ``MilliValue``/``Value`` we round up, so a request never shrinks.

Range: a quantity "may not represent a number greater than 2^63-1" (the ``resource.Quantity``
contract); the scheduler reads CPU and GPUs through ``MilliValue`` and everything else through
``Value``, both int64, which saturate past that. phalanx refuses instead of saturating: an
amount above ``2**63 - 1`` in its integer unit (``cpu: 100P`` is 10^20 milli-CPU, ``memory:
100E`` is 10^20 bytes) is an error, so every resource matrix stays exact in int64.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from phalanx.api.errors import short_repr

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exp>[+-]?\d+))?$"
)

#: The largest amount of any resource, in its integer unit (int64, as Kubernetes counts).
MAX_UNITS = 2**63 - 1

_MAX_EXPONENT = 64  # far beyond any real quantity; stops 1e999999999 from hanging

#: Resources counted in thousandths: "500m" CPU is 500, one GPU is 1000.
MILLI_RESOURCES = frozenset({"cpu"})


def is_gpu(name: str) -> bool:
    """True for GPU device resources such as ``nvidia.com/gpu`` or ``amd.com/gpu``."""
    return name.endswith("/gpu")


def is_milli(name: str) -> bool:
    return name in MILLI_RESOURCES or is_gpu(name)


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity given as a YAML string or number; raise ValueError when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"quantity {short_repr(value)} is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"quantity {value!r} is not finite")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise ValueError(f"quantity {short_repr(value)} is not a string or number")
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"malformed quantity {short_repr(value)}")
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"quantity {short_repr(value)} is out of range")
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def to_units(name: str, value: object) -> int:
    """The integer amount of resource ``name``: milli-units for CPU and GPUs, else whole units."""
    amount = parse_quantity(value)
    if amount < 0:
        raise ValueError(f"negative quantity {short_repr(value)}")
    scaled = math.ceil(amount * 1000 if is_milli(name) else amount)
    if scaled > MAX_UNITS:
        unit = " milli-units" if is_milli(name) else ""
        raise ValueError(f"quantity {short_repr(value)} is out of range (at most 2^63-1{unit})")
    return scaled


def format_units(name: str, amount: int) -> str:
    """Human form of an integer amount: ``1500m`` → ``1.5`` CPUs, GPU milli → GPUs, bytes → Gi."""
    if is_milli(name):
        whole, rest = divmod(amount, 1000)
        return str(whole) if rest == 0 else f"{amount / 1000:g}"
    if name in ("memory", "ephemeral-storage") and amount >= 2**20:
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if amount >= size:
                return f"{amount / size:g}{suffix}"
    return str(amount)
