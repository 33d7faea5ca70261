"""Typed accessors over parsed YAML/JSON that fail with an :class:`InputError` naming the field.

Design: every converter in :mod:`phalanx.k8s` reads plain dicts only through these helpers, so a
malformed manifest (``spec: 5``, ``containers: null``, a list where a map belongs) can only ever
surface as an ``InputError`` whose ``field`` is the dotted path of the offending value — never as a
``KeyError``/``TypeError``/``AttributeError``. Paths are built like Kubernetes ``field.Path``:
struct fields and simple map keys are joined with ``.``, list indexes and map keys containing
``.`` or ``/`` (labels, annotations, ``nvidia.com/gpu``) are written ``[key]``.

``null`` is treated as absent, as the Kubernetes JSON decoder does for optional fields. Values are
checked strictly against the Kubernetes types: a label value ``1`` (a YAML integer) is rejected,
as ``kubectl apply`` would reject it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn

from phalanx.api.errors import InputError
from phalanx.api.quantity import is_gpu, parse_quantity, to_units
from phalanx.api.specs import Resources

Obj = Mapping[str, Any]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)

_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def child(path: str, key: str | int) -> str:
    """The path of ``key`` inside the value at ``path``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _SIMPLE_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def fail(path: str, message: str) -> NoReturn:
    raise InputError(message, field=path)


def describe(value: object) -> str:
    """A short phrase for the type of ``value`` in error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def as_mapping(value: object, path: str) -> Obj:
    """``value`` as a map with string keys; ``null`` is the empty map."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        fail(path, f"must be a map, not {describe(value)}")
    for key in value:
        if not isinstance(key, str):
            fail(path, f"key {key!r} must be a string")
    return value


def as_list(value: object, path: str) -> list[Any]:
    """``value`` as a list; ``null`` is the empty list."""
    if value is None:
        return []
    if not isinstance(value, list):
        fail(path, f"must be a list, not {describe(value)}")
    return value


def as_str(value: object, path: str) -> str:
    if not isinstance(value, str):
        hint = " (quote it in YAML)" if isinstance(value, int | float) else ""
        fail(path, f"must be a string, not {describe(value)}{hint}")
    return value


def get_mapping(obj: Obj, key: str, path: str) -> Obj:
    return as_mapping(obj.get(key), child(path, key))


def get_list(obj: Obj, key: str, path: str) -> list[Any]:
    return as_list(obj.get(key), child(path, key))


def get_str(obj: Obj, key: str, path: str, default: str = "") -> str:
    value = obj.get(key)
    return default if value is None else as_str(value, child(path, key))


def require_str(obj: Obj, key: str, path: str) -> str:
    """A non-empty string that must be present."""
    value = get_str(obj, key, path)
    if not value:
        fail(child(path, key), "is required")
    return value


def get_bool(obj: Obj, key: str, path: str, default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        fail(child(path, key), f"must be true or false, not {describe(value)}")
    return value


def check_int(
    value: object,
    path: str,
    *,
    minimum: int = INT32_MIN,
    maximum: int = INT32_MAX,
) -> int:
    """``value`` as an integer within bounds (int32 by default, like most Kubernetes fields)."""
    if isinstance(value, bool) or not isinstance(value, int):
        fail(path, f"must be an integer, not {describe(value)}")
    if value < minimum:
        fail(path, f"must be at least {minimum}, not {value}")
    if value > maximum:
        fail(path, f"must be at most {maximum}, not {value}")
    return value


def get_int(
    obj: Obj,
    key: str,
    path: str,
    *,
    minimum: int = INT32_MIN,
    maximum: int = INT32_MAX,
) -> int | None:
    """An optional integer field; ``None`` when absent or ``null``."""
    value = obj.get(key)
    if value is None:
        return None
    return check_int(value, child(path, key), minimum=minimum, maximum=maximum)


def get_string_map(obj: Obj, key: str, path: str) -> dict[str, str]:
    """A ``map[string]string`` field such as labels, annotations or a node selector."""
    where = child(path, key)
    raw = as_mapping(obj.get(key), where)
    return {name: as_str(value, child(where, name)) for name, value in raw.items()}


def quantity(name: str, value: object, path: str) -> int:
    """Resource ``name``'s integer amount (see :func:`phalanx.api.quantity.to_units`)."""
    if not name:
        fail(path, "resource name must not be empty")
    try:
        return to_units(name, value)
    except ValueError as exc:
        fail(path, str(exc))


def is_extended(name: str) -> bool:
    """An extended resource (``nvidia.com/gpu``): a domain-prefixed name outside
    ``kubernetes.io``, as Kubernetes' ``IsExtendedResourceName``."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def check_whole(name: str, value: object, path: str, *, shares: bool = False) -> None:
    """Extended resources are counted in whole units: ``example.com/foo: 1.5`` is refused as
    the API server refuses it (``must be an integer``). With ``shares`` (a pod's request), a
    GPU may also be a share of one device in whole milli-GPUs (``500m``, ``0.25``: phalanx's
    GPU-sharing extension, as in Alibaba's openb trace), but never a fraction above one GPU
    (``1.5``) nor finer than a milli-GPU (``0.0005``). ``value`` is already a valid quantity."""
    if not (is_extended(name) or name == "pods"):
        return
    amount = parse_quantity(value)
    if amount.denominator == 1:
        return
    shown = str(value)[:40]
    if shares and is_gpu(name):
        if amount > 1:
            fail(path, f"must be a whole number of GPUs above one GPU, not {shown}")
        if (amount * 1000).denominator != 1:
            fail(path, f"must be a whole number of milli-GPUs (a share of one GPU), not {shown}")
        return
    fail(path, f"must be an integer, not {shown}")


def as_resources(value: object, path: str) -> Resources:
    """A Kubernetes ``ResourceList`` (``{cpu: 500m, memory: 1Gi}``) in integer units."""
    raw = as_mapping(value, path)
    return {name: quantity(name, amount, child(path, name)) for name, amount in raw.items()}


def get_resources(obj: Obj, key: str, path: str) -> Resources:
    return as_resources(obj.get(key), child(path, key))


def add_into(total: Resources, more: Resources) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def max_into(total: Resources, other: Resources) -> None:
    for name, amount in other.items():
        total[name] = max(amount, total.get(name, 0))
