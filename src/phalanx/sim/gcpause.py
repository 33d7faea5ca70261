"""Bulk work without the cyclic garbage collector in the way.

Creating a Job's million pods, or running a cycle over a million waiting gangs, allocates
millions of objects that live on. CPython's collector runs a young collection every 700
allocations and, once a quarter of the tracked objects are new, a full one that walks every
tracked object: at 100,000 pods the full collections alone took a quarter of the CPU time of
"load and simulate to the first cycle", and their share grows with the input. :func:`paused`
turns the collector off for one bulk step and back on after it (if it was on), so the objects
of that step are walked a few times afterwards instead of at every quarter of growth.

Nothing is lost: reference counting still frees what is not cyclic at once, and cyclic garbage
made during the step (a session and its statements) is collected after it. The step's memory
is bounded by the step itself.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Run the ``with`` body with the cyclic collector off (restored after, even on error)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
