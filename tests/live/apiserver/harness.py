"""Test helpers on top of the fake server: a connected client and an event recorder."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from phalanx.live import Backoff, KubeClient, config_for_server
from phalanx.live.resources import object_key

from .registry import ALL_CRDS, ResourceInfo
from .server import FakeApiServer


@contextlib.asynccontextmanager
async def connected(
    crds: tuple[ResourceInfo, ...] | list[ResourceInfo] = ALL_CRDS, **server_options: Any
) -> AsyncIterator[tuple[FakeApiServer, KubeClient]]:
    """A running fake server and a :class:`KubeClient` talking to it over HTTP."""
    async with FakeApiServer(crds=crds, **server_options) as server:
        config = config_for_server(server.url)
        async with KubeClient(config, timeout=5.0, trust_env=False) as client:
            yield server, client


def fast_backoff() -> Backoff:
    return Backoff(initial=0.01, maximum=0.05, jitter=0.0)


async def eventually(
    predicate: Callable[[], object], timeout: float = 5.0, what: str = "condition"
) -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class Recorder:
    """An informer handler that remembers ``(type, key)`` and the objects it saw."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.objects: list[dict[str, Any]] = []

    def __call__(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append((kind, object_key(obj)))
        self.objects.append(obj)

    def seen(self, kind: str, key: str) -> bool:
        return (kind, key) in self.events

    async def wait(self, kind: str, key: str, timeout: float = 5.0) -> None:
        await eventually(lambda: self.seen(kind, key), timeout, f"{kind} {key}")

    def clear(self) -> None:
        self.events.clear()
        self.objects.clear()
