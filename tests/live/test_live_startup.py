"""``phalanx serve`` start-up and shutdown: an unreachable server, readiness, SIGTERM.

- A well-formed server that does not answer is retried with backoff; the log says so once
  when it goes and once when it comes back (not once per attempt of each informer), and
  ``/readyz`` answers 503 meanwhile while ``/healthz`` answers 200.
- SIGTERM ends the process with status 0 within the shutdown grace period, whether the server
  answers or not, with no traceback.
- The metrics/health server listens on ``metricsAddress`` (flag ``--metrics-address``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest
from apiserver import FakeApiServer
from apiserver.harness import eventually, fast_backoff
from apiserver.registry import ALL_CRDS
from test_live_serve import bound_to, node, pod, podgroup

from phalanx.cli.serve import ServeRunner, add_parser, resolve_settings
from phalanx.live import config_for_server
from phalanx.live.settings import LeaderElection, ServeSettings

SETTINGS = ServeSettings(period=0.2, leader_election=LeaderElection(enabled=False))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def status(runner: ServeRunner, path: str) -> int:
    assert runner.health is not None
    url = f"http://127.0.0.1:{runner.health.port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_an_unreachable_server_is_one_log_line_each_way_and_not_ready_meanwhile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    port = free_port()
    runner = ServeRunner(
        SETTINGS,
        config_for_server(f"http://127.0.0.1:{port}"),
        metrics_host="127.0.0.1",
        health_port=0,
        backoff=fast_backoff(),
        trust_env=False,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.started.wait(), 5.0)
        await eventually(lambda: lines(caplog, "is unreachable"), what="the unreachable line")
        await asyncio.sleep(1.0)  # dozens of attempts by eight informers (backoff ≤ 50 ms)
        assert len(lines(caplog, "is unreachable")) == 1
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings  # the unreachable line only, no per-attempt lines
        assert not runner.ready()
        assert await status(runner, "/readyz") == 503
        assert await status(runner, "/healthz") == 200
        async with FakeApiServer(crds=ALL_CRDS, port=port) as server:
            server.put("v1", "nodes", node("node-a"))
            server.put("scheduling.x-k8s.io/v1alpha1", "podgroups", podgroup("g", 2))
            for i in range(2):
                server.put("v1", "pods", pod(f"g-{i}", group="g"))
            await eventually(runner.ready, timeout=10.0, what="ready once the server answers")
            await eventually(lambda: bound_to(server, "g-1"), timeout=10.0, what="the gang")
            assert await status(runner, "/readyz") == 200
            assert len(lines(caplog, "reachable again")) == 1
            assert len(lines(caplog, "is unreachable")) == 1
            stop.set()
            await asyncio.wait_for(task, 5.0)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, 5.0)


async def sigterm(argv: list[str], wait_for: str) -> tuple[int | None, str, float]:
    """Start ``phalanx ARGV``, wait for a log line containing ``wait_for``, send SIGTERM; the
    exit status, the whole stderr and how long it took to exit."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "phalanx.cli.main",
        *argv,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert process.stderr is not None
    seen: list[str] = []
    try:
        while not any(wait_for in line for line in seen):
            line = await asyncio.wait_for(process.stderr.readline(), 30.0)
            assert line, "".join(seen)
            seen.append(line.decode())
        loop = asyncio.get_running_loop()
        sent = loop.time()
        process.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(process.stderr.read(), 15.0)
        await asyncio.wait_for(process.wait(), 15.0)
        return process.returncode, "".join(seen) + rest.decode(), loop.time() - sent
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_sigterm_exits_0_while_the_server_is_unreachable(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{free_port()}"}}}}]
contexts: [{{name: x, context: {{cluster: c}}}}]
current-context: x
"""
    )
    argv = ["serve", "--kubeconfig", str(kubeconfig), "--metrics-port", "0"]
    code, err, took = await sigterm([*argv, "--shutdown-timeout", "3"], "is unreachable")
    assert code == 0, err
    assert "Traceback" not in err and "SIGTERM, shutting down" in err, err
    assert took < 3.0 + 2.0
    assert err.count("is unreachable") == 1


async def test_sigterm_exits_0_while_scheduling(tmp_path: Path) -> None:
    async with FakeApiServer(crds=ALL_CRDS) as server:
        server.put("v1", "nodes", node("node-a"))
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        argv = ["serve", "--kubeconfig", str(kubeconfig), "--metrics-port", "0"]
        code, err, took = await sigterm(argv, "phalanx serve: scheduler")
        assert code == 0, err
        assert "Traceback" not in err, err
        assert took < 10.0 + 2.0


def test_the_metrics_address_is_a_flag_and_a_setting(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    config = tmp_path / "s.yaml"
    config.write_text("metricsAddress: 127.0.0.1\n")
    args = parser.parse_args(["serve", "--config", str(config)])
    assert resolve_settings(args).metrics_address == "127.0.0.1"
    args = parser.parse_args(["serve", "--config", str(config), "--metrics-address", "::1"])
    assert resolve_settings(args).metrics_address == "::1"
    assert ServeSettings().metrics_address == "0.0.0.0"


async def test_the_health_server_listens_on_the_metrics_address() -> None:
    runner = ServeRunner(
        ServeSettings(metrics_address="127.0.0.1", leader_election=LeaderElection(enabled=False)),
        config_for_server(f"http://127.0.0.1:{free_port()}"),
        health_port=0,
        backoff=fast_backoff(),
        trust_env=False,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.started.wait(), 5.0)
        assert runner.health is not None and runner.health.host == "127.0.0.1"
        assert await status(runner, "/healthz") == 200
    finally:
        stop.set()
        await asyncio.wait_for(task, 5.0)
