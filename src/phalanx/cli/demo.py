"""The built-in demo: the seed scenarios under kube-default and phalanx, side by side."""

from __future__ import annotations

from importlib import resources

from phalanx.cli.output import table
from phalanx.k8s import load_files
from phalanx.sim.metrics import SimResult
from phalanx.sim.simulator import SimOptions, simulate

HORIZON = 2 * 3600.0
POLICIES = ("kube-default", "phalanx")

SCENARIOS = (
    ("01-deadlock.yaml", "deadlock", "two 4-GPU jobs on 4 GPUs, pods interleaved"),
    ("02-seven-of-eight.yaml", "seven of eight", "an 8-GPU job when 7 GPUs are free"),
    ("03-quota.yaml", "quota", "ResourceQuota pods: 2, minMember 3, parallelism 4"),
    ("04-starvation.yaml", "starvation", "4-GPU low-priority job among 2-GPU high ones"),
)


def run_demo(seed: int = 0) -> list[tuple[str, str, SimResult]]:
    out = []
    folder = resources.files("phalanx") / "examples"
    for filename, title, _ in SCENARIOS:
        with resources.as_file(folder / filename) as path:
            workload = load_files([path])
        for policy in POLICIES:
            options = SimOptions(policy=policy, seed=seed, until=HORIZON)
            out.append((filename, title, simulate(workload, options)))
    return out


def _gang(result: SimResult, name: str) -> str:
    for gang in result.gangs:
        if gang.name == name:
            return gang.state
    return "-"


def demo_table(runs: list[tuple[str, str, SimResult]]) -> str:
    rows = []
    for filename, title, result in runs:
        groups = [g for g in result.gangs if g.kind == "PodGroup"]
        rows.append(
            [
                title if result.policy == POLICIES[0] else "",
                result.policy,
                f"{sum(g.state == 'completed' for g in groups)}/{len(groups)}",
                str(result.count("deadlocked")),
                str(sum(g.state == "waiting" for g in groups)),
                f"{result.idle_gpu_hours:.2f}",
                f"${result.idle_cost:.2f}",
                filename if result.policy == POLICIES[0] else "",
            ]
        )
    headers = [
        "SCENARIO",
        "POLICY",
        "GANGS DONE",
        "DEADLOCKED",
        "WAITING",
        "IDLE GPU-H",
        "IDLE COST",
        "FILE (examples/)",
    ]
    intro = (
        "phalanx demo: the seed scenarios under the default Kubernetes scheduler and under\n"
        f"phalanx, simulated for {HORIZON / 3600:g}h each. Idle GPU-hours are GPUs bound to gangs "
        "whose work\ncannot start, at $3.5 per GPU-hour.\n"
    )
    notes = "\n".join(f"  {title}: {what}" for _, title, what in SCENARIOS)
    more = "\nRun one yourself: phalanx simulate examples/01-deadlock.yaml --policy kube-default"
    return intro + "\n" + table(headers, rows) + "\n\nScenarios:\n" + notes + "\n" + more
