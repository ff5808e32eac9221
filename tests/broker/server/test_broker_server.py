"""The broker process on the wire: every API against real broker processes and a real ZooKeeper."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from broker.client.connection import BrokerConnection
from broker.protocol import ErrorCode, encode_request
from broker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from broker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.batch_scan import scan_batches
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, wait_for

BASE_TS = 1_700_000_000_000


def connect(broker: BrokerProcess, **settings: Any) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", broker.port, node_id=broker.broker_id, **settings)
    conn.connect()
    return conn


def batch(first: int, count: int, size: int = 50, ts: int = BASE_TS) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(ts + first + i, b"k%06d" % (first + i), (b"v%06d" % (first + i)).ljust(size, b"."))
    return builder.build()


def produce(conn: BrokerConnection, topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    body = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, records)])],
    )
    if acks == 0:
        conn.send(body, expect_response=False).wait()
        return None
    return conn.request(body).responses[0].partition_responses[0]


def fetch(conn: BrokerConnection, parts: list[tuple[str, int, int, int]], **request: Any) -> dict[Any, Any]:
    """``parts``: (topic, partition, offset, partition_max_bytes) -> {(topic, p): PartitionData}."""
    topics: dict[str, list[FetchPartition]] = {}
    for topic, p, offset, max_bytes in parts:
        topics.setdefault(topic, []).append(
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=max_bytes)
        )
    request.setdefault("max_wait_ms", 0)
    request.setdefault("min_bytes", 0)
    response = conn.request(FetchRequest(topics=[FetchTopic(t, ps) for t, ps in topics.items()], **request))
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def wait_exposed(conn: BrokerConnection, topic: str, partition: int, offset: int) -> None:
    """acks=-1 is answered once appended; with ``expose = "flushed"`` consumers see the records once the
    next flush (``flush_ms`` 20 in the tests) moves the high watermark: wait for it."""

    def exposed() -> bool:
        response = conn.request(
            ListOffsetsRequest(
                topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(partition, timestamp=-1)])]
            )
        )
        found: int = response.topics[0].partitions[0].offset
        return found >= offset

    wait_for(exposed, 10, f"{topic}-{partition} to expose offsets below {offset}")


def offsets_in(records: Any) -> list[int]:
    scan = scan_batches(bytes(records), where="test")
    out: list[int] = []
    for b in scan.batches:
        out.extend(range(b.base_offset, b.next_offset))
    return out


# ------------------------------------------------------------------------------------------ metadata


def test_three_brokers_spread_a_twelve_partition_topic(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(3)
    assignment = cluster.create_topic("spread", 12)
    leaders = [assignment[p][0] for p in range(12)]
    assert sorted(leaders.count(b) for b in range(3)) == [4, 4, 4]
    for broker in cluster.brokers:
        conn = connect(broker)
        try:
            response = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="spread")]))
        finally:
            conn.close()
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
            (b.broker_id, "127.0.0.1", b.port) for b in cluster.brokers
        ]
        assert response.controller_id == 0
        (topic,) = response.topics
        assert topic.error_code == 0
        assert [(p.partition_index, p.leader_id, list(p.replica_nodes)) for p in topic.partitions] == [
            (p, leaders[p], [leaders[p]]) for p in range(12)
        ]
        # each broker keeps exactly the partitions it leads
        on_disk = sorted(d.name for d in broker.log_dir.iterdir() if d.name.startswith("spread-"))
        assert on_disk == sorted(f"spread-{p}" for p in range(12) if leaders[p] == broker.broker_id)
    # a produce to a partition led elsewhere is refused with NOT_LEADER_OR_FOLLOWER
    other = next(p for p in range(12) if leaders[p] != 0)
    conn = connect(cluster.brokers[0])
    try:
        assert produce(conn, "spread", other, batch(0, 1)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        mine = next(p for p in range(12) if leaders[p] == 0)
        answer = produce(conn, "spread", mine, batch(0, 3))
        assert (answer.error_code, answer.base_offset) == (0, 0)
    finally:
        conn.close()


def test_metadata_auto_creates_only_when_allowed(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(1, num_partitions=3, auto_create_topics=True)
    conn = connect(cluster.brokers[0])
    try:
        no = conn.request(
            MetadataRequest(topics=[MetadataRequestTopic(name="fresh")], allow_auto_topic_creation=False)
        )
        assert no.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        yes = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="fresh")]))
        assert yes.topics[0].error_code == 0
        assert [p.partition_index for p in yes.topics[0].partitions] == [0, 1, 2]
        bad = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="bad name!")]))
        assert bad.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    finally:
        conn.close()
    assert cluster.admin.describe_topic("fresh") == {0: (0,), 1: (0,), 2: (0,)}

    off = start_cluster(1)  # the default: off, as production Kafka sets it
    conn = connect(off.brokers[0])
    try:
        answer = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="fresh")]))
        assert answer.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        conn.close()


def test_create_and_delete_topics_over_the_wire(broker_cluster: BrokerCluster) -> None:
    conn = connect(broker_cluster.brokers[0])
    try:
        response = conn.request(
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(name="made", num_partitions=4, replication_factor=1),
                    CreatableTopic(name="made", num_partitions=1, replication_factor=1),
                    CreatableTopic(name="two-copies", num_partitions=1, replication_factor=2),
                    CreatableTopic(name="no/slash", num_partitions=1, replication_factor=1),
                    CreatableTopic(name="zero", num_partitions=0, replication_factor=1),
                ],
                timeout_ms=5000,
            )
        )
        codes = [(t.name, t.error_code) for t in response.topics]
        assert codes == [
            ("made", ErrorCode.INVALID_REQUEST),
            ("made", ErrorCode.INVALID_REQUEST),
            ("two-copies", ErrorCode.INVALID_REPLICATION_FACTOR),
            ("no/slash", ErrorCode.INVALID_TOPIC_EXCEPTION),
            ("zero", ErrorCode.INVALID_PARTITIONS),
        ]
        response = conn.request(
            CreateTopicsRequest(topics=[CreatableTopic(name="made", num_partitions=4, replication_factor=-1)])
        )
        assert [(t.error_code, t.num_partitions) for t in response.topics] == [(0, 4)]
        again = conn.request(
            CreateTopicsRequest(topics=[CreatableTopic(name="made", num_partitions=4, replication_factor=1)])
        )
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        broker_cluster.wait_for_topic("made", dict.fromkeys(range(4), (0,)))
        assert produce(conn, "made", 3, batch(0, 2)).error_code == 0

        names = ["made", "never"]
        deleted = conn.request(
            DeleteTopicsRequest(
                topics=[DeleteTopicState(name=n) for n in names], topic_names=names, timeout_ms=5000
            )
        )
        assert [(r.name, r.error_code) for r in deleted.responses] == [
            ("made", 0),
            ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
    finally:
        conn.close()
    log_dir = broker_cluster.brokers[0].log_dir
    wait_for(lambda: not any(d.name.startswith("made-") for d in log_dir.iterdir()), 10, "made-* to go")
    assert broker_cluster.admin.list_topics() == []


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


def test_acks_zero_error_closes_the_connection(broker_cluster: BrokerCluster) -> None:
    conn = connect(broker_cluster.brokers[0])
    try:
        produce(conn, "missing-topic", 0, batch(0, 1), acks=0)
        wait_for(lambda: conn.closed, 10, "the broker to close the acks=0 connection")
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
    sock = _raw(broker)
    try:
        sock.sendall(b"".join(wire))
        sock.settimeout(10)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        response = sock.recv(size, socket.MSG_WAITALL)
        assert struct.unpack_from(">i", response, 0) == (100,)  # the acks=1 one, correlation id 100
        assert _closed_by_peer(sock)
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

        def ask(ts: int) -> tuple[int, int]:
            response = conn.request(
                ListOffsetsRequest(
                    topics=[ListOffsetsTopic("times", [ListOffsetsPartition(0, timestamp=ts)])]
                )
            )
            p = response.topics[0].partitions[0]
            return p.error_code, p.offset

        assert ask(-2) == (0, 0)
        assert ask(-1) == (0, 50)
        # record i of batch b has timestamp BASE_TS + b*1000 + b*10 + i
        assert ask(BASE_TS + 2000) == (0, 20)
        assert ask(BASE_TS + 2025) == (0, 25)
        assert ask(BASE_TS + 2030) == (0, 30)
        assert ask(BASE_TS + 99_000) == (0, -1)
        response = conn.request(
            ListOffsetsRequest(topics=[ListOffsetsTopic("nope", [ListOffsetsPartition(0, timestamp=-1)])])
        )
        assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ bad input


def _raw(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def _closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _api_versions_frame(version: int = 3, correlation_id: int = 7) -> bytes:
    return encode_request(version, correlation_id, "raw", ApiVersionsRequest())


def test_bad_frames_close_only_their_connection(broker_cluster: BrokerCluster) -> None:
    broker = broker_cluster.brokers[0]
    broker_cluster.create_topic("steady", 1)
    healthy = connect(broker)
    try:
        cases: list[bytes] = [
            struct.pack(">i", 2_000_000_000),  # a huge length prefix: refused before any buffering
            struct.pack(">i", -5),
            struct.pack(">i", 3) + b"abc",  # shorter than a request header
            struct.pack(">i", 10) + struct.pack(">hhi", 999, 0, 1) + b"\x00\x00",  # unknown API key
            struct.pack(">i", 10) + struct.pack(">hhi", 0, 42, 1) + b"\x00\x00",  # Produce v42
            struct.pack(">i", 40) + struct.pack(">hhi", 0, 9, 1) + os.urandom(32),  # garbage body
        ]
        cases.append(_api_versions_frame()[:-1] + b"")  # truncated, then the peer hangs up below
        for i, frame in enumerate(cases[:-1]):
            sock = _raw(broker)
            sock.sendall(frame)
            assert _closed_by_peer(sock), f"case {i}: the broker kept the connection"
            sock.close()
            # everyone else is still served
            assert produce(healthy, "steady", 0, batch(i, 1)).base_offset == i
        sock = _raw(broker)
        sock.sendall(cases[-1])
        sock.close()
        assert produce(healthy, "steady", 0, batch(99, 1)).error_code == 0
    finally:
        healthy.close()


def test_api_versions_newer_than_ours_gets_the_fallback(broker_cluster: BrokerCluster) -> None:
    sock = _raw(broker_cluster.brokers[0])
    try:
        frame = bytearray(_api_versions_frame(version=3, correlation_id=41))
        struct.pack_into(">h", frame, 6, 99)  # api_version 99 in the header
        sock.sendall(bytes(frame))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        payload = sock.recv(size, socket.MSG_WAITALL)
        correlation_id, error_code = struct.unpack_from(">ih", payload)
        assert (correlation_id, error_code) == (41, ErrorCode.UNSUPPORTED_VERSION)
        conn = connect(broker_cluster.brokers[0])  # negotiates the same way and works
        try:
            response: ApiVersionsResponse = conn.request(ApiVersionsRequest())
            assert response.error_code == 0
            assert {k.api_key for k in response.api_keys} == {0, 1, 2, 3, 10, 18, 19, 20, 22}
        finally:
            conn.close()
    finally:
        sock.close()


# ------------------------------------------------------------------------------------------ lifecycle


def test_kill_and_restart_keeps_every_acknowledged_record(broker_cluster: BrokerCluster) -> None:
    broker = broker_cluster.brokers[0]
    broker_cluster.create_topic("durable", 1)
    conn = connect(broker)
    try:
        for i in range(20):
            assert produce(conn, "durable", 0, batch(i * 5, 5), acks=-1).base_offset == i * 5
    finally:
        conn.close()
    broker.kill()
    broker.restart()
    conn = connect(broker)
    try:
        parts = fetch(conn, [("durable", 0, 0, 1 << 20)])
        assert offsets_in(parts[("durable", 0)].records) == list(range(100))
        assert produce(conn, "durable", 0, batch(100, 1), acks=-1).base_offset == 100
    finally:
        conn.close()
    assert "is up" in broker.log()


def test_a_taken_broker_id_is_refused(broker_cluster: BrokerCluster, tmp_path: Any) -> None:
    taken = broker_cluster.brokers[0]
    config = tmp_path / "dup.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\nsession_timeout_ms = 1000\n'
        f'[broker]\nbroker_id = 0\nport = 0\n[log]\nlog_dirs = ["{tmp_path / "dup-logs"}"]\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "--config", str(config), "broker", "start"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "broker id 0 is taken" in result.stderr
    assert f"127.0.0.1:{taken.port}" in result.stderr
    assert taken.running
