"""Log compaction in real broker processes (issue 20, the storage half): kcat and confluent-kafka read a
compacted topic as its key -> value map, a keyless record is refused with INVALID_RECORD, and kill -9 at
random moments of cleaning always recovers the same map. The topic is compacted through the broker-wide
``[log] cleanup_policy = "compact"``."""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from broker.config import LogConfig
from broker.log.checkpoint import read_checkpoint
from broker.log.file_names import CLEANER_OFFSET_CHECKPOINT_FILE_NAME
from broker.log.log import Log
from broker.record.batch_scan import scan_batches
from broker.record.topic_partition import TopicPartition
from tests.support.broker_cluster import (
    KILL_LOOP_SESSION_TIMEOUT_MS,
    BrokerCluster,
    BrokerProcess,
    wait_for,
)

KCAT = "/usr/bin/kcat"
TOPIC = "changelog"
COMPACTED: dict[str, Any] = {
    "cleanup_policy": "compact",
    "segment_bytes": 16 * 1024,
    "min_cleanable_dirty_ratio": 0.01,
    "cleaner_backoff_ms": 50,
    "cleaner_dedupe_buffer_bytes": 1024 * 1024,
}

Op = tuple[bytes, bytes | None]


def produce(cluster: BrokerCluster, ops: list[Op]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            # batches of at most 8 KiB: never one batch larger than a segment (16 KiB), which would make
            # everything one active segment the cleaner may not touch
            "batch.size": 8192,
            "enable.idempotence": False,
        }
    )
    errors: list[str] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value in ops:
        producer.produce(TOPIC, value=value, key=key, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def random_ops(rng: random.Random, count: int, keys: int, prefix: str = "") -> list[Op]:
    return [
        (
            f"key-{rng.randrange(keys):05d}".encode(),
            None if rng.random() < 0.1 else f"{prefix}v{i}-{rng.randrange(10**6)}".encode(),
        )
        for i in range(count)
    ]


def replay(ops: list[Op]) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for key, value in ops:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def as_map(records: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, bytes]:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    return replay([(key, value) for _, key, value in records])


def consume_all(cluster: BrokerCluster) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(ConfluentPartition(TOPIC, 0), timeout=10)
        consumer.assign([ConfluentPartition(TOPIC, 0, 0)])
        records: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        while (not records or records[-1][0] < high - 1) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            offset, key = message.offset(), message.key()
            assert offset is not None
            assert key is not None
            records.append((offset, key, message.value()))
        return records
    finally:
        consumer.close()


def kcat_all(cluster: BrokerCluster) -> list[tuple[int, bytes, bytes | None]]:
    out = subprocess.run(
        [
            KCAT,
            "-C",
            "-b",
            cluster.bootstrap_servers,
            "-t",
            TOPIC,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-Z",
            "-f",
            "%o\t%k\t%s\n",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    records: list[tuple[int, bytes, bytes | None]] = []
    for line in out.splitlines():
        offset, key, value = line.split(b"\t")
        records.append((int(offset), key, None if value == b"NULL" else value))
    return records


def partition_dir(broker: BrokerProcess) -> Path:
    return broker.log_dir / f"{TOPIC}-0"


def first_dirty(broker: BrokerProcess) -> int:
    path = broker.log_dir / CLEANER_OFFSET_CHECKPOINT_FILE_NAME
    return read_checkpoint(path).get(TopicPartition(TOPIC, 0), 0) if path.exists() else 0


def active_base(broker: BrokerProcess) -> int:
    return max(int(p.stem) for p in partition_dir(broker).glob("*.log"))


def wait_until_clean(broker: BrokerProcess) -> None:
    wait_for(
        lambda: first_dirty(broker) >= active_base(broker) > 0, 60, "the cleaner to reach the active segment"
    )


def test_kcat_and_confluent_kafka_read_the_compacted_topic_as_its_map(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1, **COMPACTED)
    cluster.create_topic(TOPIC, 1)
    broker = cluster.broker(0)
    ops = random_ops(random.Random(30), 20_000, 2_000)
    produce(cluster, ops)
    wait_until_clean(broker)
    clean_end = first_dirty(broker)
    expected = replay(ops)
    consumed = consume_all(cluster)
    assert as_map(consumed) == expected
    assert kcat_all(cluster) == consumed
    # below the first dirty offset each key is there once: its last put or its last tombstone
    clean_keys = [key for offset, key, _ in consumed if offset < clean_end]
    assert len(clean_keys) == len(set(clean_keys))
    assert len(consumed) < len(ops) // 2
    assert consumed[-1][0] == len(ops) - 1  # the last record of the partition is never cleaned away


def test_a_keyless_record_to_a_compacted_topic_gets_invalid_record_and_nothing_is_appended(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1, **COMPACTED)
    cluster.create_topic(TOPIC, 1)
    produce(cluster, [(b"k", b"v")])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(TOPIC, value=b"no key", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() if e is not None else None for e in errors] == [KafkaError.INVALID_RECORD]
    assert (
        "changelog-0: INVALID_RECORD: changelog-0 append: invalid record batch at position 0: a compacted "
        "topic does not accept a record without a key: record #0 at offset 0 of the batch"
        in cluster.broker(0).log()
    )
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g"})
    assert consumer.get_watermark_offsets(ConfluentPartition(TOPIC, 0), timeout=10) == (0, 1)
    consumer.close()


def _cleaner_files(broker: BrokerProcess) -> list[str]:
    try:
        return [p.name for p in partition_dir(broker).iterdir() if p.name.endswith((".cleaned", ".swap"))]
    except FileNotFoundError:  # a file renamed or deleted while listing
        return []


def _recovered_map(broker: BrokerProcess, into: Path) -> tuple[dict[bytes, bytes], list[str], int]:
    """Recover a copy of the killed broker's partition in this process: its map, the cleaner files the kill
    left, and how many records lie below its cleaner checkpoint with a duplicated key."""
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(partition_dir(broker), into / f"{TOPIC}-0")
    left = sorted(p.name for p in (into / f"{TOPIC}-0").iterdir() if p.name.endswith((".cleaned", ".swap")))
    log = Log(
        into / f"{TOPIC}-0", LogConfig(log_dirs=[str(into)], cleanup_policy="compact", expose="appended")
    )
    try:
        records: list[tuple[int, bytes, bytes | None]] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            region = log.read(offset, 1 << 20, max_offset=log.log_end_offset)
            assert region is not None
            for batch in scan_batches(region.read_bytes()).batches:
                batch.validate()
                records.extend((r.offset, r.key or b"", r.value) for r in batch.records())
                offset = batch.next_offset
    finally:
        log.close()
    clean_end = first_dirty(broker)
    clean_keys = [key for o, key, _ in records if o < clean_end]
    return as_map(records), left, len(clean_keys) - len(set(clean_keys))


@pytest.mark.slow
def test_kill_9_at_random_moments_of_cleaning_always_recovers_the_same_map(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    # 2 s ZooKeeper sessions: each restart waits for the killed broker's registration to go
    cluster = start_cluster(1, session_timeout_ms=KILL_LOOP_SESSION_TIMEOUT_MS, **COMPACTED)
    cluster.create_topic(TOPIC, 1)
    broker = cluster.broker(0)
    rng = random.Random(31)
    ops: list[Op] = []
    states: list[list[str]] = []
    for round_number in range(20):
        batch = random_ops(rng, 4_000, 3_000, prefix=f"r{round_number}-")
        produce(cluster, batch)
        ops += batch
        if round_number % 2:
            time.sleep(rng.uniform(0.0, 0.6))  # anywhere: mapping, rewriting, swapping or idle
        else:  # as soon as a cleaned segment is being written (the pass may be past it by the kill)
            deadline = time.monotonic() + 3
            while not _cleaner_files(broker) and time.monotonic() < deadline:
                time.sleep(0.0002)
        broker.kill()
        recovered, left, duplicated = _recovered_map(broker, tmp_path / f"copy-{round_number}")
        states.append(left)
        assert recovered == replay(ops), f"round {round_number}: the recovered map differs"
        assert duplicated == 0, f"round {round_number}: {duplicated} duplicated keys below the checkpoint"
        broker.start()
        cluster.wait_for_topic(TOPIC, {0: (0,)})
    wait_until_clean(broker)
    assert as_map(consume_all(cluster)) == replay(ops)
    mid_pass = sum(bool(left) for left in states)
    print(f"{mid_pass} of 20 kills left cleaner files: {states}")


def test_a_topic_compacted_by_its_own_config_is_cleaned_and_its_neighbour_is_not(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """The broker's default stays ``delete``; ``cleanup.policy=compact`` on one topic (ZooKeeper's
    /config/topics) makes the cleaner take that topic's log alone, and its validator refuse keyless
    records."""
    settings = {k: v for k, v in COMPACTED.items() if k != "cleanup_policy"}
    cluster = start_cluster(1, **settings)
    cluster.create_topic(TOPIC, 1, configs={"cleanup.policy": "compact"})
    cluster.create_topic("plain", 1)
    broker = cluster.broker(0)
    ops = random_ops(random.Random(32), 5_000, 100)
    produce(cluster, ops)
    producer = Producer(
        # batches of at most 8 KiB, as produce()'s: one batch larger than a segment would be the whole log
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0, "batch.size": 8192}
    )
    errors: list[KafkaError | None] = []
    for key, value in ops:
        producer.produce("plain", value=value or b"", key=key, partition=0)
    producer.produce("plain", value=b"keyless is fine here", partition=0)
    producer.produce(TOPIC, value=b"keyless", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() if e is not None else None for e in errors] == [KafkaError.INVALID_RECORD]
    wait_until_clean(broker)
    assert as_map(consume_all(cluster)) == replay(ops)
    assert first_dirty(broker) > 0
    plain_files = sorted((broker.log_dir / "plain-0").glob("*.log"))
    assert len(plain_files) > 1
    plain_records = sum(
        len(batch.records()) for path in plain_files for batch in scan_batches(path.read_bytes()).batches
    )
    assert plain_records == len(ops) + 1  # not compacted: every record is still there
    assert (
        read_checkpoint(broker.log_dir / CLEANER_OFFSET_CHECKPOINT_FILE_NAME).get(TopicPartition("plain", 0))
        is None
    )


def test_a_follower_catches_up_from_a_cleaned_leader_across_its_gaps(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    """Replication factor 2: the follower is down while the leader's log is written and cleaned; restarted, it
    fetches the cleaned log (offset gaps, rewritten and empty batches) and rejoins the ISR with the same
    records at the same offsets."""
    cluster = start_cluster(2, **COMPACTED, replica_lag_time_max_ms=5000)
    cluster.create_topic(TOPIC, 1, assignment={0: (0, 1)}, replication_factor=2)
    leader, follower = cluster.broker(0), cluster.broker(1)
    follower.stop()
    ops = random_ops(random.Random(33), 10_000, 500)
    produce(cluster, ops)
    wait_until_clean(leader)
    follower.start()
    cluster.wait_for_isr(TOPIC, 0, [0, 1], timeout_s=60)
    leader_end = cluster.high_watermark(TOPIC, 0)
    follower.stop()
    follower_map, _, _ = _recovered_map(follower, tmp_path / "follower-copy")
    assert follower_map == replay(ops)
    copy = tmp_path / "follower-copy" / f"{TOPIC}-0"
    log = Log(copy, LogConfig(log_dirs=[str(copy.parent)], expose="appended"))
    try:
        assert log.log_end_offset == leader_end == len(ops)
        copied = [
            batch for segment in log.segments for batch in segment.batches(0, segment.size_bytes, 1 << 20)
        ]
    finally:
        log.close()
    # what the follower copied is the cleaned log: fewer records than offsets, gaps between batches
    assert sum(batch.record_count for batch in copied) < len(ops) // 2
    assert any(
        a.next_offset < b.base_offset or a.record_count < a.last_offset_delta + 1 for a, b in pairwise(copied)
    )
    assert as_map(consume_all(cluster)) == replay(ops)
