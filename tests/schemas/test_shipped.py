from __future__ import annotations

import pytest

from schemas.errors import SchemaError
from schemas.registry.compatibility import incompatibilities
from schemas.shipped import SHIPPED, shipped_schema, shipped_schema_text


def fields(name: str) -> dict[str, object]:
    return {f["name"]: f["type"] for f in shipped_schema(name).tree["fields"]}


@pytest.mark.parametrize("name", ["page_view", "page_view_v2", "click", "search"])
def test_tracking_events_carry_timestamp_and_host(name: str) -> None:
    schema = shipped_schema(name)
    assert schema.type_name.startswith("lumber.tracking.")
    assert fields(name)["timestamp_ms"] == "long"
    assert fields(name)["host"] == "string"
    assert fields(name)["event_id"] == "string"


def test_audit_event_fields() -> None:
    schema = shipped_schema("audit_event")
    assert schema.type_name == "lumber.audit.AuditEvent"
    assert fields("audit_event") == {
        "topic": "string",
        "tier": {
            "type": "enum",
            "name": "lumber.audit.AuditTier",
            "symbols": ["producer", "load", "mirror"],
            "doc": "Where in the pipeline the messages were counted.",
        },
        "host": "string",
        "window_start_ms": "long",
        "window_ms": "long",
        "count": "long",
        "bytes": "long",
        "malformed_count": "long",
        "missing_timestamp_count": "long",
        "event_id": "string",
        "emitted_at_ms": "long",
        "partition": ["null", "int"],
        "counter": "string",
        "job": ["null", "string"],
        "sequence": "long",
    }


def test_page_view_v2_evolves_fully_compatibly() -> None:
    v1, v2 = shipped_schema("page_view"), shipped_schema("page_view_v2")
    assert set(fields("page_view_v2")) - set(fields("page_view")) == {"load_time_ms"}
    assert incompatibilities(reader=v2, writer=v1) == []
    assert incompatibilities(reader=v1, writer=v2) == []


def test_shipped_files_are_package_data() -> None:
    assert len(SHIPPED) == 5
    for name in SHIPPED:
        assert shipped_schema_text(name).lstrip().startswith("{")
    with pytest.raises(SchemaError, match="no shipped schema 'nope'; the shipped ones are page_view"):
        shipped_schema_text("nope")
