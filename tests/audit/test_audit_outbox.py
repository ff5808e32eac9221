"""The audit's persistent outbox against real brokers and a real registry: an audited producer killed with
``kill -9`` at random points and restarted with the same state dir leaves a producer tier equal to what it
was acknowledged, and an event published again after a restart is counted once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_emitter import AuditEmitter
from audit.audit_event import AuditEvent
from audit.audit_reader import read_audit_events
from audit.audit_report import dedupe
from audit.audited_producer import audited_producer
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from tests.support.broker_cluster import BrokerCluster, servers, wait_for
from tests.support.registry import RegistryProcess

ROOT = Path(__file__).resolve().parents[2]
W = 60_000
W0 = 1_795_334_400_000  # 2026-11-22T08:00Z


def producer_tier(cluster: BrokerCluster, registry: RegistryProcess) -> tuple[list[AuditEvent], int]:
    """The producer tier's unique events on the audit topic, and how many copies were read in all."""
    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    try:
        read = read_audit_events(ConsumerConfig(bootstrap_servers=servers(cluster)), codec, topic="_audit")
    finally:
        codec.close()
    unique = dedupe(read.events)
    assert unique.conflicts == ()
    return [e for e in unique.events if e.tier == "producer"], len(read.events)


def per_window(events: list[AuditEvent]) -> Counter[int]:
    found: Counter[int] = Counter()
    for event in events:
        found[event.window_start_ms] += event.count
    return found


def topic_records(cluster: BrokerCluster, topic: str) -> dict[int, int]:
    """Record number -> timestamp of every record of ``topic`` (values ``v<n>``)."""
    consumer = Consumer(ConsumerConfig(bootstrap_servers=servers(cluster)))
    try:
        partitions = consumer.partitions_for(topic)
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        found: dict[int, int] = {}
        position = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 60
        while any(position[tp] < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"reading {topic} stalled at {position} of {ends}"
            for record in consumer.poll(timeout_ms=200):
                assert record.value is not None
                found[int(record.value[1:])] = record.timestamp_ms
                tp = TopicPartition(record.topic, record.partition)
                position[tp] = max(position[tp], record.offset + 1)
        return found
    finally:
        consumer.close()


def acked(log: Path) -> dict[int, int]:
    lines = log.read_text().splitlines() if log.exists() else []
    return {int(n): int(ts) for _, n, ts in (line.split() for line in lines)}


@pytest.mark.slow
def test_an_audited_producer_killed_at_random_counts_exactly_what_it_was_acknowledged(
    start_cluster: Callable[..., BrokerCluster], registry: RegistryProcess, tmp_path: Path
) -> None:
    cluster = start_cluster(1)
    cluster.create_topic("pv", 2)
    ack_log = tmp_path / "acks.log"
    state_dir = tmp_path / "state"
    rng = random.Random(24)
    stderr = (tmp_path / "producer.err").open("ab")
    rounds = 6
    for round_ in range(rounds):
        before = len(acked(ack_log))
        process = subprocess.Popen(
            [
                sys.executable, "-m", "tests.audit.audited_producer_process",
                "--servers", cluster.bootstrap_servers, "--registry", registry.url,
                "--state-dir", str(state_dir), "--client-id", "web-producer", "--topic", "pv",
                "--window-ms", str(W), "--base-ms", str(W0), "--ack-log", str(ack_log),
                "--start", str(round_ * 1_000_000),
            ],
            cwd=ROOT,
            stderr=stderr,
        )  # fmt: skip
        try:
            target = before + rng.randint(50, 600)
            wait_for(lambda t=target: len(acked(ack_log)) >= t, 60, f"{target} acknowledgements")  # type: ignore[misc]
            time.sleep(rng.uniform(0, 0.6))  # anywhere between emissions (every 300 ms)
            if round_ < rounds - 1:
                os.kill(process.pid, signal.SIGKILL)
            else:
                process.send_signal(signal.SIGTERM)  # the last one closes: publishes what is left
            assert process.wait(60) == (-signal.SIGKILL if round_ < rounds - 1 else 0)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    stderr.close()

    sent = topic_records(cluster, "pv")
    logged = acked(ack_log)
    assert set(logged) <= set(sent)  # nothing acknowledged is lost (idempotent, acks=all)
    # in flight at a kill: acknowledged by the broker, the process died before it learned it (not in the
    # ack log). The journal write precedes the ack log's line, so such a record may be counted, at most
    unlogged = {n: ts for n, ts in sent.items() if n not in logged}
    events, copies = producer_tier(cluster, registry)
    tier = per_window(events)
    logged_windows = Counter(ts - ts % W for ts in logged.values())
    unlogged_windows = Counter(ts - ts % W for ts in unlogged.values())
    assert sorted(logged_windows) == [W0, W0 + W, W0 + 2 * W, W0 + 3 * W]
    for start in sorted(set(tier) | set(logged_windows)):
        assert logged_windows[start] <= tier[start] <= logged_windows[start] + unlogged_windows[start], (
            f"window {start}: producer tier {tier[start]}, acknowledged {logged_windows[start]}, "
            f"in flight at a kill {unlogged_windows[start]}"
        )
    assert sum(tier.values()) - len(logged) <= len(unlogged)
    # one counter across the restarts, its sequences one after the other, each id once
    assert {e.counter for e in events} == {events[0].counter}
    sequences = sorted({e.sequence for e in events})
    assert sequences == list(range(1, len(sequences) + 1))
    assert copies >= len(events)


def test_an_event_published_again_after_a_restart_is_counted_once(
    start_cluster: Callable[..., BrokerCluster], registry: RegistryProcess, tmp_path: Path
) -> None:
    cluster = start_cluster(1)
    cluster.create_topic("pv", 1)
    config = ProducerConfig(
        bootstrap_servers=servers(cluster),
        client_id="web-producer",
        acks="all",
        linger_ms=0,
        host_name="web-1",
        audit_interval_ms=3_600_000,  # emitted by hand below
        audit_window_ms=W,
        audit_registry_url=registry.url,
        audit_state_dir=str(tmp_path / "state"),
    )
    journal = tmp_path / "state" / "producer-web-producer.journal"
    emitter = AuditEmitter.for_producer(config, registry=RegistryConfig(url=registry.url))
    first = Producer(config, delivery_listener=emitter)
    for n in range(7):
        first.send("pv", b"v%d" % n, timestamp_ms=W0 + n).result(10)
    before_publish = journal.read_bytes()  # counted, not taken
    assert emitter.emit() == 1
    taken = journal.read_bytes()
    wait_for(lambda: emitter.delivered == 1, 20, "the event confirmed")
    wait_for(lambda: len(journal.read_bytes()) > len(taken), 20, "the confirmation journaled")
    first.close()
    # as if killed after the broker confirmed the event and before the journal said so
    journal.write_bytes(taken)
    second = audited_producer(config, registry=RegistryConfig(url=registry.url))
    second.send("pv", b"v7", timestamp_ms=W0 + W).result(10)
    second.close()
    events, copies = producer_tier(cluster, registry)
    assert copies == 3  # sequence 1 twice (same id), sequence 2 (the record of the second process)
    assert sorted((e.window_start_ms, e.count, e.sequence) for e in events) == [(W0, 7, 1), (W0 + W, 1, 2)]
    assert len(before_publish) < len(taken)
