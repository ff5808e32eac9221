"""Lumber's clients and the real Kafka clients, both ways, every codec: exact content and offsets.

* our producer, read by a confluent-kafka consumer (assign mode, explicit offsets) and by kafka-python's;
* confluent-kafka's and kafka-python's producers, read by our consumer.

Each record has its key (or none), value (or none), headers and an explicit timestamp, so that everything
the record batch carries is compared, in compressed batches for every codec.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from broker.client.producer.producer_batch import RecordMetadata
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import HOST, consumer, producer, read_records
from tests.support.broker_cluster import servers

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000
COUNT = 60

Expected = tuple[Any, ...]  # offset, timestamp, key, value, headers


def sample(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]:
    """Record ``i``: key, value, headers, timestamp; compressible, with nulls here and there."""
    key = None if i % 5 == 0 else b"key-%d" % (i % 7)
    value = None if i % 11 == 4 else (b"value %d " % i) * (1 + i % 9)
    headers: list[tuple[str, bytes | None]] = (
        [("trace", b"%08x" % (i * 2654435761 % 2**32))] if i % 3 else [("n", None), ("e", b"")]
    )
    return key, value, headers, BASE_TS + 17 * i


# ------------------------------------------------------------------------------------- ours -> theirs


def produce_ours(cluster: Any, topic: str, codec: str) -> list[Expected]:
    expected: list[Expected] = []
    with producer(cluster, compression_type=codec, linger_ms=50, acks="all") as p:
        futures = []
        for i in range(COUNT):
            key, value, headers, ts = sample(i)
            futures.append(p.send(topic, value, key, partition=0, headers=headers, timestamp_ms=ts))
        bulk = p.send_many(
            topic, [b"bulk %d" % i * 20 for i in range(COUNT)], key=b"k", partition=0, timestamp_ms=BASE_TS
        )
        metadata = [f.result(10) for f in futures]
        ranges = bulk.result(10)
    assert metadata == [RecordMetadata(topic, 0, i, sample(i)[3]) for i in range(COUNT)]
    assert next((r.base_offset, r.next_offset) for r in ranges)[0] == COUNT
    assert ranges[-1].next_offset == 2 * COUNT
    for i in range(COUNT):
        key, value, headers, ts = sample(i)
        expected.append((i, ts, key, value, [("host", HOST.encode()), *headers]))
    expected.extend(
        (COUNT + i, BASE_TS, b"k", b"bulk %d" % i * 20, [("host", HOST.encode())]) for i in range(COUNT)
    )
    return expected


@pytest.mark.parametrize("codec", CODECS)
def test_our_producer_read_by_confluent_kafka(broker_cluster: Any, codec: str) -> None:
    topic = f"ours-to-confluent-{codec}"
    broker_cluster.create_topic(topic, 1)
    expected = produce_ours(broker_cluster, topic, codec)
    reader = ConfluentConsumer(
        {
            "bootstrap.servers": ",".join(servers(broker_cluster)),
            "group.id": "interop-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        start = 7  # an explicit offset in the middle of a batch
        reader.assign([ConfluentTopicPartition(topic, 0, start)])
        got: list[Expected] = []
        deadline = time.monotonic() + 30
        while len(got) < len(expected) - start and time.monotonic() < deadline:
            for message in reader.consume(num_messages=500, timeout=1.0):
                assert message.error() is None, message.error()
                ts_type, ts = message.timestamp()
                assert ts_type == 1  # CreateTime
                got.append(
                    (message.offset(), ts, message.key(), message.value(), list(message.headers() or []))
                )
    finally:
        reader.close()
    assert got == expected[start:]


@pytest.mark.parametrize("codec", CODECS)
def test_our_producer_read_by_kafka_python(broker_cluster: Any, codec: str) -> None:
    topic = f"ours-to-kafka-python-{codec}"
    broker_cluster.create_topic(topic, 1)
    expected = produce_ours(broker_cluster, topic, codec)
    reader = kafka.KafkaConsumer(
        bootstrap_servers=servers(broker_cluster),
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=1000,
    )
    try:
        tp = kafka.TopicPartition(topic, 0)
        reader.assign([tp])
        reader.seek(tp, 3)
        got: list[Expected] = []
        deadline = time.monotonic() + 30
        while len(got) < len(expected) - 3 and time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=1000).values():
                got.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records)
    finally:
        reader.close()
    assert got == expected[3:]


# ------------------------------------------------------------------------------------- theirs -> ours


def read_ours(cluster: Any, topic: str, start: int) -> list[Expected]:
    tp = TopicPartition(topic, 0)
    with consumer(cluster, tp) as c:
        c.seek(tp, start)
        records = read_records(c, COUNT - start)
        for record in records:
            assert record.timestamp_type == 0
        return [(r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in records]


def kafka_python_sample(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]:
    """:func:`sample` as kafka-python's producer takes it: it refuses null header values (sent as b"null"
    here) and a record with neither key nor value (sent with an empty value)."""
    key, value, headers, ts = sample(i)
    if key is None and value is None:
        value = b""
    return key, value, [(k, b"null" if v is None else v) for k, v in headers], ts


def expected_theirs(start: int, make: Any = sample) -> list[Expected]:
    out: list[Expected] = []
    for i in range(start, COUNT):
        key, value, headers, ts = make(i)
        out.append((i, ts, key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_producer_read_by_ours(broker_cluster: Any, codec: str) -> None:
    topic = f"confluent-to-ours-{codec}"
    broker_cluster.create_topic(topic, 1)
    writer = ConfluentProducer(
        {
            "bootstrap.servers": ",".join(servers(broker_cluster)),
            "compression.type": codec,
            "linger.ms": 50,
            "acks": "all",
        }
    )
    offsets: list[int] = []

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        offsets.append(message.offset())

    for i in range(COUNT):
        key, value, headers, ts = sample(i)
        pairs: list[tuple[str, str | bytes | None]] = list(headers)
        writer.produce(
            topic, value=value, key=key, partition=0, timestamp=ts, headers=pairs, on_delivery=delivered
        )
    assert writer.flush(30) == 0
    assert offsets == list(range(COUNT))
    assert read_ours(broker_cluster, topic, 5) == expected_theirs(5)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_producer_read_by_ours(broker_cluster: Any, codec: str) -> None:
    topic = f"kafka-python-to-ours-{codec}"
    broker_cluster.create_topic(topic, 1)
    writer = kafka.KafkaProducer(
        bootstrap_servers=servers(broker_cluster),
        compression_type=None if codec == "none" else codec,
        linger_ms=50,
        acks="all",
    )
    try:
        futures = []
        for i in range(COUNT):
            key, value, headers, ts = kafka_python_sample(i)
            futures.append(
                writer.send(topic, value=value, key=key, headers=headers, partition=0, timestamp_ms=ts)
            )
        writer.flush(30)
        assert [f.get(10).offset for f in futures] == list(range(COUNT))
    finally:
        writer.close(10)
    assert read_ours(broker_cluster, topic, 0) == expected_theirs(0, kafka_python_sample)


def test_keys_land_where_confluent_kafka_puts_them(broker_cluster: Any) -> None:
    # librdkafka's murmur2_random partitioner is the Java client's choice for keyed records
    broker_cluster.create_topic("placement-confluent", 12)
    broker_cluster.create_topic("placement-ours", 12)
    keys = [b"user-%d" % i for i in range(120)]
    theirs: dict[bytes | None, int | None] = {}
    writer = ConfluentProducer(
        {"bootstrap.servers": ",".join(servers(broker_cluster)), "partitioner": "murmur2_random"}
    )
    for key in keys:
        writer.produce(
            "placement-confluent",
            b"v",
            key,
            on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()),
        )
    assert writer.flush(30) == 0
    with producer(broker_cluster) as p:
        futures = {key: p.send("placement-ours", b"v", key) for key in keys}
        ours: dict[bytes | None, int | None] = {key: f.result(10).partition for key, f in futures.items()}
    assert ours == theirs
