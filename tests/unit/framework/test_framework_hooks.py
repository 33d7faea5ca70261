"""The GPU-device and placement hooks (framework.plugin): ChoosesGpus decides where
``Statement.allocate`` puts a pod, ObservesPlacements hears of committed placements only,
OpensSession runs when a session opens; GpuClustering reads its classes from the cluster."""

from __future__ import annotations

import numpy as np

from phalanx.api.specs import NodeSpec, PodSpec
from phalanx.api.workload import Item, Timing, Workload
from phalanx.cluster import devices
from phalanx.cluster.labels import Mask
from phalanx.cluster.nodes import NodeTable
from phalanx.cluster.resources import ResourceIndex
from phalanx.cluster.state import ClusterState
from phalanx.cluster.workloads import PodInfo, PodStatus
from phalanx.framework.plugin import Hooks, Scores
from phalanx.framework.session import Session
from phalanx.plugins.gpuclustering import GpuClustering
from phalanx.plugins.predicates import Predicates
from phalanx.sim.simulator import SimOptions, Simulation

GPU = "nvidia.com/gpu"


class LastDevice:
    """A scoring plugin that puts a share on the last device with room and logs its hooks."""

    name = "last-device"
    weight = 1

    def __init__(self) -> None:
        self.observed: list[tuple[str, int]] = []
        self.opened = 0

    def score(self, table: NodeTable, pod: PodInfo, feasible: Mask) -> Scores:
        return np.zeros(len(table), dtype=np.float64)

    def choose_gpus(self, table: NodeTable, pod: PodInfo, node: int) -> tuple[int, ...]:
        room = np.flatnonzero(table.gpu_free[node] >= pod.request[table.gpu_col])
        return (int(room[-1]),)

    def observe(self, table: NodeTable, pod: PodInfo, node: int) -> None:
        self.observed.append((pod.key, node))

    def open_session(self, session: Session) -> None:
        self.opened += 1


def state_of(nodes: int = 1) -> ClusterState:
    specs = [NodeSpec(f"n{i}", {"cpu": 8000, "pods": 10, GPU: 4000}) for i in range(nodes)]
    return ClusterState(specs, ResourceIndex())


def share(state: ClusterState, name: str, milli: int = 500) -> PodInfo:
    return state.add_pod(PodSpec("ns", name, {"cpu": 100, GPU: milli, "pods": 1}), 0.0)


def session_of(state: ClusterState, plugin: object) -> Session:
    return Session(state, [Predicates(), plugin], now=0.0, rng=np.random.default_rng(0))


def test_hooks_are_found_once_and_the_chooser_is_a_scoring_plugin() -> None:
    plugin = LastDevice()
    hooks = Hooks([Predicates(), plugin])
    assert hooks.gpu_chooser is plugin
    assert hooks.observers == [plugin] and hooks.openers == [plugin]
    assert Hooks([Predicates()]).gpu_chooser is None


def test_allocate_takes_the_chosen_devices_and_discard_gives_them_back() -> None:
    state = state_of()
    plugin = LastDevice()
    session = session_of(state, plugin)
    assert plugin.opened == 1
    pod = share(state, "a")
    statement = session.statement()
    statement.allocate(pod, 0)
    assert pod.gpus == (3,)  # the table's best fit would take device 0
    assert session.table.gpu_free[0].tolist() == [1000, 1000, 1000, 500]
    statement.discard()
    assert session.table.gpu_free[0].tolist() == [1000] * 4 and pod.status is PodStatus.PENDING
    assert plugin.observed == []  # nothing was committed
    statement = session.statement()
    statement.allocate(pod, 0)
    statement.commit()
    assert plugin.observed == [("ns/a", 0)]


def test_without_a_chooser_the_table_best_fit_places_the_share() -> None:
    state = state_of()
    session = Session(state, [Predicates()], now=0.0, rng=np.random.default_rng(0))
    pod = share(state, "a")
    statement = session.statement()
    statement.allocate(pod, 0)
    assert pod.gpus == devices.pick(np.full(4, 1000, dtype=np.int64), 500) == (0,)


def test_gpuclustering_reads_the_classes_of_bound_pods_when_a_session_opens() -> None:
    state = state_of(nodes=2)
    bound = share(state, "bound")
    state.bind(bound, 0, 0.0)
    plugin = GpuClustering()
    session = session_of(state, plugin)
    pod = share(state, "next")
    scores = plugin.score(session.table, pod, session.feasible(pod))
    assert scores[0] >= 75 > scores[1]  # node 0 hosts only shares: the top tier
    state.release(bound)  # the share leaves: node 0 hosts no GPU task any more
    session = session_of(state, plugin)
    scores = plugin.score(session.table, pod, session.feasible(pod))
    assert 25 <= scores[0] < 50 and 25 <= scores[1] < 50


def test_the_simulator_binds_on_the_devices_the_scoring_plugin_chose() -> None:
    """``random`` draws a device among those with room; the table's best fit would always take
    device 0 of an idle node. The bound pod keeps the drawn device."""
    node = NodeSpec("n0", {"cpu": 8000, "pods": 10, GPU: 4000})
    pod = PodSpec("ns", "a", {"cpu": 100, GPU: 500, "pods": 1})
    workload = Workload(items=[Item(node, Timing(), "t"), Item(pod, Timing(), "t")])
    chosen = set()
    for seed in range(12):
        sim = Simulation(workload, SimOptions(scoring="random", seed=seed))
        sim.run()
        bound = sim.state.pods["ns/a"]
        assert bound.status is PodStatus.BOUND
        chosen.add(bound.gpus)
        free = sim.state.table.gpu_free[0].tolist()
        assert free == [500 if (i,) == bound.gpus else 1000 for i in range(4)]
    assert len(chosen) > 1
