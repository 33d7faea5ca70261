"""A list-then-watch informer with a local store, in the manner of client-go's reflector.

Loop (:meth:`Informer.run`):

1. **List** (paged) → replace the store, deliver the differences to the handler (ADDED for new
   keys, MODIFIED when the ``resourceVersion`` changed, DELETED for keys that vanished), remember
   the list's ``resourceVersion``, set :attr:`Informer.synced`.
2. **Watch** from that ``resourceVersion`` with ``allowWatchBookmarks=true`` and
   ``timeoutSeconds``; apply each event to the store, then hand it to the handler. BOOKMARKs only
   advance the ``resourceVersion``.
3. When the watch ends — the server's timeout, a dropped connection, a 5xx — **watch again from
   the last resourceVersion**, no relist. Only **410 Gone** (HTTP status or ERROR event: the
   revision was compacted) goes back to step 1.
4. Errors back off exponentially with jitter (:class:`Backoff`, reset once data flows again);
   a watch that ends at once with no event also backs off, so a server that closes every watch
   cannot make the loop spin.
5. **404 on the list**: the API is not served (a CRD not installed, the alpha Workload API off).
   It is logged once, :attr:`Informer.missing` is set, ``synced`` is set (nobody waits forever)
   and objects it held are delivered as DELETED. Then the informer stops — or, with
   ``recheck_missing`` seconds, lists again that often, so a CRD installed later is picked up
   without a restart (logged once when it appears).

Handler contract: ``handler(event_type, obj)`` with ``event_type`` in ADDED/MODIFIED/DELETED,
called after the store was updated, one event at a time, in order; it may be sync or async. An
ADDED for a key already stored is delivered as MODIFIED and a MODIFIED for an unknown key as
ADDED, so a handler can trust the type. A handler exception is logged and does not stop the
informer. Objects are the decoded JSON dicts, shared with the store: treat them as read-only.
Store keys are ``namespace/name`` (``name`` when cluster-scoped), as client-go's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from phalanx.live.client import DEFAULT_PAGE_SIZE, KubeClient, Obj
from phalanx.live.errors import ApiError, TransportError
from phalanx.live.resources import Resource, object_key

logger = logging.getLogger(__name__)

Handler = Callable[[str, Obj], Awaitable[None] | None]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

#: A watch shorter than this that delivered nothing counts as a failure (backoff).
MIN_WATCH_SECONDS = 1.0


@dataclass
class Backoff:
    """Exponential backoff: ``initial``, ×``factor`` per failure, capped, ± ``jitter``."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    _next: float = field(default=0.0, init=False, repr=False)

    def next(self) -> float:
        base = self._next or self.initial
        self._next = min(base * self.factor, self.maximum)
        return base * random.uniform(1.0 - self.jitter, 1.0 + self.jitter)

    def reset(self) -> None:
        self._next = 0.0


@dataclass
class InformerStats:
    lists: int = 0
    relists: int = 0  # lists after the first (410 Gone, or recovery)
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    gone: int = 0
    errors: int = 0


class Informer:
    """Keeps :attr:`store` in step with one resource (optionally one namespace/selector)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        handler: Handler | None = None,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        page_size: int = DEFAULT_PAGE_SIZE,
        backoff: Backoff | None = None,
        recheck_missing: float | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.recheck_missing = recheck_missing
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.timeout_seconds = timeout_seconds
        self.page_size = page_size
        self.backoff = backoff or Backoff()
        #: the last failure logged, until a list or watch succeeds again (one line per change).
        self._failing: str | None = None
        self.store: dict[str, Obj] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.missing = False
        self.stats = InformerStats()
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        scope = f" in {self.namespace}" if self.namespace else ""
        return f"Informer({self.resource}{scope}, rv={self.resource_version!r})"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer {self.resource}")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> Informer:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first list landed (False if the API is missing)."""
        await asyncio.wait_for(self.synced.wait(), timeout)
        return not self.missing

    # ------------------------------------------------------------------ loop
    async def run(self) -> None:
        """List and watch until cancelled (or until the API turns out to be missing)."""
        need_list = True
        loop = asyncio.get_running_loop()
        while True:
            if need_list:
                try:
                    await self._list()
                except ApiError as exc:
                    if exc.not_found:
                        if not self.missing:
                            await self._mark_missing(exc)
                        if self.recheck_missing is None:
                            return
                        await asyncio.sleep(self.recheck_missing)
                        continue
                    await self._failed("list", exc)
                    continue
                except TransportError as exc:
                    await self._failed("list", exc)
                    continue
                need_list = False
                self.backoff.reset()
                self._recovered()
                if self.missing:
                    self.missing = False
                    logger.warning("%s is served now; watching it", self.resource)
            started = loop.time()
            try:
                received = await self._watch()
            except ApiError as exc:
                if exc.gone:
                    self.stats.gone += 1
                    logger.info("%s: %s; relisting", self, exc.message or "410 Gone")
                    need_list = True
                    continue
                need_list = exc.not_found  # the API may have gone away: the list will tell
                await self._failed("watch", exc)
                continue
            except TransportError as exc:
                await self._failed("watch", exc)
                continue
            if received == 0 and loop.time() - started < MIN_WATCH_SECONDS:
                await asyncio.sleep(self.backoff.next())

    async def _failed(self, what: str, exc: Exception) -> None:
        """Back off; log only a change of error (the client logs the server going away)."""
        self.stats.errors += 1
        delay = self.backoff.next()
        reachable = self.client.reachability.up
        message = f"{what} failed ({exc})"
        if reachable and message != self._failing:
            logger.warning("%s: %s; retrying with backoff", self, message)
        else:
            logger.debug("%s: %s; retrying in %.2fs", self, message, delay)
        self._failing = message if reachable else self._failing
        await asyncio.sleep(delay)

    def _recovered(self) -> None:
        if self._failing is not None:
            logger.info("%s: recovered (after: %s)", self, self._failing)
            self._failing = None

    async def _mark_missing(self, exc: ApiError) -> None:
        logger.warning(
            "%s is not served by the API server (%s); not watching it", self.resource, exc
        )
        self.missing = True
        gone, self.store = self.store, {}
        self.synced.set()
        for obj in gone.values():
            await self._dispatch(DELETED, obj)

    async def _list(self) -> None:
        result = await self.client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self.page_size,
        )
        self.stats.lists += 1
        if self.stats.lists > 1:
            self.stats.relists += 1
        old, new = self.store, {object_key(obj): obj for obj in result.items}
        self.store = new
        self.resource_version = result.resource_version
        self.synced.set()
        for key, obj in old.items():
            if key not in new:
                await self._dispatch(DELETED, obj)
        for key, obj in new.items():
            previous = old.get(key)
            if previous is None:
                await self._dispatch(ADDED, obj)
            elif _rv(previous) != _rv(obj):
                await self._dispatch(MODIFIED, obj)

    async def _watch(self) -> int:
        """One watch; the number of events (bookmarks included) it delivered."""
        self.stats.watches += 1
        received = 0
        events = self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version or None,
            timeout_seconds=self.timeout_seconds,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                if received == 0:
                    self.backoff.reset()
                    self._recovered()
                received += 1
                if event.type == "BOOKMARK":
                    self.stats.bookmarks += 1
                    self.resource_version = event.resource_version or self.resource_version
                    continue
                obj = event.object
                obj.setdefault("apiVersion", self.resource.api_version)
                obj.setdefault("kind", self.resource.kind)
                key = object_key(obj)
                if event.type == DELETED:
                    known = self.store.pop(key, None) is not None
                    kind = DELETED if known else ""
                else:
                    kind = MODIFIED if key in self.store else ADDED
                    self.store[key] = obj
                self.resource_version = event.resource_version or self.resource_version
                self.stats.events += 1
                if kind:
                    await self._dispatch(kind, obj)
        return received

    async def _dispatch(self, kind: str, obj: Obj) -> None:
        if self.handler is None:
            return
        try:
            result = self.handler(kind, obj)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("%s: handler failed on %s %s", self, kind, object_key(obj))


def _rv(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")
