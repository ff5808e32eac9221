"""The protocol layer on the wire (broker/server/kafka_apis.py): Metadata, CreateTopics / DeleteTopics,
acks=0 failures, malformed frames and the ApiVersions fallback; against real broker processes and a real
ZooKeeper."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable

from broker.protocol import ErrorCode, encode_request
from broker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from broker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.broker.server.helpers import (
    batch,
    closed_by_peer,
    connect,
    produce,
    raw_socket,
)
from tests.support.broker_cluster import BrokerCluster, wait_for

# ------------------------------------------------------------------------------------------ metadata


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


def test_acks_zero_error_closes_the_connection(broker_cluster: BrokerCluster) -> None:
    conn = connect(broker_cluster.brokers[0])
    try:
        produce(conn, "missing-topic", 0, batch(0, 1), acks=0)
        wait_for(lambda: conn.closed, 10, "the broker to close the acks=0 connection")
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ bad input


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
            sock = raw_socket(broker)
            sock.sendall(frame)
            assert closed_by_peer(sock), f"case {i}: the broker kept the connection"
            sock.close()
            # everyone else is still served
            assert produce(healthy, "steady", 0, batch(i, 1)).base_offset == i
        sock = raw_socket(broker)
        sock.sendall(cases[-1])
        sock.close()
        assert produce(healthy, "steady", 0, batch(99, 1)).error_code == 0
    finally:
        healthy.close()


def test_api_versions_newer_than_ours_gets_the_fallback(broker_cluster: BrokerCluster) -> None:
    sock = raw_socket(broker_cluster.brokers[0])
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
            keys = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 42, 47}
            assert {k.api_key for k in response.api_keys} == keys
        finally:
            conn.close()
    finally:
        sock.close()
