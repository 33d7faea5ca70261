"""YAML text → Python values, refusing what the Kubernetes API server's decoder refuses.

Design: every YAML or JSON file phalanx reads (manifests, ``serve`` settings, kubeconfigs) goes
through :func:`load_all` or :func:`load_one`, which differ from ``yaml.safe_load`` in three ways:

- **Duplicate keys** in one mapping are an error, as the API server's strict decoding makes
  them (``metadata: {name: a, name: b}``). YAML merge keys (``<<: *base``) may still be
  overridden by explicit keys.
- **Nesting depth** is limited to :data:`MAX_DEPTH` levels. The C YAML loader composes nodes
  recursively and overflows the C stack (a segmentation fault, no message) somewhere past
  20,000 levels; the pure-Python one raises ``RecursionError`` past about 1,000. No Kubernetes
  object comes near 100 levels. A cheap upper bound (longest line + deepest bracket nesting)
  clears ordinary files without parsing twice; only a file that could be too deep is scanned
  event by event, which stops at the first level too many.
- **Errors** are :class:`InputError` s with the file as ``source`` and the line and column.
  PyYAML 6.0.4 and later (their libyaml) refuse deep nesting themselves, with an error of
  their own; it is reported as the same "nested more than … levels deep" line. libyaml counts
  the document's root block too, so with it a block document of exactly 1,000 levels is
  refused as well.

The C loader is used when PyYAML has it (10× faster on large manifests).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import yaml

from phalanx.api.errors import InputError, short_repr

#: The deepest nesting of maps and lists accepted in any YAML or JSON input.
MAX_DEPTH = 1000

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


class StrictLoader(_Base):  # type: ignore[misc]
    """The safe loader, refusing a key that appears twice in one mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[object] = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, Hashable) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"duplicate key {short_repr(key)}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _depth_bound(text: str) -> int:
    """An upper bound of the nesting depth: flow brackets plus the longest line."""
    longest = max((len(line) for line in text.splitlines()), default=0)
    if "[" not in text and "{" not in text:
        return longest
    codes = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    steps = np.zeros(len(codes), dtype=np.int32)
    steps[(codes == ord("[")) | (codes == ord("{"))] = 1
    steps[(codes == ord("]")) | (codes == ord("}"))] = -1
    return longest + int(np.cumsum(steps).max(initial=0))


def check_depth(text: str, source: str, limit: int = MAX_DEPTH) -> None:
    """Raise an InputError when ``text`` nests maps and lists deeper than ``limit``."""
    if _depth_bound(text) <= limit:
        return
    depth = 0
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    try:
        for event in yaml.parse(text, Loader=_Base):
            if isinstance(event, starts):
                depth += 1
                if depth > limit:
                    mark = event.start_mark
                    line = f" at line {mark.line + 1}" if mark is not None else ""
                    raise InputError(f"nested more than {limit} levels deep{line}", source=source)
            elif isinstance(event, ends):
                depth -= 1
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source) from None


def yaml_error(exc: yaml.YAMLError, source: str) -> InputError:
    """One line for a PyYAML error: the problem, where it is, and what it belongs to."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return InputError(f"YAML error: {short_repr(str(exc), 200)}", source=source)
    mark = exc.problem_mark or exc.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = exc.problem or exc.context or "malformed YAML"
    if "nesting depth" in problem:  # PyYAML ≥ 6.0.4 has a depth limit of its own
        line = f" at line {mark.line + 1}" if mark is not None else ""
        return InputError(f"nested more than {MAX_DEPTH} levels deep{line}", source=source)
    context = exc.context_mark
    if exc.problem and exc.context and context is not None and context is not mark:
        problem += f" ({exc.context} started at line {context.line + 1})"
    return InputError(f"YAML syntax error{where}: {problem}", source=source)


def load_all(text: str, source: str) -> list[Any]:
    """Every document of ``text`` (YAML or JSON); InputErrors name ``source``."""
    check_depth(text, source)
    try:
        return list(yaml.load_all(text, Loader=StrictLoader))
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source) from None
    except RecursionError:  # pragma: no cover - check_depth stops this first
        raise InputError(f"nested more than {MAX_DEPTH} levels deep", source=source) from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's guard)
        raise InputError(f"YAML error: {short_repr(str(exc), 200)}", source=source) from None


def load_one(text: str, source: str) -> Any:
    """The single document of ``text`` (None when empty); more than one is an error."""
    documents = load_all(text, source)
    if len(documents) > 1:
        raise InputError(
            f"expected one YAML document, found {len(documents)} (separated by ---)", source=source
        )
    return documents[0] if documents else None


def read_text(path: str) -> str:
    """A file's text; an InputError names the file when it is missing, unreadable or not
    UTF-8."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise InputError("file not found", source=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", source=path) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=path) from None
    except ValueError as exc:  # an embedded NUL in the path
        raise InputError(f"cannot read file: {exc}", source=path) from None
