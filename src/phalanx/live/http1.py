"""A lean HTTP/1.1 client for the scheduler's small writes: binds, Events, status patches.

Why: a scheduler that binds hundreds of pods a second sends a few small requests per pod (the
bind, its ``Scheduled`` Event, a share of a PodGroup status patch). Through
``aiohttp.ClientSession`` each costs about 0.2 ms of CPU against the API test server — request
and response objects, header multidicts, a task and timers per request — which was the largest
part of the scheduler's CPU per bind. Here a request is one pre-formatted byte string written
on a kept-alive connection, and the answer is read by a small parser: about 0.08 ms.

What it speaks: HTTP/1.1 over TCP or TLS (the :class:`ssl.SSLContext` the configuration gives:
CA, client certificate), keep-alive with a pool of idle connections, responses framed by
``Content-Length``, ``chunked`` transfer encoding (with trailers) or the connection's close;
interim ``1xx`` answers are skipped; ``Connection: close`` (or HTTP/1.0 without keep-alive) is
honoured. No compression is asked for, no redirects are followed, no proxy is used (the client
sends its writes through aiohttp when a proxy applies: :func:`proxied`).

Failures: a connection the server closed while idle is detected when the request finds it
closed before any answer; the request is then sent once more on a new connection (what
aiohttp and Go's transport do; a bind sent twice answers 409, which the bind path reads as
"already bound by this very pod"). Any other failure raises ``OSError`` (``ConnectFailed``
when no connection could be made) and closes that connection; the caller's timeout
(``asyncio.timeout``) cancels a request and closes its connection too; so does the request's
own ``timeout`` (one timer, raising ``TimeoutError``). Parsing errors raise ``ConnectionError``.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

#: Longest status line and headers accepted.
MAX_HEAD = 64 * 1024


class ConnectFailed(OSError):
    """No connection to the server could be made (refused, no route, DNS, TLS handshake)."""


class _Stale(ConnectionResetError):
    """A kept-alive connection was closed before any answer: send the request again."""


class _Response:
    """Parses one response, fed in pieces; :meth:`feed` is true once it is complete."""

    __slots__ = ("body", "buffer", "chunked", "keep", "length", "received", "status", "trailer")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.body = bytearray()
        self.status = 0
        self.length: int | None = None
        self.chunked = False
        self.trailer = False
        self.keep = True
        self.received = False

    @property
    def until_close(self) -> bool:
        """Framed by the connection's close (no length, not chunked)."""
        return self.status != 0 and self.length is None and not self.chunked

    def feed(self, data: bytes) -> bool:
        self.received = True
        self.buffer += data
        while self.status == 0:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    raise ConnectionError("response headers too long")
                return False
            head = bytes(self.buffer[:end])
            del self.buffer[: end + 4]
            self._head(head)
        if self.chunked:
            return self._chunks()
        if self.length is None:
            self.body += self.buffer
            self.buffer.clear()
            return False
        if len(self.buffer) < self.length:
            return False
        self.body = self.buffer[: self.length]
        if len(self.buffer) > self.length:
            self.keep = False  # bytes nobody asked for: do not trust this connection again
        return True

    def _head(self, head: bytes) -> None:
        first = head.split(b"\r\n", 1)[0]
        parts = first.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ConnectionError(f"not an HTTP/1.x status line: {first[:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:
            return  # an interim answer (100 Continue): the real one follows
        self.status = status
        self.keep = parts[0] != b"HTTP/1.0"
        lower = head.lower()  # only three headers matter: find them, not every line
        length = _header(lower, b"content-length")
        if length is not None:
            self.length = int(length)
        self.chunked = (_header(lower, b"transfer-encoding") or b"").endswith(b"chunked")
        connection = _header(lower, b"connection")
        if connection == b"close":
            self.keep = False
        elif connection == b"keep-alive":
            self.keep = True
        if self.chunked:
            self.length = None
        elif status in (204, 304):
            self.length = 0
        if self.until_close:
            self.keep = False

    def _chunks(self) -> bool:
        buffer = self.buffer
        while True:
            end = buffer.find(b"\r\n")
            if end < 0:
                return False
            if self.trailer:
                del buffer[: end + 2]
                if end == 0:
                    if buffer:
                        self.keep = False
                    return True
                continue
            try:
                size = int(bytes(buffer[:end]).split(b";")[0].strip(), 16)
            except ValueError as exc:
                raise ConnectionError(f"bad chunk size {bytes(buffer[:end][:40])!r}") from exc
            if size == 0:
                del buffer[: end + 2]
                self.trailer = True
                continue
            if len(buffer) < end + 2 + size + 2:
                return False
            self.body += buffer[end + 2 : end + 2 + size]
            del buffer[: end + 2 + size + 2]


def _header(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` in a lower-cased response head (the first such line)."""
    start = head.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


class _Connection(asyncio.Protocol):
    """One kept-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._response = _Response()
        self._waiter: asyncio.Future[tuple[int, bytes, bool]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, data: bytes) -> asyncio.Future[tuple[int, bytes, bool]]:
        """Write a request; the future of (status, body, whether the connection may be reused)."""
        self._response = _Response()
        self._waiter = asyncio.get_running_loop().create_future()
        if self.closed or self.transport is None:
            self._waiter.set_exception(_Stale("the connection was closed"))
        else:
            self.transport.write(data)
        return self._waiter

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.close()  # nothing was asked: the connection is out of step
            return
        try:
            done = self._response.feed(data)
        except (ConnectionError, ValueError) as exc:
            self.close()
            waiter.set_exception(ConnectionError(f"bad response: {exc}"))
            return
        if done:
            response = self._response
            waiter.set_result((response.status, bytes(response.body), response.keep))

    def expire(self, seconds: float) -> None:
        """The request's deadline passed: fail it and drop the connection."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(TimeoutError(f"not answered within {seconds:.2f} s"))
        self.close()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        response = self._response
        if response.until_close:
            waiter.set_result((response.status, bytes(response.body), False))
        elif not response.received:
            waiter.set_exception(_Stale(f"the server closed the connection ({exc or 'EOF'})"))
        else:
            waiter.set_exception(
                ConnectionResetError("the server closed the connection mid-answer")
            )

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def proxied(url: str) -> bool:
    """Whether the environment (``HTTPS_PROXY``, ``NO_PROXY``...) sends ``url`` via a proxy."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if parts.scheme not in proxies and "all" not in proxies:
        return False
    bypass = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 (not in stubs)
    return not bypass(parts.netloc)


class Http1Pool:
    """Kept-alive HTTP/1.1 connections to one server (``base``: its URL, maybe with a path
    prefix); :meth:`request` sends one request and returns (status, body)."""

    def __init__(self, base: str, ssl_context: ssl.SSLContext | None, *, max_idle: int = 64):
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base!r}")
        self.tls = ssl_context if parts.scheme == "https" else None
        if parts.scheme == "https" and self.tls is None:
            self.tls = ssl.create_default_context()
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = f"Host: {host}:{self.port}\r\n"
        self.max_idle = max_idle
        self._idle: list[_Connection] = []

    async def request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        """Send one request; (status, body). ``timeout``: seconds for all of it (connecting,
        a retry on a new connection): past it, ``TimeoutError`` and the connection is closed
        (one timer per request: cheaper than an ``asyncio.timeout`` around it)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        target = self.prefix + path + ("?" + urlencode(params) if params else "")
        lines = [f"{method} {target} HTTP/1.1\r\n", self._host_header]
        lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}\r\n")
        data = "".join(lines).encode("latin-1") + b"\r\n" + (body or b"")
        while self._idle:
            connection = self._idle.pop()
            if connection.closed:
                continue
            try:
                return await self._exchange(connection, data, deadline, timeout)
            except _Stale:
                continue  # closed by the server while idle: try the next, or a new one
        connection = await self._connect(deadline)
        return await self._exchange(connection, data, deadline, timeout)

    async def _connect(self, deadline: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls is not None else None,
                )
        except TimeoutError as exc:
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: timed out") from exc
        except OSError as exc:  # refused, unreachable, DNS, TLS handshake (ssl.SSLError)
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        return connection

    async def _exchange(
        self,
        connection: _Connection,
        data: bytes,
        deadline: float | None,
        timeout: float | None,
    ) -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        timer = None
        if deadline is not None:
            timer = loop.call_at(deadline, connection.expire, timeout or 0.0)
        try:
            status, body, keep = await connection.send(data)
        except BaseException:
            connection.close()  # failed, timed out or cancelled: its state is unknown
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if keep and not connection.closed and len(self._idle) < self.max_idle:
            self._idle.append(connection)
        else:
            connection.close()
        return status, body

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
