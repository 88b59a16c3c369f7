"""`python -m bench.chaos`'s selections: unknown service or fault names are refused with the
valid names (exit 2), known ones select their cells in the matrix's order; the 3-node Kafka
mode's services only with `--kafka-nodes 3`, and only 1 or 3 nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bench.chaos.cli import main
from bench.chaos.names import (
    FAULTS,
    SERVICES,
    ChaosUsageError,
    applies,
    cells,
    check_edge_pair,
    select,
    select_services,
    services_for,
)
from bench.chaos.report import table


def test_an_unknown_service_is_refused_with_the_valid_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--services", "kafka,zookeeper", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown service 'zookeeper'" in err
    assert "valid services are mosquitto, kafka, bridge, commands, api, analytics, devices, " \
        "supervisor, edge (or all)" in err  # fmt: skip


def test_an_unknown_fault_is_refused_with_the_valid_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--faults", "kill9,unplug", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown fault 'unplug'" in err
    assert "valid faults are kill9, stop30, restart, disk-full, cut60 (or all)" in err


def test_known_names_select_their_cells_in_the_matrix_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--services", "kafka,bridge", "--faults", "disk-full,kill9", "--dry-run"]) == 0
    # disk-full applies to Kafka and Mosquitto only
    assert capsys.readouterr().out.splitlines() == [
        "kafka x kill9", "kafka x disk-full", "bridge x kill9",
    ]  # fmt: skip


def test_select_defaults_to_all_and_names_every_unknown() -> None:
    assert select(None, SERVICES, "service") == list(SERVICES)
    assert select("all", FAULTS, "fault") == list(FAULTS)
    with pytest.raises(ChaosUsageError, match="unknown fault 'a', 'b'"):
        select("a,kill9,b", FAULTS, "fault")


def test_the_whole_matrix() -> None:
    everything = cells(SERVICES, FAULTS)
    assert ("mosquitto", "disk-full") in everything
    assert ("bridge", "disk-full") not in everything
    assert ("supervisor", "restart") not in everything  # restarting it is `up` again
    assert ("edge", "cut60") in everything
    assert [c for c in everything if "edge" in c or "cut60" in c] == [("edge", "cut60")]
    assert len(everything) == 8 * 3 - 1 + 2 + 1


def test_the_matrix_tells_not_applicable_from_not_run() -> None:
    @dataclass
    class Result:
        service: str
        fault: str
        lost: int | None = 0
        duplicates: int | None = 2
        recover_s: float | None = 4.4
        worst: str = "none"
        detail: str = ""
        load_avg: str = "1.0"

    text = table([Result("kafka", "kill9")], ["kafka", "bridge"], ["kill9", "disk-full"])
    assert text.splitlines()[2:] == [
        "| kafka | 0 / 2 / 4 s | not run |",
        "| bridge | not run | - |",
    ]


def test_the_cluster_services_need_three_kafka_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--services", "kafka-broker,bridge", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "service 'kafka-broker' needs --kafka-nodes 3" in err
    assert main(["--services", "kafka-controller", "--kafka-nodes", "1", "--dry-run"]) == 2
    assert "service 'kafka-controller' needs --kafka-nodes 3" in capsys.readouterr().err


def test_the_single_kafka_is_refused_on_three_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--kafka-nodes", "3", "--services", "kafka", "--dry-run"]) == 2
    assert "kafka-broker or kafka-controller" in capsys.readouterr().err


@pytest.mark.parametrize("nodes", ["0", "2", "5"])
def test_only_one_or_three_kafka_nodes(nodes: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--kafka-nodes", nodes, "--dry-run"]) == 2
    assert f"--kafka-nodes {nodes}: the matrix runs with 1 or 3 Kafka nodes" in (
        capsys.readouterr().err
    )
    with pytest.raises(ChaosUsageError):
        services_for(int(nodes))


def test_three_nodes_hurt_a_broker_and_the_controller_without_disk_full(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--kafka-nodes", "3", "--services", "kafka-controller,kafka-broker", "--dry-run"]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{s} x {f}"
        for s in ("kafka-broker", "kafka-controller")
        for f in ("kill9", "stop30", "restart")
    ]


def test_all_services_on_three_nodes_put_the_node_roles_in_kafkas_place() -> None:
    three = select_services(None, 3)
    assert three[:3] == ["mosquitto", "kafka-broker", "kafka-controller"]
    assert "kafka" not in three
    assert three[3:] == [s for s in SERVICES if s not in ("mosquitto", "kafka")]
    assert select_services("all", 1) == list(SERVICES)


def test_the_edge_site_has_one_fault_and_the_cut_one_service(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--services", "edge", "--faults", "cut60", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == ["edge x cut60"]
    # either name alone selects the pair
    assert main(["--services", "edge", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == ["edge x cut60"]
    assert main(["--faults", "cut60", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == ["edge x cut60"]
    # beside other cells
    assert main(["--services", "bridge,edge", "--faults", "kill9,cut60", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == ["bridge x kill9", "edge x cut60"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--services", "edge", "--faults", "kill9"],
         "service 'edge' takes only the fault 'cut60' (its link cut), not 'kill9'"),
        (["--services", "edge,bridge", "--faults", "stop30,restart"],
         "service 'edge' takes only the fault 'cut60'"),
        (["--services", "mosquitto", "--faults", "cut60"],
         "fault 'cut60' (a cut link) applies only to service 'edge', not 'mosquitto'"),
        (["--services", "kafka,bridge", "--faults", "cut60,kill9"],
         "fault 'cut60' (a cut link) applies only to service 'edge', not 'kafka', 'bridge'"),
    ],
)  # fmt: skip
def test_an_invalid_edge_pair_is_refused(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--dry-run"]) == 2
    assert says in capsys.readouterr().err
    with pytest.raises(ChaosUsageError, match="edge"):
        check_edge_pair(argv[1], argv[3])


@pytest.mark.parametrize("cut", ["0", "-5"])
def test_the_cut_must_last(cut: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--services", "edge", "--cut-s", cut, "--dry-run"]) == 2
    assert "the cut must last more than 0 s" in capsys.readouterr().err


def test_the_edge_row_and_column_are_not_applicable_elsewhere() -> None:
    assert applies("edge", "cut60")
    assert not applies("edge", "kill9")
    assert not applies("mosquitto", "cut60")
    assert not applies("kafka-broker", "cut60")
    assert "edge" in select_services(None, 3)
