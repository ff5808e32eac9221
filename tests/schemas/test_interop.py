"""Confluent's own Python client and Avro serde against our registry (a real server process) and our serde."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from schemas.avro_schema import AvroSchema
from schemas.client import SchemaRegistryClient
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.schemas.conftest import RegistryProcess

pytestmark = pytest.mark.interop

SEARCH = {
    "event_id": "s-1",
    "timestamp_ms": 1_700_000_000_000,
    "host": "web-3",
    "member_id": 7,
    "session_id": "abc",
    "query": "data engineer",
    "vertical": "JOBS",
    "result_count": 120,
    "page_number": 1,
    "latency_ms": 35,
}


@pytest.fixture
def confluent(registry: RegistryProcess) -> Iterator[ConfluentClient]:
    client = ConfluentClient({"url": registry.url})
    yield client
    client.__exit__()


def test_confluent_client_registers_and_looks_up(
    confluent: ConfluentClient, registry: RegistryProcess
) -> None:
    v1 = Schema(shipped_schema_text("page_view"), "AVRO")
    v2 = Schema(shipped_schema_text("page_view_v2"), "AVRO")
    assert confluent.register_schema("pv-value", v1) == 1
    assert confluent.register_schema("pv-value", v2) == 2
    assert confluent.register_schema("pv-other", v1) == 1  # same schema, other subject: same id
    fetched = confluent.get_schema(2)
    assert fetched.schema_type == "AVRO"
    assert AvroSchema.parse(str(fetched.schema_str)) == AvroSchema.parse(shipped_schema_text("page_view_v2"))
    found = confluent.lookup_schema("pv-value", v1)
    assert (found.schema_id, found.subject, found.version) == (1, "pv-value", 1)
    latest = confluent.get_latest_version("pv-value")
    assert (latest.schema_id, latest.version) == (2, 2)
    assert confluent.get_version("pv-value", 1).schema_id == 1
    assert confluent.get_versions("pv-value") == [1, 2]
    assert sorted(confluent.get_subjects()) == ["pv-other", "pv-value"]
    assert confluent.get_compatibility() == "BACKWARD"
    # Confluent's client hands back the answer body of PUT /config/{subject}, as its own registry sends it
    assert confluent.set_compatibility("pv-value", "FULL") == {"compatibility": "FULL"}  # type: ignore[comparison-overlap]
    assert confluent.get_compatibility("pv-value") == "FULL"
    assert confluent.test_compatibility("pv-value", v1) is True
    assert confluent.test_compatibility_all_versions("pv-value", v1) is True
    breaking = Schema(shipped_schema_text("click"), "AVRO")
    assert confluent.test_compatibility("pv-value", breaking) is False
    with pytest.raises(SchemaRegistryError) as info:
        confluent.register_schema("pv-value", breaking)
    assert (info.value.http_status_code, info.value.error_code) == (409, 409)
    assert (
        "BACKWARD: the new schema cannot read data written with version 2: at 'Click': writer record "
        "lumber.tracking.PageView does not match reader record lumber.tracking.Click"
    ) in info.value.error_message
    with pytest.raises(SchemaRegistryError) as missing:
        confluent.get_latest_version("nope")
    assert missing.value.error_code == 40401
    assert confluent.delete_version("pv-value", 2) == 2
    assert confluent.delete_subject("pv-other") == [1]
    assert confluent.delete_subject("pv-other", permanent=True) == [1]
    assert sorted(confluent.get_subjects()) == ["pv-value"]


def serialize_with_confluent(confluent: ConfluentClient, topic: str, schema: str, record: Any) -> bytes:
    serializer = AvroSerializer(confluent, schema)
    payload: bytes = serializer(record, SerializationContext(topic, MessageField.VALUE))
    return payload


def test_confluent_serializer_output_decodes_with_our_serde(
    confluent: ConfluentClient, registry: RegistryProcess, closing: Callable[[Any], Any]
) -> None:
    payload = serialize_with_confluent(confluent, "search", shipped_schema_text("search"), SEARCH)
    assert payload[:5] == b"\x00\x00\x00\x00\x01"
    serde = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    assert serde.decode(payload) == SEARCH
    assert closing(SchemaRegistryClient(registry.url)).get_versions("search-value") == [1]


def test_our_serde_output_decodes_with_confluent_deserializer(
    confluent: ConfluentClient, registry: RegistryProcess, closing: Callable[[Any], Any]
) -> None:
    client = closing(SchemaRegistryClient(registry.url))
    schema_id = client.register("search-value", shipped_schema_text("search"))
    payload = AvroSerde(client).encode(schema_id, SEARCH)
    deserializer = AvroDeserializer(confluent)
    assert deserializer(payload, SerializationContext("search", MessageField.VALUE)) == SEARCH
    # and with a reader schema: page view v1 data read as v2 by Confluent's deserializer
    view = {
        "event_id": "e",
        "timestamp_ms": 1,
        "host": "h",
        "member_id": None,
        "session_id": "s",
        "page_key": "feed",
        "page_url": "u",
        "referrer_url": None,
        "user_agent": "ua",
        "ip_address": "ip",
    }
    v1_id = client.register("pv-value", shipped_schema_text("page_view"))
    reader = AvroDeserializer(confluent, shipped_schema_text("page_view_v2"))
    decoded = reader(AvroSerde(client).encode(v1_id, view), SerializationContext("pv", MessageField.VALUE))
    assert decoded == {**view, "load_time_ms": None}
