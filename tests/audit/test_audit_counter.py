"""The producer tier of the audit: counting (AuditCounter over real batches) and publishing (a real producer
with its emitter as delivery listener, broker processes and schema registry)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_counter import AuditCounter
from audit.audit_event import AuditEvent, mirror_event_id, producer_event_id
from audit.audit_reader import read_audit_events
from audit.audited_producer import audited_producer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import BrokerResponseError, ClientConfigError
from broker.client.producer.producer import Producer
from broker.client.producer.producer_batch import ProducerBatch
from broker.client.producer.producer_config import ProducerConfig
from broker.record.compression import CompressionType
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from tests.broker.client.helpers import HOST
from tests.support.broker_cluster import servers, wait_for
from tests.support.registry import RegistryProcess

W = 600_000
T0 = 1_795_334_400_000  # 2026-11-22T08:00Z, a window start


def batch(topic: str, *records: tuple[int, bytes | None]) -> ProducerBatch:
    found = ProducerBatch(topic, 0, CompressionType.NONE, time.monotonic(), keep_records=True)
    for timestamp_ms, value in records:
        assert found.append(timestamp_ms, None, value, b"", 1 << 20) >= 0
    return found


def producer(cluster: Any, **settings: Any) -> Producer:
    """An audited producer (its emitter as its delivery listener) on ``cluster``."""
    settings.setdefault("host_name", HOST)
    settings.setdefault("linger_ms", 0)
    settings.setdefault("request_timeout_ms", 10_000)
    settings.setdefault("max_block_ms", 10_000)
    settings.setdefault("enable_idempotence", settings.get("acks", "all") == "all")
    config = ProducerConfig(bootstrap_servers=servers(cluster), **settings)
    return audited_producer(config, registry=RegistryConfig(url=config.audit_registry_url))


def test_only_acknowledged_batches_count_per_window_then_take_numbers_the_deltas() -> None:
    clock = [T0 + 3 * W + 17]
    counter = AuditCounter(
        host="web-1", counter="p-1", window_ms=W, audit_topic="_audit", clock_ms=lambda: clock[0]
    )
    ok = batch("pv", (T0 + 1, b"aaaa"), (T0 + W - 1, b"bb"), (T0 + W, None), (-1, b"cc"))
    ok.append_values(T0 + 2 * W + 5, None, [b"x" * 10, None, b"y" * 3], 0, b"", 1 << 20)  # one segment of 3
    failed = batch("pv", (T0 + 7, b"zzzzz"), (T0 + W + 1, b"z"))
    audit = batch("_audit", (T0 + 2, b"event"))
    raw = ProducerBatch.raw("pv", 0, time.monotonic())
    assert raw.append_raw(b"\0" * 70, 1, 1 << 20) == 0  # records produced (and counted) elsewhere
    ok.build()  # sent: a batch with a listener keeps its records until it is done
    counter.count_batch(failed, BrokerResponseError(10, "produce", topic="pv", partition=0))
    assert counter.take() == []  # nothing confirmed yet
    counter.count_batch(ok, None)
    counter.count_batch(audit, None)  # the audit topic's batch is never counted
    counter.count_batch(raw, None)
    assert counter.failed_records == 2
    assert {k: (c.count, c.bytes, c.missing_timestamp_count) for k, c in counter.totals().items()} == {
        ("pv", T0): (2, 6, 0),
        ("pv", T0 + W): (1, 0, 0),
        ("pv", T0 + 2 * W): (3, 13, 0),
        ("pv", T0 + 3 * W): (0, 2, 1),  # no timestamp: the window of the confirmation
    }
    first = counter.take()
    assert first == [
        AuditEvent(
            topic="pv",
            tier="producer",
            host="web-1",
            window_start_ms=start,
            window_ms=W,
            count=count,
            bytes=size,
            malformed_count=0,
            missing_timestamp_count=no_ts,
            event_id=producer_event_id("web-1", "p-1", "pv", start, W, 1),
            emitted_at_ms=T0 + 3 * W + 17,
            counter="p-1",
            sequence=1,
        )
        for start, count, size, no_ts in (
            (T0, 2, 6, 0),
            (T0 + W, 1, 0, 0),
            (T0 + 2 * W, 3, 13, 0),
            (T0 + 3 * W, 0, 2, 1),
        )
    ]
    assert counter.take() == []
    counter.count_batch(batch("pv", (T0 + 3, b"q")), None)
    clock[0] += 1000
    (second,) = counter.take()
    assert (second.window_start_ms, second.count, second.sequence, second.emitted_at_ms) == (
        T0,
        1,
        2,
        clock[0],
    )
    assert second.event_id == producer_event_id("web-1", "p-1", "pv", T0, W, 2) != first[0].event_id
    assert counter.totals()[("pv", T0)].count == 3


def test_an_audit_needs_a_topic_and_a_registry() -> None:
    with pytest.raises(
        ClientConfigError, match="audit_interval_ms > 0 needs an audit_topic and an audit_registry_url"
    ):
        ProducerConfig(audit_interval_ms=1000, audit_registry_url="")
    assert ProducerConfig().audit_interval_ms == 0  # off unless asked for


# ---------------------------------------------------------------------------------------------- publishing


def audit_events(cluster: Any, registry: RegistryProcess) -> list[AuditEvent]:
    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    try:
        read = read_audit_events(
            ConsumerConfig(bootstrap_servers=servers(cluster), fetch_max_wait_ms=100), codec, topic="_audit"
        )
    finally:
        codec.close()
    assert read.unreadable == 0
    return list(read.events)


def by_window(events: list[AuditEvent]) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for e in events:
        out[(e.topic, e.window_start_ms)] = out.get((e.topic, e.window_start_ms), 0) + e.count
    return out


def test_an_audited_producer_publishes_what_was_confirmed_every_interval_and_on_close(
    broker_cluster: Any, registry: RegistryProcess
) -> None:
    broker_cluster.create_topic("pv", 2)
    broker_cluster.create_topic("_audit", 1)
    p = producer(
        broker_cluster,
        acks="1",
        audit_interval_ms=300,
        audit_registry_url=registry.url,
        max_request_size=4 << 20,
        batch_size=4 << 20,
    )
    try:
        for i in range(5):
            p.send("pv", b"v" * (i + 1), partition=i % 2, timestamp_ms=T0 + i)
        p.send_many("pv", [b"abc"] * 3, partition=1, timestamp_ms=T0 + W + 9)
        p.flush()
        refused = p.send("pv", b"x" * (2 << 20), partition=0, timestamp_ms=T0 + 5)  # over max_message_bytes
        p.flush()
        assert isinstance(refused.exception(0), BrokerResponseError)
        wait_for(
            lambda: sum(by_window(audit_events(broker_cluster, registry)).values()) == 8,
            20,
            "the first emission",
        )
        p.send("pv", b"late", partition=0, timestamp_ms=T0 + 2)
    finally:
        p.close()
    # acks 1: appended, exposed once the broker flushes
    wait_for(
        lambda: sum(by_window(audit_events(broker_cluster, registry)).values()) == 9, 20, "the last event"
    )
    events = audit_events(broker_cluster, registry)
    assert by_window(events) == {("pv", T0): 6, ("pv", T0 + W): 3}
    last = max(e.sequence for e in events)
    assert sorted({e.sequence for e in events}) == list(range(1, last + 1))  # deltas, numbered
    # the record sent after the first counts were seen is alone in the emission at close
    assert [(e.window_start_ms, e.count, e.bytes) for e in events if e.sequence == last] == [(T0, 1, 4)]
    earlier: dict[int, list[int]] = {}
    for e in events:
        if e.sequence < last:
            earlier.setdefault(e.window_start_ms, [0, 0])
            earlier[e.window_start_ms][0] += e.count
            earlier[e.window_start_ms][1] += e.bytes
    assert earlier == {T0: [5, 15], T0 + W: [3, 9]}  # the refused 2 MiB record is not counted
    assert {(e.host, e.tier, e.window_ms, e.partition) for e in events} == {(HOST, "producer", W, None)}
    assert len({e.counter for e in events}) == 1
    assert events[0].counter.startswith("lumber-producer-")
    assert len({e.event_id for e in events}) == 3
    for e in events:
        assert e.event_id == producer_event_id(HOST, e.counter, "pv", e.window_start_ms, W, e.sequence)


def test_an_event_that_could_not_be_sent_is_sent_later_with_its_id(
    start_cluster: Any, registry: RegistryProcess, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = start_cluster(2)
    cluster.create_topic("pv", 1, assignment={0: [0]})
    cluster.create_topic("_audit", 1, assignment={0: [1]})
    cluster.broker(1).stop()  # the audit topic's only broker: its events cannot be delivered for now
    caplog.set_level(logging.WARNING, logger="audit.audit_emitter")
    p = producer(
        cluster,
        acks="all",
        audit_interval_ms=200,
        audit_registry_url=registry.url,
        max_block_ms=400,
        request_timeout_ms=1000,
        delivery_timeout_ms=1000,
    )
    try:
        p.send_many("pv", [b"a", b"b", b"c", b"d"], timestamp_ms=T0 + 1).result(10)
        # the event waits in the outbox
        wait_for(
            lambda: any(m in r.getMessage() for r in caplog.records for m in ("not sent", "not delivered")),
            20,
            "a failed emission",
        )
        cluster.broker(1).start()
        wait_for(lambda: len(audit_events(cluster, registry)) == 1, 20, "the event to be sent again")
    finally:
        p.close()
    (event,) = audit_events(cluster, registry)  # close had nothing left to send
    assert (event.window_start_ms, event.count, event.sequence) == (T0, 4, 1)
    assert event.event_id == producer_event_id(HOST, event.counter, "pv", T0, W, 1)


def test_a_clean_close_publishes_the_counts_an_interval_never_reached(
    broker_cluster: Any, registry: RegistryProcess
) -> None:
    broker_cluster.create_topic("pv", 1)
    broker_cluster.create_topic("_audit", 1)
    with producer(
        broker_cluster, acks="0", audit_interval_ms=3_600_000, audit_registry_url=registry.url
    ) as p:
        p.send_many("pv", [b"1", b"22", b"333"], timestamp_ms=T0 + 4 * W + 1)
    # acks 0: the event was written to the socket; wait for the broker to expose it
    wait_for(lambda: len(audit_events(broker_cluster, registry)) == 1, 20, "the event sent at close")
    (event,) = audit_events(broker_cluster, registry)
    assert (event.window_start_ms, event.count, event.bytes, event.sequence) == (T0 + 4 * W, 3, 6, 1)


def test_a_mirror_tier_counter_counts_runs_with_ids_of_its_own() -> None:
    clock = [T0 + 2 * W]
    counter = AuditCounter(
        host="mirror-1",
        counter="m-1",
        window_ms=W,
        audit_topic="_audit",
        clock_ms=lambda: clock[0],
        tier="mirror",
    )
    counter.count_runs("pv", [(T0 + 1, 1, 5), (T0 + W + 2, 1, 0), (-1, 1, 3)])
    counter.count_runs("_audit", [(T0 + 1, 1, 50)])  # the audit topic is never counted
    counter.count_runs("pv", [])
    events = counter.take()
    assert [(e.tier, e.window_start_ms, e.count, e.bytes, e.missing_timestamp_count) for e in events] == [
        ("mirror", T0, 1, 5, 0),
        ("mirror", T0 + W, 1, 0, 0),
        ("mirror", T0 + 2 * W, 0, 3, 1),
    ]
    assert [e.event_id for e in events] == [
        mirror_event_id("mirror-1", "m-1", "pv", start, W, 1) for start in (T0, T0 + W, T0 + 2 * W)
    ]
    assert mirror_event_id("h", "c", "t", 0, W, 1) != producer_event_id("h", "c", "t", 0, W, 1)
    with pytest.raises(ValueError, match="counts the producer or the mirror tier"):
        AuditCounter(host="h", counter="c", window_ms=W, audit_topic="_audit", tier="load")
