"""Shared helpers for the client tests: clients pointed at the ``broker_cluster`` fixture, reading back."""

from __future__ import annotations

import time
from typing import Any

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from tests.support.broker_cluster import servers

HOST = "test-host"


def producer(cluster: Any, **settings: Any) -> Producer:
    settings.setdefault("host_name", HOST)
    settings.setdefault("linger_ms", 0)
    settings.setdefault("request_timeout_ms", 10_000)
    settings.setdefault("max_block_ms", 10_000)
    # idempotence (the default) needs acks=all: a test asking for acks 0 or 1 turns it off
    settings.setdefault("enable_idempotence", settings.get("acks", "all") == "all")
    return Producer(ProducerConfig(bootstrap_servers=servers(cluster), **settings))


def consumer(cluster: Any, *partitions: TopicPartition, **settings: Any) -> Consumer:
    settings.setdefault("auto_offset_reset", "earliest")
    settings.setdefault("fetch_max_wait_ms", 100)
    settings.setdefault("request_timeout_ms", 10_000)
    return Consumer(ConsumerConfig(bootstrap_servers=servers(cluster), **settings), partitions=partitions)


def read_records(reader: Consumer, count: int, timeout_s: float = 20.0) -> list[ConsumerRecord]:
    """Exactly ``count`` records (fails if fewer arrive within ``timeout_s``; more are left unread)."""
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(out)} of {count} records arrived within {timeout_s} s"
        out.extend(reader.poll(timeout_ms=int(min(remaining, 1.0) * 1000), max_records=count - len(out)))
    return out


def read_batches(reader: Consumer, records: int, timeout_s: float = 20.0) -> list[FetchedBatch]:
    """Whole batches until they hold ``records`` records."""
    out: list[FetchedBatch] = []
    deadline = time.monotonic() + timeout_s
    while sum(b.record_count for b in out) < records:
        remaining = deadline - time.monotonic()
        assert remaining > 0, (
            f"only {sum(b.record_count for b in out)} of {records} records within {timeout_s} s"
        )
        out.extend(reader.poll_batches(timeout_ms=int(min(remaining, 1.0) * 1000)))
    return out
