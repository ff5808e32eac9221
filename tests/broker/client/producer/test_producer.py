"""The producer against real broker processes (the ``broker_cluster`` fixture) and a real ZooKeeper."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest

from broker.client.errors import (
    BrokerResponseError,
    BufferExhaustedError,
    ProducerClosedError,
    ProducerError,
    RecordTooLargeError,
    UnknownPartitionError,
    UnknownTopicError,
)
from broker.client.producer.partitioner import partition_for_key
from broker.client.producer.producer import Producer
from broker.client.producer.producer_batch import DeliveryRange, RecordMetadata
from broker.client.producer.producer_config import ProducerConfig
from broker.protocol.error_code import ErrorCode
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_encoder import record_bound
from broker.record.record_header import encode_headers
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import HOST, consumer, producer, read_batches, read_records

HOST_HEADER = ("host", HOST.encode())


def test_send_delivers_exact_content_offsets_and_the_host_header(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    base_ts = 1_700_000_000_000
    with producer(broker_cluster) as p:
        futures = [
            p.send(
                "events",
                f"value-{i}".encode(),
                f"key-{i}".encode(),
                headers=[("n", str(i).encode())],
                timestamp_ms=base_ts + i,
            )
            for i in range(20)
        ]
        before_ms = time.time_ns() // 1_000_000
        stamped = p.send("events", b"now", None)
        after_ms = time.time_ns() // 1_000_000
        p.flush()
        assert [f.result(0) for f in futures] == [
            RecordMetadata("events", 0, i, base_ts + i) for i in range(20)
        ]
        created = stamped.result(0)
        assert created.offset == 20
        assert before_ms <= created.timestamp_ms <= after_ms
    with consumer(broker_cluster, TopicPartition("events", 0)) as c:
        records = read_records(c, 21)
    assert [(r.offset, r.key, r.value, r.timestamp_ms, r.headers) for r in records[:20]] == [
        (i, f"key-{i}".encode(), f"value-{i}".encode(), base_ts + i, (HOST_HEADER, ("n", str(i).encode())))
        for i in range(20)
    ]
    last = records[20]
    assert (last.offset, last.key, last.value, last.timestamp_ms) == (20, None, b"now", created.timestamp_ms)
    assert last.headers == (HOST_HEADER,)
    assert last.header("host") == HOST.encode()


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker_cluster: Any, acks: str) -> None:
    broker_cluster.create_topic("acks", 1)
    values = [b"%05d" % i for i in range(300)]
    with producer(broker_cluster, acks=acks) as p:
        delivery = p.send_many("acks", values)
        single = p.send("acks", b"last")
        ranges = delivery.result(10)
        metadata = single.result(10)
    assert sum(r.record_count for r in ranges) == 300
    if acks == "0":  # no response: offsets are unknown
        assert {r.base_offset for r in ranges} == {-1}
        assert metadata.offset == -1
    else:
        assert next((r.base_offset, r.next_offset) for r in ranges)[0] == 0
        assert ranges[-1].next_offset == 300
        assert metadata.offset == 300
    with consumer(broker_cluster, TopicPartition("acks", 0)) as c:
        records = read_records(c, 301)
    assert [r.value for r in records] == [*values, b"last"]
    assert [r.offset for r in records] == list(range(301))


def test_acks_zero_writes_queued_batches_as_many_requests_in_order(broker_cluster: Any) -> None:
    """With acks=0 the sender writes every queued batch at once, one request per batch and partition:
    each partition gets exactly its records, one per batch, in the order sent."""
    broker_cluster.create_topic("unanswered", 3)
    value = b"z" * 40
    bound = record_bound(len(value) + 6, 1, len(encode_headers([HOST_HEADER])))
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    with producer(broker_cluster, acks="0", batch_size=HEADER_SIZE + bound, linger_ms=60_000) as p:
        for i in range(1500):
            partition = (i * 7) % 3 if i % 11 else 2
            record = b"%06d" % i + value
            p.send("unanswered", record, partition=partition)
            sent[partition].append(record)
        p.flush()
    for partition, records in sent.items():
        with consumer(broker_cluster, TopicPartition("unanswered", partition)) as c:
            batches = read_batches(c, len(records))
        assert [b.record_count for b in batches] == [1] * len(records)
        assert [b.base_offset for b in batches] == list(range(len(records)))
        assert [v for b in batches for v in b.values().values] == records


def test_batches_close_at_batch_size(broker_cluster: Any) -> None:
    broker_cluster.create_topic("sized", 1)
    value = b"x" * 100
    bound = record_bound(len(value), 1, len(encode_headers([HOST_HEADER])))
    with producer(broker_cluster, batch_size=HEADER_SIZE + 3 * bound, linger_ms=60_000) as p:
        futures = [p.send("sized", value) for _ in range(10)]
        p.flush()
        assert [f.result(0).offset for f in futures] == list(range(10))
    with consumer(broker_cluster, TopicPartition("sized", 0)) as c:
        batches = read_batches(c, 10)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 2), (3, 5), (6, 8), (9, 9)]


def test_send_many_fills_batches_to_the_same_bound(broker_cluster: Any) -> None:
    broker_cluster.create_topic("sized-many", 1)
    value = b"y" * 60
    bound = record_bound(len(value), 1, len(encode_headers([HOST_HEADER])))
    with producer(broker_cluster, batch_size=HEADER_SIZE + 4 * bound, linger_ms=60_000) as p:
        delivery = p.send_many("sized-many", [value] * 10, partition=0)
        p.flush()  # the last batch is not full: send it without waiting for the linger
        ranges = delivery.result(10)
    assert [(r.base_offset, r.record_count) for r in ranges] == [(0, 4), (4, 4), (8, 2)]
    with consumer(broker_cluster, TopicPartition("sized-many", 0)) as c:
        batches = read_batches(c, 10)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 3), (4, 7), (8, 9)]


def test_linger_holds_a_batch_until_it_expires(broker_cluster: Any) -> None:
    broker_cluster.create_topic("linger", 1)
    with producer(broker_cluster, linger_ms=600) as p:
        p.partitions_for("linger")  # metadata first, so that only the linger is timed
        started = time.monotonic()
        first = p.send("linger", b"a")
        second = p.send("linger", b"b")
        time.sleep(0.2)
        assert not first.done()
        assert not second.done()
        assert second.result(10).offset == 1
        waited = time.monotonic() - started
        assert waited >= 0.55
        third = p.send("linger", b"c")
        p.flush()  # sends at once, without waiting for the linger
        assert third.result(0).offset == 2
        assert time.monotonic() - started < waited + 0.5
    with consumer(broker_cluster, TopicPartition("linger", 0)) as c:
        batches = read_batches(c, 3)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 1), (2, 2)]


def test_records_without_a_key_stick_to_a_partition_per_batch(broker_cluster: Any) -> None:
    broker_cluster.create_topic("sticky", 3)
    value = b"z" * 50
    bound = record_bound(3 + len(value), 1, len(encode_headers([HOST_HEADER])))  # b"%03d" + value
    with producer(broker_cluster, batch_size=HEADER_SIZE + 5 * bound, linger_ms=60_000) as p:
        delivery = p.send_many("sticky", [b"%03d" % i + value for i in range(40)])
        p.flush()  # the last batch is not closed until a record does not fit: send it now
        ranges = delivery.result(10)
    assert [r.record_count for r in ranges] == [5] * 8
    assert all(a.partition != b.partition for a, b in itertools.pairwise(ranges))
    next_offsets: dict[int, int] = {}
    for r in ranges:  # each partition's ranges follow each other without gaps
        assert r.base_offset == next_offsets.get(r.partition, 0)
        next_offsets[r.partition] = r.next_offset
    with consumer(broker_cluster, *(TopicPartition("sticky", p) for p in range(3))) as c:
        records = read_records(c, 40)
    where = {r.value[:3]: (r.partition, r.offset) for r in records if r.value is not None}
    expected = {}
    index = 0
    for r in ranges:
        for k in range(r.record_count):
            expected[b"%03d" % index] = (r.partition, r.base_offset + k)
            index += 1
    assert where == expected


def test_keyed_records_go_to_the_java_partition(broker_cluster: Any) -> None:
    broker_cluster.create_topic("keyed", 12)
    keys = [f"user-{i}".encode() for i in range(200)]
    with producer(broker_cluster) as p:
        futures = [p.send("keyed", b"v", key) for key in keys]
        p.flush()
        partitions = [f.result(0).partition for f in futures]
    assert partitions == [partition_for_key(key, 12) for key in keys]
    assert len(set(partitions)) == 12


def test_backpressure_blocks_then_raises_and_close_loses_nothing(broker_cluster: Any) -> None:
    broker_cluster.create_topic("pressure", 1)
    value = b"p" * 1000
    p = producer(broker_cluster, buffer_memory=16 * 1024, max_block_ms=500, retry_backoff_ms=50)
    p.partitions_for("pressure")
    broker_cluster.brokers[0].kill()  # nothing can be acknowledged now
    accepted = [p.send("pressure", value) for _ in range(15)]  # 15 records fit in 16 KiB
    started = time.monotonic()
    with pytest.raises(BufferExhaustedError, match=r"buffer_memory=16384 .* max_block_ms=500"):
        p.send("pressure", value)
    blocked_s = time.monotonic() - started
    assert 0.45 <= blocked_s < 5
    assert not any(f.done() for f in accepted)
    broker_cluster.brokers[0].restart()
    p.close()  # delivers every record it accepted
    assert [f.result(0).offset for f in accepted] == list(range(len(accepted)))
    with consumer(broker_cluster, TopicPartition("pressure", 0)) as c:
        assert len(read_records(c, len(accepted))) == len(accepted)


def test_close_delivers_everything_accepted(broker_cluster: Any) -> None:
    broker_cluster.create_topic("closing", 2)
    p = producer(broker_cluster, linger_ms=60_000, batch_size=1 << 20)
    singles = [p.send("closing", b"s%d" % i, partition=i % 2) for i in range(500)]
    bulk = p.send_many("closing", [b"b%d" % i for i in range(2000)], partition=1)
    p.close()
    assert all(f.done() for f in singles)
    assert sorted(f.result(0).offset for f in singles if f.result(0).partition == 0) == list(range(250))
    assert sum(r.record_count for r in bulk.result(0)) == 2000
    with pytest.raises(ProducerClosedError):
        p.send("closing", b"late")
    with consumer(broker_cluster, TopicPartition("closing", 0), TopicPartition("closing", 1)) as c:
        assert len(read_records(c, 2500)) == 2500


def test_delivery_errors_reach_the_caller(broker_cluster: Any) -> None:
    broker_cluster.create_topic("errors", 2)
    seen: list[tuple[Any, BaseException | None]] = []
    with producer(broker_cluster, max_request_size=4 << 20, batch_size=4 << 20) as p:
        # larger than the broker's max_message_bytes (1 MiB + 12): the broker refuses the batch
        too_big = p.send(
            "errors", b"x" * (2 << 20), partition=0, on_delivery=lambda md, err: seen.append((md, err))
        )
        fine = p.send("errors", b"fine", partition=1)
        p.flush()
        error = too_big.exception(0)
        assert isinstance(error, BrokerResponseError)
        assert error.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert "MESSAGE_TOO_LARGE" in str(error)
        assert f"errors-{too_big.exception(0).partition}" in str(error)  # type: ignore[union-attr]
        assert seen == [(None, error)]
        assert fine.result(0).offset == 0
        # refused before anything is sent
        with pytest.raises(RecordTooLargeError, match=r"max_request_size is 4194304"):
            p.send("errors", b"y" * (5 << 20))
        with pytest.raises(
            UnknownPartitionError, match=r"topic 'errors' has partitions 0-1, there is no partition 2"
        ):
            p.send("errors", b"v", partition=2)
        with pytest.raises(TypeError, match=r"value must be bytes .* got str"):
            p.send("errors", "text")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"value #1 is str"):
            p.send_many("errors", [b"ok", "text"])  # type: ignore[list-item]


def test_unknown_topic_with_auto_create_off(broker_cluster: Any) -> None:
    with producer(broker_cluster, allow_auto_topic_creation=False, max_block_ms=600) as p:
        started = time.monotonic()
        with pytest.raises(
            UnknownTopicError, match=r"'nowhere' .* after 600 ms: .*UNKNOWN_TOPIC_OR_PARTITION"
        ):
            p.send("nowhere", b"v")
        assert time.monotonic() - started >= 0.55
        with pytest.raises(UnknownTopicError):
            p.send_many("nowhere", [b"v"])


def test_producer_learns_the_cluster_from_zookeeper(broker_cluster: Any) -> None:
    broker_cluster.create_topic("zk-learnt", 3)
    config = ProducerConfig(host_name=HOST, linger_ms=0)
    with Producer(config, zookeeper_connect=broker_cluster.zk_connect) as p:
        ranges = p.send_many("zk-learnt", [b"a", b"b", b"c"], partition=2).result(10)
    assert [(r.partition, r.base_offset, r.record_count) for r in ranges] == [(2, 0, 3)]


def test_concurrent_senders_lose_nothing(broker_cluster: Any) -> None:
    broker_cluster.create_topic("threads", 4)
    with producer(broker_cluster, linger_ms=2, batch_size=4096) as p:

        def work(n: int) -> None:
            for i in range(500):
                p.send("threads", b"%d-%d" % (n, i), key=b"%d" % n)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.flush()
    with consumer(broker_cluster, *(TopicPartition("threads", i) for i in range(4))) as c:
        records = read_records(c, 2000)
    by_key: dict[bytes | None, list[bytes | None]] = {}
    for r in records:
        by_key.setdefault(r.key, []).append(r.value)
    assert dict(by_key.items()) == {b"%d" % n: [b"%d-%d" % (n, i) for i in range(500)] for n in range(4)}


def built_batch(first_ts: int, values: list[bytes], codec: CompressionType = CompressionType.NONE) -> bytes:
    """A record batch v2 made elsewhere: keys, headers and timestamps of its own, base offset 1000."""
    builder = RecordBatchBuilder(codec, base_offset=1000)
    for i, value in enumerate(values):
        builder.append(first_ts + i, b"k%d" % i, value, [("origin", b"elsewhere"), ("none", None)])
    return builder.build()


def test_send_batch_appends_the_bytes_as_they_are_after_the_records_sent_before(broker_cluster: Any) -> None:
    broker_cluster.create_topic("raw", 1)
    first = built_batch(1_700_000_000_000, [b"a-%d" % i for i in range(5)])
    second = built_batch(1_700_000_100_000, [b"b-%d" % i for i in range(300)], CompressionType.GZIP)
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []
    with producer(broker_cluster, linger_ms=10_000) as p:
        before = p.send("raw", b"plain", partition=0, timestamp_ms=5)  # lingers in its open batch
        one = p.send_batch("raw", 0, first, on_delivery=lambda m, e: delivered.append((m, e)))
        two = p.send_batch("raw", 0, memoryview(second))
        p.flush()
        assert before.result(0) == RecordMetadata("raw", 0, 0, 5)
        assert one.result(0) == [DeliveryRange("raw", 0, 1, 5)]
        assert two.result(0) == [DeliveryRange("raw", 0, 6, 300)]
        assert delivered == [(RecordMetadata("raw", 0, 1, 1_700_000_000_000), None)]
    with consumer(broker_cluster, TopicPartition("raw", 0)) as c:
        batches = read_batches(c, 306)
        c.seek(TopicPartition("raw", 0), 0)
        records = read_records(c, 306)
    assert [(b.base_offset, b.record_count) for b in batches] == [(0, 1), (1, 5), (6, 300)]
    # the same bytes from the batch length on, but for the idempotent producer's stamp (producer id,
    # epoch, consecutive sequences after the plain record's) and the CRC over it; the broker rewrote only
    # the base offset and the partition leader epoch (bytes 12..15, outside the CRC: epoch 0, the first)
    for fetched, sent in zip(batches[1:], (first, second), strict=True):
        got = bytes(fetched.batch.buffer)
        assert sent[12:16] == b"\xff\xff\xff\xff"
        assert got[12:16] == b"\x00\x00\x00\x00"
        assert (
            got[8:12] + got[16:17] + got[21:43] + got[57:]
            == sent[8:12] + sent[16:17] + sent[21:43] + sent[57:]
        )
        fetched.batch.validate()  # the CRC was recomputed
    producer_id = batches[0].batch.producer_id
    assert producer_id >= 0
    assert [(b.batch.producer_id, b.batch.producer_epoch, b.batch.base_sequence) for b in batches] == [
        (producer_id, 0, 0),
        (producer_id, 0, 1),
        (producer_id, 0, 6),
    ]
    assert batches[2].batch.compression == CompressionType.GZIP
    assert [(r.offset, r.key, r.value, r.timestamp_ms, r.headers) for r in records[1:]] == [
        (1 + i, b"k%d" % i, b"a-%d" % i, 1_700_000_000_000 + i, (("origin", b"elsewhere"), ("none", None)))
        for i in range(5)
    ] + [
        (6 + i, b"k%d" % i, b"b-%d" % i, 1_700_000_100_000 + i, (("origin", b"elsewhere"), ("none", None)))
        for i in range(300)
    ]


def test_consecutive_raw_batches_of_a_partition_travel_in_one_request(broker_cluster: Any) -> None:
    broker_cluster.create_topic("raw", 1)
    parts = [built_batch(1_700_000_000_000, [b"%d-%d" % (n, i) for i in range(10)]) for n in range(4)]
    with producer(broker_cluster, acks="all", max_in_flight_requests_per_connection=1) as p:
        p.partitions_for("raw")
        # the first may leave alone; the others queue behind it while it waits for its flush, together
        deliveries = [p.send_batch("raw", 0, part) for part in parts]
        p.flush()
        assert [d.result(0) for d in deliveries] == [[DeliveryRange("raw", 0, 10 * n, 10)] for n in range(4)]
        carriers = [d._parts[0][0] for d in deliveries]
        assert carriers[1] is carriers[2] is carriers[3]
        assert carriers[1].count in (30, 40)
    with consumer(broker_cluster, TopicPartition("raw", 0)) as c:
        batches = read_batches(c, 40)
    assert [(b.base_offset, b.record_count) for b in batches] == [(0, 10), (10, 10), (20, 10), (30, 10)]


def test_send_batch_refuses_what_is_not_one_whole_batch(broker_cluster: Any) -> None:
    broker_cluster.create_topic("raw", 2)
    batch = built_batch(0, [b"x", b"y"])
    with producer(broker_cluster, max_request_size=4096) as p:
        assert len(batch) == 127
        with pytest.raises(
            ProducerError,
            match=r"raw-0: expected one record batch of 254 bytes, got a batch of 127 bytes \(offset 1000\)",
        ):
            p.send_batch("raw", 0, batch + batch)
        with pytest.raises(ProducerError, match="raw-1: not a record batch"):
            p.send_batch("raw", 1, batch[:-1])
        with pytest.raises(UnknownPartitionError):
            p.send_batch("raw", 2, batch)
        big = built_batch(0, [bytes(3000), bytes(3000)])
        with pytest.raises(RecordTooLargeError, match=r"raw-0 \(offsets 1000..1001 at the source\)"):
            p.send_batch("raw", 0, big)
