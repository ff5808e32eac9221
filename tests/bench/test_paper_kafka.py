"""bench/paper_kafka.py: a tiny run of the Kafka comparison against a real Apache Kafka broker and a real
Lumber broker, with the memory phase before the rounds and the connections phases in them; every phase
counted exactly (what was acknowledged is what the high watermarks add up to and what was read)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.paper_kafka import KAFKA, LUMBER, partitions_case, run_kafka_comparison
from bench.paper_kafka_connections import ConnectionsPhase, connections_case
from bench.paper_kafka_memory import MemoryPhase, memory_case
from tests.support.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

RECORDS = 600


def test_memory_partitions_and_connections_counted_on_both_brokers(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    said: list[str] = []
    comparison = run_kafka_comparison(
        start_cluster(0),
        tmp_path,
        RECORDS,
        1,
        [1, 4],
        said.append,
        before_rounds=[MemoryPhase(partitions=20)],
        each_round=[ConnectionsPhase([1, 3])],
        standard_cases=False,
    )
    assert comparison.failures == []
    expected = [
        memory_case("produce", 20),
        memory_case("consume", 20),
        partitions_case("produce", 1),
        partitions_case("consume", 1),
        partitions_case("produce", 4),
        partitions_case("consume", 4),
        connections_case("produce", 1),
        connections_case("consume", 1),
        connections_case("produce", 3),
        connections_case("consume", 3),
    ]
    # each case ran once on each broker, and only after its counts were checked (a phase whose high
    # watermarks or reads did not add up to RECORDS is a failure, not a rate)
    assert sorted(comparison.cases) == sorted(expected)
    for case in expected:
        for broker in (KAFKA, LUMBER):
            result = comparison.cases[case][broker]
            assert len(result.rate.values) == 1, (case, broker)
            assert result.rate.values[0] > 0
    assert comparison.connections == [1, 3]
    assert set(comparison.memory) == {KAFKA, LUMBER}
    for reading in comparison.memory.values():
        assert reading["partitions"] == 20
        assert 10 < reading["before_mib"] < 4096
        assert 10 < reading["after_mib"] < 4096
    assert any(line.startswith("memory Lumber") for line in said)
