"""The lean HTTP/1.1 write path (phalanx.live.http1): framing, keep-alive, closed connections."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from phalanx.live import KubeClient, config_for_server
from phalanx.live.errors import ApiError, TransportError
from phalanx.live.http1 import ConnectFailed, Http1Pool, _Response, proxied

#: A script: the raw answers to the requests of one connection, in order (None: hang up).
Script = list[bytes | None]


@asynccontextmanager
async def scripted(*connections: Script) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A TCP server answering the n-th connection's requests with ``connections[n]``; yields
    its URL and the requests it read (head and body)."""
    seen: list[bytes] = []
    scripts = list(connections)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        script = scripts.pop(0) if scripts else []
        for answer in script:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            seen.append(head + await reader.readexactly(length))
            if answer is None:
                break
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        server.close()


def ok(body: bytes, *extra: bytes) -> bytes:
    head = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n" + b"".join(extra)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def feed_all(pieces: list[bytes]) -> _Response:
    response = _Response()
    done = [response.feed(piece) for piece in pieces]
    assert done[-1] and not any(done[:-1])
    return response


def test_responses_are_framed_by_length_or_chunks_in_any_pieces() -> None:
    raw = ok(b'{"a": 1}')
    response = feed_all([raw[:5], raw[5:40], raw[40:]])
    assert (response.status, bytes(response.body), response.keep) == (201, b'{"a": 1}', True)
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"a"\r\n5\r\n: 12}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    response = feed_all([chunked[i : i + 7] for i in range(0, len(chunked), 7)])
    assert bytes(response.body) == b'{"a": 12}'
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"{}", b"Connection: close\r\n")
    response = feed_all([interim])
    assert (response.status, response.keep) == (201, False)
    assert feed_all([b"HTTP/1.1 204 No Content\r\n\r\n"]).status == 204
    with pytest.raises(ConnectionError):
        _Response().feed(b"SSH-2.0-OpenSSH\r\n\r\n")


async def test_connections_are_kept_alive_and_a_closed_one_is_replaced() -> None:
    # the first connection answers once and is closed by the server while idle
    async with scripted([ok(b'{"n": 1}')], [ok(b'{"n": 2}'), ok(b'{"n": 3}')]) as (url, seen):
        pool = Http1Pool(url, None)
        assert await pool.request("POST", "/x", {"A": "b"}, b"{}") == (201, b'{"n": 1}')
        await asyncio.sleep(0.05)  # the server hangs up the idle connection
        assert await pool.request("POST", "/x", {}, b"{}") == (201, b'{"n": 2}')
        assert await pool.request("PATCH", "/y", {}, b"[]", {"q": "a b"}) == (201, b'{"n": 3}')
        pool.close()
    assert seen[0].startswith(b"POST /x HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nA: b\r\n" in seen[0] and seen[0].endswith(b"Content-Length: 2\r\n\r\n{}")
    assert seen[2].startswith(b"PATCH /y?q=a+b HTTP/1.1")


async def test_a_response_cut_short_or_a_refused_connection_is_a_transport_error() -> None:
    cut = ok(b'{"long": "answer"}')[:-5]
    async with (
        scripted([cut]) as (url, _),
        KubeClient(config_for_server(url), trust_env=False) as client,
    ):
        with pytest.raises(TransportError, match="mid-answer"):
            await client.request("POST", "/api/v1/namespaces/a/events", body={})
    async with KubeClient(config_for_server(url), trust_env=False) as client:  # closed now
        with pytest.raises(TransportError):
            await client.request("POST", "/api/v1/namespaces/a/events", body={})
        assert not client.reachability.up


async def test_an_error_status_is_an_api_error_and_the_connection_stays() -> None:
    status = b'{"kind": "Status", "code": 409, "reason": "Conflict", "message": "taken"}'
    answer = ok(status).replace(b"201 Created", b"409 Conflict")
    async with (
        scripted([answer, ok(b"{}")]) as (url, seen),
        KubeClient(config_for_server(url), trust_env=False) as client,
    ):
        with pytest.raises(ApiError) as caught:
            await client.request("POST", "/api/v1/namespaces/a/pods/p/binding", body={})
        assert caught.value.conflict
        assert await client.request("DELETE", "/api/v1/namespaces/a/pods/p") == {}
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({"HTTPS_PROXY": "http://p:3128"}, True),
        ({"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "k8s.local"}, False),
    ],
)
def test_a_proxied_server_is_left_to_aiohttp(
    env: dict[str, str], expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert proxied("https://k8s.local:6443") is expected


async def test_a_kept_connection_hung_up_before_answering_is_retried_once_on_a_new_one() -> None:
    async with scripted([ok(b'{"n": 1}'), None], [ok(b'{"n": 2}')]) as (url, seen):
        pool = Http1Pool(url, None)
        assert await pool.request("POST", "/x", {}, b"{}") == (201, b'{"n": 1}')
        assert await pool.request("POST", "/x", {}, b"{}") == (201, b'{"n": 2}')
        pool.close()
    assert len(seen) == 3  # the second request was read twice: hung up, then answered


async def test_a_request_past_its_timeout_fails_and_its_connection_is_dropped() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads until the client hangs up, never answers
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with KubeClient(config_for_server(url), trust_env=False) as client:
            started = asyncio.get_running_loop().time()
            with pytest.raises(TransportError, match=r"not answered within 0\.10 s"):
                await client.request("POST", "/api/v1/namespaces/a/events", body={}, timeout=0.1)
            assert asyncio.get_running_loop().time() - started < 2.0
            assert client._writes is not None and not client._writes._idle
    finally:
        server.close()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), made by the openssl command."""
    cert, key = directory / "server.crt", directory / "server.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_writes_go_over_tls_with_the_configurations_context(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    seen: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(ok(b'{"tls": true}'))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=served)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        trusting = ssl.create_default_context(cafile=str(cert))
        pool = Http1Pool(url, trusting)
        assert await pool.request("POST", "/x", {}, b"{}") == (201, b'{"tls": true}')
        pool.close()
        with pytest.raises(ConnectFailed):  # the system's CAs do not know it
            await Http1Pool(url, ssl.create_default_context()).request("POST", "/x", {}, b"{}")
    finally:
        server.close()
    assert seen[0].startswith(b"POST /x HTTP/1.1")
