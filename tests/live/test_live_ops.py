"""``phalanx serve`` operations: leader election, health and metrics, the settings file."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from apiserver import FakeApiServer
from apiserver.harness import connected, eventually, fast_backoff
from test_live_serve import NS, bound_to, node, pod, podgroup

from phalanx.api.errors import InputError
from phalanx.cli.serve import ServeRunner, add_parser, resolve_settings
from phalanx.live import PODGROUPS, PODS, KubeClient, config_for_server
from phalanx.live.recovery import RecoveryConfig
from phalanx.live.settings import LeaderElection, ServeSettings, load_settings
from phalanx.plugins.nodeorder import Binpack, Spread
from phalanx.policies import Scheduler, Scorer, get_policy

LEASE = LeaderElection(
    enabled=True, lease_name="phalanx", lease_duration=1.0, renew_deadline=0.6, retry_period=0.1
)
FAST = ServeSettings(period=0.2, leader_election=LEASE)


def runner(server: FakeApiServer, identity: str, settings: ServeSettings = FAST) -> ServeRunner:
    return ServeRunner(
        settings,
        config_for_server(server.url),
        identity=identity,
        metrics_host="127.0.0.1",
        health_port=0,
        backoff=fast_backoff(),
        trust_env=False,
    )


@contextlib.asynccontextmanager
async def running(r: ServeRunner) -> AsyncIterator[tuple[asyncio.Event, asyncio.Task[None]]]:
    stop = asyncio.Event()
    task = asyncio.create_task(r.run(stop))
    try:
        yield stop, task
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5.0)


def binds(r: ServeRunner) -> float:
    return r.metrics.registry.get_sample_value("phalanx_binds_total") or 0.0


async def submit_gang(client: KubeClient, name: str, size: int) -> None:
    await client.create(PODGROUPS, podgroup(name, size))
    for i in range(size):
        await client.create(PODS, pod(f"{name}-{i}", group=name))


def leader_of(*runners: ServeRunner) -> list[ServeRunner]:
    return [r for r in runners if r.elector is not None and r.elector.is_leader]


async def test_only_the_leader_binds_and_a_standby_takes_over_a_crashed_leader() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        a, b = runner(server, "replica-a"), runner(server, "replica-b")
        async with running(a) as (_, task_a), running(b) as (_, task_b):
            await eventually(lambda: len(leader_of(a, b)) == 1, what="a leader")
            [leader] = leader_of(a, b)
            standby = b if leader is a else a
            await submit_gang(client, "first", 2)
            await eventually(lambda: all(bound_to(server, f"first-{i}") for i in range(2)))
            await eventually(lambda: binds(leader) == 2, what="the leader's bind count")
            assert binds(standby) == 0
            assert standby.scheduler is None
            stored = server.get("coordination.k8s.io/v1", "leases", "phalanx", "default")
            assert stored is not None
            assert leader.elector is not None and standby.elector is not None
            assert stored["spec"]["holderIdentity"] == leader.elector.identity

            # the leader dies without releasing the Lease: the standby waits it out
            leader_task = task_a if leader is a else task_b
            loop = asyncio.get_running_loop()
            crashed_at = loop.time()
            leader_task.cancel()
            await eventually(lambda: leader_of(standby) == [standby], timeout=3.0, what="takeover")
            took = loop.time() - crashed_at
            assert took <= LEASE.lease_duration + 2 * LEASE.retry_period + 1.0  # CI slack
            await submit_gang(client, "second", 2)
            await eventually(lambda: all(bound_to(server, f"second-{i}") for i in range(2)))
            await eventually(lambda: binds(standby) == 2, what="the new leader's bind count")
            stored = server.get("coordination.k8s.io/v1", "leases", "phalanx", "default")
            assert stored is not None
            assert stored["spec"]["holderIdentity"] == standby.elector.identity
            assert stored["spec"]["leaseTransitions"] >= 1


async def test_a_cleanly_stopped_leader_releases_and_the_standby_takes_over_fast() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        a = runner(server, "replica-a")
        async with running(a) as (stop_a, task_a):
            await eventually(lambda: leader_of(a) == [a], what="a leads")
            b = runner(server, "replica-b")
            async with running(b):
                await eventually(lambda: b.ready(), what="standby ready")
                assert leader_of(a, b) == [a]
                loop = asyncio.get_running_loop()
                stopped_at = loop.time()
                stop_a.set()
                await asyncio.wait_for(task_a, 5.0)
                await eventually(lambda: leader_of(b) == [b], timeout=3.0, what="takeover")
                assert loop.time() - stopped_at < LEASE.lease_duration
                await submit_gang(client, "g", 2)
                await eventually(lambda: all(bound_to(server, f"g-{i}") for i in range(2)))
                # the counter moves when the bind reply arrives, after the server stored it
                await eventually(lambda: binds(b) == 2, what="the new leader's bind count")
                assert binds(a) == 0


async def get(session: aiohttp.ClientSession, r: ServeRunner, path: str) -> tuple[int, str]:
    assert r.health is not None
    async with session.get(f"http://127.0.0.1:{r.health.port}{path}") as response:
        return response.status, await response.text()


async def test_healthz_readyz_and_metrics_respond() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a"))
        reserving = dataclasses.replace(FAST, policy="phalanx")  # expected starts
        leader = runner(server, "replica-a", reserving)
        standby = runner(server, "replica-b")
        async with (
            running(leader),
            aiohttp.ClientSession(trust_env=False) as session,
        ):
            await eventually(lambda: leader_of(leader) == [leader], what="leader")
            async with running(standby):
                await standby.started.wait()
                await eventually(leader.ready, what="leader ready")
                await eventually(standby.ready, what="standby ready")
                for r in (leader, standby):
                    assert await get(session, r, "/healthz") == (200, "ok\n")
                    assert (await get(session, r, "/readyz"))[0] == 200
                await submit_gang(client, "train", 2)
                await client.create(PODGROUPS, podgroup("big", 3))
                await client.create(PODS, pod("big-0", group="big"))
                await eventually(lambda: all(bound_to(server, f"train-{i}") for i in range(2)))
                await eventually(
                    lambda: (
                        leader.metrics.registry.get_sample_value(
                            "phalanx_gangs_waiting", {"reason": "NotEnoughMembers"}
                        )
                        == 1
                    ),
                    what="waiting gauge",
                )
                await client.create(PODS, pod("hold", gpus=1))
                await eventually(lambda: bound_to(server, "hold"), what="hold bound")
                await client.create(PODS, pod("wide", gpus=4))  # waits: "hold" has a GPU

                def expected_start() -> float | None:
                    return leader.metrics.registry.get_sample_value(
                        "phalanx_gang_expected_start_seconds", {"gang": f"pod:{NS}/wide"}
                    )

                # unknown (-1): nothing says when "hold" ends
                await eventually(lambda: expected_start() == -1, what="expected start gauge")
                status, text = await get(session, leader, "/metrics")
                assert status == 200
                for name in (
                    "phalanx_cycle_duration_seconds_bucket",
                    "phalanx_gangs_waiting",
                    "phalanx_binds_total 3.0",  # train's 2 pods and "hold"
                    "phalanx_bind_failures_total 0.0",
                    "phalanx_gang_wait_seconds_count 2.0",
                    "phalanx_partial_bind_recoveries_total",
                    "phalanx_placement_attempts_total",
                    "phalanx_leader 1.0",
                    'phalanx_gang_expected_start_seconds{gang="pod:team/wide"} -1.0',
                ):
                    assert name in text, name
                status, text = await get(session, standby, "/metrics")
                assert "phalanx_leader 0.0" in text
                assert "phalanx_binds_total 0.0" in text


async def test_readyz_is_503_until_the_api_answers() -> None:
    async with connected() as (server, _client):
        server.fail("*", r".*", 500, times=100_000)  # the API answers nothing
        r = runner(server, "replica-a")
        async with running(r), aiohttp.ClientSession(trust_env=False) as session:
            await r.started.wait()
            assert await get(session, r, "/healthz") == (200, "ok\n")
            assert (await get(session, r, "/readyz"))[0] == 503
            server.clear_faults()
            # Ready as a standby first (the API answers), then — leading — once its informers
            # have synced: wait for the leader's readiness, not the standby's moment of it.
            await eventually(lambda: r.scheduler is not None and r.ready(), 10.0, "ready")
            assert (await get(session, r, "/readyz"))[0] == 200


# -- settings and flags ----------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    root = argparse.ArgumentParser(prog="phalanx")
    add_parser(root.add_subparsers(dest="command"))
    return root.parse_args(["serve", *argv])


def test_the_deployment_arguments_parse() -> None:
    args = parse("--leader-elect", "--metrics-port", "8080", "--scheduler-name", "gangs")
    settings = resolve_settings(args)
    assert settings.leader_election.enabled is True
    assert (settings.metrics_port, settings.scheduler_name) == (8080, "gangs")
    assert resolve_settings(parse("--no-leader-elect")).leader_election.enabled is False
    assert resolve_settings(parse()).leader_election.enabled is None  # auto: in-cluster
    assert resolve_settings(parse()) == ServeSettings()
    with pytest.raises(SystemExit):
        parse("--metrics-port", "70000")


def test_the_leader_election_default_follows_in_cluster() -> None:
    config = config_for_server("http://127.0.0.1:1")
    assert ServeRunner(ServeSettings(), config, in_cluster=True).leader_elect
    assert not ServeRunner(ServeSettings(), config, in_cluster=False).leader_elect
    off = dataclasses.replace(ServeSettings(), leader_election=LeaderElection(enabled=False))
    assert not ServeRunner(off, config, in_cluster=True).leader_elect


CONFIG = """\
schedulerName: gangs
period: 0.5
policy: phalanx
metricsPort: 9090
bindConcurrency: 4
leaderElection:
  enabled: true
  leaseNamespace: kube-system
  leaseDuration: 30
  renewDeadline: 20
  retryPeriod: 4
timeouts:
  request: 5
  shutdown: 3
"""


def test_a_config_file_is_read_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "phalanx.yaml"
    path.write_text(CONFIG)
    settings = load_settings(path)
    assert settings.scheduler_name == "gangs"
    assert settings.period == 0.5
    assert settings.metrics_port == 9090
    assert settings.bind_concurrency == 4
    assert settings.leader_election == LeaderElection(
        enabled=True,
        lease_namespace="kube-system",
        lease_duration=30.0,
        renew_deadline=20.0,
        retry_period=4.0,
    )
    assert (settings.timeouts.request, settings.timeouts.shutdown) == (5.0, 3.0)
    merged = resolve_settings(
        parse("--config", str(path), "--period", "2", "--no-leader-elect", "--metrics-port", "0")
    )
    assert merged.period == 2.0 and merged.metrics_port == 0
    assert merged.leader_election.enabled is False
    assert merged.leader_election.lease_namespace == "kube-system"
    assert merged.scheduler_name == "gangs"
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_settings(empty) == ServeSettings()


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("period: -1\n", "period", "must be positive"),
        ("period: soon\n", "period", "expected a number"),
        ("policy: kube\n", "policy", "unknown policy"),
        ("metricsPort: 99999\n", "metricsPort", "between 0 and 65535"),
        ("bindConcurrency: 0\n", "bindConcurrency", "at least 1"),
        ("schedulerName: ''\n", "schedulerName", "non-empty string"),
        ("colour: red\n", "colour", "unknown field"),
        ("leaderElection: {enabled: maybe}\n", "leaderElection.enabled", "true or false"),
        ("leaderElection: {leaseTime: 3}\n", "leaderElection.leaseTime", "unknown field"),
        (
            "leaderElection: {leaseDuration: 5, renewDeadline: 5}\n",
            "leaderElection.renewDeadline",
            "less than leaseDuration",
        ),
        ("leaderElection: [1]\n", "leaderElection", "expected a mapping"),
        ("timeouts: {request: 0}\n", "timeouts.request", "must be positive"),
        ("scoring: {tetris: 1}\n", "scoring.tetris", "unknown field"),
        (
            "scoring: {fgd: {weight: 1, resources: {cpu: 1}}}\n",
            "scoring.fgd.resources",
            "fgd takes no per-resource weights",
        ),
        ("scoring: {binpack: -1}\n", "scoring.binpack", "must not be negative"),
        ("scoring: {binpack: 0}\n", "scoring", "positive weight"),
        ("scoring: {}\n", "scoring", "at least one plugin"),
        ("scoring: {spread: {weight: 1, size: 2}}\n", "scoring.spread.size", "unknown field"),
        ("scoring: {spread: {resources: {cpu: x}}}\n", "scoring.spread.resources.cpu", "integer"),
        ("recovery: {undo: drop}\n", "recovery", "undo must be"),
        ("recovery: {partialBindLimit: 0}\n", "recovery.partialBindLimit", "must be positive"),
        ("recovery: {bindRetries: 1.5}\n", "recovery.bindRetries", "expected an integer"),
        ("recovery: {retries: 1}\n", "recovery.retries", "unknown field"),
        ("orderings: [queues, slack]\n", "orderings[1]", "unknown ordering 'slack'"),
        ("orderings: []\n", "orderings", "name at least one ordering plugin"),
        ("orderings: {least-slack: 1}\n", "orderings", "expected a list of names"),
    ],
)
def test_a_bad_field_names_the_file_and_the_field(
    tmp_path: Path, text: str, field: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_settings(path)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: {field}: ")
    assert message in line


def test_scoring_weights_and_recovery_come_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "phalanx.yaml"
    path.write_text(
        "policy: volcano\n"
        "scoring:\n"
        "  binpack: 0\n"
        "  spread: {weight: 2, resources: {cpu: 1}}\n"
        "recovery: {bindRetries: 1, partialBindLimit: 5, undo: evict, requeueMax: 10}\n"
    )
    settings = load_settings(path)
    assert settings.policy == "volcano"
    assert settings.scoring == (Scorer("binpack", 0), Scorer("spread", 2, {"cpu": 1}))
    assert settings.recovery == RecoveryConfig(
        bind_retries=1, partial_bind_limit=5.0, undo="evict", requeue_max=10.0
    )
    plugins = Scheduler(get_policy(settings.policy), scorers=settings.scoring).plugins
    (scorer,) = [p for p in plugins if isinstance(p, Spread)]
    assert (scorer.weight, scorer.weights) == (2, {"cpu": 1})
    assert not any(isinstance(p, Binpack) for p in plugins)  # weight 0: left out


async def test_the_runner_schedules_with_the_configured_scoring_and_recovery() -> None:
    recovery = RecoveryConfig(partial_bind_limit=7.0)
    settings = dataclasses.replace(
        FAST, scoring=(Scorer("spread", 1),), recovery=recovery, policy="volcano"
    )
    async with connected() as (server, _client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "nodes", node("node-b"))
        for name in ("solo-1", "solo-2"):
            server.put("v1", "pods", pod(name))
        r = runner(server, "replica-a", settings)
        async with running(r):
            await eventually(lambda: bool(bound_to(server, "solo-2")), what="binds")
            assert r.scheduler is not None and r.scheduler.recovery == recovery
            # spread: two lone pods go to different nodes (binpack would stack them)
            assert {bound_to(server, "solo-1"), bound_to(server, "solo-2")} == {"node-a", "node-b"}


def test_a_file_that_is_not_a_mapping_or_not_yaml_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- 1\n")
    with pytest.raises(InputError, match="expected a mapping"):
        load_settings(path)
    path.write_text("period: [1\n")
    with pytest.raises(InputError) as caught:
        load_settings(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)
    with pytest.raises(InputError, match="file not found"):
        load_settings(tmp_path / "missing.yaml")


async def test_a_leader_that_cannot_renew_steps_down_and_stops_scheduling() -> None:
    async with connected() as (server, _client):
        server.put("v1", "nodes", node("node-a"))
        r = runner(server, "replica-a")
        async with running(r):
            await eventually(lambda: r.scheduler is not None, what="leading")
            assert r.elector is not None
            loop = asyncio.get_running_loop()
            server.fail("*", r"/leases/", 500, times=10_000)
            failing_at = loop.time()
            await eventually(lambda: r.scheduler is None, timeout=3.0, what="step down")
            assert loop.time() - failing_at < LEASE.lease_duration
            assert not r.elector.is_leader
            assert r.metrics.registry.get_sample_value("phalanx_leader") == 0.0
            server.clear_faults()
            await eventually(lambda: r.scheduler is not None, timeout=3.0, what="leads again")
            assert r.elector.terms == 2
