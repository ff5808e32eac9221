"""bench/paper_kafka.py: a tiny run of the Kafka comparison against a real Apache Kafka broker and a real
Lumber broker, with the warm-up of every measured shape and the memory phase before the rounds and the
connections phases in them; every phase counted exactly (what was acknowledged is what the high watermarks
add up to and what was read, a consume phase's passes over its topic included), with the broker's cores
and the machine's idle share beside its rate; and the shapes the warm-up takes for a full run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.paper_kafka import (
    KAFKA,
    LUMBER,
    BrokerUnderTest,
    KafkaBench,
    benchmark_kafka,
    lumber_create_topic,
    partitions_case,
    run_kafka_comparison,
)
from bench.paper_kafka_clients import ConfluentProducer, admin_create_topic
from bench.paper_kafka_connections import ConnectionsPhase, connections_case
from bench.paper_kafka_memory import MemoryPhase, memory_case
from bench.paper_kafka_warmup import WarmUpShape
from tests.support.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

RECORDS = 600


def test_a_kafka_topic_is_created_once_every_partition_has_its_log(tmp_path: Path) -> None:
    # Kafka names the leaders before its broker has made the logs (for 500 partitions, a second or more
    # before the last): the comparison's phases start only once every partition's log folder is there
    kafka = benchmark_kafka(tmp_path / "kafka")
    kafka.start()
    try:
        [node] = kafka.nodes
        admin_create_topic(kafka.bootstrap, node.data_dir)("many", 500)
        made = {entry.name for entry in node.data_dir.iterdir() if entry.name.startswith("many-")}
        assert made == {f"many-{p}" for p in range(500)}
    finally:
        kafka.stop()


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
        warm_up_s=0.0,
        consume_records=2 * RECORDS,
        produce_records=3 * RECORDS - 1,
    )
    assert comparison.failures == []
    assert comparison.produce_passes == 3
    # the partitions' produce phases sent the records three times (the fewest passes that send
    # produce_records), and their consume phases read those once (more than consume_records); the memory
    # and connections phases' once; every phase's line names the records it timed
    for broker in (KAFKA, LUMBER):
        for partitions in (1, 4):
            (line,) = [
                line
                for line in said
                if line.startswith(f"round 1 {broker}") and partitions_case("consume", partitions) in line
            ]
            assert f"({3 * RECORDS:,} records in " in line, line
            (line,) = [
                line
                for line in said
                if line.startswith(f"round 1 {broker}") and partitions_case("produce", partitions) in line
            ]
            assert f"({3 * RECORDS:,} records in " in line, line
    # the warm-up took each partitions shape the rounds measure, one pass each (no time asked for), and
    # read back every record it produced to each
    assert list(comparison.warm_up) == [partitions_case("produce", 1), partitions_case("produce", 4)]
    for by_broker in comparison.warm_up.values():
        assert sorted(by_broker) == sorted([KAFKA, LUMBER])
        for rates in by_broker.values():
            assert len(rates) == 1
            assert rates[0] > 0
    for broker in (KAFKA, LUMBER):
        for partitions in (1, 4):
            assert any(
                line.startswith(f"warm-up {broker}")
                and partitions_case("produce", partitions) in line
                and f"1 passes of {RECORDS:,}" in line
                and line.endswith(f"read back {RECORDS:,}")
                for line in said
            ), (broker, partitions)
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
            # the broker's cores over the same phase: its CPU seconds over the wall seconds, so CPU per
            # record times records per second (read in 10 ms ticks: a phase of 600 records may show a
            # few "cores" of one tick, so no upper bound here), and the machine's idle share
            assert len(result.broker_cores.values) == 1, (case, broker)
            assert result.broker_cores.values[0] == pytest.approx(
                result.cpu_per_million.values[0] * result.rate.values[0] / 1_000_000
            )
            assert len(result.idle.values) == 1, (case, broker)
            assert 0.0 <= result.idle.values[0] <= 1.0
            # the clients' CPU over the same phase: this process's threads did the producing or consuming
            assert len(result.client_cpu_per_million.values) == 1, (case, broker)
            assert result.client_cpu_per_million.values[0] > 0, (case, broker)
    assert comparison.connections == [1, 3]
    assert set(comparison.memory) == {KAFKA, LUMBER}
    for reading in comparison.memory.values():
        assert reading["partitions"] == 20
        assert 10 < reading["before_mib"] < 4096
        assert 10 < reading["after_mib"] < 4096
    assert any(line.startswith("memory Lumber") for line in said)


def test_warm_up_takes_every_produce_shape_the_rounds_measure(tmp_path: Path) -> None:
    bench = KafkaBench([], 200_000, 3, [1, 4, 10, 100], tmp_path, print)
    assert bench.warm_up_shapes() == [
        WarmUpShape("produce, batch 1, acks=1", 1, "1", 1, 0, consume=False),
        WarmUpShape("produce, batch 1, acks=all", 1, "all", 1, 0, consume=False),
        WarmUpShape("produce, batch 50, acks=1", 50, "1", 1, 0, consume=True),
        WarmUpShape("produce, batch 50, acks=all", 50, "all", 1, 0, consume=False),
        WarmUpShape(partitions_case("produce", 1), 50, "1", 1, None, consume=True),
        WarmUpShape(partitions_case("produce", 4), 50, "1", 4, None, consume=True),
        WarmUpShape(partitions_case("produce", 10), 50, "1", 10, None, consume=True),
        WarmUpShape(partitions_case("produce", 100), 50, "1", 100, None, consume=True),
    ]


def test_a_consume_phase_of_three_passes_times_three_consumers_reading_every_record(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(1)
    lumber = cluster.broker(0)
    assert lumber.popen is not None
    broker = BrokerUnderTest(LUMBER, lumber.address, (lumber.popen.pid,), lumber_create_topic(cluster, 0))
    broker.create_topic("passes", 1)
    ConfluentProducer(broker.bootstrap, "passes", 50, "1").send([b"%05d" % i for i in range(RECORDS)], 0)
    said: list[str] = []
    bench = KafkaBench([broker], RECORDS, 1, [1], tmp_path, said.append, consume_records=3 * RECORDS - 1)
    assert bench.consume_passes == 3  # the fewest passes that read at least consume_records
    assert bench.consume("consume", broker, 1, "passes", 1, RECORDS, bench.consume_passes)
    assert bench.comparison.failures == []
    # one phase of 1,800 records: each consumer read the topic's 600 from offset 0 (one that read fewer
    # times out, one that read more raises), and the rate counts all three
    (line,) = said
    assert f"({3 * RECORDS:,} records in " in line, line
    (rate,) = bench.comparison.cases["consume"][LUMBER].rate.values
    assert rate > 0
