"""The consumer against real broker processes (the ``broker_cluster`` fixture) and a real ZooKeeper."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import crc32c
import pytest

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import CorruptBatchError, NoOffsetError, OffsetOutOfRangeError
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import consumer, producer, read_batches, read_records
from tests.support.broker_cluster import wait_for

TP = TopicPartition("events", 0)
BASE_TS = 1_700_000_000_000


def produce(
    cluster: Any, topic: str, count: int, *, partition: int = 0, start: int = 0, **settings: Any
) -> None:
    with producer(cluster, **settings) as p:
        p.send_many(topic, [b"m%05d" % i for i in range(start, start + count)], partition=partition).result(
            10
        )


def wait_exposed(cluster: Any, tp: TopicPartition, offset: int) -> None:
    """acks=all is answered once the batch is appended; with ``expose = "flushed"`` consumers see it after
    the next flush (``flush_ms`` 20 in the tests)."""
    with consumer(cluster) as c:
        wait_for(lambda: c.end_offsets([tp])[tp] >= offset, 10, f"{tp} to expose offsets below {offset}")


def test_iterator_blocks_until_messages_arrive(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    with consumer(broker_cluster, TP, auto_offset_reset="latest") as c:
        assert c.position(TP) == 0
        timer = threading.Timer(0.6, produce, (broker_cluster, "events", 3))
        started = time.monotonic()
        timer.start()
        got = []
        for record in c.messages(timeout_ms=10_000):
            got.append((record.offset, record.value))
            if len(got) == 3:
                break
        waited = time.monotonic() - started
        timer.join()
    assert got == [(0, b"m00000"), (1, b"m00001"), (2, b"m00002")]
    assert 0.55 <= waited < 8


def test_timeout_ends_the_wait(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    with consumer(broker_cluster, TP) as c:
        started = time.monotonic()
        assert list(c.messages(timeout_ms=400)) == []
        assert 0.38 <= time.monotonic() - started < 3
        assert c.poll(timeout_ms=200) == []
        assert c.poll_values(timeout_ms=0) == []


def test_seek_and_position(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 50)
    with consumer(broker_cluster, TP) as c:
        assert c.position(TP) == 0
        c.seek(TP, 20)
        assert c.position(TP) == 20
        first = c.poll(timeout_ms=5000, max_records=5)
        assert [r.offset for r in first] == [20, 21, 22, 23, 24]
        assert c.position(TP) == 25
        c.seek(TP, 3)  # backwards, with records fetched and not handed out yet
        assert [r.value for r in read_records(c, 2)] == [b"m00003", b"m00004"]
        c.seek(TP, 48)
        values: list[tuple[int, bytes | None]] = []
        while len(values) < 2:
            for chunk in c.poll_values(timeout_ms=2000):
                assert chunk.topic_partition == TP
                values.extend(zip(chunk.offsets, chunk.values, strict=True))
        assert values == [(48, b"m00048"), (49, b"m00049")]
        assert c.position(TP) == 50
        assert c.end_offsets([TP]) == {TP: 50}
        assert c.beginning_offsets([TP]) == {TP: 0}


def test_poll_values_decodes_many_batches_at_once_exactly(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 150, batch_size=2048, linger_ms=200)  # batches of about 70 records
    produce(broker_cluster, "events", 1, start=150)
    produce(broker_cluster, "events", 200, start=151, compression_type="zstd", linger_ms=200)
    produce(broker_cluster, "events", 49, start=351, batch_size=1024, linger_ms=200)
    expected = [(offset, b"m%05d" % offset) for offset in range(37, 400)]
    with consumer(broker_cluster, TP, max_partition_fetch_bytes=1 << 20, max_prefetch_bytes=1 << 20) as c:
        c.seek(TP, 37)  # in the middle of the first batch
        batches = read_batches(c, 363)
        assert len(batches) >= 5
        assert {b.batch.attributes & 7 for b in batches} == {0, 4}  # plain and zstd batches
        c.seek(TP, 37)
        got: list[tuple[int, bytes | None]] = []
        chunks = 0
        deadline = time.monotonic() + 20
        while len(got) < len(expected) and time.monotonic() < deadline:
            for chunk in c.poll_values(timeout_ms=1000):
                assert chunk.topic_partition == TP
                assert isinstance(chunk.offsets, range)
                got.extend(zip(chunk.offsets, chunk.values, strict=True))
                chunks += 1
        assert c.position(TP) == 400
    assert got == expected
    assert chunks == len(batches)  # one chunk per batch, as before


@pytest.mark.parametrize("seek", [True, False])
def test_the_first_fetch_does_not_wait_out_the_retry_backoff(broker_cluster: Any, seek: bool) -> None:
    # The fetcher's first metadata refresh may predate the assignment; the partition's leader then shows
    # up in a refresh made by the caller's thread (ListOffsets), and the fetch must go out right away.
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 10, acks="all")
    wait_exposed(broker_cluster, TP, 10)
    for _ in range(3):
        with consumer(broker_cluster, TP, retry_backoff_ms=20_000) as c:
            if seek:
                c.seek(TP, 0)
            assert c.end_offsets([TP]) == {TP: 10}
            started = time.monotonic()
            got: list[bytes | None] = []
            while len(got) < 10 and time.monotonic() - started < 30:
                got.extend(v for chunk in c.poll_values(timeout_ms=500) for v in chunk.values)
            waited = time.monotonic() - started
        assert got == [b"m%05d" % i for i in range(10)]
        assert waited < 5


def test_seek_to_time(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    with producer(broker_cluster, acks="all") as p:
        for i in range(30):  # batches of one record each, timestamps 1000 ms apart
            p.send("events", b"t%d" % i, timestamp_ms=1_700_000_000_000 + 1000 * i).result(10)
    wait_exposed(broker_cluster, TP, 30)
    with consumer(broker_cluster, TP) as c:
        assert c.seek_to_time(TP, 1_700_000_005_500) == 6
        assert [r.value for r in read_records(c, 2)] == [b"t6", b"t7"]
        assert c.seek_to_time(TP, 0) == 0
        assert read_records(c, 1)[0].offset == 0
        assert c.seek_to_time(TP, 1_800_000_000_000) == 30  # later than everything: the end
        assert c.position(TP) == 30
        assert c.offsets_for_times({TP: 1_800_000_000_000}) == {TP: None}
        assert c.offsets_for_times({TP: 1_700_000_029_000}) == {TP: 29}


@pytest.mark.parametrize(("reset", "expected_first"), [("earliest", 0), ("latest", 40)])
def test_auto_offset_reset_when_out_of_range(broker_cluster: Any, reset: str, expected_first: int) -> None:
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 40)
    with consumer(broker_cluster, TP, auto_offset_reset=reset) as c:
        c.seek(TP, 10_000)
        if reset == "latest":
            deadline = time.monotonic() + 10
            while c.poll(timeout_ms=100) == [] and time.monotonic() < deadline:
                if c.position(TP) == 40:
                    break
            assert c.position(TP) == 40
            produce(broker_cluster, "events", 2, start=40)
        records = read_records(c, 2)
    assert [r.offset for r in records] == [expected_first, expected_first + 1]


def test_auto_offset_reset_none_raises(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 5)
    with consumer(broker_cluster, TP, auto_offset_reset="none") as c:
        with pytest.raises(NoOffsetError, match=r"events-0: no position, and auto_offset_reset is 'none'"):
            c.poll(timeout_ms=5000)
        c.seek(TP, 99)
        with pytest.raises(OffsetOutOfRangeError, match=r"events-0: offset 99 is out of range"):
            c.poll(timeout_ms=5000)
        c.seek(TP, 2)
        assert [r.offset for r in read_records(c, 3)] == [2, 3, 4]


def test_large_batches_and_small_fetches(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 3000, batch_size=256 * 1024, linger_ms=1000)
    with consumer(broker_cluster, TP, max_partition_fetch_bytes=10_000, max_prefetch_bytes=20_000) as c:
        batches = read_batches(c, 3000)
        assert next(b.record_count for b in batches) > 1000  # one batch far above max_partition_fetch_bytes
        values = [v for b in batches for v in b.values().values]
    assert values == [b"m%05d" % i for i in range(3000)]


def test_consumer_resumes_after_the_broker_is_killed_and_restarted(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 1)
    produce(broker_cluster, "events", 1000, acks="all")
    with consumer(broker_cluster, TP, retry_backoff_ms=50, max_prefetch_bytes=4096) as c:
        first = read_records(c, 500)
        assert [r.offset for r in first] == list(range(500))
        broker_cluster.brokers[0].kill()
        broker_cluster.brokers[0].restart()
        produce(broker_cluster, "events", 100, start=1000, acks="all")
        rest = read_records(c, 600, timeout_s=60)
    assert [r.offset for r in rest] == list(range(500, 1100))
    assert [r.value for r in rest] == [b"m%05d" % i for i in range(500, 1100)]


def test_consumer_learns_the_cluster_from_zookeeper(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 2)
    produce(broker_cluster, "events", 10, partition=1)
    config = ConsumerConfig(auto_offset_reset="earliest", fetch_max_wait_ms=100)
    with Consumer(config, zookeeper_connect=broker_cluster.zk_connect) as c:
        partitions = c.partitions_for("events")
        assert partitions == [TopicPartition("events", 0), TopicPartition("events", 1)]
        c.assign(partitions)
        records = read_records(c, 10)
    assert {(r.partition, r.offset) for r in records} == {(1, i) for i in range(10)}


def test_iteration_hands_out_every_record_once(broker_cluster: Any) -> None:
    broker_cluster.create_topic("events", 3)
    for partition in range(3):
        produce(broker_cluster, "events", 400, partition=partition)
    partitions = [TopicPartition("events", p) for p in range(3)]
    with consumer(broker_cluster, *partitions, max_prefetch_bytes=8192) as c:
        seen = [(r.partition, r.offset) for r in c.messages(timeout_ms=1500)]
        assert [c.position(tp) for tp in partitions] == [400, 400, 400]
    assert sorted(seen) == [(p, o) for p in range(3) for o in range(400)]
    for p in range(3):  # in order within each partition
        assert [o for q, o in seen if q == p] == list(range(400))


def _undecodable_batch() -> bytes:
    """Five records whose header claims four (count and lastOffsetDelta), CRC recomputed: a broker that
    validates records refuses it (INVALID_RECORD); one with ``[log] validate_records = false`` stores it,
    as a disk could after a clean shutdown; a consumer cannot decode it."""
    builder = RecordBatchBuilder()
    for i in range(5):
        builder.append(BASE_TS + i, None, b"bad%d" % i)
    data = bytearray(builder.build())
    struct.pack_into(">i", data, 23, 3)  # lastOffsetDelta
    struct.pack_into(">i", data, 57, 4)  # record count
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize("api", ["poll_values", "poll"])
def test_a_corrupt_batch_loses_nothing_before_or_after_it(start_cluster: Any, api: str) -> None:
    """The values of the batches before an undecodable one are handed out, the error names its offset and
    leaves the position there, and seeking past it reads on."""
    broker_cluster = start_cluster(1, validate_records=False)
    broker_cluster.create_topic("events", 1)
    good = [b"g%02d" % i for i in range(10)]
    after = [b"a%02d" % i for i in range(7)]
    with producer(broker_cluster, acks="1") as p:
        p.send_many("events", good, partition=0).result(10)
        p.send_batch("events", 0, _undecodable_batch()).result(10)
        p.send_many("events", after, partition=0).result(10)

    def read(c: Consumer) -> list[tuple[int, bytes | None]]:
        if api == "poll":
            return [(r.offset, r.value) for r in c.poll(timeout_ms=500)]
        chunks = c.poll_values(timeout_ms=500)
        return [pair for chunk in chunks for pair in zip(chunk.offsets, chunk.values, strict=True)]

    def read_until_it_fails(c: Consumer, into: list[tuple[int, bytes | None]]) -> None:
        for _ in range(40):
            into.extend(read(c))

    with consumer(broker_cluster, TP, max_partition_fetch_bytes=1 << 20) as c:
        got: list[tuple[int, bytes | None]] = []
        with pytest.raises(CorruptBatchError) as failure:
            read_until_it_fails(c, got)
        assert got == list(enumerate(good))
        assert (failure.value.topic, failure.value.partition, failure.value.offset) == ("events", 0, 10)
        assert c.position(TP) == 10
        with pytest.raises(CorruptBatchError):  # still there
            read_until_it_fails(c, got)
        assert len(got) == len(good)
        c.seek(TP, 14)
        deadline = time.monotonic() + 20
        rest: list[tuple[int, bytes | None]] = []
        while len(rest) < len(after) and time.monotonic() < deadline:
            rest.extend(read(c))
    assert rest == [(14 + i, value) for i, value in enumerate(after)]
