"""Kubernetes Events about pods and gangs, in the form kube-scheduler writes them.

Design: the builders return plain dicts so a caller can batch, log or drop them; :func:`create`
posts one. :func:`event` builds the current ``events.k8s.io/v1`` form (``regarding``, ``note``,
``action``, ``reportingController``/``reportingInstance``, ``eventTime`` in microseconds);
:func:`core_event` builds the legacy ``v1`` form (``involvedObject``, ``message``, ``source``)
for servers or tools that only read core events (a real server serves both views of one store).
Names follow client-go: ``<object name>.<unix nanoseconds in hex>``. No aggregation or series
here: a caller that emits the same event repeatedly should rate-limit it. :class:`EventRecorder`
writes them in the background so that a scheduler never waits for its Events, and tells when
its queue is long (:meth:`EventRecorder.pressed`) so that a caller can fold many Events into
one (the live scheduler folds a gang's per-pod ``Scheduled`` Events into its PodGroup's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from datetime import datetime
from typing import Any

from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import LiveError
from phalanx.live.resources import EVENTS, EVENTS_V1
from phalanx.live.writes import micro_time, rfc3339

logger = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
#: kube-scheduler's reasons.
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"


def reference(obj: Obj) -> Obj:
    """An ``ObjectReference`` to ``obj`` (apiVersion, kind, namespace, name, uid, rv)."""
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
    }
    for source, target in (
        ("namespace", "namespace"),
        ("uid", "uid"),
        ("resourceVersion", "resourceVersion"),
    ):
        if meta.get(source):
            ref[target] = meta[source]
    return ref


def _name_and_namespace(ref: Obj) -> tuple[str, str]:
    """An Event's name and namespace from the reference to what it is about."""
    return f"{ref['name']}.{time.time_ns():x}", ref.get("namespace") or "default"


def event(
    regarding: Obj,
    *,
    reason: str,
    note: str,
    type_: str = NORMAL,
    action: str = "Scheduling",
    controller: str = "phalanx",
    instance: str = "phalanx",
    related: Obj | None = None,
    now: datetime | None = None,
) -> Obj:
    """An ``events.k8s.io/v1`` Event about ``regarding`` (a pod, PodGroup, node...)."""
    ref = reference(regarding)
    name, namespace = _name_and_namespace(ref)
    body: Obj = {
        "apiVersion": EVENTS_V1.api_version,
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "note": note[:1024],  # the API's limit on note
        "type": type_,
        "regarding": ref,
    }
    if related is not None:
        body["related"] = reference(related)
    return body


def core_event(
    regarding: Obj,
    *,
    reason: str,
    message: str,
    type_: str = NORMAL,
    component: str = "phalanx",
    instance: str = "phalanx",
    now: datetime | None = None,
) -> Obj:
    """A legacy ``v1`` Event about ``regarding``."""
    ref = reference(regarding)
    name, namespace = _name_and_namespace(ref)
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": instance,
    }


async def create(client: KubeClient, body: Obj, *, answer: bool = True) -> Obj:
    """POST an Event built by :func:`event` or :func:`core_event`; the Event created
    (``answer=False``: ``{}``, not decoded)."""
    resource = EVENTS if body.get("apiVersion") == "v1" else EVENTS_V1
    return await client.create(resource, body, answer=answer)


class EventRecorder:
    """Writes Events in the background, behind the scheduler's binds.

    Like client-go's event broadcaster, a scheduler must never wait for its Events: they are
    queued (:meth:`emit` returns at once) and written by ``workers`` background tasks. At most
    ``limit`` Events wait; beyond that the oldest are dropped and counted in :attr:`dropped`
    (a scheduler that binds faster than the API server takes Events loses Events, not binds).
    :meth:`flush` waits until everything queued is written; :meth:`aclose` flushes (bounded by
    ``timeout``) and stops the workers.

    Under pressure — ``fold_above`` Events or more waiting — :meth:`pressed` is true: a caller
    should then emit one Event where it would emit many (and add how many it spared to
    :attr:`folded`); a warning is logged once each time the pressure starts.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        workers: int = 4,
        limit: int = 10_000,
        fold_above: int = 256,
    ) -> None:
        self.client = client
        self.workers = workers
        self.limit = limit
        self.fold_above = fold_above
        self.dropped = 0
        self.written = 0
        self.failed = 0
        #: Events not emitted because their content went into another one (:meth:`pressed`).
        self.folded = 0
        self._pressed = False
        self._queue: deque[Obj] = deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def pressed(self) -> bool:
        """Whether ``fold_above`` Events or more wait to be written."""
        pressed = len(self._queue) >= self.fold_above
        if pressed and not self._pressed:
            logger.warning(
                "%d Events wait to be written: the per-pod Scheduled Events of a gang are "
                "folded into its PodGroup's until the queue drains",
                len(self._queue),
            )
        self._pressed = pressed
        return pressed

    def emit(self, body: Obj) -> None:
        if len(self._queue) >= self.limit:
            self._queue.popleft()
            self.dropped += 1
        self._queue.append(body)
        self._idle.clear()
        self._ready.set()
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._work()) for _ in range(self.workers)]

    async def _work(self) -> None:
        while True:
            if not self._queue:
                self._ready.clear()
                if not self._busy:
                    self._idle.set()
                await self._ready.wait()
                continue
            body = self._queue.popleft()
            self._busy += 1
            try:
                await create(self.client, body, answer=False)
                self.written += 1
            except LiveError as exc:
                self.failed += 1
                logger.warning("could not write a %s event: %s", body.get("reason"), exc)
            finally:
                self._busy -= 1
            if not self._queue and not self._busy:
                self._idle.set()

    async def flush(self) -> None:
        """Wait until every queued Event is written (or has failed)."""
        if self._tasks:
            await self._idle.wait()

    async def aclose(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), timeout)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
