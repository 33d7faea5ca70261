"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection``.

:class:`LeaderElector` runs a callback only while this replica holds the Lease:

- **Acquire**: every ``retry_period``, read the Lease. Take it (PUT conditional on the read
  ``resourceVersion``, or create it) when it is free (no holder, released) or when its record
  has not changed for ``lease_duration`` as observed *by this replica's clock* (so clock skew
  between replicas does not matter, as in client-go). A 409 means another replica won.
- **Renew**: every ``retry_period`` while leading. If no renewal succeeds for
  ``renew_deadline`` (< ``lease_duration``) the replica steps down: the callback's ``stop``
  event is set, and the replica goes back to standby. It stops before a standby may take over.
- **Release**: on a clean stop (SIGTERM), the leader clears ``holderIdentity`` so a standby
  takes over at its next retry instead of after a whole lease duration.

Holder identity: ``$POD_NAME`` (the Deployment sets it), else ``hostname_pid``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from phalanx.live import leases
from phalanx.live.client import KubeClient, Obj
from phalanx.live.errors import ApiError, LiveError, TransportError

logger = logging.getLogger(__name__)

DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0


def default_identity() -> str:
    """``$POD_NAME``, else ``hostname_pid``."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def _record(obj: Obj) -> tuple[object, ...]:
    spec = obj.get("spec") or {}
    return (
        spec.get("holderIdentity"),
        spec.get("renewTime"),
        spec.get("acquireTime"),
        spec.get("leaseTransitions"),
        (obj.get("metadata") or {}).get("resourceVersion"),
    )


class LeaderElector:
    """Elect one leader among replicas sharing ``namespace/name``; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        release_on_stop: bool = True,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_stop = release_on_stop
        self.on_change = on_change
        self.is_leader = False
        #: Set once the Lease was read (or written) successfully: the replica can reach the API.
        self.observed = asyncio.Event()
        self.terms = 0
        self._lease: Obj | None = None
        self._observed_record: tuple[object, ...] | None = None
        self._observed_at = 0.0

    @property
    def duration_seconds(self) -> int:
        return max(1, round(self.lease_duration))

    def _set_leader(self, value: bool) -> None:
        if value != self.is_leader:
            self.is_leader = value
            logger.info(
                "%s %s leadership of lease %s/%s",
                self.identity,
                "acquired" if value else "lost",
                self.namespace,
                self.name,
            )
            if self.on_change is not None:
                self.on_change(value)

    # -- one attempt -------------------------------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this replica holds the Lease afterwards."""
        loop = asyncio.get_running_loop()
        now = datetime.now(UTC)
        current = await leases.get(self.client, self.namespace, self.name)
        self.observed.set()
        if current is None:
            body = leases.lease(
                self.namespace, self.name, self.identity, self.duration_seconds, now=now
            )
            try:
                self._lease = await leases.create(self.client, body)
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
            self._observe(self._lease, loop.time())
            return True
        record = _record(current)
        if record != self._observed_record:
            self._observe(current, loop.time())
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if loop.time() < self._observed_at + duration:
                return False  # held by someone else, still valid
        updated = leases.acquire(current, self.identity, self.duration_seconds, now=now)
        try:
            self._lease = await leases.update(self.client, updated)
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        self._observe(self._lease, loop.time())
        return True

    def _observe(self, obj: Obj, at: float) -> None:
        self._observed_record = _record(obj)
        self._observed_at = at

    async def release(self) -> None:
        """Give the Lease up (holder cleared) if this replica still holds it."""
        if self._lease is None:
            return
        try:
            current = await leases.get(self.client, self.namespace, self.name)
            if current is None or (current.get("spec") or {}).get("holderIdentity") != (
                self.identity
            ):
                return
            spec = current.setdefault("spec", {})
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            await leases.update(self.client, current)
            logger.info("%s released lease %s/%s", self.identity, self.namespace, self.name)
        except LiveError as exc:
            logger.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)
        finally:
            self._lease = None

    # -- the loops ---------------------------------------------------------------------------
    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except LiveError as exc:
            # the client logs the server going away and coming back, once each
            quiet = isinstance(exc, TransportError) and not self.client.reachability.up
            log = logger.debug if quiet else logger.warning
            log("lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        # asyncio.timeout, not wait_for: on Python 3.11 a cancel that lands as wait_for times
        # out becomes a TimeoutError, and a crashed leader's renewal would go on for ever
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await stop.wait()

    async def _acquire(self, stop: asyncio.Event) -> bool:
        while not stop.is_set():
            if await self._attempt():
                return True
            await self._sleep(stop, self.retry_period)
        return False

    async def _renew(self, stop: asyncio.Event) -> None:
        """Renew until ``stop`` or until no renewal succeeded for ``renew_deadline``."""
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not stop.is_set():
            await self._sleep(stop, self.retry_period)
            if stop.is_set():
                return
            attempt_deadline = last + self.renew_deadline - loop.time()
            renewed = False
            if attempt_deadline > 0:
                try:
                    async with asyncio.timeout(attempt_deadline):
                        renewed = await self._attempt()
                except TimeoutError:
                    renewed = False
            if renewed:
                last = loop.time()
            elif loop.time() - last >= self.renew_deadline:
                return

    async def run(
        self, stop: asyncio.Event, lead: Callable[[asyncio.Event], Coroutine[Any, Any, None]]
    ) -> None:
        """Until ``stop``: wait to lead, then run ``lead(term_stop)`` while leadership lasts.

        ``term_stop`` is set when leadership is lost or ``stop`` is set; ``lead`` must return
        soon after. A lost term goes back to standby; a new term calls ``lead`` again.
        """
        try:
            while not stop.is_set():
                if not await self._acquire(stop):
                    return
                self.terms += 1
                self._set_leader(True)
                term_stop = asyncio.Event()
                renewing = asyncio.create_task(self._renew(stop))
                leading = asyncio.create_task(lead(term_stop))
                stopping = asyncio.create_task(stop.wait())
                try:
                    await asyncio.wait(
                        {renewing, leading, stopping}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    term_stop.set()
                    self._set_leader(False)
                    stopping.cancel()
                    renewing.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await renewing
                    try:
                        await leading
                    except Exception:
                        logger.exception("leading failed")
                if not stop.is_set():
                    logger.warning("%s stepped down; back to standby", self.identity)
                    await self._sleep(stop, self.retry_period)
        finally:
            if self.release_on_stop and stop.is_set():
                await self.release()
