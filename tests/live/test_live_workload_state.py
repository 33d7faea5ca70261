"""KAI and Workload-API PodGroups and scheduling gates in the one live state: every event
changes it in place and the result equals a state rebuilt from the same objects; the status
rules of both APIs; a malformed PodGroup is one bad object."""

from __future__ import annotations

import copy
from typing import Any

from apiserver import WORKLOAD_API_V1BETA1
from apiserver.harness import connected, eventually, fast_backoff
from test_live_apis import wl_pod
from test_live_serve import NS, bound_to, create_pod, node, pod
from test_live_state import normalised
from test_live_workload_apis import add, kai_group, kai_member, member, pod_group

from phalanx.live import PODS
from phalanx.live.api_status import kai_status, workload_status
from phalanx.live.cache import ClusterCache
from phalanx.live.group_status import Verdict
from phalanx.live.loop import LiveScheduler
from phalanx.live.resources import (
    KAI_PODGROUPS,
    WORKLOAD_PODGROUPS_V1BETA1,
    WORKLOADS_V1BETA1,
    Resource,
)

Obj = dict[str, Any]
WL = WORKLOAD_PODGROUPS_V1BETA1


class Cluster:
    """The objects an API server would hold, and one cache changed by their events."""

    def __init__(self) -> None:
        self.objects: dict[Resource, dict[str, Obj]] = {PODS: {}, KAI_PODGROUPS: {}, WL: {}}
        self.version = 0
        self.cache = ClusterCache()
        self.cache.start(nodes=[node("node-a")], pods=[], groups={}, now=0.0)

    def apply(self, resource: Resource, kind: str, obj: Obj) -> None:
        obj = copy.deepcopy(obj)
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
        key = f"{NS}/{obj['metadata']['name']}"
        if kind == "DELETED":
            self.objects[resource].pop(key)
        else:
            self.objects[resource][key] = obj
        self.cache.event(resource, kind, obj, float(self.version))
        self.check()

    def check(self) -> None:
        fresh = ClusterCache().build(
            nodes=[node("node-a")],
            pods=list(self.objects[PODS].values()),
            groups={r: list(self.objects[r].values()) for r in (KAI_PODGROUPS, WL)},
            now=0.0,
        )
        assert normalised(self.cache.state) == normalised(fresh.state)
        for gang in fresh.state.gangs.values():
            mine = self.cache.state.gangs[gang.ident]
            assert mine.hold == gang.hold, gang.ident


def gated(obj: Obj, *gates: str) -> Obj:
    obj = copy.deepcopy(obj)
    obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return obj


def test_events_on_kai_and_workload_podgroups_and_gates_equal_a_rebuild() -> None:
    cluster = Cluster()
    # pods before their groups: orphans that join when the groups come
    cluster.apply(PODS, "ADDED", kai_member("k-0", "llm"))
    cluster.apply(PODS, "ADDED", member("w-0", "train"))
    cluster.apply(PODS, "ADDED", gated(member("w-1", "train"), "example.com/quota"))
    cluster.apply(KAI_PODGROUPS, "ADDED", kai_group("llm", 2, "research"))
    cluster.apply(PODS, "ADDED", kai_member("k-1", "llm"))
    cluster.apply(WL, "ADDED", pod_group("v1beta1", "train", 2))
    train = cluster.cache.state.gangs[f"{NS}/train"]
    assert train.hold is not None and train.hold[0] == "SchedulingGated"
    assert len(train.members) == 2
    # the gate removed by an update: the hold goes
    cluster.apply(PODS, "MODIFIED", member("w-1", "train"))
    assert cluster.cache.state.gangs[f"{NS}/train"].hold is None
    # a gang turned basic, and back: its pods are ungrouped, then grouped again
    cluster.apply(WL, "MODIFIED", pod_group("v1beta1", "train", None))
    assert f"{NS}/train" not in cluster.cache.state.gangs
    cluster.apply(WL, "MODIFIED", pod_group("v1beta1", "train", 2))
    assert len(cluster.cache.state.gangs[f"{NS}/train"].members) == 2
    # a gated lone pod, ungated; a KAI group deleted: its pods wait as orphans
    cluster.apply(PODS, "ADDED", gated(pod("solo", gpus=1), "a.io/x"))
    cluster.apply(PODS, "MODIFIED", pod("solo", gpus=1))
    cluster.apply(KAI_PODGROUPS, "DELETED", kai_group("llm", 2, "research"))
    assert f"{NS}/llm" in cluster.cache.state.orphans
    cluster.apply(PODS, "DELETED", kai_member("k-0", "llm"))
    cluster.apply(WL, "DELETED", pod_group("v1beta1", "train", 2))
    cluster.apply(PODS, "DELETED", member("w-0", "train"))


def verdict(placed: bool, reason: str = "NotEnoughResources") -> Verdict:
    return Verdict(placed=placed, reason=reason, message="no room", pending=2, members=2)


def with_conditions(version: str, *conditions: Obj) -> Obj:
    group = pod_group(version, "g", 2)
    group["metadata"]["generation"] = 3
    group["status"] = {"conditions": list(conditions)}
    return group


def test_workload_api_conditions_by_version() -> None:
    other = {"type": "DisruptionTarget", "status": "False", "reason": "x"}
    waiting = workload_status(with_conditions("v1beta1", other), verdict(False), now="t1")
    assert waiting["conditions"][0] == other
    condition = waiting["conditions"][1]
    assert condition == {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "2/2 pods unschedulable: no room",
        "lastTransitionTime": "t1",
        "observedGeneration": 3,
    }
    again = workload_status(with_conditions("v1beta1", condition), verdict(False), now="t2")
    assert again["conditions"][0]["lastTransitionTime"] == "t1"  # no transition
    placed = workload_status(with_conditions("v1beta1", condition), verdict(True), now="t3")
    assert placed["conditions"][0]["status"] == "True"
    assert placed["conditions"][0]["lastTransitionTime"] == "t3"
    # v1beta1's condition is terminal; v1alpha2's follows the gang
    terminal = with_conditions("v1beta1", placed["conditions"][0])
    assert workload_status(terminal, verdict(False), now="t4")["conditions"][0]["status"] == "True"
    alpha = with_conditions("v1alpha2", {**placed["conditions"][0], "type": "PodGroupScheduled"})
    back = workload_status(alpha, verdict(False, "InternalError"), now="t4")["conditions"][0]
    assert (back["status"], back["reason"]) == ("False", "SchedulerError")
    assert workload_status(alpha, None)["conditions"] == alpha["status"]["conditions"]


def test_kai_status_keeps_other_node_pools_and_counts_pods() -> None:
    other = {"type": "UnschedulableOnNodePool", "nodePool": "gpu-a", "status": "True"}
    group = kai_group("llm", 2, "q")
    group["status"] = {"schedulingConditions": [other]}
    pods = [pod("a"), {**pod("b"), "status": {"phase": "Running"}}]
    waiting = kai_status(group, pods, verdict(False), now="t1")
    assert waiting["schedulingConditions"][0] == other
    ours = waiting["schedulingConditions"][1]
    assert (ours["nodePool"], ours["reason"], ours["reasons"]) == (
        "default",
        "Unschedulable",
        [{"reason": "NotEnoughResources", "message": "no room"}],
    )
    assert (waiting["pending"], waiting["running"]) == (1, 1)
    group["status"] = {"schedulingConditions": waiting["schedulingConditions"]}
    later = kai_status(group, pods, verdict(False), now="t2")
    assert later["schedulingConditions"][1]["lastTransitionTime"] == "t1"
    assert kai_status(group, pods, verdict(True))["schedulingConditions"] == [other]


async def test_a_malformed_workload_podgroup_is_one_bad_object() -> None:
    async with connected(crds=WORKLOAD_API_V1BETA1) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        bad = pod_group("v1beta1", "bad", 2)
        bad["spec"]["schedulingPolicy"] = {"gang": {"minCount": 0}}
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await add(scheduler, client, WL, bad)
            await add(scheduler, client, WL, pod_group("v1beta1", "good", 2))
            for name, group in (("b-0", "bad"), ("b-1", "bad"), ("g-0", "good"), ("g-1", "good")):
                await create_pod(scheduler, client, member(name, group))
            result = await scheduler.run_once(1.0)
            assert sorted(p.key for p, _ in result.binds) == [f"{NS}/g-0", f"{NS}/g-1"]
            why = scheduler.cache.rejected[f"PodGroup/{NS}/bad"]
            assert "spec.schedulingPolicy.gang.minCount" in why

            def explained() -> str:
                stored = server.get("v1", "pods", "b-0", NS) or {}
                conditions = (stored.get("status") or {}).get("conditions") or [{}]
                return str(conditions[0].get("message") or "")

            await eventually(lambda: "is invalid" in explained(), what="orphan explained")
            assert explained().startswith(f"PodGroup {NS}/bad (scheduling.k8s.io) is invalid")
        assert bound_to(server, "b-0") is None


def test_kai_subgroups_are_roles_of_the_live_gang() -> None:
    group = kai_group("llm", 3, "research")
    group["spec"]["subGroups"] = [
        {"name": "leader", "minMember": 1},
        {"name": "workers", "minMember": 2},
    ]
    pods = []
    for name, role in (("l-0", "leader"), ("w-0", "workers"), ("w-1", "workers")):
        obj = kai_member(name, "llm")
        obj["metadata"]["labels"]["kai.scheduler/subgroup-name"] = role
        pods.append(obj)
    state = (
        ClusterCache()
        .build(nodes=[node("node-a")], pods=pods, groups={KAI_PODGROUPS: [group]}, now=0.0)
        .state
    )
    gang = state.gangs[f"{NS}/llm"]
    assert (gang.min_member, gang.role_minimums) == (3, {"leader": 1, "workers": 2})
    assert sorted(p.spec.role for p in gang.members) == ["leader", "workers", "workers"]
    assert gang.spec is not None and gang.spec.queue == "research"


async def test_a_v1beta1_workload_gang_of_workload_ref_pods_binds_whole() -> None:
    templates = [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]
    workload = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": NS},
        "spec": {"podGroupTemplates": templates},
    }
    async with connected(crds=WORKLOAD_API_V1BETA1) as (server, client):
        server.put("v1", "nodes", node("node-a"))
        async with LiveScheduler(client, backoff=fast_backoff()) as scheduler:
            await add(scheduler, client, WORKLOADS_V1BETA1, workload)
            await create_pod(scheduler, client, wl_pod("w-0", "job", "workers", gpus=1))
            assert (await scheduler.run_once(1.0)).binds == []
            await create_pod(scheduler, client, wl_pod("w-1", "job", "workers", gpus=1))
            assert len((await scheduler.run_once(2.0)).binds) == 2
            assert scheduler.cache.state.gangs[f"{NS}/job-workers"].min_member == 2
