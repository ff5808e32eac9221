from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

from schemas.client import SchemaRegistryClient
from schemas.errors import (
    BadMagicByteError,
    DecodeError,
    EncodeError,
    RegistryUnavailableError,
    TruncatedPayloadError,
    UnknownSchemaIdError,
)
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema, shipped_schema_text
from tests.schemas.conftest import RegistryProcess

Closing = Callable[[Any], Any]

VIEW = {
    "event_id": "e-1",
    "timestamp_ms": 1_700_000_000_123,
    "host": "web-7.example",
    "member_id": 42,
    "session_id": "sess-9",
    "page_key": "profile_view",
    "page_url": "https://example.com/in/ann",
    "referrer_url": None,
    "user_agent": "Mozilla/5.0",
    "ip_address": "10.0.0.1",
}
VIEW_V2 = {**VIEW, "load_time_ms": 123}


@pytest.fixture
def ids(registry: RegistryProcess) -> dict[str, int]:
    with SchemaRegistryClient(registry.url) as client:
        return {
            "v1": client.register("page_view-value", shipped_schema_text("page_view")),
            "v2": client.register("page_view-value", shipped_schema_text("page_view_v2")),
            "click": client.register("click-value", shipped_schema_text("click")),
        }


def test_round_trip_and_exact_framing(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    serde = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    payload = serde.encode(ids["v1"], VIEW)
    assert payload[:5] == b"\x00\x00\x00\x00\x01"
    assert payload[5:7] == b"\x06e"  # the first field: zig-zag length 3, then "e-1"
    assert serde.schema_id_of(payload) == 1
    assert serde.decode(payload) == VIEW


def test_reader_schema_resolves_both_ways(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    writer = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    old_data = writer.encode(ids["v1"], VIEW)
    new_data = writer.encode(ids["v2"], VIEW_V2)
    as_v2 = closing(
        AvroSerde(SchemaRegistryClient(registry.url), reader_schema=shipped_schema_text("page_view_v2"))
    )
    assert as_v2.decode(old_data) == {**VIEW, "load_time_ms": None}
    assert as_v2.decode(new_data) == VIEW_V2
    as_v1 = closing(AvroSerde(SchemaRegistryClient(registry.url), reader_schema=shipped_schema("page_view")))
    assert as_v1.decode(new_data) == VIEW
    # a per-call reader overrides the serde's
    assert as_v1.decode(old_data, reader_schema=shipped_schema("page_view_v2"))["load_time_ms"] is None


def test_decode_many_mixes_ids(registry: RegistryProcess, ids: dict[str, int], closing: Closing) -> None:
    serde = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    click = {
        "event_id": "c-1",
        "timestamp_ms": 5,
        "host": "h",
        "member_id": None,
        "session_id": "s",
        "page_key": "feed",
        "element_id": "like",
        "target_url": None,
        "position": 3,
    }
    payloads = [
        serde.encode(ids["v1"], VIEW),
        serde.encode(ids["v2"], VIEW_V2),
        serde.encode(ids["click"], click),
    ]
    batch = payloads * 3
    assert serde.decode_many(batch) == [VIEW, VIEW_V2, click] * 3
    assert serde.decode_many([]) == []


def test_decode_errors_name_what_and_where(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    serde = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    good = serde.encode(ids["v1"], VIEW)
    cases: list[tuple[bytes, type[Exception], str]] = [
        (b"\x01" + good[1:], BadMagicByteError, "payload: magic byte is 0x01 at offset 0, expected 0x00"),
        (b"", TruncatedPayloadError, "payload: payload has 0 bytes, fewer than the 5-byte header"),
        (
            b"\x00\x00\x00",
            TruncatedPayloadError,
            "payload: payload has 3 bytes, fewer than the 5-byte header",
        ),
        (b"\x07\x00", BadMagicByteError, "payload: magic byte is 0x07 at offset 0"),
        (
            good[:-4],
            TruncatedPayloadError,
            f"payload: payload of {len(good) - 4} bytes (schema id 1) ends inside its Avro record",
        ),
        (
            good + b"\x00\x00",
            DecodeError,
            (
                "payload: 2 bytes left over after the Avro record of schema id 1 "
                f"(record ends at offset {len(good)} of {len(good) + 2})"
            ),
        ),
        (
            b"\x00\x00\x00\x03\xe7" + good[5:],
            UnknownSchemaIdError,
            f"payload: schema id 999 is not known to the registry at {registry.url}",
        ),
    ]
    for payload, error, message in cases:
        with pytest.raises(error) as info:
            serde.decode(payload)
        assert message in str(info.value), (payload, str(info.value))
    with pytest.raises(BadMagicByteError, match=r"^payload 1: magic byte is 0xff"):
        serde.decode_many([good, b"\xff" + good[1:]])
    with pytest.raises(TruncatedPayloadError, match=r"^payload 2: payload of 12 bytes \(schema id 1\)"):
        serde.decode_many([good, good, good[:12]])


def test_incompatible_reader_is_a_decode_error(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    payload = closing(AvroSerde(SchemaRegistryClient(registry.url))).encode(ids["v1"], VIEW)
    reader = shipped_schema("click")  # needs element_id, which page views lack
    with pytest.raises(
        DecodeError, match="data written with schema id 1 does not resolve to the reader schema"
    ):
        closing(AvroSerde(SchemaRegistryClient(registry.url), reader)).decode(payload)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({**VIEW, "extra": 1}, "record contains more fields than the schema specifies: extra"),
        ({k: v for k, v in VIEW.items() if k != "host"}, "Field host is specified in the schema but missing"),
        ({**VIEW, "timestamp_ms": "soon"}, "schema id 1"),
    ],
)
def test_encode_is_strict(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing, record: dict[str, Any], message: str
) -> None:
    with pytest.raises(EncodeError, match=message):
        closing(AvroSerde(SchemaRegistryClient(registry.url))).encode(ids["v1"], record)


def test_fields_with_defaults_may_be_left_out(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    serde = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    sparse = {k: v for k, v in VIEW.items() if k not in ("member_id", "referrer_url")}
    assert serde.decode(serde.encode(ids["v1"], sparse)) == {**VIEW, "member_id": None}


def test_decoders_are_cached_per_id(registry: RegistryProcess, ids: dict[str, int], closing: Closing) -> None:
    serde = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    payload = serde.encode(ids["v1"], VIEW)
    other = serde.encode(ids["v2"], VIEW_V2)
    assert serde.decode(payload) == VIEW
    registry.stop()  # no registry any more: what was looked up once still decodes
    assert serde.decode_many([payload] * 100) == [VIEW] * 100
    assert serde.decode(other) == VIEW_V2  # encode() fetched id 2 already (one cache per client)
    fresh = closing(AvroSerde(SchemaRegistryClient(registry.url)))
    with pytest.raises(RegistryUnavailableError):
        fresh.decode(payload)


def test_pickles_for_spark_executors(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    serde = closing(
        AvroSerde(SchemaRegistryClient(registry.url), reader_schema=shipped_schema("page_view_v2"))
    )
    payload = serde.encode(ids["v1"], VIEW)
    serde.decode(payload)
    data = pickle.dumps(serde)
    assert len(data) < 4096  # settings and the reader schema only
    copy = closing(pickle.loads(data))
    assert copy._decoders == {}
    assert copy.client._http is None
    assert copy.reader_schema == serde.reader_schema
    assert copy.decode(payload) == {**VIEW, "load_time_ms": None}


def test_every_truncation_is_reported_as_one(
    registry: RegistryProcess, ids: dict[str, int], closing: Closing
) -> None:
    serde = closing(
        AvroSerde(SchemaRegistryClient(registry.url), reader_schema=shipped_schema("page_view_v2"))
    )
    good = serde.encode(ids["v2"], VIEW_V2)
    for cut in range(len(good)):
        with pytest.raises(TruncatedPayloadError) as info:
            serde.decode(good[:cut])
        if cut >= 5:
            assert f"payload of {cut} bytes (schema id 2) ends inside its Avro record" in str(info.value)
