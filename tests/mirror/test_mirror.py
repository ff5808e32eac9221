"""The mirror (issue 11) against real ZooKeeper and two real broker clusters on 127.0.0.1.

* a clean run: the target holds exactly the source's records per partition, in order (key, value,
  timestamp, headers), and the mirror tier's audit counts on the target equal what was produced per window;
* a ``lumber mirror`` process SIGKILLed mid-stream and restarted: nothing is lost, and the only duplicates
  are the source offsets from the last commit before the kill up to where the killed process had copied;
* batches pass through byte for byte (only one that starts before the committed offset is re-encoded);
* while the target does not answer (its broker SIGSTOPped), the sends stay in flight and the group
  commits nothing past what the target acknowledged; once it answers, exactly the rest;
* a topic created on the source after the mirror started is mirrored too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from audit.audit_codec import AuditEventCodec
from audit.audit_reader import read_audit_events
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.zookeeper.group_offsets import GroupOffsets
from broker.client.producer.producer_config import ProducerConfig
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition
from lumber.dev.zookeeper_server import ZooKeeperServer
from mirror.mirror import Mirror
from mirror.mirror_config import MirrorConfig
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from tests.broker.client.helpers import consumer, producer, read_batches, read_records
from tests.support.broker_cluster import BrokerCluster, wait_for
from tests.support.registry import RegistryProcess, launch_registry
from tests.support.sigstop import pause, resume
from tests.support.zookeeper import make_chroot

ROOT = Path(__file__).resolve().parents[2]
WINDOW_MS = 60_000
#: the start of a window, well in the past (the timestamps are the records' own, never the clock's)
BASE_MS = 1_700_000_000_000 - 1_700_000_000_000 % WINDOW_MS


@pytest.fixture
def registry(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> Iterator[RegistryProcess]:
    process = launch_registry(make_chroot(zookeeper_server.connect, "mirror_registry"), tmp_path / "registry")
    yield process
    process.stop()


def end_offsets(cluster: BrokerCluster, topic: str, partitions: int) -> dict[int, int]:
    with consumer(cluster) as reader:
        ends = reader.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: offset for tp, offset in ends.items()}


def read_partition(cluster: BrokerCluster, topic: str, partition: int, count: int) -> list[ConsumerRecord]:
    with consumer(cluster, TopicPartition(topic, partition)) as reader:
        return read_records(reader, count)


def content(record: ConsumerRecord) -> tuple[Any, ...]:
    return (record.key, record.value, record.timestamp_ms, record.headers)


def test_the_target_holds_the_source_per_partition_in_order_and_the_audit_counts_the_mirror_tier(
    start_cluster: Callable[..., BrokerCluster], registry: RegistryProcess
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    partitions = 4
    source.create_topic("page_view", partitions)
    source.create_topic("not_mirrored", 1)
    # the mirror tier's audit goes to the target, which has no _audit and whose brokers create no topics on
    # demand: the mirror's audit emitter creates it ([producer] audit_topic_partitions)
    # 3 windows x 4 partitions x 150 records: keys, null keys and values, extra headers, own timestamps
    produced: Counter[int] = Counter()  # window start -> records
    with producer(source, batch_size=4096, acks="all") as p:
        for window in range(3):
            for partition in range(partitions):
                for i in range(150):
                    timestamp_ms = BASE_MS + window * WINDOW_MS + 100 * i
                    p.send(
                        "page_view",
                        None if i % 50 == 7 else b"v-%d-%d-%d" % (window, partition, i),
                        None if i % 3 == 0 else b"k%d" % i,
                        partition=partition,
                        headers=[("trace", b"t%d" % i), ("empty", None)],
                        timestamp_ms=timestamp_ms,
                    )
                    produced[BASE_MS + window * WINDOW_MS] += 1
        p.send("not_mirrored", b"x", partition=0)
        p.flush()
    source_ends = end_offsets(source, "page_view", partitions)
    assert sum(source_ends.values()) == 1800

    config = MirrorConfig(
        topics="page_.*",
        group="mirror-test",
        streams=2,
        max_records_per_poll=100,
        audit_interval_ms=300,
        audit_window_ms=WINDOW_MS,
        audit_registry_url=registry.url,
    )
    with Mirror(
        config,
        source_zookeeper=source.zk_connect,
        target_zookeeper=target.zk_connect,
        consumer_config=ConsumerConfig(fetch_max_wait_ms=100, auto_offset_reset="earliest"),
        group_config=GroupConfig(auto_commit_interval_ms=100),
        producer_config=ProducerConfig(audit_topic_partitions=2),
        registry=RegistryConfig(url=registry.url),
    ) as mirror:
        assert mirror.start() == {"page_view": partitions}
        wait_for(lambda: mirror.copied >= 1800, 30, "the mirror to copy every record")
        assert mirror.failure is None
    assert target.admin.list_topics().count("not_mirrored") == 0
    assert len(target.admin.describe_topic("page_view")) == partitions
    assert len(target.admin.describe_topic("_audit")) == 2
    assert end_offsets(target, "page_view", partitions) == source_ends  # a clean run copies once

    for partition in range(partitions):
        want = read_partition(source, "page_view", partition, source_ends[partition])
        got = read_partition(target, "page_view", partition, source_ends[partition])
        assert [content(r) for r in got] == [content(r) for r in want]
        assert [r.offset for r in got] == [r.offset for r in want]

    # the group committed everything it copied
    committed = [
        json.loads(source.zk.get(zk_paths.group_offset_path("mirror-test", "page_view", p))[0])["offset"]
        for p in range(partitions)
    ]
    assert committed == [source_ends[p] for p in range(partitions)]

    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    try:
        read = read_audit_events(
            ConsumerConfig(fetch_max_wait_ms=100), codec, topic="_audit", zookeeper_connect=target.zk_connect
        )
    finally:
        codec.close()
    mirrored: Counter[int] = Counter()
    for event in read.events:
        assert event.tier == "mirror"
        assert event.topic == "page_view"
        assert event.window_ms == WINDOW_MS
        mirrored[event.window_start_ms] += event.count
    assert len({e.event_id for e in read.events}) == len(read.events)
    assert mirrored == produced
    assert sorted(mirrored) == [BASE_MS, BASE_MS + WINDOW_MS, BASE_MS + 2 * WINDOW_MS]


TOPIC = "stream"
PARTITIONS = 6
GROUP = "mirror-kill"
SESSION_TIMEOUT_MS = 3000


def start_mirror(
    source: BrokerCluster, target: BrokerCluster, config: Path, log: Any
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "lumber", "--config", str(config), "mirror",
            "--source-zookeeper", source.zk_connect, "--target-zookeeper", target.zk_connect,
            "--group", GROUP,  # overrides [mirror] group; the rest comes from the section
        ],
        cwd=ROOT,
        stderr=log,
    )  # fmt: skip


def committed(source: BrokerCluster, partition: int) -> int:
    path = zk_paths.group_offset_path(GROUP, TOPIC, partition)
    return int(json.loads(source.zk.get(path)[0])["offset"]) if source.zk.exists(path) else 0


def target_values(target: BrokerCluster) -> dict[int, list[int]]:
    ends = end_offsets(target, TOPIC, PARTITIONS)
    return {
        p: [int(r.value or b"-1") for r in read_partition(target, TOPIC, p, ends[p])]
        for p in range(PARTITIONS)
    }


def process_config(tmp_path: Path) -> Path:
    """The ``lumber.toml`` of a mirror process: what to mirror (``--group`` overrides the section's group),
    short group session, quick commits and fetches."""
    config = tmp_path / "mirror.toml"
    config.write_text(
        f'[mirror]\ntopics = "{TOPIC}"\ngroup = "not-{GROUP}"\nstreams = 2\naudit_interval_ms = 0\n\n'
        f"[group]\nsession_timeout_ms = {SESSION_TIMEOUT_MS}\nauto_commit_interval_ms = 300\n\n"
        "[consumer]\nfetch_max_wait_ms = 100\n\n[producer]\nlinger_ms = 5\n"
    )
    return config


def test_a_killed_mirror_loses_nothing_and_duplicates_only_its_uncommitted_window(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    source.create_topic(TOPIC, PARTITIONS)
    config = process_config(tmp_path)
    produced = Counter[int]()  # partition -> records; each value is its own source offset
    stop_producing = threading.Event()

    def produce() -> None:
        with producer(source, acks="all") as p:
            while not stop_producing.is_set():
                for partition in range(PARTITIONS):
                    for _ in range(5):
                        p.send(TOPIC, b"%d" % produced[partition], partition=partition)
                        produced[partition] += 1
                p.flush()
                time.sleep(0.01)

    logs = [(tmp_path / f"mirror-{i}.log").open("wb") for i in range(2)]
    feeder = threading.Thread(target=produce, daemon=True)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        feeder.start()
        processes.append(start_mirror(source, target, config, logs[0]))
        wait_for(
            lambda: (
                TOPIC in target.admin.list_topics()
                and all(n > 100 for n in end_offsets(target, TOPIC, PARTITIONS).values())
            ),
            40,
            "the first mirror to copy into every partition",
        )
        os.kill(processes[0].pid, signal.SIGKILL)
        processes[0].wait(10)
        time.sleep(0.2)  # a commit already on the wire lands; after this nobody commits for the victim
        at_kill = {p: committed(source, p) for p in range(PARTITIONS)}
        copied_by_victim = end_offsets(target, TOPIC, PARTITIONS)
        processes.append(start_mirror(source, target, config, logs[1]))
        time.sleep(1.0)
        stop_producing.set()
        feeder.join(10)
        total = sum(produced.values())
        wait_for(
            lambda: (
                sum(end_offsets(target, TOPIC, PARTITIONS).values())
                >= total + sum(copied_by_victim[p] - at_kill[p] for p in range(PARTITIONS))
            ),
            SESSION_TIMEOUT_MS / 1000 + 30,
            "the restarted mirror to copy the rest",
        )
        processes[1].send_signal(signal.SIGTERM)
        assert processes[1].wait(30) == 0
    finally:
        stop_producing.set()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        for log in logs:
            log.close()

    found = target_values(target)
    for p in range(PARTITIONS):
        victim = copied_by_victim[p]
        assert at_kill[p] <= victim
        # the victim's copy, then everything again from the last commit before the kill: nothing lost,
        # duplicates exactly the uncommitted window [at_kill, victim)
        assert found[p] == list(range(victim)) + list(range(at_kill[p], produced[p])), f"partition {p}"
        duplicates = sorted(v for v, n in Counter(found[p]).items() if n > 1)
        assert duplicates == list(range(at_kill[p], victim))


def owner_pids(source: BrokerCluster) -> set[int]:
    pids = set()
    for p in range(PARTITIONS):
        try:  # an owner node goes away while a rebalance moves its partition
            owner = json.loads(source.zk.get(zk_paths.group_owner_path(GROUP, TOPIC, p))[0])["owner"]
        except NoNodeError:
            continue
        pids.add(int(owner.split("-")[-2]))
    return pids


def test_two_mirror_processes_share_the_partitions_and_copy_everything_once(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    source.create_topic(TOPIC, PARTITIONS)
    config = process_config(tmp_path)
    produced = Counter[int]()
    logs = [(tmp_path / f"mirror-{i}.log").open("wb") for i in range(2)]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with producer(source, acks="all") as p:

            def send_round() -> None:
                for partition in range(PARTITIONS):
                    for _ in range(20):
                        p.send(TOPIC, b"%d" % produced[partition], partition=partition)
                        produced[partition] += 1
                p.flush()

            send_round()
            processes.append(start_mirror(source, target, config, logs[0]))
            wait_for(
                lambda: owner_pids(source) == {processes[0].pid}, 30, "the first mirror to own everything"
            )
            processes.append(start_mirror(source, target, config, logs[1]))
            deadline = time.monotonic() + 30
            while owner_pids(source) != {process.pid for process in processes}:  # records flow meanwhile
                assert time.monotonic() < deadline, "the two mirrors did not come to share the partitions"
                send_round()
                time.sleep(0.05)
            for _ in range(20):
                send_round()
        wait_for(
            lambda: end_offsets(target, TOPIC, PARTITIONS) == {p: produced[p] for p in range(PARTITIONS)},
            30,
            "the mirrors to copy every record",
        )
        for process in processes:
            process.send_signal(signal.SIGTERM)
        assert [process.wait(30) for process in processes] == [0, 0]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        for log in logs:
            log.close()
    found = target_values(target)
    assert found == {p: list(range(produced[p])) for p in range(PARTITIONS)}


def read_partition_batches(
    cluster: BrokerCluster, topic: str, partition: int, count: int
) -> list[FetchedBatch]:
    with consumer(cluster, TopicPartition(topic, partition)) as reader:
        return read_batches(reader, count)


def batch_bytes(batches: list[FetchedBatch]) -> list[bytes]:
    """Each batch's bytes from batchLength on (the base offset is the broker's to assign), but for the CRC
    and the producer id, epoch and base sequence: the mirror clears the source's producer ids."""
    return [
        bytes(b.batch.buffer[8:17]) + bytes(b.batch.buffer[21:43]) + bytes(b.batch.buffer[57:])
        for b in batches
    ]


def committed_offsets(
    source: BrokerCluster, group: str, topic: str, partitions: int
) -> dict[int, int | None]:
    found: dict[int, int | None] = {}
    for p in range(partitions):
        path = zk_paths.group_offset_path(group, topic, p)
        found[p] = int(json.loads(source.zk.get(path)[0])["offset"]) if source.zk.exists(path) else None
    return found


def quick_mirror(
    source: BrokerCluster, target: BrokerCluster, topics: str, group: str, **settings: Any
) -> Mirror:
    return Mirror(
        MirrorConfig(topics=topics, group=group, audit_interval_ms=0, **settings),
        source_zookeeper=source.zk_connect,
        target_zookeeper=target.zk_connect,
        consumer_config=ConsumerConfig(fetch_max_wait_ms=50, auto_offset_reset="earliest"),
        group_config=GroupConfig(auto_commit_interval_ms=50, session_timeout_ms=SESSION_TIMEOUT_MS),
    )


def test_batches_pass_through_byte_for_byte_and_only_a_batch_cut_by_the_committed_offset_is_reencoded(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    source.create_topic("pass", 3)
    for codec, partitions in (("none", (0, 1)), ("gzip", (2,))):
        with producer(source, batch_size=2048, linger_ms=50, compression_type=codec, acks="all") as p:
            for partition in partitions:
                for i in range(120):
                    p.send(
                        "pass",
                        b"v%d-%d" % (partition, i) * (1 + i % 5),
                        None if i % 4 == 0 else b"k%d" % i,
                        partition=partition,
                        headers=[("n", b"%d" % i)] if i % 2 else [("n", b"%d" % i), ("null", None)],
                        timestamp_ms=BASE_MS + 1000 * i - (7 if i % 3 == 0 else 0),
                    )
            p.flush()
    ends = end_offsets(source, "pass", 3)
    assert ends == {0: 120, 1: 120, 2: 120}
    source_batches = {p: read_partition_batches(source, "pass", p, 120) for p in range(3)}
    assert all(len(b) > 2 for b in source_batches.values())
    assert source_batches[0][0].record_count > 5  # offset 5 is inside the first batch
    GroupOffsets(source.zk, "pass-g").rewind({TopicPartition("pass", 0): 5}, requested_by="test")

    with quick_mirror(source, target, "pass", "pass-g", streams=2) as mirror:
        mirror.start()
        wait_for(lambda: mirror.copied >= 355, 30, "the mirror to copy every record from the commits on")
        wait_for(lambda: committed_offsets(source, "pass-g", "pass", 3) == ends, 10, "the last commit")
        streams = mirror.streams
    assert end_offsets(target, "pass", 3) == {0: 115, 1: 120, 2: 120}
    assert sum(s.reencoded for s in streams) == 1
    assert sum(s.passed_through for s in streams) == sum(len(b) for b in source_batches.values()) - 1
    for partition in (1, 2):  # whole partitions: the very same batches
        got = read_partition_batches(target, "pass", partition, 120)
        assert [(b.base_offset, b.record_count) for b in got] == [
            (b.base_offset, b.record_count) for b in source_batches[partition]
        ]
        assert batch_bytes(got) == batch_bytes(source_batches[partition])
        assert {b.batch.producer_id for b in source_batches[partition]} != {-1}  # an idempotent source
        assert {(b.batch.producer_id, b.batch.base_sequence) for b in got} == {(-1, -1)}
        assert [content(r) for r in read_partition(target, "pass", partition, 120)] == [
            content(r) for r in read_partition(source, "pass", partition, 120)
        ]
    got = read_partition_batches(target, "pass", 0, 115)
    assert batch_bytes(got[1:]) == batch_bytes(source_batches[0][1:])  # the first one was cut at offset 5
    assert got[0].record_count == source_batches[0][0].record_count - 5
    want = read_partition(source, "pass", 0, 120)[5:]
    copied = read_partition(target, "pass", 0, 115)
    assert [content(r) for r in copied] == [content(r) for r in want]
    assert [r.offset for r in copied] == [r.offset - 5 for r in want]


def test_the_group_commits_only_what_the_target_acknowledged_while_sends_are_in_flight(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    source.create_topic("pipe", 2)

    def produce(start: int, count: int) -> None:
        with producer(source, acks="all") as p:
            for partition in range(2):
                for i in range(start, start + count):
                    p.send("pipe", b"%d" % i, partition=partition)
            p.flush()

    produce(0, 100)
    target_broker = target.brokers[0]
    assert target_broker.popen is not None
    with quick_mirror(source, target, "pipe", "pipe-g") as mirror:
        mirror.start()
        wait_for(
            lambda: committed_offsets(source, "pipe-g", "pipe", 2) == {0: 100, 1: 100}, 20, "the first copy"
        )
        pause(target_broker.popen.pid)  # the target takes requests but never answers
        try:
            produce(100, 50)
            wait_for(
                lambda: sum(s.in_flight_records for s in mirror.streams) == 100,
                10,
                "the sends to be in flight",
            )
            time.sleep(0.5)  # ten auto-commit intervals
            assert committed_offsets(source, "pipe-g", "pipe", 2) == {0: 100, 1: 100}
        finally:
            resume(target_broker.popen.pid)
        wait_for(
            lambda: committed_offsets(source, "pipe-g", "pipe", 2) == {0: 150, 1: 150},
            20,
            "the acknowledgements",
        )
        assert mirror.copied == 300
        assert sum(s.in_flight_records for s in mirror.streams) == 0
    assert end_offsets(target, "pipe", 2) == {0: 150, 1: 150}
    for partition in range(2):
        assert [r.value for r in read_partition(target, "pipe", partition, 150)] == [
            b"%d" % i for i in range(150)
        ]


def test_a_topic_created_on_the_source_after_the_start_is_mirrored_too(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    source.create_topic("late_a", 1)
    with quick_mirror(source, target, "late_.*", "late-g", topic_refresh_ms=200) as mirror:
        assert mirror.start() == {"late_a": 1}
        source.create_topic("late_b", 3)
        source.create_topic("other", 1)
        with producer(source) as p:
            for partition in range(3):
                for i in range(10):
                    p.send(
                        "late_b",
                        b"%d-%d" % (partition, i),
                        b"k",
                        partition=partition,
                        timestamp_ms=BASE_MS + i,
                    )
            p.send("other", b"x", partition=0)
            p.flush()
        wait_for(lambda: mirror.copied >= 30, 20, "the new topic to be mirrored")
        assert mirror.topics == {"late_a": 1, "late_b": 3}
        assert len(mirror.members) == 2
    assert "other" not in target.admin.list_topics()
    assert len(target.admin.describe_topic("late_b")) == 3
    for partition in range(3):
        assert [content(r) for r in read_partition(target, "late_b", partition, 10)] == [
            content(r) for r in read_partition(source, "late_b", partition, 10)
        ]
    assert end_offsets(target, "late_b", 3) == {0: 10, 1: 10, 2: 10}
