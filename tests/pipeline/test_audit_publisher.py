"""The load tier's events, made from a manifest alone (the publishing itself runs in test_audit_load.py)."""

from __future__ import annotations

from broker.client.audit_event import AuditEvent, load_event_id
from broker.log.topic_partition import TopicPartition
from pipeline.audit_publisher import load_events
from pipeline.commit import Manifest, WindowCount

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
