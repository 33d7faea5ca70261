"""Every bad trace file is one InputError line naming the file, row and column."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from phalanx.api.errors import InputError
from phalanx.api.specs import GangSpec, NodeSpec, PodSpec
from phalanx.traces import load
from phalanx.traces.openb import openb_nodes, openb_pods

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
PHILLY_ROWS = (
    "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
    "2017-10-09 06:13:03,100.0,20,2000.0,6214e9\n"
    "2017-10-09 06:13:04,50.0,12,600.0,6214e9\n"
)
VC_NODES = "vc,node num\n6214e9,4\n11cb48,2\n"
OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
OPENB_ROW = "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,100,0\n"


def philly_root(tmp_path: Path, jobs: str = PHILLY_HEADER + PHILLY_ROWS) -> Path:
    folder = tmp_path / "philly"
    folder.mkdir(exist_ok=True)
    (folder / "philly.csv").write_text(jobs)
    (folder / "philly_vc_nodes_heliosartifact.csv").write_text(VC_NODES)
    return tmp_path


def error_of(spec: str, root: Path) -> str:
    with pytest.raises(InputError) as info:
        load(spec, root=root)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def csv_path(root: Path) -> str:
    return str(root / "philly" / "philly.csv")


# --- a good small file -----------------------------------------------------------------------


def test_small_philly_file(tmp_path: Path) -> None:
    workload = load("philly", root=philly_root(tmp_path))
    assert len(list(workload.of(NodeSpec))) == 6
    gangs = [(i.spec, i.timing) for i in workload.items_of(GangSpec)]
    assert [(g.key, t.submit_after) for g, t in gangs if isinstance(g, GangSpec)] == [
        ("6214e9/job-00002", 0.0),
        ("6214e9/job-00003", 1.0),
        ("11cb48/job-00001", 2932.0),
    ]
    pods = {p.name: p.requests["nvidia.com/gpu"] for p in workload.of(PodSpec)}
    assert pods == {
        "job-00002-0": 8000,
        "job-00002-1": 8000,
        "job-00002-2": 4000,
        "job-00003-0": 8000,
        "job-00003-1": 4000,
        "job-00001-0": 1000,
    }
    vc = load("philly:vc=11cb48,scale=2", root=tmp_path)
    assert [n.name for n in vc.of(NodeSpec)] == ["philly-node-0000", "philly-node-0001"]


# --- missing and truncated files ------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    root = philly_root(tmp_path)
    (root / "philly" / "philly.csv").unlink()
    assert error_of("philly", root) == f"{csv_path(root)}: file not found"


def test_missing_vc_table(tmp_path: Path) -> None:
    root = philly_root(tmp_path)
    (root / "philly" / "philly_vc_nodes_heliosartifact.csv").unlink()
    assert "philly_vc_nodes_heliosartifact.csv: file not found" in error_of("philly", root)


def test_truncated_last_row(tmp_path: Path) -> None:
    root = philly_root(tmp_path, PHILLY_HEADER + PHILLY_ROWS + "2017-10-09 06:13:04,50.0")
    assert error_of("philly", root) == (f"{csv_path(root)}: row 4: 2 of 5 fields (truncated file?)")


def test_header_only(tmp_path: Path) -> None:
    root = philly_root(tmp_path, PHILLY_HEADER)
    assert error_of("philly", root) == (
        f"{csv_path(root)}: header only, no data rows (truncated file?)"
    )


def test_empty_file(tmp_path: Path) -> None:
    root = philly_root(tmp_path, "")
    assert "philly.csv: empty file: no header row (truncated file?)" in error_of("philly", root)


def test_short_row_in_the_middle(tmp_path: Path) -> None:
    rows = PHILLY_HEADER + "2017-10-09 07:01:55,66.0,1\n" + PHILLY_ROWS
    message = error_of("philly", philly_root(tmp_path, rows))
    assert message.endswith(
        "philly.csv: row 1: 3 fields, expected 5 (timestamp, duration, num_gpus, gpu_time, cluster)"
    )


def test_blank_line_between_rows(tmp_path: Path) -> None:
    rows = PHILLY_HEADER + PHILLY_ROWS + "\n" + PHILLY_ROWS
    assert "philly.csv: row 4: blank line between rows" in error_of(
        "philly", philly_root(tmp_path, rows)
    )


def test_trailing_blank_lines_are_fine(tmp_path: Path) -> None:
    workload = load("philly", root=philly_root(tmp_path, PHILLY_HEADER + PHILLY_ROWS + "\n\n"))
    assert sum(1 for _ in workload.of(GangSpec)) == 3


def test_directory_instead_of_file(tmp_path: Path) -> None:
    root = philly_root(tmp_path)
    (root / "philly" / "philly.csv").unlink()
    (root / "philly" / "philly.csv").mkdir()
    assert "philly.csv: is a directory, not a file" in error_of("philly", root)


def test_not_utf8(tmp_path: Path) -> None:
    root = philly_root(tmp_path)
    (root / "philly" / "philly.csv").write_bytes(b"timestamp,\xff\xfe\n")
    assert "philly.csv: not UTF-8 text" in error_of("philly", root)


# --- columns --------------------------------------------------------------------------------


def test_unknown_column(tmp_path: Path) -> None:
    rows = "timestamp,duration,num_gpus,gpu_time,cluster,user\n" + "2017-10-09 07:01:55,1,1,1,a,b\n"
    message = error_of("philly", philly_root(tmp_path, rows))
    assert message.startswith(f"{csv_path(tmp_path)}: user: unknown column 'user' (known columns:")


def test_missing_required_column(tmp_path: Path) -> None:
    rows = "timestamp,duration,cluster\n2017-10-09 07:01:55,66.0,11cb48\n"
    assert error_of("philly", philly_root(tmp_path, rows)) == (
        f"{csv_path(tmp_path)}: num_gpus: missing required column 'num_gpus'"
    )


def test_optional_column_may_be_absent(tmp_path: Path) -> None:
    rows = "timestamp,duration,num_gpus,cluster\n2017-10-09 07:01:55,66.0,2,11cb48\n"
    assert sum(1 for _ in load("philly", root=philly_root(tmp_path, rows)).of(PodSpec)) == 1


def test_duplicate_column(tmp_path: Path) -> None:
    rows = "timestamp,duration,num_gpus,cluster,cluster\n2017-10-09 07:01:55,66.0,2,a,a\n"
    assert "cluster: duplicate column 'cluster'" in error_of("philly", philly_root(tmp_path, rows))


# --- malformed rows -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "located"),
    [
        ("2017-10-09 07:01:55,66.0,x,66.0,11cb48", "num_gpus: 'x' is not an integer"),
        ("2017-10-09 07:01:55,66.0,0,66.0,11cb48", "num_gpus: 0 is below the minimum 1"),
        ("2017-10-09 07:01:55,66.0,1.5,66.0,11cb48", "num_gpus: '1.5' is not an integer"),
        ("2017-10-09 07:01:55,soon,1,66.0,11cb48", "duration: 'soon' is not a number"),
        ("2017-10-09 07:01:55,-3,1,66.0,11cb48", "duration: -3 is below the minimum 0"),
        ("2017-10-09 07:01:55,nan,1,66.0,11cb48", "duration: 'nan' is not a finite number"),
        ("2017-10-09 07:01:55,1e400,1,66.0,11cb48", "duration: '1e400' is not a finite number"),
        (
            "2017-10-09T07:01:55+02:00,66.0,1,66.0,11cb48",
            "timestamp: '2017-10-09T07:01:55+02:00' is not a time such as 2017-10-09 07:01:55",
        ),
        (
            "yesterday,66.0,1,66.0,11cb48",
            "timestamp: 'yesterday' is not a time such as 2017-10-09 07:01:55",
        ),
        (
            "2017-10-09 07:01:55,66.0,1,66.0,VC_1",
            "cluster: 'VC_1' is not a VC id usable as a namespace (e.g. 6214e9)",
        ),
    ],
)
def test_malformed_philly_row(tmp_path: Path, row: str, located: str) -> None:
    root = philly_root(tmp_path, PHILLY_HEADER + PHILLY_ROWS + row + "\n")
    assert error_of("philly", root) == f"{csv_path(root)}: row 4: {located}"


def test_bad_vc_table(tmp_path: Path) -> None:
    root = philly_root(tmp_path)
    table = root / "philly" / "philly_vc_nodes_heliosartifact.csv"
    table.write_text("vc,node num\n6214e9,4\n11cb48,none\n")
    assert error_of("philly", root) == f"{table}: row 2: node num: 'none' is not an integer"
    table.write_text("vc,node num\n6214e9,4\n6214e9,2\n")
    assert error_of("philly", root) == f"{table}: row 2: vc: duplicate VC '6214e9'"


def test_unknown_vc_and_vc_without_nodes(tmp_path: Path) -> None:
    root = philly_root(tmp_path, PHILLY_HEADER + PHILLY_ROWS + "2017-10-09 07:01:55,1,1,1,abc\n")
    message = error_of("philly:vc=ffffff", root)
    assert message == (
        f"{csv_path(root)}: vc: no job of VC 'ffffff' in philly.csv (VCs: 11cb48, 6214e9, abc)"
    )
    message = error_of("philly:vc=abc", root)
    assert "VC 'abc' has no node count (VCs with one: 6214e9, 11cb48); give nodes=N" in message
    assert sum(1 for _ in load("philly:vc=abc,nodes=1", root=root).of(GangSpec)) == 1


# --- openb ----------------------------------------------------------------------------------


def openb_file(tmp_path: Path, text: str, name: str = "openb_pod_list_default.csv") -> Path:
    folder = tmp_path / "openb" / "csv"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("row", "located"),
    [
        ("p1,1000,1024,2,500,,LS,Running,0,1,0", "gpu_milli: 500: a pod of 2 GPUs must take whole"),
        ("p1,1000,1024,1,0,,LS,Running,0,1,0", "gpu_milli: 0 is not in 1..1000 for one GPU"),
        ("p1,1000,1024,1,1200,,LS,Running,0,1,0", "gpu_milli: 1200 is not in 1..1000"),
        ("p1,1000,1024,-1,0,,LS,Running,0,1,0", "num_gpu: -1 is below the minimum 0"),
        ("p1,1k,1024,1,1000,,LS,Running,0,1,0", "cpu_milli: '1k' is not an integer"),
        ("p1,1000,1024,1,1000,T4||G2,LS,Running,0,1,0", "gpu_spec: 'T4||G2' has an empty GPU"),
        ("p1,1000,1024,1,1000,,LS,Running,9,1,0", "deletion_time: 1 is before creation_time 9"),
        ("p1,1000,1024,1,1000,,LS,Running,x,1,0", "creation_time: 'x' is not an integer"),
        ("openb-pod-0000,1,1,0,0,,LS,Running,0,1,0", "name: duplicate pod 'openb-pod-0000'"),
        (",1,1,0,0,,LS,Running,0,1,0", "name: empty pod name"),
    ],
)
def test_malformed_openb_row(tmp_path: Path, row: str, located: str) -> None:
    path = openb_file(tmp_path, OPENB_HEADER + OPENB_ROW + row + "\n")
    with pytest.raises(InputError) as info:
        openb_pods(path)
    assert str(info.value).startswith(f"{path}: row 2: {located}")


def test_openb_gpu_milli_without_gpus_is_a_cpu_pod(tmp_path: Path) -> None:
    """As the FGD simulator reads a row: the GPU demand is num_gpu × gpu_milli."""
    row = "p1,1000,1024,0,100,V100M16,LS,Running,0,1,0"
    path = openb_file(tmp_path, OPENB_HEADER + OPENB_ROW + row + "\n")
    _, pod = openb_pods(path)
    assert pod.requests == {"pods": 1, "cpu": 1000, "memory": 1024 * 2**20}
    assert not pod.placement.affinity_terms


def test_openb_five_column_list_and_unknown_column(tmp_path: Path) -> None:
    path = openb_file(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,8,1000\n")
    (pod,) = openb_pods(path)
    assert pod.requests == {"pods": 1, "cpu": 1, "memory": 2**20, "nvidia.com/gpu": 8000}
    path.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,priority\np,1,1,8,1000,3\n")
    with pytest.raises(InputError, match="priority: unknown column 'priority'"):
        openb_pods(path)


def test_openb_missing_pod_list(tmp_path: Path) -> None:
    (tmp_path / "openb").mkdir()
    message = error_of("openb:gpushare20", tmp_path)
    assert message == (
        f"{tmp_path / 'openb' / 'csv' / 'openb_pod_list_gpushare20.csv'}: file not found"
    )


def test_openb_missing_node_file(tmp_path: Path) -> None:
    openb_file(tmp_path, OPENB_HEADER + OPENB_ROW)
    assert error_of("openb", tmp_path).endswith(
        "openb/node_yaml/openb_node_list_gpu_node.yaml: file not found"
    )


NODE_YAML = """\
apiVersion: v1
kind: Node
metadata:
  name: n0
  labels: {alibabacloud.com/gpu-card-model: T4}
status:
  allocatable:
    alibabacloud.com/gpu-count: '2'
    alibabacloud.com/gpu-milli: '%s'
    cpu: 8000m
    memory: 64Gi
    pods: '1001'
"""


def test_openb_node_yaml(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(NODE_YAML % "2000")
    (node,) = openb_nodes(path)
    assert node.allocatable == {
        "cpu": 8000,
        "memory": 64 * 2**30,
        "pods": 1001,
        "nvidia.com/gpu": 2000,
    }
    assert node.labels["alibabacloud.com/gpu-card-model"] == "T4"
    path.write_text(NODE_YAML % "1000")
    with pytest.raises(InputError) as info:
        openb_nodes(path)
    assert str(info.value) == (
        f"{path}: Node n0: status.allocatable[alibabacloud.com/gpu-milli]: "
        "alibabacloud.com/gpu-milli 1000 is not alibabacloud.com/gpu-count 2 × 1000"
    )


def test_openb_node_yaml_errors(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text("")
    with pytest.raises(InputError, match="no Node documents"):
        openb_nodes(path)
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(InputError, match="expected only kind Node, found 'Pod'"):
        openb_nodes(path)
    path.write_text(NODE_YAML.replace("cpu: 8000m", "cpu: lots") % "2000")
    with pytest.raises(InputError) as info:
        openb_nodes(path)
    assert str(info.value).startswith(f"{path}: Node n0: status.allocatable.cpu:")
    path.write_text("kind: Node\n  bad: [")
    with pytest.raises(InputError, match="YAML syntax error"):
        openb_nodes(path)


def test_openb_node_csv_errors(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1024,x,T4\n")
    with pytest.raises(InputError) as info:
        openb_nodes(path)
    assert str(info.value) == f"{path}: row 1: gpu: 'x' is not an integer"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1000,1024,1,T4\nn0,1,1,0,\n")
    with pytest.raises(InputError, match="row 2: sn: duplicate node 'n0'"):
        openb_nodes(path)


# --- sia and tiresias -----------------------------------------------------------------------


def test_sia_errors(tmp_path: Path) -> None:
    folder = tmp_path / "sia-workloads" / "saturn"
    folder.mkdir(parents=True)
    path = folder / "workload-1.csv"
    header = "name,time,application,num_replicas,batch_size\n"
    path.write_text(header + "gpt-0,10,gpt,4,64\n")
    assert error_of("sia", tmp_path) == (
        f"{path}: row 1: application: unknown application 'gpt' "
        "(known: cifar10, ncf, deepspeech2, bert, yolov3, imagenet)"
    )
    path.write_text(header + "bert-0,10,bert,0,64\n")
    assert error_of("sia", tmp_path) == f"{path}: row 1: num_replicas: 0 is below the minimum 1"
    path.write_text(header + "bert-0,10,bert,2,64\nbert-0,20,bert,2,64\n")
    assert error_of("sia", tmp_path) == f"{path}: row 2: name: duplicate job 'bert-0'"
    assert error_of("sia:saturn,workload=4", tmp_path).endswith("workload-4.csv: file not found")
    path.write_text(header + "bert-0,10,bert,2,64\n")
    workload = load("sia:saturn", root=tmp_path)
    assert [p.name for p in workload.of(PodSpec)] == ["bert-0-0", "bert-0-1"]


def test_tiresias_errors(tmp_path: Path) -> None:
    folder = tmp_path / "tiresias-60job"
    folder.mkdir()
    path = folder / "60_job.csv"
    header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
    path.write_text(header + "0,1,0,606,vgg19,164,30\n0,1,0,606,vgg19,164,30\n")
    assert error_of("tiresias", tmp_path) == f"{path}: row 2: job_id: duplicate job 0"
    path.write_text(header + "0,1,0,606,vgg19,long,30\n")
    assert error_of("tiresias", tmp_path) == f"{path}: row 1: duration: 'long' is not a number"
    path.write_text(textwrap.dedent(header))
    assert "header only" in error_of("tiresias", tmp_path)
