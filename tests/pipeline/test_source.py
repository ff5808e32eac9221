from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from broker.client.consumer.consumer_record import ConsumerRecord
from pipeline.load_errors import ReadError
from pipeline.ranges import OffsetRange
from pipeline.record_columns import RecordColumns
from pipeline.source import ReadTask, SourceSettings, quarantine_reason, records_to_batches
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.load_job import unique_topic
from tests.support.registry import RegistryProcess

HOUR_9 = 1_795_338_000_000  # 2026-11-22T09:00:00Z
HOUR_10 = HOUR_9 + 3_600_000


def view(n: int, ts: int, v2: bool) -> dict[str, Any]:
    record = {
        "event_id": f"e{n}",
        "timestamp_ms": ts,
        "host": f"web{n % 3}",
        "member_id": None if n % 2 else n,
        "session_id": f"s{n}",
        "page_key": "feed",
        "page_url": f"/p/{n}",
        "referrer_url": None,
        "user_agent": "ua",
        "ip_address": "10.0.0.1",
    }
    if v2:
        record["load_time_ms"] = n * 10
    return record


@pytest.fixture
def setup(load_registry: RegistryProcess) -> Any:
    topic = unique_topic("pv")
    client = SchemaRegistryClient(load_registry.url)
    v1 = client.register(f"{topic}-value", shipped_schema_text("page_view"))
    v2 = client.register(f"{topic}-value", shipped_schema_text("page_view_v2"))
    click = client.register(f"{topic}_clicks-value", shipped_schema_text("click"))
    latest = client.get_latest(f"{topic}-value")
    serde = AvroSerde(client)
    yield topic, v1, v2, click, latest, serde
    client.close()


def rec(topic: str, offset: int, ts: int, value: bytes | None, host: str | None = "web1") -> ConsumerRecord:
    headers = () if host is None else (("host", host.encode()),)
    return ConsumerRecord(topic, 3, offset, ts, b"k%d" % offset, value, headers)


def test_decodes_v1_and_v2_into_one_table_and_quarantines_the_rest(
    setup: Any, load_registry: RegistryProcess
) -> None:
    topic, v1, v2, click, latest, serde = setup
    good = [
        rec(topic, 10, HOUR_9 + 1, serde.encode(v1, view(10, HOUR_9 + 1, False))),
        rec(topic, 11, HOUR_10 + 2, serde.encode(v2, view(11, HOUR_10 + 2, True)), host=None),
    ]
    framed_v1 = serde.encode(v1, view(12, HOUR_9, False))
    bad = [
        rec(topic, 12, HOUR_9 + 3, b"\x01" + framed_v1[1:]),  # bad magic byte
        rec(topic, 13, HOUR_9 + 4, b"\x00\x00"),  # shorter than the header
        rec(topic, 14, HOUR_9 + 5, struct.pack(">bI", 0, 999_999) + framed_v1[5:]),  # unknown id
        rec(
            topic, 15, HOUR_9 + 6, framed_v1[:5] + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
        ),  # corrupt
        rec(
            topic,
            16,
            HOUR_9 + 7,
            serde.encode(
                click,
                {
                    "event_id": "c",
                    "timestamp_ms": 1,
                    "host": "h",
                    "session_id": "s",
                    "page_key": "p",
                    "element_id": "e",
                },
            ),
        ),  # schema mismatch: a Click does not resolve to a PageView
        rec(topic, 17, HOUR_9 + 8, None),  # no value
    ]
    chunks = [RecordColumns.from_records(c) for c in (good[:1], [*good[1:], *bad[:3]], bad[3:])]
    task = ReadTask(4, OffsetRange(topic, 3, 10, 18), latest.schema, latest.schema_id)
    settings = SourceSettings(registry=RegistryConfig(url=load_registry.url), arrow_batch_records=3)

    data = [row for b in records_to_batches(task, settings, "data", chunks) for row in b.to_pylist()]
    assert data == [
        {
            **view(10, HOUR_9 + 1, False),
            "load_time_ms": None,
            "_topic": topic,
            "_partition": 3,
            "_offset": 10,
            "_timestamp": HOUR_9 + 1,
            "_schema_id": v1,
            "_host": "web1",
            "_task": 4,
            "dt": "2026-11-22",
            "hr": "09",
        },
        {
            **view(11, HOUR_10 + 2, True),
            "_topic": topic,
            "_partition": 3,
            "_offset": 11,
            "_timestamp": HOUR_10 + 2,
            "_schema_id": v2,
            "_host": None,
            "_task": 4,
            "dt": "2026-11-22",
            "hr": "10",
        },
    ]

    errors = [row for b in records_to_batches(task, settings, "errors", chunks) for row in b.to_pylist()]
    assert [(e["_offset"], e["_reason"], e["_schema_id"]) for e in errors] == [
        (12, "bad_framing", None),
        (13, "bad_framing", None),
        (14, "unknown_schema_id", 999_999),
        (15, "corrupt_bytes", v1),
        (16, "schema_mismatch", click),
        (17, "null_value", None),
    ]
    assert [e["_value"] for e in errors] == [r.value for r in bad]
    assert all(
        e["_key"] == b"k%d" % e["_offset"] and e["dt"] == "2026-11-22" and e["hr"] == "09" for e in errors
    )
    assert "999999" in errors[2]["_error"]


def test_event_time_from_a_payload_field(setup: Any, load_registry: RegistryProcess) -> None:
    topic, _v1, v2, _click, latest, serde = setup
    records = [rec(topic, 0, HOUR_9, serde.encode(v2, view(0, HOUR_10 + 5, True)))]
    task = ReadTask(0, OffsetRange(topic, 3, 0, 1), latest.schema, latest.schema_id, "timestamp_ms")
    settings = SourceSettings(registry=RegistryConfig(url=load_registry.url))
    (row,) = [
        r
        for b in records_to_batches(task, settings, "data", [RecordColumns.from_records(records)])
        for r in b.to_pylist()
    ]
    assert (row["_timestamp"], row["dt"], row["hr"]) == (HOUR_9, "2026-11-22", "10")


def test_a_range_not_fully_accounted_for_fails_the_task(setup: Any, load_registry: RegistryProcess) -> None:
    topic, v1, _v2, _click, latest, serde = setup
    records = [rec(topic, 5, HOUR_9, serde.encode(v1, view(5, HOUR_9, False)))]
    task = ReadTask(1, OffsetRange(topic, 3, 5, 7), latest.schema, latest.schema_id)
    settings = SourceSettings(registry=RegistryConfig(url=load_registry.url))
    with pytest.raises(ReadError, match=r"1 rows \+ 0 quarantined = 1 of 1 records read, expected 2"):
        list(records_to_batches(task, settings, "data", [RecordColumns.from_records(records)]))


def test_task_descriptions_round_trip() -> None:
    task = ReadTask(3, OffsetRange("t", 1, 2, 9), '{"type":"string"}', 5, "ts")
    assert ReadTask.from_json(json.loads(json.dumps(task.to_json()))) == task
    assert quarantine_reason(None, None) == "null_value"
