"""Every request and response of every supported API at every supported version: random messages round
trip through the compiled codec, and the compiled and reference codecs agree byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import compiler, interpreter
from broker.protocol.apis import SUPPORTED_APIS
from broker.protocol.messages.api_versions import ApiVersionsRequest
from broker.protocol.messages.fetch import EpochEndOffset, PartitionData
from broker.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from broker.protocol.primitives import byte_view
from broker.protocol.schema import schema_of
from tests.broker.protocol.strategies import normalize, struct_values

CASES = [
    pytest.param(spec, version, cls, id=f"{cls.__name__}-v{version}")
    for spec in SUPPORTED_APIS
    for version in spec.versions
    for cls in (spec.request, spec.response)
]


@pytest.mark.parametrize(("spec", "version", "cls"), CASES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_and_agreement(spec, version, cls, data):
    flexible = spec.is_flexible(version)
    message = data.draw(struct_values(cls, version, flexible=flexible))
    context = f"{spec.name} v{version}"

    compiled = b"".join(compiler.encode(message, cls, version, flexible=flexible, context=context))
    reference = b"".join(
        interpreter.encode_message(message, cls, version, flexible=flexible, context=context)
    )
    assert compiled == reference

    framed = byte_view(b"\x01\x02" + compiled)
    decoded, end = compiler.decode(cls, framed, 2, version, flexible=flexible, context=context)
    assert end == len(framed)
    assert normalize(decoded) == normalize(message)
    checked, checked_end = interpreter.decode_message(
        cls, framed, 2, version, flexible=flexible, context=context
    )
    assert checked_end == end
    assert normalize(checked) == normalize(decoded)


@pytest.mark.parametrize(("spec", "version", "cls"), CASES)
def test_default_message_round_trips(spec, version, cls):
    flexible = spec.is_flexible(version)
    message = cls()
    encoded = b"".join(compiler.encode(message, cls, version, flexible=flexible, context="x"))
    decoded, end = compiler.decode(cls, byte_view(encoded), 0, version, flexible=flexible, context="x")
    assert end == len(encoded)
    assert normalize(decoded) == normalize(message)


def test_fields_outside_their_versions_are_not_written():
    partition = PartitionProduceResponse(
        index=1, error_code=0, base_offset=7, log_append_time_ms=5, log_start_offset=3
    )
    response = ProduceResponse(responses=[TopicProduceResponse("t", [partition])], throttle_time_ms=9)
    v0 = b"".join(compiler.encode(response, ProduceResponse, 0, flexible=False, context="x"))
    # responses: count 1, name "t", partitions: count 1, index, error code, base offset; no throttle time.
    assert v0 == (b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00" + (7).to_bytes(8))
    decoded, _ = compiler.decode(ProduceResponse, byte_view(v0), 0, 0, flexible=False, context="x")
    assert decoded.throttle_time_ms == 0
    assert decoded.responses[0].partition_responses[0].log_start_offset == -1


def test_tagged_fields_are_written_only_when_not_default():
    absent = b"".join(compiler.encode(PartitionData(), PartitionData, 12, flexible=True, context="x"))
    assert absent.endswith(b"\x00")
    present = PartitionData(diverging_epoch=EpochEndOffset(epoch=3, end_offset=9))
    encoded = b"".join(compiler.encode(present, PartitionData, 12, flexible=True, context="x"))
    # One tagged field, tag 0, 14 bytes: int32 epoch, int64 end offset, the struct's own empty tag section.
    assert encoded.endswith(b"\x01\x00\x0d" + (3).to_bytes(4) + (9).to_bytes(8) + b"\x00")
    decoded, _ = compiler.decode(PartitionData, byte_view(encoded), 0, 12, flexible=True, context="x")
    assert decoded.diverging_epoch == EpochEndOffset(epoch=3, end_offset=9)


def test_unknown_tagged_fields_are_skipped():
    encoded = b"\x02a\x02b" + b"\x02" + b"\x07\x02zz" + b"\x09\x00"
    decoded, end = compiler.decode(ApiVersionsRequest, byte_view(encoded), 0, 3, flexible=True, context="x")
    assert decoded == ApiVersionsRequest("a", "b")
    assert end == len(encoded)


def test_every_schema_declares_a_default_for_every_field():
    for spec in SUPPORTED_APIS:
        for cls in (spec.request, spec.response):
            schema = schema_of(cls)
            assert [field.name for field in schema.fields] == list(cls._fields)  # type: ignore[attr-defined]


def test_generated_source_is_kept_for_inspection():
    codec = compiler.codec_for(ProduceRequest, 7, flexible=False)
    assert codec.decoder_source.startswith("def _decode(buf, view, pos):")
    assert "for _ in range(" in codec.decoder_source
    assert codec.encoder_source.startswith("def _encode(obj, app, region):")
