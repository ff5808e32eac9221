"""bench/paper_kafka_report.py: the Kafka comparison's tables, medians with min and max, ratios Lumber / Kafka
and issue 39's goals beside them."""

from __future__ import annotations

from bench.paper_kafka import KAFKA, LUMBER, KafkaComparison, partitions_case
from bench.paper_kafka_connections import connections_case
from bench.paper_kafka_memory import memory_case
from bench.paper_kafka_replication import replication_case
from bench.paper_kafka_report import markdown


def comparison() -> KafkaComparison:
    result = KafkaComparison(records=200_000, rounds=3, partitions=[1, 4])
    rates = {
        ("produce, batch 50, acks=1", KAFKA): ([300_000.0, 200_000.0, 250_000.0], [4.0, 6.0, 5.0]),
        ("produce, batch 50, acks=1", LUMBER): ([100_000.0, 150_000.0, 125_000.0], [7.0, 9.0, 8.0]),
        ("consume", KAFKA): ([1_000_000.0], [1.0]),
        ("consume", LUMBER): ([1_500_000.0], [1.0]),
        (partitions_case("produce", 1), KAFKA): ([200_000.0], [5.0]),
        (partitions_case("produce", 4), KAFKA): ([100_000.0], [9.0]),
        (partitions_case("produce", 1), LUMBER): ([400_000.0], [3.0]),
        (partitions_case("produce", 4), LUMBER): ([200_000.0], [3.0]),
    }
    for (case, broker), (values, cpu) in rates.items():
        for value, seconds in zip(values, cpu, strict=True):
            result.result(case, broker).rate.add(value)
            result.result(case, broker).cpu_per_million.add(seconds)
    # the clients' CPU per million records, on the partitions cases only
    for (case, broker), seconds in {
        (partitions_case("produce", 1), KAFKA): 1.0,
        (partitions_case("produce", 4), KAFKA): 2.0,
        (partitions_case("produce", 1), LUMBER): 1.5,
        (partitions_case("produce", 4), LUMBER): 2.5,
    }.items():
        result.result(case, broker).client_cpu_per_million.add(seconds)
    result.failures.append("round 2 Lumber kcat consume: RuntimeError: kcat exited 1")
    return result


def test_cases_with_medians_ratios_and_goals() -> None:
    lines = markdown(comparison()).splitlines()
    assert lines[0] == (
        "200,000 records of 100 bytes, 3 rounds, median [min - max]; "
        "broker CPU in seconds per million records"
    )
    passes = comparison()
    passes.consume_passes = 10
    assert markdown(passes).splitlines()[0] == (
        "200,000 records of 100 bytes, 3 rounds, median [min - max]; "
        "broker CPU in seconds per million records; each confluent-kafka consume phase: 10 consumers read "
        "its topic in turn (2,000,000 records)"
    )
    passes.produce_passes = 5
    assert (
        markdown(passes)
        .splitlines()[0]
        .endswith(
            "(2,000,000 records); each produce phase of the partitions' cases sends the records 5 times "
            "(1,000,000 records), its consume phase reading at least as many records as the consume phase"
        )
    )
    assert (
        "| produce, batch 50, acks=1 | 250,000 [200,000 - 300,000] | 125,000 [100,000 - 150,000] | 0.50x "
        "| >= 1x: not met | 5.00 [4.00 - 6.00] | 8.00 [7.00 - 9.00] | 1.60x | <= 1.5x: not met |"
    ) in lines
    assert (
        "| consume | 1,000,000 | 1,500,000 | 1.50x | >= 1x: met | 1.00 | 1.00 | 1.00x | <= 1.5x: met |"
    ) in lines
    # cases that did not run are left out, not shown empty
    assert not any(line.startswith("| produce, batch 1") for line in lines)
    assert lines[-1] == "- FAILED round 2 Lumber kcat consume: RuntimeError: kcat exited 1"


def test_partitions_against_each_broker_own_fewest() -> None:
    lines = markdown(comparison()).splitlines()
    assert (
        "| one producer, batch 50, acks=1 | Kafka rec/s | of its fewest | Lumber rec/s | of its fewest "
        "| Lumber / Kafka | Kafka broker CPU | Lumber broker CPU | client CPU, Kafka | client CPU, Lumber |"
    ) in lines
    assert (
        "| produce, 1 partition | 200,000 | 1.00x | 400,000 | 1.00x | 2.00x | 5.00 | 3.00 | 1.00 | 1.50 |"
    ) in lines
    assert (
        "| produce, 4 partitions | 100,000 | 0.50x | 200,000 | 0.50x | 2.00x | 9.00 | 3.00 | 2.00 | 2.50 |"
    ) in lines
    assert "| consume, 1 partition | - | - | - | - | - | - | - | - | - |" in lines
    # each ratio with the two costs it is the inverse of on two shared cores: Lumber's (1.5 + 3) / (2.5 + 3)
    # = 0.82; the client's alone 1.5 / 2.5; 1.0x needs the broker at 4 at most (1.5 + 3) / 1.0 - 2.5 = 2.0
    assert (
        "- Lumber produce, 4 / 1 partitions: 0.50x (goal for Lumber >= 1x: not met); CPU s per million "
        "records at 1 / 4: client 1.50 / 2.50 (alone 0.60x: a broker costing nothing), broker 3.00 / 3.00; "
        "1x with this client needs the broker at 4 at most 2.00"
    ) in lines
    # Kafka's line has no goal of its own to solve for
    assert (
        "- Apache Kafka produce, 4 / 1 partitions: 0.50x (goal for Lumber >= 1x: not met); CPU s per million "
        "records at 1 / 4: client 1.00 / 2.00 (alone 0.50x: a broker costing nothing), broker 5.00 / 9.00"
    ) in lines


def test_partitions_goal_lines_without_client_figures_give_the_ratio_alone() -> None:
    result = comparison()
    for case in (partitions_case("produce", 1), partitions_case("produce", 4)):
        result.cases[case][LUMBER].client_cpu_per_million.values.clear()
    lines = markdown(result).splitlines()
    assert "- Lumber produce, 4 / 1 partitions: 0.50x (goal for Lumber >= 1x: not met)" in lines


def growth_comparison() -> KafkaComparison:
    result = KafkaComparison(records=20_000, rounds=2, partitions=[], connections=[1, 10])
    rates = {
        (connections_case("produce", 1), KAFKA): [200_000.0, 100_000.0],
        (connections_case("produce", 10), KAFKA): [150_000.0, 50_000.0],
        (connections_case("produce", 1), LUMBER): [100_000.0],
        (connections_case("produce", 10), LUMBER): [120_000.0],
        (replication_case("produce", 1, "1"), KAFKA): [300_000.0],
        (replication_case("produce", 3, "all"), KAFKA): [150_000.0],
        (replication_case("produce", 1, "1"), LUMBER): [100_000.0],
        (replication_case("produce", 3, "all"), LUMBER): [40_000.0],
        (memory_case("produce", 1000), LUMBER): [90_000.0],
    }
    for (case, broker), values in rates.items():
        for value in values:
            result.result(case, broker).rate.add(value)
            result.result(case, broker).cpu_per_million.add(2.0)
    result.replication = True
    result.memory[KAFKA] = {"partitions": 1000.0, "before_mib": 400.0, "after_mib": 500.0}
    result.memory[LUMBER] = {"partitions": 1000.0, "before_mib": 100.0, "after_mib": 150.0}
    return result


def test_connections_replication_and_memory_tables() -> None:
    lines = markdown(growth_comparison()).splitlines()
    assert (
        "| produce, 1 connection | 150,000 [100,000 - 200,000] | 1.00x | 100,000 | 1.00x | 0.67x "
        "| 2.00 [2.00 - 2.00] | 2.00 | - | - |"
    ) in lines
    assert (
        "| produce, 10 connections | 100,000 [50,000 - 150,000] | 0.67x | 120,000 | 1.20x | 1.20x "
        "| 2.00 [2.00 - 2.00] | 2.00 | - | - |"
    ) in lines
    assert "| consume, 10 connections | - | - | - | - | - | - | - | - | - |" in lines
    # no standard cases ran: no cases table
    assert not any(line.startswith("| case |") for line in lines)
    assert (
        "| replication: produce, RF 3, acks=all | 150,000 | 40,000 | 0.27x | 2.00 | 2.00 | 1.00x |" in lines
    )
    assert "- Apache Kafka RF 3 acks=all / RF 1 acks=1: 0.50x" in lines
    assert (
        "- Lumber RF 3 acks=all / RF 1 acks=1: 0.40x (goal for Lumber: at least Kafka's 0.50x: not met)"
    ) in lines
    assert "| Apache Kafka | 1,000 | 400 | 500 | 100 | 102.4 | - | - |" in lines
    assert "| Lumber | 1,000 | 100 | 150 | 50 | 51.2 | 90,000 | - |" in lines
    # no partitions phases ran: no partitions table
    assert not any(line.startswith("| one producer") for line in lines)


def machine_comparison() -> KafkaComparison:
    result = KafkaComparison(records=200_000, rounds=3, partitions=[1])
    figures = {
        # case, broker: (rates, broker cores, idle shares), one value a round
        ("produce, batch 50, acks=1", KAFKA): (
            [300_000.0, 200_000.0, 250_000.0],
            [1.2, 1.0, 1.1],
            [0.3, 0.1, 0.2],
        ),
        ("produce, batch 50, acks=1", LUMBER): (
            [250_000.0, 250_000.0, 250_000.0],
            [0.95, 0.9, 1.0],
            [0.0, 0.02, 0.4],
        ),
        (partitions_case("produce", 1), LUMBER): ([400_000.0], [0.5], [0.55]),
    }
    for (case, broker), (rates, cores, idle) in figures.items():
        for rate, core, share in zip(rates, cores, idle, strict=True):
            result.result(case, broker).rate.add(rate)
            result.result(case, broker).cpu_per_million.add(3.0)
            result.result(case, broker).broker_cores.add(core)
            result.result(case, broker).idle.add(share)
    result.warm_up["produce, batch 1, acks=1"] = {KAFKA: [20_000.0, 35_000.0, 41_000.0], LUMBER: [30_000.0]}
    result.warm_up[partitions_case("produce", 1)] = {KAFKA: [480_000.0, 600_000.0]}
    return result


def test_machine_table_broker_cores_and_idle_share_beside_each_case() -> None:
    lines = markdown(machine_comparison()).splitlines()
    assert (
        "| case | Kafka broker cores | machine idle % | Lumber broker cores | machine idle % "
        "| Lumber / Kafka rec/s |"
    ) in lines
    assert (
        "| produce, batch 50, acks=1 | 1.10 [1.00 - 1.20] | 20 [10 - 30] | 0.95 [0.90 - 1.00] | 2 [0 - 40] "
        "| 1.00x |"
    ) in lines
    # a case one broker did not run shows "-" on its side
    assert "| produce, 1 partition | - | - | 0.50 | 55 | - |" in lines


def test_warm_up_table_passes_and_first_and_last_rate() -> None:
    lines = markdown(machine_comparison()).splitlines()
    assert (
        "| warm-up before round 1 | Kafka passes | Kafka rec/s, first / last pass | Lumber passes "
        "| Lumber rec/s, first / last pass |"
    ) in lines
    assert "| produce, batch 1, acks=1 | 3 | 20,000 / 41,000 | 1 | 30,000 / 30,000 |" in lines
    assert "| produce, 1 partition | 2 | 480,000 / 600,000 | - | - |" in lines


def test_no_machine_or_warm_up_table_without_their_figures() -> None:
    lines = markdown(comparison()).splitlines()
    assert not any(line.startswith("| case | Kafka broker cores") for line in lines)
    assert not any(line.startswith("| warm-up before round 1") for line in lines)
