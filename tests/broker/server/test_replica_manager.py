"""The replica manager on the wire (broker/server/replica_manager.py): Produce appends with their offsets,
validation, pipelined acks=0 runs, Fetch reads with their byte limits and long polls, ListOffsets; against
real broker processes and a real ZooKeeper. And in process, on a real ZooKeeper: a Produce arriving after
Metadata named the broker leader but before the watcher applied the leadership."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.cluster import zk_paths
from broker.cluster.cluster_view import EMPTY_VIEW, ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.partition_state import PartitionState
from broker.config import BrokerConfig
from broker.log.log_manager import LogManager
from broker.protocol import ErrorCode, encode_request
from broker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.batch_scan import scan_batches
from broker.record.record_batch import RecordBatch
from broker.record.topic_partition import TopicPartition
from broker.server.delayed_produce import ProduceResult
from broker.server.purgatory import Purgatory
from broker.server.replica_manager import ReplicaManager
from broker.server.topic_metadata import topic_metadata
from lumber.dev.process import free_port
from tests.broker.cluster.helpers import add_broker
from tests.broker.log.helpers import config as log_config
from tests.broker.server.helpers import (
    BASE_TS,
    batch,
    closed_by_peer,
    connect,
    fetch,
    offsets_in,
    produce,
    raw_socket,
    wait_exposed,
)
from tests.support.broker_cluster import BrokerCluster, wait_for

# ------------------------------------------------------------------------------------------ produce


def test_produce_acks_and_offsets(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("acks", 1)
    conn = connect(broker_cluster.brokers[0])
    try:
        first = produce(conn, "acks", 0, batch(0, 5), acks=1)
        assert (first.error_code, first.base_offset, first.log_start_offset) == (0, 0, 0)
        produce(conn, "acks", 0, batch(5, 3), acks=0)  # no response at all
        flushed = produce(conn, "acks", 0, batch(8, 2), acks=-1)
        assert (flushed.error_code, flushed.base_offset) == (0, 8)
        bad = produce(conn, "acks", 0, batch(10, 1), acks=2)
        assert bad.error_code == ErrorCode.INVALID_REQUIRED_ACKS
        wait_exposed(conn, "acks", 0, 10)
        parts = fetch(conn, [("acks", 0, 0, 1 << 20)])
        assert offsets_in(parts[("acks", 0)].records) == list(range(10))
        assert parts[("acks", 0)].high_watermark == 10
    finally:
        conn.close()


def test_produce_validates_batches(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("strict", 1)
    conn = connect(broker_cluster.brokers[0])
    try:
        good = batch(0, 3)
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF  # a record byte: the CRC no longer matches
        assert produce(conn, "strict", 0, bytes(corrupt)).error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(conn, "strict", 0, good[:-5]).error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(conn, "strict", 9, good).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(conn, "nope", 0, good).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert produce(conn, "bad name", 0, good).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        huge = batch(0, 1, size=1024 * 1024 + 100)
        assert produce(conn, "strict", 0, huge).error_code == ErrorCode.MESSAGE_TOO_LARGE
        # nothing refused was appended
        assert produce(conn, "strict", 0, good).base_offset == 0
    finally:
        conn.close()


def _produce_frame(
    correlation_id: int, topic: str, partition: int, records: bytes, acks: int, version: int
) -> bytes:
    body = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, records)])],
    )
    return encode_request(version, correlation_id, "runs", body)


def _values(records: Any) -> list[bytes | None]:
    scan = scan_batches(bytes(records), where="test")
    return [r.value for b in scan.batches for r in b.records()]


@pytest.mark.parametrize("inline_requests", [True, False])
def test_pipelined_acks_zero_produces_are_appended_in_order_up_to_a_bad_one(
    start_cluster: Callable[..., BrokerCluster], inline_requests: bool
) -> None:
    """A producer pipelining acks=0 requests: the broker serves them in runs (one append per partition and
    run) when ``inline_requests`` is on; either way exactly what came before the corrupt request is kept,
    in order, with an acks=1 request in the middle answered, and the connection is then closed."""
    cluster = start_cluster(1, inline_requests=inline_requests)
    cluster.create_topic("runs", 2)
    broker = cluster.brokers[0]
    wire: list[bytes] = []
    expected: dict[int, list[int]] = {0: [], 1: []}
    for i in range(400):
        partition = 0 if i % 7 else 1
        records = batch(i, 1)
        if i == 300:
            corrupt = bytearray(records)
            corrupt[-1] ^= 0xFF
            records = bytes(corrupt)
        acks = 1 if i == 100 else 0
        wire.append(_produce_frame(i, "runs", partition, records, acks, version=9 if i % 2 else 7))
        if i < 300:
            expected[partition].append(i)
    sock = raw_socket(broker)
    try:
        sock.sendall(b"".join(wire))
        sock.settimeout(10)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        response = sock.recv(size, socket.MSG_WAITALL)
        assert struct.unpack_from(">i", response, 0) == (100,)  # the acks=1 one, correlation id 100
        assert closed_by_peer(sock)
    finally:
        sock.close()
    conn = connect(broker)
    try:
        for partition in (0, 1):

            def flushed(p: int = partition) -> bool:
                return bool(fetch(conn, [("runs", p, 0, 1)])[("runs", p)].high_watermark >= len(expected[p]))

            wait_for(flushed, 10, "the appended records to be flushed")
            parts = fetch(conn, [("runs", partition, 0, 1 << 20)])
            assert parts[("runs", partition)].high_watermark == len(expected[partition])
            values = _values(parts[("runs", partition)].records)
            assert values == [(b"v%06d" % i).ljust(50, b".") for i in expected[partition]]
            assert offsets_in(parts[("runs", partition)].records) == list(range(len(expected[partition])))
        assert len(expected[0]) + len(expected[1]) == 300
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ fetch


def test_fetch_honours_partition_and_total_max_bytes(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("sized", 2)
    conn = connect(broker_cluster.brokers[0])
    try:
        sizes = []
        for i in range(10):
            data = batch(i * 10, 10, size=100)
            sizes.append(len(data))
            for p in (0, 1):
                produce(conn, "sized", p, data, acks=-1)
        for p in (0, 1):
            wait_exposed(conn, "sized", p, 100)
        one = sizes[0]
        assert len(set(sizes)) == 1
        parts = fetch(conn, [("sized", 0, 0, 3 * one), ("sized", 1, 0, 3 * one)])
        assert offsets_in(parts[("sized", 0)].records) == list(range(30))
        assert offsets_in(parts[("sized", 1)].records) == list(range(30))
        # the total limit: p0 takes 3 batches, p1 only what is left (1 batch)
        parts = fetch(conn, [("sized", 0, 0, 3 * one), ("sized", 1, 0, 3 * one)], max_bytes=4 * one)
        assert len(bytes(parts[("sized", 0)].records)) == 3 * one
        assert len(bytes(parts[("sized", 1)].records)) == one
        # the first partition with data gets one whole batch even over its limit (KIP-74), the next none
        parts = fetch(conn, [("sized", 0, 50, 10), ("sized", 1, 0, 10)])
        assert offsets_in(parts[("sized", 0)].records) == list(range(50, 60))
        assert bytes(parts[("sized", 1)].records) == b""
        # out of range and an offset in the middle of a batch (the whole batch comes back)
        parts = fetch(conn, [("sized", 0, 101, 1000), ("sized", 1, 55, one)])
        assert parts[("sized", 0)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert parts[("sized", 0)].high_watermark == 100
        assert offsets_in(parts[("sized", 1)].records) == list(range(50, 60))
        # bytes served are the bytes appended, batch for batch
        got = RecordBatch(bytes(parts[("sized", 1)].records))
        assert got.base_offset == 50
        assert got.record_count == 10
    finally:
        conn.close()


def test_fetch_long_poll_waits_for_min_bytes(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("poll", 1)
    reader = connect(broker_cluster.brokers[0])
    writer = connect(broker_cluster.brokers[0])
    try:
        started = time.monotonic()
        parts = fetch(reader, [("poll", 0, 0, 1 << 20)], max_wait_ms=400, min_bytes=1)
        waited = time.monotonic() - started
        assert bytes(parts[("poll", 0)].records) == b""
        assert waited >= 0.35  # it waited for max_wait_ms since nothing came

        body = FetchRequest(
            max_wait_ms=20_000,
            min_bytes=1,
            topics=[
                FetchTopic("poll", [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])
            ],
        )
        pending = reader.send(body)
        time.sleep(0.2)
        assert not pending.done
        produce(writer, "poll", 0, batch(0, 4), acks=1)
        response = pending.wait(10)
        assert offsets_in(response.responses[0].partitions[0].records) == [0, 1, 2, 3]
    finally:
        reader.close()
        writer.close()


def test_list_offsets_earliest_latest_and_by_time(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("times", 1)
    conn = connect(broker_cluster.brokers[0])
    try:
        for i in range(5):
            produce(conn, "times", 0, batch(i * 10, 10, ts=BASE_TS + i * 1000), acks=-1)
        wait_exposed(conn, "times", 0, 50)

        def ask(ts: int) -> tuple[int, int, int]:
            response = conn.request(
                ListOffsetsRequest(
                    topics=[ListOffsetsTopic("times", [ListOffsetsPartition(0, timestamp=ts)])]
                )
            )
            p = response.topics[0].partitions[0]
            return p.error_code, p.offset, p.timestamp

        assert ask(-2) == (0, 0, -1)
        assert ask(-1) == (0, 50, -1)
        # record i of batch b has timestamp BASE_TS + b*1000 + b*10 + i; the found record's is answered
        assert ask(BASE_TS + 2000) == (0, 20, BASE_TS + 2020)
        assert ask(BASE_TS + 2025) == (0, 25, BASE_TS + 2025)
        assert ask(BASE_TS + 2030) == (0, 30, BASE_TS + 3030)
        assert ask(BASE_TS + 99_000) == (0, -1, -1)
        assert ask(-3) == (0, 49, BASE_TS + 4049)  # KIP-734: the record with the largest timestamp
        response = conn.request(
            ListOffsetsRequest(topics=[ListOffsetsTopic("nope", [ListOffsetsPartition(0, timestamp=-1)])])
        )
        assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ leadership


@pytest.mark.zookeeper
def test_a_produce_finds_the_state_metadata_names_before_the_watcher_applies_it(
    zk: Any, tmp_path: Path
) -> None:
    """Metadata answers from the cluster watcher's view as soon as the view is published; the replica
    manager applies it after, on the watcher's notification thread (Kafka 4's broker likewise publishes a
    new metadata image to its MetadataCache before ReplicaManager.applyDelta makes it leader, and answers
    NOT_LEADER_OR_FOLLOWER in between). A Produce in between finds what Metadata named: the replica manager
    applies the request's view itself (``leader_partition``), whether the view makes this broker leader
    (an acks=1 Produce is appended, not refused) or shrinks the ISR of its leadership below
    ``min.insync.replicas`` (an acks=all Produce is refused NOT_ENOUGH_REPLICAS, nothing appended, not
    appended to wait for a replica Metadata no longer names). The notification step is held for as long as
    the test likes, on a real watcher, a real ZooKeeper and a real log."""
    tp = TopicPartition("handover", 0)
    state_path = zk_paths.partition_state_path(tp.topic, tp.partition)
    add_broker(zk, 1, free_port())
    add_broker(zk, 2, free_port())  # never listening: broker 1's fetcher of broker 2 only backs off
    zk.create(zk_paths.topic_path(tp.topic), zk_paths.encode_assignment({0: [1, 2]}), makepath=True)
    follower = PartitionState(leader=2, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    zk.create(state_path, zk_paths.encode_partition_state(follower), makepath=True)

    held = threading.Event()
    held.set()
    applied: list[ClusterView] = []
    replicas: list[ReplicaManager] = []

    def notification_step(old: ClusterView, new: ClusterView) -> None:
        assert held.wait(60), "the test never released the notification step"
        replicas[0].apply(old, new)
        applied.append(new)

    def controller_writes(state: PartitionState) -> None:
        """The state znode set as the controller sets it; returns once the watcher's view holds it."""
        held.clear()  # the view waits in the notification step
        _, stat = zk.get(state_path)
        written = zk.set(state_path, zk_paths.encode_partition_state(state), version=stat.version)
        wait_for(
            lambda: watcher.view.states[tp].zk_version == written.version, 10, f"the view holding {state}"
        )
        [answer] = list(topic_metadata(watcher.view, tp.topic, None).partitions)  # what Metadata answers
        assert (answer.leader_id, answer.leader_epoch, answer.isr_nodes) == (1, 1, list(state.isr))

    def produce(acks: int) -> ProduceResult:
        results: list[dict[TopicPartition, ProduceResult]] = []
        manager.append_records([(tp, batch(0, 3))], acks=acks, timeout_ms=1000, respond=results.append)
        wait_for(lambda: len(results) == 1, 5, "the Produce's answer")
        return results[0][tp]

    watcher = ClusterWatcher(zk, on_change=notification_step)
    purgatory = Purgatory("handover")
    with LogManager(log_config(tmp_path)) as logs:
        config = BrokerConfig(broker_id=1, min_insync_replicas=2)
        manager = ReplicaManager(1, logs, watcher, purgatory, config=config)
        replicas.append(manager)
        watcher.start()
        try:
            manager.apply(EMPTY_VIEW, watcher.view)
            partition = manager.get_partition(tp)
            assert partition is not None
            assert (partition.leader_id, partition.leader_epoch) == (2, 0)

            # the controller moves the leadership to broker 1 (a preferred election): epoch 1
            controller_writes(PartitionState(leader=1, leader_epoch=1, isr=(1, 2), controller_epoch=1))
            assert (partition.leader_id, partition.leader_epoch, applied) == (2, 0, [])
            led = produce(acks=1)
            assert led.error is None
            assert led.info is not None
            assert led.info.first_offset == 0
            assert (partition.leader_id, partition.leader_epoch, partition.isr) == (1, 1, frozenset({1, 2}))
            assert applied == []  # served while the notification step was still held
            held.set()
            wait_for(lambda: len(applied) == 1, 10, "the held view to be applied")

            # then broker 2 dies and leaves the ISR (the same epoch): below min.insync.replicas
            controller_writes(PartitionState(leader=1, leader_epoch=1, isr=(1,), controller_epoch=1))
            refused = produce(acks=-1)
            assert type(refused.error).__name__ == "NotEnoughReplicasError"
            assert (partition.isr, partition.log_end_offset, len(applied)) == (frozenset({1}), 3, 1)
            held.set()
            wait_for(lambda: len(applied) == 2, 10, "the held view to be applied")
            assert (partition.leader_id, partition.leader_epoch, partition.log_end_offset) == (1, 1, 3)
        finally:
            held.set()
            watcher.stop()
            manager.shutdown()
            purgatory.shutdown()
