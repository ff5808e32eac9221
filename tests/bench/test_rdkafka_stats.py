"""bench/rdkafka_stats.py: a real confluent-kafka producer's statistics over one phase, against a real
Lumber broker (bench/partition_spread.py's producer), counted exactly; and the phase's start at the mark."""

from __future__ import annotations

import json

import pytest

from bench.partition_spread import lumber_send, rdkafka_send
from bench.rdkafka_stats import RdkafkaStats
from tests.support.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

RECORDS = 2_000


def test_a_phase_of_librdkafka_counted_by_partition_and_request(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("stats-4", 4)
    address = broker_cluster.bootstrap_servers
    values = [b"%04d" % i + b"v" * 96 for i in range(RECORDS)]
    rdkafka_send(address, "stats-4", values[:100], "in turn")(None)  # a phase before: not counted below
    stats = rdkafka_send(address, "stats-4", values, "in turn")(None)
    # 50 records a partition in turn: 500 to each, every one counted once, none of the earlier phase's
    # (a new producer, so its counters start at 0; the mark is its first emission, before any record)
    assert stats.records_by_partition() == {0: 500, 1: 500, 2: 500, 3: 500}
    summary = stats.summary()
    requests = stats.counter("Produce")
    assert requests >= RECORDS // 50  # at most 50 records a message set (batch.num.messages)
    assert summary["records_per_request"] == RECORDS / requests
    # librdkafka writes one partition's message set per Produce request
    assert stats.window("batchcnt").count == requests
    assert summary["sets_per_request"] == 1.0
    assert stats.window("batchcnt").total == RECORDS
    # every request of the phase answered once: its Produce requests, and those of the connection to the
    # broker when it opened after the mark (ApiVersions, Metadata: a loaded machine's CI run counted 2)
    assert stats.window("rtt").count == stats.counter("tx")
    # Lumber's own producer to the same topic leaves the statistics object of librdkafka's untouched
    lumber_send(address, "stats-4", values[:200], 4)(None)
    assert stats.records_by_partition() == {0: 500, 1: 500, 2: 500, 3: 500}


def test_the_phase_starts_at_the_mark() -> None:
    stats = RdkafkaStats("t")

    def emission(tx: int, produce: int, txmsgs: int, batches: int) -> str:
        broker = {"nodeid": 1, "tx": tx, "txbytes": tx * 100, "wakeups": 0, "req": {"Produce": produce}}
        broker |= {"rtt": {"cnt": batches, "sum": batches * 2000}, "waitresp_cnt": batches, "outbuf_cnt": 0}
        bootstrap = {"nodeid": -1, "tx": 1000, "req": {"Produce": 1000}}  # never counted
        # "-1": librdkafka's unassigned partition, never counted
        partitions = {"0": {"txmsgs": txmsgs}, "-1": {"txmsgs": 0}}
        topic = {"batchcnt": {"cnt": batches, "sum": batches * 50}, "partitions": partitions}
        return json.dumps({"brokers": {"a": broker, "b": bootstrap}, "topics": {"t": topic}})

    stats.callback(emission(tx=7, produce=5, txmsgs=250, batches=5))
    stats.mark()
    stats.callback(emission(tx=10, produce=8, txmsgs=400, batches=3))
    stats.callback(emission(tx=11, produce=9, txmsgs=450, batches=1))
    assert stats.counter("Produce") == 4
    assert stats.counter("tx") == 4
    assert stats.records_by_partition() == {0: 200}
    summary = stats.summary()
    assert summary["records_per_request"] == 50.0
    assert summary["sets_per_request"] == 1.0
    assert summary["rtt_ms"] == 2.0
    assert summary["in_flight"] == 2.0
    assert summary["bytes_per_request"] == 100.0


def test_no_emission_before_the_phase_is_an_error() -> None:
    with pytest.raises(ValueError, match="t: no statistics were emitted before the phase"):
        RdkafkaStats("t").mark()
