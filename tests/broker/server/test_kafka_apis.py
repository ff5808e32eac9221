"""The protocol layer on the wire (broker/server/kafka_apis.py): Metadata, CreateTopics / DeleteTopics,
the config APIs' per-resource answers, acks=0 failures, fetch sessions (with kafka-python, which uses them),
malformed frames and the ApiVersions fallback; against real broker processes and a real ZooKeeper."""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from broker.protocol import ErrorCode, encode_request
from broker.protocol.messages.alter_configs import AlterableConfig, AlterConfigsRequest, AlterConfigsResource
from broker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from broker.protocol.messages.config_resource import AlterConfigOp, ConfigResourceType, ConfigSource
from broker.protocol.messages.create_topics import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from broker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from broker.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from broker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from lumber.dev.process import free_port
from tests.broker.server.helpers import (
    answered,
    batch,
    closed_by_peer,
    connect,
    offsets_in,
    produce,
    raw_socket,
    session_fetch,
    wait_exposed,
)
from tests.broker.server.test_broker_metrics import scrape
from tests.support.broker_cluster import BrokerCluster, servers, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

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


# ------------------------------------------------------------------------------------------ configs

TOPIC = int(ConfigResourceType.TOPIC)
BROKER = int(ConfigResourceType.BROKER)


def test_config_apis_answer_each_resource_on_its_own(broker_cluster: BrokerCluster) -> None:
    conn = connect(broker_cluster.brokers[0])
    try:
        created = conn.request(
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(
                        name="c",
                        num_partitions=1,
                        replication_factor=1,
                        configs=[CreatableTopicConfig(name="retention.ms", value="60000")],
                    )
                ]
            ),
            version=7,
        )
        configs = {c.name: (c.value, c.config_source, c.read_only) for c in created.topics[0].configs}
        assert configs["retention.ms"] == ("60000", ConfigSource.TOPIC_CONFIG, False)
        assert configs["segment.bytes"] == ("1073741824", ConfigSource.DEFAULT_CONFIG, False)
        assert len(configs) == 16

        described = conn.request(
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(TOPIC, "c", ["retention.ms", "no.such.key"]),
                    DescribeConfigsResource(TOPIC, "c", None),  # named twice: both refused
                    DescribeConfigsResource(TOPIC, "missing", None),
                    DescribeConfigsResource(TOPIC, "bad name!", None),
                    DescribeConfigsResource(BROKER, "7", None),
                    DescribeConfigsResource(BROKER, "", None),
                    DescribeConfigsResource(int(ConfigResourceType.GROUP), "g", None),
                ],
                include_synonyms=True,
                include_documentation=True,
            ),
            version=4,
        )
        assert [(r.resource_name, r.error_code, r.error_message) for r in described.results] == [
            ("c", ErrorCode.INVALID_REQUEST, "resource 'c' is named twice"),
            ("c", ErrorCode.INVALID_REQUEST, "resource 'c' is named twice"),
            ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic 'missing' does not exist"),
            (
                "bad name!",
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                described.results[3].error_message,
            ),
            ("7", ErrorCode.INVALID_REQUEST, "unexpected broker id '7': expected 0 or an empty string"),
            ("", 0, None),
            (
                "g",
                ErrorCode.INVALID_REQUEST,
                (
                    "unsupported config resource type GROUP: Lumber has configs for topics (2) and "
                    "brokers (4) only"
                ),
            ),
        ]
        assert "bad name!" in (described.results[3].error_message or "")
        assert described.results[5].configs == []

        one = conn.request(
            DescribeConfigsRequest(
                resources=[DescribeConfigsResource(TOPIC, "c", ["retention.ms", "no.such.key"])],
                include_synonyms=True,
                include_documentation=True,
            ),
            version=4,
        )
        (entry,) = one.results[0].configs
        assert (entry.name, entry.value, entry.config_source, entry.config_type) == (
            "retention.ms",
            "60000",
            ConfigSource.TOPIC_CONFIG,
            5,  # LONG
        )
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
            ("retention.ms", "60000", ConfigSource.TOPIC_CONFIG),
            ("log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG),
        ]
        assert (entry.documentation or "").startswith("Delete a whole non-active segment once")

        altered = conn.request(
            IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsResource(
                        TOPIC, "c", [IncrementalAlterableConfig("segment.ms", int(AlterConfigOp.SET), "1000")]
                    ),
                    IncrementalAlterConfigsResource(
                        TOPIC,
                        "missing",
                        [IncrementalAlterableConfig("segment.ms", int(AlterConfigOp.SET), "1000")],
                    ),
                    IncrementalAlterConfigsResource(
                        BROKER, "0", [IncrementalAlterableConfig("log.retention.ms", 0, "1")]
                    ),
                ]
            ),
            version=1,
        )
        assert [(r.resource_name, r.error_code) for r in altered.responses] == [
            ("c", 0),
            ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("0", ErrorCode.INVALID_REQUEST),
        ]
        bad = conn.request(
            IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsResource(
                        TOPIC,
                        "c",
                        [
                            IncrementalAlterableConfig("segment.ms", int(AlterConfigOp.SET), "5"),
                            IncrementalAlterableConfig("segment.ms", int(AlterConfigOp.DELETE), None),
                        ],
                    ),
                ]
            ),
            version=0,
        )
        assert [(r.error_code, r.error_message) for r in bad.responses] == [
            (ErrorCode.INVALID_REQUEST, "topic 'c': duplicate config keys ['segment.ms'] in one request")
        ]
        bad = conn.request(
            IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsResource(
                        TOPIC, "c", [IncrementalAlterableConfig("segment.ms", 9, "5")]
                    ),
                    IncrementalAlterConfigsResource(
                        TOPIC, "c2", [IncrementalAlterableConfig("segment.ms", int(AlterConfigOp.SET), None)]
                    ),
                ]
            ),
            version=1,
        )
        assert [(r.error_code, r.error_message) for r in bad.responses] == [
            (
                ErrorCode.INVALID_REQUEST,
                (
                    "topic 'c': segment.ms: unknown config operation 9 (expected 0 SET, 1 DELETE, 2 "
                    "APPEND or 3 SUBTRACT)"
                ),
            ),
            (ErrorCode.INVALID_REQUEST, "topic 'c2': segment.ms: SET needs a value, got null"),
        ]
        # AlterConfigs: a null value leaves the key out
        replaced = conn.request(
            AlterConfigsRequest(
                resources=[
                    AlterConfigsResource(
                        TOPIC,
                        "c",
                        [AlterableConfig("retention.bytes", "4096"), AlterableConfig("segment.ms", None)],
                    )
                ]
            ),
            version=0,
        )
        assert [r.error_code for r in replaced.responses] == [0]
    finally:
        conn.close()
    assert broker_cluster.admin.topic_config("c") == {"retention.bytes": "4096"}


# ------------------------------------------------------------------------------------------ produce


def test_acks_zero_error_closes_the_connection(broker_cluster: BrokerCluster) -> None:
    conn = connect(broker_cluster.brokers[0])
    try:
        produce(conn, "missing-topic", 0, batch(0, 1), acks=0)
        wait_for(lambda: conn.closed, 10, "the broker to close the acks=0 connection")
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ fetch sessions


def test_fetch_sessions_answer_only_what_changed_and_sessionless_versions_still_answer_all(
    broker_cluster: BrokerCluster,
) -> None:
    broker_cluster.create_topic("s", 2)
    conn = connect(broker_cluster.brokers[0])
    try:
        assert produce(conn, "s", 0, batch(0, 3)).base_offset == 0
        assert produce(conn, "s", 1, batch(0, 2)).base_offset == 0
        wait_exposed(conn, "s", 0, 3)
        wait_exposed(conn, "s", 1, 2)
        full = session_fetch(conn, 0, 0, {("s", 0): 0, ("s", 1): 0})
        session_id = full.session_id
        assert (full.error_code, session_id > 0) == (0, True)
        got = answered(full)
        assert sorted(got) == [("s", 0), ("s", 1)]
        assert (offsets_in(got["s", 0].records), got["s", 0].high_watermark) == ([0, 1, 2], 3)
        assert (offsets_in(got["s", 1].records), got["s", 1].high_watermark) == ([0, 1], 2)

        # epoch 1: both moved to their ends; nothing new, no high watermark moved: nothing answered
        step = session_fetch(conn, session_id, 1, {("s", 0): 3, ("s", 1): 2})
        assert (step.error_code, step.session_id, answered(step)) == (0, session_id, {})
        # epoch 2 names nothing: partition 1 is read at its cached offset 2, and only it is answered
        assert produce(conn, "s", 1, batch(2, 4)).base_offset == 2
        wait_exposed(conn, "s", 1, 6)
        step = session_fetch(conn, session_id, 2)
        got = answered(step)
        assert sorted(got) == [("s", 1)]
        assert (offsets_in(got["s", 1].records), got["s", 1].high_watermark) == ([2, 3, 4, 5], 6)
        # epoch 3 forgets partition 1: new records there are not answered, partition 0's are
        assert produce(conn, "s", 1, batch(6, 1)).base_offset == 6
        assert produce(conn, "s", 0, batch(3, 2)).base_offset == 3
        wait_exposed(conn, "s", 0, 5)
        step = session_fetch(conn, session_id, 3, {("s", 0): 3}, forgotten={"s": [1]})
        got = answered(step)
        assert sorted(got) == [("s", 0)]
        assert offsets_in(got["s", 0].records) == [3, 4]

        # session errors: the top-level error, no partition, and the session still works afterwards
        wrong = session_fetch(conn, session_id, 9)
        assert (wrong.error_code, answered(wrong)) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, {})
        unknown = session_fetch(conn, session_id + 1, 1)
        assert (unknown.error_code, unknown.session_id, answered(unknown)) == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            0,
            {},
        )
        step = session_fetch(conn, session_id, 4, {("s", 0): 5})
        assert (step.error_code, answered(step)) == (0, {})

        # Fetch v4-v6 have no session fields: every partition, every time, session id 0
        for version in (4, 6):
            old = session_fetch(conn, 0, -1, {("s", 0): 3, ("s", 1): 6}, version=version)
            got = answered(old)
            assert (old.session_id, sorted(got)) == (0, [("s", 0), ("s", 1)])
            assert (offsets_in(got["s", 0].records), offsets_in(got["s", 1].records)) == ([3, 4], [6])
    finally:
        conn.close()


def _poll_offsets(reader: Any, want: int, deadline_s: float = 30) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        for tp, records in reader.poll(timeout_ms=500).items():
            got.extend((tp.partition, r.offset) for r in records)
    return got


def test_kafka_python_reads_through_a_session_and_recovers_from_its_eviction(
    start_cluster: Callable[..., BrokerCluster], caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python opens a session (Fetch v7+); a follower's session evicts it (one slot; a privileged
    session may evict a consumer's at any time); kafka-python gets FETCH_SESSION_ID_NOT_FOUND, goes back to
    full fetches and reads on, every record once, at its offset."""
    caplog.set_level(logging.DEBUG, logger="kafka.consumer.fetcher")
    port = free_port()
    cluster = start_cluster(1, max_incremental_fetch_session_cache_slots=1, metrics_port=port)
    cluster.create_topic("kp", 3)
    conn = connect(cluster.brokers[0])
    reader = kafka.KafkaConsumer(
        bootstrap_servers=servers(cluster), group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    sessions = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
    cached = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
    evictions = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"
    try:
        assert produce(conn, "kp", 0, batch(0, 40)).base_offset == 0
        reader.assign([kafka.TopicPartition("kp", p) for p in range(3)])
        reader.seek_to_beginning()
        got = _poll_offsets(reader, 40)
        assert sorted(got) == [(0, o) for o in range(40)]
        # in its session now: the answers carry partition 2 only
        assert produce(conn, "kp", 2, batch(0, 25)).base_offset == 0
        got = _poll_offsets(reader, 25)
        assert sorted(got) == [(2, o) for o in range(25)]
        metrics = scrape(port)
        assert (metrics[sessions, ()], metrics[cached, ()], metrics[evictions, ()]) == (1, 3, 0)

        # a follower's full fetch (replica_id >= 0) takes the only slot
        follower = session_fetch(conn, 0, 0, {("kp", 1): 0}, replica_id=1)
        assert follower.session_id > 0
        metrics = scrape(port)
        assert (metrics[sessions, ()], metrics[cached, ()], metrics[evictions, ()]) == (1, 1, 1)

        assert produce(conn, "kp", 1, batch(0, 30)).base_offset == 0
        assert produce(conn, "kp", 0, batch(40, 10)).base_offset == 40
        got = _poll_offsets(reader, 40)
        assert sorted(got) == [(0, o) for o in range(40, 50)] + [(1, o) for o in range(30)]
        # no slot for kafka-python now: it fetches in full, and the follower's session stays
        assert scrape(port)[sessions, ()] == 1
        assert session_fetch(conn, follower.session_id, 1).error_code == 0
    finally:
        reader.close()
        conn.close()
    said = [r.getMessage() for r in caplog.records if r.name == "kafka.consumer.fetcher"]
    assert any("created a new incremental fetch session" in m for m in said), said[-20:]
    assert any("sent an incremental fetch response for session" in m for m in said), said[-20:]
    assert any("FetchSessionIdNotFoundError" in m for m in said), said[-20:]
    assert not [m for m in said if "invalid" in m], said[-20:]


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
            keys = {
                0,
                1,
                2,
                3,
                8,
                9,
                10,
                11,
                12,
                13,
                14,
                15,
                16,
                17,
                18,
                19,
                20,
                21,
                22,
                23,
                29,
                30,
                31,
                32,
                33,
                35,
                36,
                37,
                42,
                43,
                44,
                45,
                46,
                47,
                60,
                61,
            }
            assert {k.api_key for k in response.api_keys} == keys
        finally:
            conn.close()
    finally:
        sock.close()
