"""The producer's audit on a cluster without the audit topic whose brokers create no topic on demand (their
default): the emitter creates the topic and its events read back exactly; a cluster that cannot create it
is reported at once and the producer still closes at once, its counts logged."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_reader import read_audit_events
from audit.audited_producer import audited_producer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer_config import ProducerConfig
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from tests.support.broker_cluster import BrokerCluster, servers, wait_for
from tests.support.registry import RegistryProcess

WINDOW_MS = 60_000
W0 = 1_795_334_400_000  # 2026-11-22T08:00Z
W1 = W0 + WINDOW_MS


def test_an_audited_producer_creates_the_audit_topic_and_its_counts_read_back_exactly(
    start_cluster: Callable[..., BrokerCluster], registry: RegistryProcess
) -> None:
    cluster = start_cluster(2)
    cluster.create_topic("pv", 2)
    config = ProducerConfig(
        bootstrap_servers=servers(cluster),
        acks="all",
        linger_ms=0,
        host_name="web-1",
        audit_interval_ms=3_600_000,  # only close() emits
        audit_window_ms=WINDOW_MS,
        audit_topic_partitions=3,
        audit_registry_url=registry.url,
    )
    started = time.monotonic()
    with audited_producer(config, registry=RegistryConfig(url=config.audit_registry_url)) as producer:
        futures = [producer.send("pv", b"a", partition=i % 2, timestamp_ms=W0 + i) for i in range(7)]
        futures += [producer.send("pv", b"bb", partition=1, timestamp_ms=W1 + i) for i in range(5)]
        for future in futures:
            future.result(10)
        # created by the emitter's thread as it started, with the configured partitions
        wait_for(lambda: "_audit" in cluster.admin.list_topics(), 5, "the emitter to create _audit")
        assert sorted(cluster.admin.describe_topic("_audit")) == [0, 1, 2]
    # close() published the counts without waiting for a topic (well under the 60 s max_block_ms)
    assert time.monotonic() - started < 20
    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    try:
        read = read_audit_events(
            ConsumerConfig(bootstrap_servers=servers(cluster), fetch_max_wait_ms=100), codec, topic="_audit"
        )
    finally:
        codec.close()
    assert read.unreadable == 0
    assert sorted((e.topic, e.tier, e.host, e.window_start_ms, e.count, e.bytes) for e in read.events) == [
        ("pv", "producer", "web-1", W0, 7, 7),
        ("pv", "producer", "web-1", W1, 5, 10),
    ]
    assert read.records == 2


def test_a_cluster_that_cannot_create_it_is_reported_at_once_and_close_does_not_wait(
    start_cluster: Callable[..., BrokerCluster], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = start_cluster(1)
    cluster.create_topic("pv", 1)
    config = ProducerConfig(
        acks="all",
        linger_ms=0,
        audit_interval_ms=3_600_000,
        audit_window_ms=WINDOW_MS,
        audit_topic="no audit",  # a name the broker refuses to create
        audit_registry_url="http://127.0.0.1:9",  # never reached: nothing is encoded without a topic
    )
    caplog.set_level(logging.ERROR, logger="audit.audit_emitter")
    expected = (
        "topic 'no audit' does not exist and cannot be created: broker 127.0.0.1:"
        f"{cluster.broker(0).port} (broker 0) refused CreateTopics (1 partitions): INVALID_TOPIC_EXCEPTION"
    )
    started = time.monotonic()
    producer = audited_producer(
        config, zookeeper_connect=cluster.zk_connect, registry=RegistryConfig(url=config.audit_registry_url)
    )
    try:
        wait_for(lambda: any(expected in r.getMessage() for r in caplog.records), 2, "the error at start")
        assert time.monotonic() - started < 2
        assert (
            caplog.records[0]
            .getMessage()
            .endswith("; create it with `lumber topics create 'no audit' --partitions 1`")
        )
        for i in range(3):
            producer.send("pv", b"v", timestamp_ms=W0 + i).result(10)
    finally:
        closing = time.monotonic()
        producer.close()
    assert time.monotonic() - closing < 5  # the 6 rounds of close() each fail at once
    messages = [r.getMessage() for r in caplog.records]
    queued = [m for m in messages if m.startswith("audit: 1 events stay queued with their ids: " + expected)]
    assert len(queued) == 1  # once, though each of the resending rounds of close() is refused again
    assert [m for m in messages if m.startswith("audit: topic ")] == [messages[0]]  # the start's, once
    lost = [m for m in messages if "events could not be delivered to no audit" in m]
    assert len(lost) == 1
    assert '"count": 3' in lost[0]
    assert cluster.admin.list_topics() == ["pv"]
