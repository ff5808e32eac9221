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
    result.failures.append("round 2 Lumber kcat consume: RuntimeError: kcat exited 1")
    return result


def test_cases_with_medians_ratios_and_goals() -> None:
    lines = markdown(comparison()).splitlines()
    assert lines[0] == (
        "200,000 records of 100 bytes, 3 rounds, median [min - max]; "
        "broker CPU in seconds per million records"
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
    assert "| produce, 1 partition | 200,000 | 1.00x | 400,000 | 1.00x | 2.00x | 5.00 | 3.00 |" in lines
    assert "| produce, 4 partitions | 100,000 | 0.50x | 200,000 | 0.50x | 2.00x | 9.00 | 3.00 |" in lines
    assert "| consume, 1 partition | - | - | - | - | - | - | - |" in lines
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
        "| 2.00 [2.00 - 2.00] | 2.00 |"
    ) in lines
    assert (
        "| produce, 10 connections | 100,000 [50,000 - 150,000] | 0.67x | 120,000 | 1.20x | 1.20x "
        "| 2.00 [2.00 - 2.00] | 2.00 |"
    ) in lines
    assert "| consume, 10 connections | - | - | - | - | - | - | - |" in lines
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
