"""Produce as real clients see it: acks=all answered in milliseconds (confluent-kafka, kcat), fsync-before-ack
as group commit, both expose modes, and poison batches refused with nothing appended."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, Message, Producer

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.network.connection import BrokerConnection
from broker.protocol import ErrorCode
from broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.topic_partition import TopicPartition
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, wait_for
from tests.support.poison_batches import (
    gzip_flag_on_plain_records,
    random_records_batch,
    record_count_mismatch,
    record_length_past_the_end,
)

KCAT = "/usr/bin/kcat"


def connect(broker: BrokerProcess) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", broker.port, node_id=broker.broker_id)
    conn.connect()
    return conn


def produce_raw(conn: BrokerConnection, topic: str, records: bytes, acks: int = -1) -> Any:
    body = ProduceRequest(
        acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(topic, [PartitionProduceData(0, records)])]
    )
    return conn.request(body).responses[0].partition_responses[0]


def latest_offset(conn: BrokerConnection, topic: str, partition: int = 0) -> int:
    response = conn.request(
        ListOffsetsRequest(topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(partition, timestamp=-1)])])
    )
    found = response.topics[0].partitions[0]
    assert found.error_code == 0
    offset: int = found.offset
    return offset


def paced_produce(
    servers: str, topic: str, rate: int, seconds: float, **config: Any
) -> list[tuple[int, float]]:
    """Produce ``rate`` msg/s for ``seconds`` with librdkafka's defaults (acks=all) plus ``config``;
    returns (offset, seconds from produce() to the broker's acknowledgement) per message, failing on any
    error. The latency is librdkafka's own (``Message.latency()``, taken on its thread when the answer
    arrives), so that the test process being descheduled on a busy machine does not count."""
    producer = Producer({"bootstrap.servers": servers, **config})
    reports: list[tuple[int, float]] = []
    errors: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        index = int(msg.key() or b"-1")
        latency = msg.latency()
        if err is not None or latency is None:
            errors.append(f"message {index}: {err}")
            return
        reports.append((msg.offset() or 0, latency))

    total = int(rate * seconds)
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        while (now := time.monotonic()) < due:
            producer.poll(min(due - now, 0.005))
        producer.produce(topic, key=b"%d" % i, value=b"v" * 100, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    assert len(reports) == total
    return reports


# ------------------------------------------------------------------------------------------ acks=all


def test_default_confluent_producer_is_answered_at_once(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """librdkafka's default (acks=all) at 1,000 msg/s for 10 s, against a broker without flush_on_ack:
    every delivery report within 5 s, whatever the machine's load. The flush timer is pushed out to 60 s,
    so a request held by it (or by a lost wake-up: the 69 s p50 this test was written for) would wait far
    longer than that, while a loaded CI machine's stalls (550 ms under a full test run) stay far below."""
    broker_cluster = start_cluster(1, flush_on_ack=False, flush_ms=60_000, flush_messages=10**9)
    broker_cluster.create_topic("acks-all", 1)
    reports = paced_produce(broker_cluster.bootstrap_servers, "acks-all", 1000, 10)
    assert sorted(offset for offset, _ in reports) == list(range(10_000))
    slowest = max(latency for _, latency in reports)
    assert slowest < 5.0, f"slowest delivery report after {slowest * 1000:.1f} ms"


def test_flush_on_ack_answers_only_flushed_records_by_group_commit(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """With flush_on_ack and flushes by the policy pushed out of reach (60 s, 10^9 messages), only the group
    commit can flush: the high watermark (expose = flushed: the flushed offset) passes every acknowledged
    offset as soon as it is acknowledged."""
    cluster = start_cluster(1, flush_on_ack=True, flush_ms=60_000, flush_messages=10**9, expose="flushed")
    cluster.create_topic("synced", 1)
    conn = connect(cluster.brokers[0])
    try:
        for i in range(20):
            answer = produce_raw(conn, "synced", record_count_mismatch(3, 3))
            assert (answer.error_code, answer.base_offset) == (0, i * 3)
            assert latest_offset(conn, "synced") == (i + 1) * 3  # flushed before the answer
        # 40 requests pipelined on one connection: served behind the one waiting for its fsync, answered
        # in order, each once flushed
        pending = [
            conn.send(
                ProduceRequest(
                    acks=-1,
                    timeout_ms=5000,
                    topic_data=[
                        TopicProduceData("synced", [PartitionProduceData(0, record_count_mismatch(3, 3))])
                    ],
                )
            )
            for _ in range(40)
        ]
        answers = [p.wait(30).responses[0].partition_responses[0] for p in pending]
        assert [(a.error_code, a.base_offset) for a in answers] == [(0, 60 + i * 3) for i in range(40)]
        assert latest_offset(conn, "synced") == 180
        # librdkafka's defaults pipeline requests: each waits for a group commit, those behind it are
        # appended meanwhile and answered by the same or the next fsync
        reports = paced_produce(cluster.bootstrap_servers, "synced", 1000, 3)
        assert sorted(offset for offset, _ in reports) == list(range(180, 3180))
        assert latest_offset(conn, "synced") == 3180
        slowest = max(latency for _, latency in reports)
        # an fsync per answer (three files: log and indexes) on a shared, loaded disk: bounded by seconds,
        # far below the 60 s flush timer a request that missed its group commit would wait for
        assert slowest < 5.0, f"slowest delivery report after {slowest * 1000:.1f} ms"
    finally:
        conn.close()
    assert "log flusher" not in cluster.brokers[0].log()  # no flusher failure logged


def test_kcat_acks_all_in_batches_of_seven_writes_every_line(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    broker_cluster = start_cluster(1, flush_on_ack=False)
    broker_cluster.create_topic("kcat-all", 1)
    lines = "".join(f"line-{i}\n" for i in range(700))
    subprocess.run(
        [
            KCAT,
            "-P",
            "-b",
            broker_cluster.bootstrap_servers,
            "-t",
            "kcat-all",
            "-p",
            "0",
            "-X",
            "acks=all",
            "-X",
            "batch.num.messages=7",
        ],
        input=lines.encode(),
        check=True,
        timeout=60,
        capture_output=True,
    )
    assert kcat_read(broker_cluster.bootstrap_servers, "kcat-all") == [f"line-{i}" for i in range(700)]


def kcat_read(servers: str, topic: str) -> list[str]:
    done = subprocess.run(
        [KCAT, "-C", "-b", servers, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\\n"],
        check=True,
        timeout=60,
        capture_output=True,
    )
    return done.stdout.decode().splitlines()


@pytest.mark.parametrize("expose", ["flushed", "appended"])
def test_confluent_producer_and_consumer_in_both_expose_modes(
    start_cluster: Callable[..., BrokerCluster], expose: str
) -> None:
    """expose only holds back consumers: the producer is answered at once either way, and the consumer
    reads every record (once flushed, with expose = flushed)."""
    cluster = start_cluster(1, expose=expose, flush_ms=3000, flush_on_ack=False)
    cluster.create_topic("modes", 1)
    reports = paced_produce(cluster.bootstrap_servers, "modes", 500, 1)
    # a producer held back by the flush (every 3 s here) would wait seconds
    assert max(latency for _, latency in reports) < 1.0
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "g",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([_kafka_partition("modes")])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 500 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            got.append(msg.offset() or 0)
        assert got == list(range(500))
    finally:
        consumer.close()


def _kafka_partition(topic: str) -> Any:
    from confluent_kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

    return KafkaTopicPartition(topic, 0, 0)


# ------------------------------------------------------------------------------------------ poison


POISON = {
    "random record bytes": (random_records_batch(7), None),
    "gzip flag on a plain payload": (gzip_flag_on_plain_records(), ErrorCode.CORRUPT_MESSAGE),
    "record length past the batch end": (record_length_past_the_end(), ErrorCode.CORRUPT_MESSAGE),
    "record count above the records": (record_count_mismatch(3, 5), ErrorCode.INVALID_RECORD),
    "record count below the records": (record_count_mismatch(5, 3), ErrorCode.INVALID_RECORD),
}


def test_poison_batches_are_refused_and_the_partition_stays_readable(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("poison", 1)
    servers = broker_cluster.bootstrap_servers
    conn = connect(broker_cluster.brokers[0])
    try:
        good = record_count_mismatch(4, 4)  # four well-formed records
        assert produce_raw(conn, "poison", good).base_offset == 0
        # exposed once flushed (expose = flushed, flush_ms 20); from then on the high watermark is the log end
        wait_for(lambda: latest_offset(conn, "poison") == 4, 10, "the first batch to be exposed")
        for name, (data, code) in POISON.items():
            for acks in (1, -1):
                answer = produce_raw(conn, "poison", data, acks=acks)
                expected = {ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD} if code is None else {code}
                assert answer.error_code in expected, name
                assert answer.base_offset == -1, name
                assert "poison-0" in (answer.error_message or ""), name
            time.sleep(0.05)  # past a flush (flush_ms 20): anything appended would be exposed by now
            assert latest_offset(conn, "poison") == 4, name  # nothing appended
        assert produce_raw(conn, "poison", good).base_offset == 4
    finally:
        conn.close()
    assert kcat_read(servers, "poison") == [f"value-{i % 4}" for i in range(8)]
    config = ConsumerConfig(bootstrap_servers=servers.split(","), auto_offset_reset="earliest")
    with Consumer(config, partitions=[TopicPartition("poison", 0)]) as consumer:
        values = [r.value for r in consumer.messages(timeout_ms=2000)]
    assert values == [f"value-{i % 4}".encode() for i in range(8)]
