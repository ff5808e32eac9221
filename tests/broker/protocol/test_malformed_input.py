"""Bad request bytes: every truncation, huge and negative lengths, nulls where none are allowed, and random
mutations. Each must raise a ProtocolError that names the message, field and position, quickly and without
allocating what a length prefix claims."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import (
    MalformedMessageError,
    ProtocolError,
    decode_request,
    encode_request,
)
from broker.protocol.apis import SUPPORTED_APIS
from broker.protocol.codec import decode_request_reference
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.broker.protocol.strategies import filled, normalize

SAMPLES = [
    pytest.param(spec, version, id=f"{spec.name}-v{version}")
    for spec in SUPPORTED_APIS
    for version in sorted({spec.min_version, spec.flexible_from or spec.max_version, spec.max_version})
]


def frame_of(spec, version):
    return encode_request(version, 7, "client-1", filled(spec.request, version))[4:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("spec", "version"), SAMPLES)
def test_every_truncation_is_a_located_error(spec, version):
    frame = frame_of(spec, version)
    assert normalize(decode_request(frame).body) == normalize(filled(spec.request, version))
    for cut in range(len(frame)):
        with pytest.raises(MalformedMessageError) as info:
            decode_request(frame[:cut])
        error = info.value
        assert error.position is not None
        assert error.position <= cut
        assert error.context in ("request header", f"{spec.name} v{version} request")
        assert str(error).endswith(f"at position {error.position}")


def produce_v7_frame(records_length: int, records: bytes) -> bytes:
    header = struct.pack(">hhih", 0, 7, 1, 1) + b"c"
    body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">i", 1)
    return header + body + struct.pack(">ii", 0, records_length) + records


def test_huge_records_length():
    frame = produce_v7_frame(1048576, b"x" * 12)
    tracemalloc.start()
    try:
        with pytest.raises(
            MalformedMessageError,
            match=r"^Produce v7 request: topic_data\[0\]\.partition_data\[0\]\.records: "
            r"length 1048576 exceeds remaining 12 bytes at position 34$",
        ):
            decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024


@pytest.mark.timeout(10)
def test_huge_array_count_fails_before_looping():
    header = struct.pack(">hhih", 0, 7, 1, 1) + b"c"
    frame = header + struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 2**31 - 1) + b"\x00" * 40
    tracemalloc.start()
    try:
        with pytest.raises(
            MalformedMessageError,
            match=r"Produce v7 request: topic_data: array of 2147483647 elements needs at least 12884901882 "
            r"bytes, 40 remain at position 19",
        ):
            decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            produce_v7_frame(-2, b""),
            r"partition_data\[0\]\.records: nullable_records has invalid length -2 at position 34",
        ),
        (
            struct.pack(">hhih", 0, 7, 1, -1) + struct.pack(">hhii", -1, 1, 1000, -1),
            r"Produce v7 request: topic_data: null array where it is not nullable at position 18",
        ),
        (
            struct.pack(">hhih", 0, 7, 1, -1) + struct.pack(">hhiih", -1, 1, 1000, 1, -1) + b"\x00" * 4,
            r"topic_data\[0\]\.name: null string where it is not nullable at position 22",
        ),
        (
            struct.pack(">hhih", 0, 7, 1, -1) + struct.pack(">hhiih", -3, 1, 1000, 1, -1),
            r"Produce v7 request: transactional_id: nullable_string has invalid length -3 at position 10",
        ),
        (
            struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">ih", 1, 2) + b"\xc3\x28" + b"\x01",
            r"topics\[0\]\.name: string is not valid UTF-8 \(invalid continuation byte\) at position 14",
        ),
        (
            # Metadata v12 (flexible): a compact array count that does not end after 5 bytes.
            struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\xff\x01",
            r"Metadata v12 request: topics: array length is longer than 5 bytes at position 11",
        ),
        (
            # ApiVersions v3: a tagged field whose value runs past the frame.
            struct.pack(">hhih", 18, 3, 1, -1) + b"\x00" + b"\x01\x01" + b"\x01" + b"\x00\x09ab",
            r"v3 request: <tagged fields>: tag 0: length 9 exceeds remaining 2 bytes at position 15",
        ),
        (
            # Fetch v12: tagged cluster_id (tag 0) whose string is shorter than its tagged size says.
            struct.pack(">hhih", 1, 12, 1, -1)
            + b"\x00"
            + struct.pack(">iiiibii", -1, 0, 0, 0, 0, 0, -1)
            + b"\x01\x01\x01"
            + b"\x01\x00\x03\x02zQ",
            r"Fetch v12 request: cluster_id: tagged value is 2 bytes but its size says 3 at position 42",
        ),
    ],
    ids=[
        "negative-records-length",
        "null-array",
        "null-string",
        "negative-string-length",
        "bad-utf8",
        "overlong-varint",
        "tag-past-end",
        "tag-size-mismatch",
    ],
)
def test_malformed_fields_are_named(frame, message):
    with pytest.raises(MalformedMessageError, match=message):
        decode_request(frame)
    with pytest.raises(MalformedMessageError, match=message):
        decode_request_reference(frame)


def test_valid_sample_decodes_identically_in_both_codecs():
    request = ProduceRequest(acks=1, topic_data=[TopicProduceData("t", [PartitionProduceData(0, b"abc")])])
    frame = encode_request(9, 1, "c", request)[4:]
    assert normalize(decode_request(frame)) == normalize(decode_request_reference(frame))


MUTATION_BASES = [
    frame_of(spec, version) for spec in SUPPORTED_APIS for version in (spec.min_version, spec.max_version)
]


@pytest.mark.timeout(120)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(MUTATION_BASES),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 10_000),
)
def test_mutated_frames_fail_cleanly_and_both_codecs_agree(base, edits, cut):
    frame = bytearray(base)
    for position, value in edits:
        frame[position % len(frame)] = value
    frame = frame[: max(cut, len(frame) - 3)]
    try:
        fast = decode_request(bytes(frame))
    except ProtocolError as exc:
        with pytest.raises(type(exc)):
            decode_request_reference(bytes(frame))
        return
    assert normalize(fast) == normalize(decode_request_reference(bytes(frame)))


@pytest.mark.timeout(60)
@settings(max_examples=300, deadline=None)
@given(
    key_version=st.sampled_from([(s.key, v) for s in SUPPORTED_APIS for v in s.versions]),
    body=st.binary(max_size=64),
)
def test_random_bodies_fail_cleanly(key_version, body):
    key, version = key_version
    frame = struct.pack(">hhih", key, version, 1, 2) + b"id" + b"\x00" + body
    try:
        decode_request(frame)
    except ProtocolError as exc:
        message = str(exc)
    else:
        return
    assert "position" in message or "correlation id" in message
