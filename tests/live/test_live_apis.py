"""Every gang API in the live cache, and ``phalanx explain`` against the fake API server."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from apiserver.harness import connected
from test_live_serve import NS, node, pod

from phalanx.api.errors import InputError
from phalanx.cli.explain import add_parser, run_explain
from phalanx.live.cache import ClusterCache
from phalanx.live.explain import explain, render
from phalanx.policies import Scheduler, get_policy


def group(api_version: str, name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member},
    }


def workload(name: str, **groups: int | None) -> dict[str, Any]:
    pod_groups = [
        {"name": g, "policy": {"basic": {}} if n is None else {"gang": {"minCount": n}}}
        for g, n in groups.items()
    ]
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"podGroups": pod_groups},
    }


def wl_pod(name: str, workload_name: str, pod_group: str, key: str = "", gpus: int = 0) -> Any:
    obj = pod(name, gpus=gpus)
    ref = {"name": workload_name, "podGroup": pod_group}
    if key:
        ref["podGroupReplicaKey"] = key
    obj["spec"]["workloadRef"] = ref
    return obj


def labelled(name: str, key: str, value: str, *, annotation: bool = False) -> Any:
    obj = pod(name)
    obj["metadata"]["annotations" if annotation else "labels"] = {key: value}
    return obj


def test_the_cache_builds_gangs_of_every_api() -> None:
    cache = ClusterCache()
    pods = [labelled(f"s-{i}", "pod-group.scheduling.sigs.k8s.io", "sigs") for i in range(2)]
    pods += [
        labelled(f"v-{i}", "scheduling.k8s.io/group-name", "vc", annotation=True) for i in range(3)
    ]
    pods += [wl_pod(f"w0-{i}", "train", "workers", "0") for i in range(2)]
    pods += [wl_pod("w1-0", "train", "workers", "1")]  # replica 1 is short of its 2
    pods += [wl_pod("d-0", "train", "driver")]  # basic: scheduled on its own
    pods += [wl_pod("m-0", "missing", "workers")]  # no such Workload: waits
    snapshot = cache.build(
        nodes=[node("node-a")],
        pods=pods,
        podgroups_sigs=[group("scheduling.sigs.k8s.io/v1alpha1", "sigs", 2)],
        volcano_podgroups=[group("scheduling.volcano.sh/v1beta1", "vc", 3)],
        workloads=[workload("train", workers=2, driver=None)],
        now=1.0,
    )
    gangs = snapshot.state.gangs
    assert gangs[f"{NS}/sigs"].min_member == 2
    assert gangs[f"{NS}/vc"].min_member == 3
    assert len(gangs[f"{NS}/train-workers-0"].members) == 2
    assert len(gangs[f"{NS}/train-workers-1"].members) == 1
    assert snapshot.state.pods[f"{NS}/d-0"].gang.implicit
    assert f"{NS}/missing-workers" in snapshot.state.orphans
    result = Scheduler(get_policy("phalanx")).cycle(snapshot.state, 1.0)
    bound = {p.spec.name for p, _ in result.binds}
    assert bound == {"s-0", "s-1", "v-0", "v-1", "v-2", "w0-0", "w0-1", "d-0"}


def test_a_bad_workload_is_skipped_and_its_pods_wait() -> None:
    cache = ClusterCache()
    bad = workload("train", workers=2)
    bad["spec"]["podGroups"][0]["policy"] = {"gang": {"minCount": 0}}
    snapshot = cache.build(
        nodes=[node("node-a")],
        pods=[wl_pod(f"w-{i}", "train", "workers") for i in range(2)],
        workloads=[bad],
        now=1.0,
    )
    assert "minCount" in cache.rejected[f"Workload/{NS}/train"]
    assert f"{NS}/train-workers" in snapshot.state.orphans


async def test_explain_reports_without_binding() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        server.put("v1", "nodes", node("node-b", gpus=4))
        server.put(
            "scheduling.x-k8s.io/v1alpha1",
            "podgroups",
            group("scheduling.x-k8s.io/v1alpha1", "big", 3),
        )
        for i in range(3):
            server.put("v1", "pods", pod(f"big-{i}", group="big", gpus=4))  # 12 GPUs of 8
        server.put("scheduling.k8s.io/v1alpha1", "workloads", workload("train", workers=2))
        for i in range(2):
            server.put("v1", "pods", wl_pod(f"w-{i}", "train", "workers", "0", gpus=2))
        server.put("v1", "pods", wl_pod("x-0", "gone", "workers"))
        reports = {r.name: r for r in await explain(client, now=1.0)}
        assert set(reports) == {"big", "train-workers-0", "gone-workers"}
        big = reports["big"]
        assert not big.fits and big.placement == {}
        assert "more than the whole cluster has" in big.message
        assert (big.min_member, big.pending, big.needs["nvidia.com/gpu"]) == (
            3,
            ["big-0", "big-1", "big-2"],
            12000,  # GPUs in milli-units
        )
        train = reports["train-workers-0"]
        assert train.fits and train.api == "scheduling.k8s.io"
        assert sorted(p for ps in train.placement.values() for p in ps) == ["w-0", "w-1"]
        assert reports["gone-workers"].reason == "GroupMissing"
        text = render(list(reports.values()))
        assert "gang team/big (scheduling.x-k8s.io)" in text
        assert "w-0, w-1" in text or "<- w-0" in text
        assert "nvidia.com/gpu=12" in text
        assert server.count("POST", r"/binding$") == 0
        assert server.count("PATCH") == 0
        only = await explain(client, namespace=NS, name="big", now=1.0)
        assert [r.name for r in only] == ["big"]
        assert await explain(client, namespace="elsewhere", now=1.0) == []


async def test_explain_works_without_any_gang_crd() -> None:
    async with connected(crds=()) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "pods", pod("lone", gpus=1))
        reports = await explain(client, now=1.0)
        assert [(r.name, r.fits, r.placement) for r in reports] == [
            ("lone", True, {"node-a": ["lone"]})
        ]
        assert "pod team/lone" in render(reports)


async def test_explain_command_connects_through_a_kubeconfig(tmp_path: Path) -> None:
    async with connected() as (server, _client):
        server.put("v1", "nodes", node("node-a"))
        server.put("v1", "pods", pod("lone"))
        kubeconfig = tmp_path / "config"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
            f"clusters: [{{name: c, cluster: {{server: '{server.url}'}}}}]\n"
            "users: [{name: u, user: {}}]\n"
            "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
        )
        root = argparse.ArgumentParser(prog="phalanx")
        add_parser(root.add_subparsers(dest="command"))
        args = root.parse_args(["explain", "--kubeconfig", str(kubeconfig), "-n", NS])
        reports = await run_explain(args)
        assert [r.name for r in reports] == ["lone"]


def test_explain_arguments() -> None:
    root = argparse.ArgumentParser(prog="phalanx")
    add_parser(root.add_subparsers(dest="command"))
    args = root.parse_args(["explain", "-n", "team", "podgroup/train"])
    assert (args.command, args.namespace, args.target, args.kubeconfig) == (
        "explain",
        "team",
        "train",
        None,
    )
    assert root.parse_args(["explain"]).target is None
    with pytest.raises(SystemExit):
        root.parse_args(["explain", "deployment/x"])


async def test_explain_uses_the_settings_file_of_serve(tmp_path: Path) -> None:
    async with connected() as (server, _client):
        for name in ("node-a", "node-b"):
            server.put("v1", "nodes", node(name))
        server.put("v1", "pods", pod("placed", node_name="node-a"))  # node-a is busier
        server.put("v1", "pods", pod("lone", scheduler="gangs"))
        kubeconfig = server.kubeconfig(tmp_path / "config")
        settings = tmp_path / "phalanx.yaml"
        root = argparse.ArgumentParser(prog="phalanx")
        add_parser(root.add_subparsers(dest="command"))

        async def placement(text: str) -> dict[str, list[str]]:
            settings.write_text(text)
            argv = ["explain", "--kubeconfig", str(kubeconfig), "--config", str(settings)]
            (report,) = await run_explain(root.parse_args(argv))
            return report.placement

        # binpack (the default) stacks onto the busier node; spread picks the emptier one
        assert await placement("schedulerName: gangs\n") == {"node-a": ["lone"]}
        spread = "schedulerName: gangs\nscoring: {spread: 1}\n"
        assert await placement(spread) == {"node-b": ["lone"]}
        with pytest.raises(InputError, match=r"scoring\.tetris"):
            await placement("scoring: {tetris: 1}\n")


async def test_explain_gives_the_expected_start_and_its_reason() -> None:
    """A pod of another scheduler holds the only GPU with no estimate: the waiting pod's
    expected start is unknown, and the explanation says why; with an estimate on the running
    pod it is that pod's estimated end (not reserved: one GPU is below the 16-GPU head rule,
    and it has not waited an hour)."""
    async with connected(crds=()) as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=1))
        server.put("v1", "pods", pod("busy", gpus=1, scheduler="other", node_name="node-a"))
        server.put("v1", "pods", pod("lone", gpus=1))
        (report,) = await explain(client, now=1.0, policy="phalanx")
        assert not report.fits
        assert "expected start: unknown: no estimate" in report.message
        assert f"{NS}/busy (no estimate)" in report.message
        busy = pod("busy", gpus=1, scheduler="other", node_name="node-a")
        busy["metadata"]["annotations"] = {"phalanx.dev/runtime-estimate": "2h"}
        server.put("v1", "pods", busy)
        (report,) = await explain(client, now=1.0, policy="phalanx")
        assert "expected start: estimated (not reserved): node-a free at" in report.message
        assert f"when {NS}/busy (estimate: runtime-estimate) ends" in report.message


async def test_explain_says_which_gangs_would_be_preempted() -> None:
    async with connected() as (server, client):
        server.put("v1", "nodes", node("node-a", gpus=4))
        low = pod("low-0", gpus=4, node_name="node-a")
        low["spec"]["priority"] = 10
        server.put("v1", "pods", low)
        server.put(
            "scheduling.x-k8s.io/v1alpha1",
            "podgroups",
            group("scheduling.x-k8s.io/v1alpha1", "urgent", 1),
        )
        urgent = pod("urgent-0", group="urgent", gpus=4)
        urgent["spec"]["priority"] = 1000
        server.put("v1", "pods", urgent)
        (report,) = await explain(client, now=1.0)
        assert report.name == "urgent" and not report.fits
        assert report.preempts == [f"{NS}/low-0 (preempt)"]
        assert report.preempt_nodes == ["node-a"]
        text = render([report])
        assert f"would preempt: {NS}/low-0 (preempt); then placed on node-a" in text
        assert server.count("POST") == 0 and server.count("DELETE") == 0
