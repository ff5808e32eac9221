"""Reconciliation (audit/audit_report.py) over hand-made events: every column, status and rule, exactly."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from audit.audit_event import AuditEvent, load_event_id, producer_event_id
from audit.audit_report import AuditReport, dedupe, reconcile
from audit.audit_tolerance import Tolerance
from audit.errors import AuditError
from schemas.avro_schema import AvroSchema
from schemas.registry.compatibility import incompatibilities
from schemas.shipped import shipped_schema

W = 600_000
HOUR = 3_600_000
T0 = 1_795_334_400_000  # 2026-11-22T08:00Z
NOW = T0 + 10 * HOUR


def produced(
    window: int,
    count: int,
    at: int,
    *,
    host: str = "web-1",
    sequence: int = 1,
    topic: str = "pv",
    width: int = W,
) -> AuditEvent:
    start = T0 + window * width
    return AuditEvent(
        topic=topic,
        tier="producer",
        host=host,
        window_start_ms=start,
        window_ms=width,
        count=count,
        bytes=count * 100,
        malformed_count=0,
        missing_timestamp_count=0,
        event_id=producer_event_id(host, f"{host}-p", topic, start, width, sequence),
        emitted_at_ms=at,
        counter=f"{host}-p",
        sequence=sequence,
    )


def loaded(
    window: int,
    rows: int,
    at: int,
    *,
    run: str = "r1",
    partition: int = 0,
    malformed: int = 0,
    job: str = "hourly",
    topic: str = "pv",
    no_timestamp: int = 0,
) -> AuditEvent:
    start = T0 + window * W
    return AuditEvent(
        topic=topic,
        tier="load",
        host="etl-1",
        window_start_ms=start,
        window_ms=W,
        count=rows,
        bytes=0,
        malformed_count=malformed,
        missing_timestamp_count=no_timestamp,
        event_id=load_event_id(job, run, topic, partition, start, W),
        emitted_at_ms=at,
        partition=partition,
        counter=run,
        job=job,
    )


def audit(events: list[AuditEvent], **kwargs: object) -> AuditReport:
    options: dict[str, object] = {"since_ms": T0, "until_ms": T0 + 4 * HOUR, "now_ms": NOW, "job": "hourly"}
    options.update(kwargs)
    return reconcile(events, **options)  # type: ignore[arg-type]


def row(report: AuditReport, window: int, topic: str = "pv") -> tuple[object, ...]:
    w = report.window(topic, T0 + window * W)
    return (w.expected, w.loaded, w.missing, w.duplicate, w.late, w.malformed, w.status)


def test_matching_counts_from_two_hosts_and_two_partitions_are_complete() -> None:
    after = T0 + HOUR
    events = [
        produced(0, 5, after, host="web-1"),
        produced(0, 3, after, host="web-2"),
        produced(1, 4, after, host="web-1"),
        loaded(0, 6, after + 10, partition=0),
        loaded(0, 2, after + 10, partition=1),
        loaded(1, 4, after + 10, partition=0),
    ]
    report = audit(events)
    assert row(report, 0) == (8, 8, 0, 0, 0, 0, "COMPLETE")
    assert row(report, 1) == (4, 4, 0, 0, 0, 0, "COMPLETE")
    first = report.window("pv", T0)
    assert first.hosts == {"web-1": 5, "web-2": 3}
    assert first.expected_bytes == 800
    assert first.first_complete_at_ms == after + 10
    assert report.ok
    assert report.notes == ()
    totals = report.totals("pv")
    assert (totals.windows, totals.expected, totals.loaded, dict(totals.statuses)) == (
        2,
        12,
        12,
        {"COMPLETE": 2},
    )


def test_missing_duplicate_and_malformed_land_in_their_own_columns() -> None:
    at = T0 + HOUR
    events = [
        produced(0, 10, at),
        loaded(0, 7, at + 1),  # 3 missing
        produced(1, 10, at),
        loaded(1, 12, at + 1),  # 2 duplicates
        produced(2, 10, at),
        loaded(2, 8, at + 1, malformed=2),  # 2 malformed, nothing missing
    ]
    report = audit(events)
    assert row(report, 0) == (10, 7, 3, 0, 0, 0, "INCOMPLETE")
    assert row(report, 1) == (10, 12, 0, 2, 0, 0, "INCOMPLETE")
    assert row(report, 2) == (10, 8, 0, 0, 0, 2, "COMPLETE")
    assert [(w.window_start_ms - T0) // W for w in report.failing] == [0, 1]
    assert not report.ok


def test_late_is_what_arrives_after_completion_for_messages_produced_after_it() -> None:
    end = T0 + W
    events = [
        produced(0, 6, end + 100),
        loaded(0, 6, end + 200, run="r1"),  # complete here
        produced(0, 3, end + 300, sequence=2),  # old timestamps, produced after the window was loaded
        loaded(0, 3, end + 400, run="r2"),  # late
        produced(1, 6, end + 100),
        loaded(1, 6, end + W + 200, run="r1"),  # window 1 ends at end + W: complete at its commit
        loaded(1, 4, end + W + 400, run="r2"),  # re-read after the offsets were rewound: duplicate, not late
    ]
    report = audit(events)
    assert row(report, 0) == (9, 9, 0, 0, 3, 0, "COMPLETE")
    assert report.window("pv", T0).first_complete_at_ms == end + 200
    assert row(report, 1) == (6, 10, 0, 4, 0, 0, "INCOMPLETE")


def test_counts_before_the_window_ends_do_not_make_it_complete_early() -> None:
    start = T0
    end = T0 + W
    events = [
        produced(0, 4, start + 100),
        loaded(0, 4, start + 200, run="r1"),  # matches, but the window is still running
        produced(0, 2, start + 300, sequence=2),  # on time
        loaded(0, 2, end + 10, run="r2"),
    ]
    report = audit(events)
    assert row(report, 0) == (6, 6, 0, 0, 0, 0, "COMPLETE")
    assert report.window("pv", T0).first_complete_at_ms == end + 10


def test_a_window_matching_at_its_end_is_complete_at_its_end() -> None:
    end = T0 + W
    events = [produced(0, 4, T0 + 100), loaded(0, 4, T0 + 200), loaded(0, 1, end + 5, run="r2")]
    report = audit(events)
    assert report.window("pv", T0).first_complete_at_ms == end
    assert row(report, 0) == (4, 5, 0, 1, 0, 0, "INCOMPLETE")


def test_open_within_the_window_and_its_grace_then_incomplete() -> None:
    events = [produced(0, 5, T0 + 1), loaded(0, 3, T0 + W + 1)]
    end = T0 + W
    assert row(audit(events, now_ms=T0 + 5), 0)[-1] == "OPEN"  # the window has not ended
    assert row(audit(events, now_ms=end + HOUR - 1), 0)[-1] == "OPEN"  # within the grace period
    late_report = audit(events, now_ms=end + HOUR)
    assert row(late_report, 0) == (5, 3, 2, 0, 0, 0, "INCOMPLETE")
    assert row(audit(events, now_ms=end + 10, grace_ms=0), 0)[-1] == "INCOMPLETE"
    assert audit(events, now_ms=end + HOUR - 1).ok  # OPEN windows do not fail the audit
    # a complete window is COMPLETE as soon as it has ended, grace or not
    assert row(audit([produced(0, 3, T0 + 1), loaded(0, 3, T0 + 2)], now_ms=end), 0)[-1] == "COMPLETE"


def test_tolerance_as_a_count_and_as_a_share() -> None:
    at = T0 + HOUR
    events = [produced(0, 1000, at), loaded(0, 997, at + 1), produced(1, 1000, at), loaded(1, 1002, at + 1)]
    assert [row(audit(events), w)[-1] for w in (0, 1)] == ["INCOMPLETE", "INCOMPLETE"]
    three = audit(events, tolerance=Tolerance.parse("3"))
    assert [row(three, w)[-1] for w in (0, 1)] == ["COMPLETE", "COMPLETE"]
    share = audit(events, tolerance=Tolerance.parse("0.25%"))  # 2 of 1000
    assert [row(share, w)[-1] for w in (0, 1)] == ["INCOMPLETE", "COMPLETE"]
    assert share.window("pv", T0).allowed == 2
    assert str(Tolerance.parse("0.25%")) == "0.25%"
    for bad in ("-1", "x", "101%", "1.5"):
        with pytest.raises(ValueError, match="expected a count of messages"):
            Tolerance.parse(bad)


def test_repeated_event_ids_count_once_and_conflicts_are_reported() -> None:
    at = T0 + HOUR
    first = produced(0, 5, at)
    again = produced(0, 5, at + 999)  # the same id re-emitted (a retry): same counts
    conflicting = AuditEvent(**{**first.to_record(), "count": 7})  # same id, other counts
    load = loaded(0, 5, at + 1)
    report = audit([first, again, load, load, conflicting])
    assert row(report, 0) == (5, 5, 0, 0, 0, 0, "COMPLETE")
    assert (report.events_read, report.events_unique) == (5, 2)
    assert report.conflicts == (first.event_id,)
    assert report.notes == (
        f"1 event ids came with different counts (the first copy was used): {first.event_id}",
    )
    assert dedupe([first, again]).dropped == 1


def test_only_the_chosen_jobs_load_counts_and_the_chosen_topics() -> None:
    at = T0 + HOUR
    events = [
        produced(0, 5, at),
        loaded(0, 5, at + 1, job="hourly"),
        loaded(0, 5, at + 1, job="backfill"),
        produced(0, 2, at, topic="clicks"),
    ]
    assert row(audit(events), 0) == (5, 5, 0, 0, 0, 0, "COMPLETE")
    assert row(audit(events, job=None), 0) == (5, 10, 0, 5, 0, 0, "INCOMPLETE")
    both = audit(events)
    assert both.topics == ("clicks", "pv")
    assert both.notes == (
        (
            "clicks: no load-tier events in this range from job 'hourly': not loaded yet, or [audit] "
            "publish_load_counts is off"
        ),
    )
    assert audit(events, topics=["pv"]).topics == ("pv",)


def test_windows_nest_into_the_widest_and_misaligned_ones_are_refused() -> None:
    at = T0 + 2 * HOUR
    events = [produced(0, 3, at), produced(1, 4, at), loaded(0, 7, at + 1, run="r1")]
    hourly_load = AuditEvent(**{**loaded(0, 2, at + 2, run="r2").to_record(), "window_ms": HOUR})
    report = audit([*events, hourly_load])
    assert report.window_ms == HOUR
    assert [row(report, 0)] == [(7, 9, 0, 2, 0, 0, "INCOMPLETE")]
    odd = AuditEvent(
        **{
            **produced(0, 1, at).to_record(),
            "event_id": "x",
            "window_ms": 420_000,
            "window_start_ms": T0 - T0 % 420_000,
        }
    )
    with pytest.raises(AuditError, match=r"pv producer tier: 420000 ms"):
        audit([*events, hourly_load, odd])


def test_the_range_selects_windows_by_their_start_and_missing_timestamps_are_shown_apart() -> None:
    at = T0 + HOUR
    events = [produced(0, 2, at), produced(6, 3, at), loaded(0, 2, at + 1, no_timestamp=4)]
    report = audit(events, until_ms=T0 + HOUR)  # window 6 starts at the hour: outside
    assert [w.window_start_ms for w in report.windows] == [T0]
    assert report.window("pv", T0).missing_timestamp == {"producer": 0, "load": 4}
    assert row(report, 0) == (2, 2, 0, 0, 0, 0, "COMPLETE")
    with pytest.raises(AuditError, match="the audit range is empty"):
        audit(events, since_ms=T0, until_ms=T0)


def test_a_topic_without_producer_counts_says_so() -> None:
    report = audit([loaded(0, 4, T0 + HOUR)])
    assert row(report, 0) == (0, 4, 0, 4, 0, 0, "INCOMPLETE")
    assert report.notes == (
        (
            "pv: no producer-tier events in this range, so nothing is expected: are its producers audited "
            "([producer] audit_interval_ms)?"
        ),
    )


def test_the_json_form_names_every_column() -> None:
    report = audit([produced(0, 5, T0 + HOUR), loaded(0, 4, T0 + HOUR + 1, malformed=1)])
    found = report.to_json()
    assert found["ok"] is True
    assert found["windows"] == [
        {
            "topic": "pv",
            "window_start": "2026-11-22 08:00",
            "window_start_ms": T0,
            "window_ms": W,
            "expected": 5,
            "loaded": 4,
            "missing": 0,
            "duplicate": 0,
            "late": 0,
            "malformed": 1,
            "missing_timestamp": {"producer": 0, "load": 0},
            "expected_bytes": 500,
            "status": "COMPLETE",
            "first_complete_at_ms": T0 + HOUR + 1,
            "tolerance_messages": 0,
            "tiers": {
                "producer": {"count": 5, "bytes": 500, "malformed": 0, "missing_timestamp": 0, "events": 1},
                "load": {"count": 4, "bytes": 0, "malformed": 1, "missing_timestamp": 0, "events": 1},
            },
            "hosts": {"web-1": 5},
        }
    ]
    assert found["topics"] == [
        {
            "topic": "pv",
            "windows": 1,
            "expected": 5,
            "loaded": 4,
            "missing": 0,
            "duplicate": 0,
            "late": 0,
            "malformed": 1,
            "statuses": {"COMPLETE": 1, "INCOMPLETE": 0, "OPEN": 0},
        }
    ]
    assert found["events"] == {
        "read": 2,
        "unique": 2,
        "duplicates_dropped": 0,
        "conflicting_ids": [],
        "unreadable": 0,
    }


def test_events_of_the_first_schema_version_read_with_the_added_fields_defaults() -> None:
    current = shipped_schema("audit_event")
    added = ("partition", "counter", "job", "sequence")
    first_tree = {**current.tree, "fields": [f for f in current.tree["fields"] if f["name"] not in added]}
    first = AvroSchema.parse(json.dumps(first_tree))
    assert incompatibilities(reader=current, writer=first) == []
    assert incompatibilities(reader=first, writer=current) == []  # a full-compatible evolution
    old = {k: v for k, v in produced(0, 5, T0 + HOUR).to_record().items() if k not in added}
    stream = io.BytesIO()
    schemaless_writer(stream, parse_schema(first_tree), old)
    stream.seek(0)
    record: Any = schemaless_reader(stream, parse_schema(first_tree), parse_schema(current.tree))
    event = AuditEvent.from_record(record)
    assert (event.count, event.partition, event.counter, event.job, event.sequence) == (5, None, "", None, 0)
