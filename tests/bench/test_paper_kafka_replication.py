"""bench/paper_kafka_replication.py: a tiny run of three Apache Kafka nodes against three Lumber brokers, RF 1
acks=1 and RF 3 acks=all, every phase counted exactly; the brokers it started are stopped after."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.paper_kafka import KAFKA, LUMBER, KafkaComparison
from bench.paper_kafka_replication import BASELINE, REPLICATED, replication_case, run_replication
from tests.support.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop, pytest.mark.slow]

RECORDS = 900


def test_rf3_acks_all_and_rf1_acks_1_on_three_brokers_each(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(0)
    comparison = KafkaComparison(RECORDS, 1, [])
    said: list[str] = []
    run_replication(cluster, tmp_path, comparison, said.append)
    assert comparison.failures == []
    assert comparison.replication
    (base_rf, base_acks), (repl_rf, repl_acks) = BASELINE, REPLICATED
    expected = [
        replication_case("produce", base_rf, base_acks),
        replication_case("produce", repl_rf, repl_acks),
        replication_case("consume", base_rf),
        replication_case("consume", repl_rf),
    ]
    # every case once on each cluster, recorded only after the high watermarks of its 3 partitions added up
    # to the 900 records acknowledged and the consumer read exactly 900
    assert sorted(comparison.cases) == sorted(expected)
    for case in expected:
        for system in (KAFKA, LUMBER):
            assert len(comparison.cases[case][system].rate.values) == 1, (case, system)
    # three Lumber brokers were added for the run, and all of them are stopped again
    assert len(cluster.brokers) == 3
    assert not any(broker.running for broker in cluster.brokers)
    assert "replication: 3 Kafka nodes" in comparison.notes[-1]
