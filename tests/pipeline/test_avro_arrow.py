from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from pipeline import avro_arrow
from pipeline.load_errors import UnsupportedSchemaError
from schemas.avro_schema import AvroSchema
from schemas.shipped import shipped_schema

RICH = {
    "type": "record",
    "name": "Rich",
    "namespace": "t",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "n", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "blob", "type": "bytes"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {
            "name": "inner",
            "type": {
                "type": "record",
                "name": "Inner",
                "fields": [{"name": "m", "type": {"type": "map", "values": "int"}}],
            },
        },
        {"name": "again", "type": ["null", "Inner"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}


def test_page_view_v2_columns() -> None:
    schema = avro_arrow.payload_schema(shipped_schema("page_view_v2"))
    assert schema.names == [
        "event_id",
        "timestamp_ms",
        "host",
        "member_id",
        "session_id",
        "page_key",
        "page_url",
        "referrer_url",
        "user_agent",
        "ip_address",
        "load_time_ms",
    ]
    assert schema.field("member_id").type == pa.int64()
    assert schema.field("load_time_ms").type == pa.int32()
    table = avro_arrow.data_schema(schema)
    assert table.names[-6:] == list(avro_arrow.META_COLUMNS)
    assert avro_arrow.staging_schema(table).names[-3:] == ["_task", "dt", "hr"]


def test_every_supported_type_maps_and_converts() -> None:
    schema = AvroSchema.parse(json.dumps(RICH))
    arrow = avro_arrow.payload_schema(schema)
    assert arrow.field("kind").type == pa.string()
    assert arrow.field("attrs").type == pa.map_(pa.string(), pa.int64())
    assert arrow.field("again").type == arrow.field("inner").type
    assert arrow.field("day").type == pa.date32()
    assert arrow.field("at").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("price").type == pa.decimal128(9, 2)
    record = {
        "flag": True,
        "n": 7,
        "ratio": 0.5,
        "blob": b"\x00\x01",
        "kind": "B",
        "tags": ["x", "y"],
        "attrs": {"a": 1, "b": None},
        "inner": {"m": {"k": 3}},
        "again": None,
        "day": dt.date(2026, 11, 22),
        "at": dt.datetime(2026, 11, 22, 9, 30, tzinfo=dt.UTC),
        "price": decimal.Decimal("12.34"),
        "id": "4f1c",
    }
    arrays = avro_arrow.columns([record], arrow)
    batch = pa.RecordBatch.from_arrays(arrays, schema=arrow)
    assert batch.to_pylist()[0] == {
        **record,
        "attrs": [("a", 1), ("b", None)],
        "inner": {"m": [("k", 3)]},
    }


def test_event_time_field_types() -> None:
    assert avro_arrow.event_time_type(shipped_schema("page_view"), "timestamp_ms") == "ms"
    rich = AvroSchema.parse(json.dumps(RICH))
    assert avro_arrow.event_time_type(rich, "at") == "datetime"
    with pytest.raises(UnsupportedSchemaError, match="expected a long"):
        avro_arrow.event_time_type(rich, "kind")
    with pytest.raises(UnsupportedSchemaError, match="not a field"):
        avro_arrow.event_time_type(rich, "nope")


@pytest.mark.parametrize(
    ("field_type", "message"),
    [
        (["null", "int", "string"], "2 non-null branches"),
        ({"type": "int", "logicalType": "time-millis"}, "time-millis"),
        ("null", "of type null"),
    ],
)
def test_unsupported_types_name_the_field(field_type: object, message: str) -> None:
    schema = AvroSchema.parse(
        json.dumps({"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]})
    )
    with pytest.raises(UnsupportedSchemaError, match="'f'") as caught:
        avro_arrow.payload_schema(schema)
    assert message in str(caught.value)


def test_payload_fields_may_not_take_the_loads_column_names() -> None:
    schema = AvroSchema.parse(
        json.dumps({"type": "record", "name": "R", "fields": [{"name": "_offset", "type": "long"}]})
    )
    with pytest.raises(UnsupportedSchemaError, match="'_offset'"):
        avro_arrow.payload_schema(schema)
