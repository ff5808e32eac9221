"""The load tier's events, made from a manifest alone, and their publishing to a cluster that has no audit
topic yet (the whole story, with Spark loads and recovery, runs in test_audit_load.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from audit.audit_codec import AuditEventCodec
from audit.audit_event import AuditEvent, load_event_id
from audit.audit_reader import read_audit_events
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.record.topic_partition import TopicPartition
from pipeline.commit import CommitProtocol
from pipeline.fs import open_filesystem
from pipeline.load_audit_publisher import LoadAuditPublisher, PublishReport, load_events, publish_load_counts
from pipeline.manifest import Manifest, WindowCount
from schemas.client import SchemaRegistryClient
from tests.support.broker_cluster import BrokerCluster, servers
from tests.support.load_job import load_config
from tests.support.registry import RegistryProcess

W = 600_000
T0 = 1_795_334_400_000  # 2026-11-22T08:00Z


def test_one_event_per_partition_and_window_and_timestampless_records_at_the_commit() -> None:
    committed_at = T0 + 5 * W + 42
    manifest = Manifest(
        job="hourly",
        sequence=7,
        run_id="20261122T085000Z-abc123",
        committed_at_ms=committed_at,
        window_ms=W,
        offsets={TopicPartition("pv", 0): 20, TopicPartition("pv", 1): 9},
        counts=(
            WindowCount("pv", 0, T0, 10, 1),
            WindowCount("pv", 0, T0 + W, 6, 0),
            WindowCount("pv", 0, -W, 2, 1),  # timestamp -1: the manifest's window before the epoch
            WindowCount("pv", 0, T0 + 5 * W, 1, 0),  # the commit's window: merged with the above
            WindowCount("pv", 1, T0, 9, 0),
        ),
    )

    def event(partition: int, start: int, rows: int, malformed: int, no_ts: int) -> AuditEvent:
        return AuditEvent(
            topic="pv",
            tier="load",
            host="etl-7",
            window_start_ms=start,
            window_ms=W,
            count=rows,
            bytes=0,
            malformed_count=malformed,
            missing_timestamp_count=no_ts,
            event_id=load_event_id("hourly", "20261122T085000Z-abc123", "pv", partition, start, W),
            emitted_at_ms=committed_at,
            partition=partition,
            counter="20261122T085000Z-abc123",
            job="hourly",
            sequence=7,
        )

    assert load_events(manifest, "etl-7") == [
        event(0, T0, 10, 1, 0),
        event(0, T0 + W, 6, 0, 0),
        event(0, T0 + 5 * W, 1, 0, 3),
        event(1, T0, 9, 0, 0),
    ]
    # the same manifest gives the same events on any host, ids and counts included
    again = load_events(manifest, "etl-9")
    assert [e.event_id for e in again] == [e.event_id for e in load_events(manifest, "etl-7")]
    assert all(a.same_counts(b) for a, b in zip(again, load_events(manifest, "etl-7"), strict=True))


def test_the_publisher_creates_the_missing_audit_topic_and_publishes_within_seconds(
    start_cluster: Callable[..., BrokerCluster], load_registry: RegistryProcess, tmp_path: Path
) -> None:
    # brokers create no topic on demand (their default) and nobody created _audit: the publisher does,
    # with [producer] audit_topic_partitions partitions, instead of waiting max_block_ms (60 s)
    cluster = start_cluster(1)
    warehouse = tmp_path / "warehouse"
    config = load_config(
        zk_connect=cluster.zk_connect,
        registry_url=load_registry.url,
        bootstrap_servers=servers(cluster),
        warehouse=warehouse,
        job="hourly",
        topics=["pv"],
    )
    config = config.replace(audit=config.audit.replace(topic_partitions=2))
    protocol = CommitProtocol(open_filesystem(f"file://{warehouse}"), "hourly")
    manifest = Manifest(
        job="hourly",
        sequence=1,
        run_id="20261122T085000Z-abc123",
        committed_at_ms=T0 + 5 * W,
        window_ms=W,
        offsets={TopicPartition("pv", 0): 11},
        counts=(WindowCount("pv", 0, T0, 10, 1),),
    )
    protocol.fs.write_text(protocol.layout.manifest(1), manifest.dumps(), overwrite=False)
    publisher = LoadAuditPublisher(protocol, config, host="etl-7")
    lines: list[str] = []
    started = time.monotonic()
    report = publish_load_counts(protocol, config, lines.append)
    assert time.monotonic() - started < 10
    assert report == PublishReport(manifests=(1,), events=1)
    assert lines == ["audit: published 1 load counts of manifests 1-1 to _audit"]
    assert publisher.published_sequence() == 1
    assert sorted(cluster.admin.describe_topic("_audit")) == [0, 1]
    codec = AuditEventCodec(SchemaRegistryClient(load_registry.url))
    try:
        read = read_audit_events(
            ConsumerConfig(bootstrap_servers=servers(cluster), fetch_max_wait_ms=100), codec, topic="_audit"
        )
    finally:
        codec.close()
    assert [
        (e.tier, e.topic, e.partition, e.window_start_ms, e.count, e.malformed_count) for e in read.events
    ] == [("load", "pv", 0, T0, 10, 1)]


def test_the_publisher_reports_a_cluster_that_cannot_create_the_topic_at_once(
    start_cluster: Callable[..., BrokerCluster], load_registry: RegistryProcess, tmp_path: Path
) -> None:
    cluster = start_cluster(1)
    cluster.broker(0).stop()  # ZooKeeper knows no live broker: nobody can create _audit
    warehouse = tmp_path / "warehouse"
    config = load_config(
        zk_connect=cluster.zk_connect,
        registry_url=load_registry.url,
        bootstrap_servers=[],  # learn the cluster from ZooKeeper
        warehouse=warehouse,
        job="hourly",
        topics=["pv"],
    )
    protocol = CommitProtocol(open_filesystem(f"file://{warehouse}"), "hourly")
    manifest = Manifest(
        "hourly", 1, "r1", T0, W, {TopicPartition("pv", 0): 3}, counts=(WindowCount("pv", 0, T0, 3, 0),)
    )
    protocol.fs.write_text(protocol.layout.manifest(1), manifest.dumps(), overwrite=False)
    lines: list[str] = []
    started = time.monotonic()
    report = publish_load_counts(protocol, config, lines.append)
    assert time.monotonic() - started < 2
    assert report.error == (
        "TopicCreationError: topic '_audit' does not exist and cannot be created: the cluster has no live "
        "broker to create it; create it with `lumber topics create _audit --partitions 1`"
    )
    assert lines == [
        (
            f"audit: the committed counts were not published to _audit ({report.error}); the next run "
            "publishes them"
        )
    ]
    assert LoadAuditPublisher(protocol, config).published_sequence() == 0
