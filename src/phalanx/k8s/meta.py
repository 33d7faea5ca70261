"""Object metadata: names, namespaces, labels, annotations and phalanx's own annotations.

Design: converters wrap their work in :func:`describing`, which stamps the object's label
(``Kind namespace/name``, or ``Kind name`` for cluster-scoped kinds) onto any ``InputError``
raised inside. :func:`object_label` never fails, so even an object with a malformed name gets
the best label we can give it. Simulation timing (``phalanx.dev/submit-after``,
``phalanx.dev/delete-after``) may sit on any object and is read by :func:`timing_from_dict`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from phalanx.api.durations import parse_duration
from phalanx.api.errors import InputError
from phalanx.api.workload import Timing
from phalanx.k8s.fields import (
    Obj,
    as_mapping,
    child,
    describe,
    fail,
    get_mapping,
    get_string_map,
)

SUBMIT_AFTER = "phalanx.dev/submit-after"
DELETE_AFTER = "phalanx.dev/delete-after"
DURATION = "phalanx.dev/duration"
MIN_TASK_MEMBER = "phalanx.dev/min-task-member"
MAX_MEMBER = "phalanx.dev/max-member"
ROLE_LABEL = "phalanx.dev/role"
UNGATE_AFTER = "phalanx.dev/ungate-after"

DEFAULT_NAMESPACE = "default"

# DNS-1123 subdomain (object names) and label (namespaces), as Kubernetes validates them.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# The name part of a label or annotation key, and a label value.
_QUALIFIED = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
#: Kubernetes' limit on all of an object's annotations together (256 KiB).
MAX_ANNOTATIONS = 256 * 1024


@contextmanager
def describing(label: str) -> Iterator[None]:
    """Attach ``label`` as the object of any InputError raised in the block."""
    try:
        yield
    except InputError as exc:
        raise exc.located(obj=label) from None


def object_label(obj: object, kind: str, *, namespaced: bool, namespace: str | None = None) -> str:
    """``Kind namespace/name`` or ``Kind name``; never raises, whatever ``obj`` holds."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return kind
    if len(name) > 80:
        name = name[:77] + "..."
    if not namespaced:
        return f"{kind} {name}"
    if namespace is None:
        ns = meta.get("namespace")
        namespace = ns if isinstance(ns, str) and ns else DEFAULT_NAMESPACE
    return f"{kind} {namespace}/{name}"


def root(obj: object) -> Obj:
    """The object itself, checked to be a map."""
    if not isinstance(obj, Mapping):
        fail("", f"object must be a map, not {describe(obj)}")
    return as_mapping(obj, "")


def metadata(obj: Obj) -> Obj:
    return get_mapping(obj, "metadata", "")


def name_of(obj: Obj) -> str:
    value = metadata(obj).get("name")
    if value is None or value == "":
        fail("metadata.name", "name is required")
    if not isinstance(value, str):
        fail("metadata.name", "must be a string")
    if len(value) > 253 or not _SUBDOMAIN.fullmatch(value):
        fail("metadata.name", f"invalid name {value!r}: must be a lowercase DNS-1123 subdomain")
    return value


def namespace_of(obj: Obj, override: str | None = None) -> str:
    if override is not None:
        return override
    value = metadata(obj).get("namespace")
    if value is None or value == "":
        return DEFAULT_NAMESPACE
    if not isinstance(value, str):
        fail("metadata.namespace", "must be a string")
    check_namespace_name(value, "metadata.namespace")
    return value


def check_namespace_name(value: str, path: str) -> None:
    if len(value) > 63 or not _LABEL.fullmatch(value):
        fail(path, f"invalid namespace {value!r}: must be a lowercase DNS-1123 label")


def _check_key(key: str, path: str) -> None:
    """A qualified name, ``[PREFIX/]NAME``, as Kubernetes checks label and annotation keys."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
        fail(path, "invalid key: the prefix must be a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED.fullmatch(name):
        fail(path, "invalid key: at most 63 of A-Z, a-z, 0-9, '-', '_', '.', alphanumeric at ends")


def labels_of(obj: Obj) -> dict[str, str]:
    labels = get_string_map(metadata(obj), "labels", "metadata")
    for key, value in labels.items():
        path = child("metadata.labels", key)
        _check_key(key, path)
        if value and (len(value) > 63 or not _QUALIFIED.fullmatch(value)):
            fail(path, "invalid value: at most 63 of A-Z, a-z, 0-9, '-', '_', '.'")
    return labels


def annotations_of(obj: Obj) -> dict[str, str]:
    annotations = get_string_map(metadata(obj), "annotations", "metadata")
    size = 0
    for key, value in annotations.items():
        _check_key(key, child("metadata.annotations", key))
        size += len(key) + len(value)
    if size > MAX_ANNOTATIONS:
        fail("metadata.annotations", f"may not be larger than {MAX_ANNOTATIONS} bytes in total")
    return annotations


def annotation_path(key: str, prefix: str = "") -> str:
    return child(f"{prefix}metadata.annotations", key)


def duration_annotation(annotations: Mapping[str, str], key: str, prefix: str = "") -> float | None:
    """Seconds in annotation ``key``, or None when absent."""
    text = annotations.get(key)
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        fail(annotation_path(key, prefix), str(exc))
    if seconds != seconds or seconds == float("inf"):  # NaN or infinite
        fail(annotation_path(key, prefix), f"duration {text!r} is not finite")
    return seconds


def max_member_annotation(
    annotations: Mapping[str, str], min_member: int, prefix: str = ""
) -> int | None:
    """An elastic gang's explicit maximum (``phalanx.dev/max-member``), or None when absent;
    a whole number, at least ``min_member``."""
    text = annotations.get(MAX_MEMBER)
    if text is None:
        return None
    path = annotation_path(MAX_MEMBER, prefix)
    if not text.strip().isdigit() or len(text) > 9:
        fail(path, f"must be a whole number of members, not {text!r}")
    value = int(text)
    if value < min_member:
        fail(path, f"must be at least the gang's minimum ({min_member}), not {value}")
    return value


def timing_from_dict(obj: Mapping[str, Any], label: str | None = None) -> Timing:
    """The simulation timing of any object, from its ``phalanx.dev/*-after`` annotations;
    ``label`` names the object in errors (default: guessed from its kind)."""
    with describing(label or _any_label(obj)):
        annotations = annotations_of(root(obj))
        submit = duration_annotation(annotations, SUBMIT_AFTER)
        delete = duration_annotation(annotations, DELETE_AFTER)
        return Timing(submit_after=submit or 0.0, delete_after=delete)


def _any_label(obj: object) -> str:
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    kind = kind if isinstance(kind, str) and kind else "object"
    namespaced = kind not in ("Node", "PriorityClass", "Namespace")
    return object_label(obj, kind, namespaced=namespaced)


#: The characters Kubernetes uses for generated name suffixes (no vowels, no look-alikes).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def generated_name(prefix: str, seed: int, counter: int) -> str:
    """``prefix`` + 5 characters, as the API server completes ``generateName``; derived from
    ``seed`` and ``counter`` so a simulation names the same pods the same way every run."""
    digest = hashlib.blake2b(f"{seed}\0{prefix}\0{counter}".encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "big")
    chars = []
    for _ in range(5):
        value, index = divmod(value, len(_SUFFIX_ALPHABET))
        chars.append(_SUFFIX_ALPHABET[index])
    return prefix + "".join(chars)
