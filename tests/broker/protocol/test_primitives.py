"""The primitive types: exact encodings, round trips, and every way their bytes can be wrong."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import primitives as p
from broker.protocol.errors import EncodeError, MalformedMessageError

FIXED = [
    (p.INT8, st.integers(-(2**7), 2**7 - 1)),
    (p.INT16, st.integers(-(2**15), 2**15 - 1)),
    (p.UINT16, st.integers(0, 2**16 - 1)),
    (p.INT32, st.integers(-(2**31), 2**31 - 1)),
    (p.INT64, st.integers(-(2**63), 2**63 - 1)),
    (p.FLOAT64, st.floats(allow_nan=False)),
    (p.BOOLEAN, st.booleans()),
    (p.UUID, st.uuids()),
    (p.UNSIGNED_VARINT, st.integers(0, 2**32 - 1)),
    (p.VARINT, st.integers(-(2**31), 2**31 - 1)),
    (p.VARLONG, st.integers(-(2**63), 2**63 - 1)),
    (p.STRING, st.text(max_size=40)),
    (p.NULLABLE_STRING, st.none() | st.text(max_size=40)),
    (p.COMPACT_STRING, st.text(max_size=200)),
    (p.COMPACT_NULLABLE_STRING, st.none() | st.text(max_size=40)),
    (p.BYTES, st.binary(max_size=40)),
    (p.NULLABLE_BYTES, st.none() | st.binary(max_size=40)),
    (p.COMPACT_BYTES, st.binary(max_size=200)),
    (p.COMPACT_NULLABLE_BYTES, st.none() | st.binary(max_size=40)),
    (p.Array(p.INT32, compact=False, nullable=True), st.none() | st.lists(st.integers(-(2**31), 2**31 - 1))),
    (p.Array(p.COMPACT_STRING, compact=True, nullable=False), st.lists(st.text(max_size=5), max_size=5)),
    (p.Array(p.VARLONG, compact=True, nullable=True), st.none() | st.lists(st.integers(-(2**63), 2**63 - 1))),
]


@pytest.mark.parametrize(("primitive", "values"), FIXED, ids=[repr(t) for t, _ in FIXED])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(primitive, values, data):
    value = data.draw(values)
    encoded = primitive.encode(value)
    prefix = b"\xaa\xbb"
    decoded, end = primitive.decode(memoryview(prefix + encoded + b"\xcc"), len(prefix))
    assert decoded == value
    assert end == len(prefix) + len(encoded)


@pytest.mark.parametrize(("primitive", "values"), FIXED, ids=[repr(t) for t, _ in FIXED])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_truncation_is_reported(primitive, values, data):
    encoded = primitive.encode(data.draw(values))
    for cut in range(len(encoded)):
        with pytest.raises(MalformedMessageError, match=r"at position \d+"):
            primitive.decode(memoryview(encoded[:cut]), 0)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varint_bytes(value, encoded):
    assert p.UNSIGNED_VARINT.encode(value) == encoded
    assert p.UNSIGNED_VARINT.decode(memoryview(encoded), 0) == (value, len(encoded))


# Zigzag pairs as in Kafka's ByteUtilsTest: 0, -1, 1, -2, 2 ... map to 0, 1, 2, 3, 4 ...
@pytest.mark.parametrize(
    ("primitive", "value", "encoded"),
    [
        (p.VARINT, 0, b"\x00"),
        (p.VARINT, -1, b"\x01"),
        (p.VARINT, 1, b"\x02"),
        (p.VARINT, -2, b"\x03"),
        (p.VARINT, 63, b"\x7e"),
        (p.VARINT, -64, b"\x7f"),
        (p.VARINT, 64, b"\x80\x01"),
        (p.VARINT, 2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (p.VARINT, -(2**31), b"\xff\xff\xff\xff\x0f"),
        (p.VARLONG, 2**63 - 1, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
        (p.VARLONG, -(2**63), b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    ],
)
def test_zigzag_bytes(primitive, value, encoded):
    assert primitive.encode(value) == encoded
    assert primitive.decode(memoryview(encoded), 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("primitive", "value", "encoded"),
    [
        (p.STRING, "ab", b"\x00\x02ab"),
        (p.NULLABLE_STRING, None, b"\xff\xff"),
        (p.COMPACT_STRING, "ab", b"\x03ab"),
        (p.COMPACT_NULLABLE_STRING, None, b"\x00"),
        (p.COMPACT_STRING, "", b"\x01"),
        (p.BYTES, b"\x01", b"\x00\x00\x00\x01\x01"),
        (p.NULLABLE_BYTES, None, b"\xff\xff\xff\xff"),
        (p.COMPACT_NULLABLE_BYTES, None, b"\x00"),
        (p.BOOLEAN, True, b"\x01"),
        (p.UINT16, 65535, b"\xff\xff"),
        (p.FLOAT64, 1.5, b"\x3f\xf8\x00\x00\x00\x00\x00\x00"),
        (p.UUID, uuid.UUID(int=1), b"\x00" * 15 + b"\x01"),
        (p.Array(p.INT16, compact=False, nullable=True), None, b"\xff\xff\xff\xff"),
        (p.Array(p.INT16, compact=True, nullable=False), [1, 2], b"\x03\x00\x01\x00\x02"),
    ],
)
def test_exact_bytes(primitive, value, encoded):
    assert primitive.encode(value) == encoded
    assert primitive.decode(memoryview(encoded), 0) == (value, len(encoded))


def test_records_decode_is_a_view_of_the_input():
    frame = bytearray(b"\x00\x00\x00\x03abc")
    value, end = p.RECORDS.decode(memoryview(frame), 0)
    assert isinstance(value, memoryview)
    assert end == 7
    frame[4] = ord("z")
    assert bytes(value) == b"zbc"


def test_boolean_reads_any_nonzero_byte_as_true():
    assert p.BOOLEAN.decode(memoryview(b"\x07"), 0) == (True, 1)


@pytest.mark.parametrize(
    ("primitive", "data", "message"),
    [
        (p.STRING, b"\x7f\xff" + b"x" * 12, r"length 32767 exceeds remaining 12 bytes at position 0"),
        (p.BYTES, b"\x7f\xff\xff\xff" + b"x" * 3, r"length 2147483647 exceeds remaining 3 bytes"),
        (p.COMPACT_BYTES, b"\xff\xff\xff\xff\x0f", r"length 4294967294 exceeds remaining 0 bytes"),
        (p.STRING, b"\xff\xff", r"null string where it is not nullable"),
        (p.NULLABLE_STRING, b"\xff\xfe", r"invalid length -2"),
        (p.NULLABLE_BYTES, b"\x80\x00\x00\x00", r"invalid length -2147483648"),
        (p.COMPACT_STRING, b"\x00", r"null compact_string where it is not nullable"),
        (p.STRING, b"\x00\x02\xff\xfe", r"not valid UTF-8"),
        (p.UNSIGNED_VARINT, b"\x80\x80\x80\x80\x80\x01", r"longer than 5 bytes"),
        (p.UNSIGNED_VARINT, b"\xff\xff\xff\xff\x1f", r"value 8589934591 exceeds 4294967295"),
        (p.VARLONG, b"\x80" * 10 + b"\x01", r"longer than 10 bytes"),
        (p.INT64, b"\x00" * 7, r"int64 needs 8 bytes, 7 remain"),
        (
            p.Array(p.INT32, compact=False, nullable=False),
            b"\x7f\xff\xff\xff\x00\x00\x00\x01",
            r"2147483647 elements needs at least 8589934588 bytes, 4 remain",
        ),
        (p.Array(p.INT32, compact=False, nullable=False), b"\xff\xff\xff\xff", r"null array\[int32\]"),
        (p.TAGGED_FIELDS, b"\x02\x01\x00\x00\x00", r"tag 0 follows tag 1: tags must be strictly ascending"),
        (p.TAGGED_FIELDS, b"\x01\x00\x05ab", r"tag 0: length 5 exceeds remaining 2 bytes"),
        (p.TAGGED_FIELDS, b"\x7f\x00", r"127 tagged fields need at least 254 bytes, 1 remain"),
    ],
)
def test_malformed_values(primitive, data, message):
    with pytest.raises(MalformedMessageError, match=message):
        primitive.decode(memoryview(data), 0)


@pytest.mark.parametrize(
    ("primitive", "value", "message"),
    [
        (p.INT8, 128, r"128 does not fit int8"),
        (p.INT32, "1", r"'1' does not fit int32"),
        (p.UNSIGNED_VARINT, -1, r"-1 does not fit unsigned_varint"),
        (p.VARINT, 2**31, r"does not fit varint"),
        (p.STRING, None, r"null is not allowed for non-nullable string"),
        (p.STRING, "x" * 32768, r"string of 32768 bytes exceeds 32767"),
        (p.BYTES, "text", r"str is not bytes"),
        (p.UUID, "00000000-0000-0000-0000-000000000000", r"is not a uuid.UUID"),
        (p.Array(p.INT8, compact=False, nullable=False), None, r"null is not allowed"),
    ],
)
def test_unencodable_values(primitive, value, message):
    with pytest.raises(EncodeError, match=message):
        primitive.encode(value)


def test_tagged_fields_round_trip_in_tag_order():
    encoded = p.TAGGED_FIELDS.encode({5: b"xy", 0: b"", 300: b"\x01"})
    assert encoded == b"\x03" + b"\x00\x00" + b"\x05\x02xy" + b"\xac\x02\x01\x01"
    fields, end = p.TAGGED_FIELDS.decode(memoryview(encoded), 0)
    assert {tag: bytes(value) for tag, value in fields.items()} == {0: b"", 5: b"xy", 300: b"\x01"}
    assert end == len(encoded)


def test_byte_view_casts_other_formats():
    view = p.byte_view(memoryview(b"\x00\x01\x00\x02").cast("H"))
    assert view.format == "B"
    assert len(view) == 4
    assert p.byte_length(memoryview(b"abcd").cast("I")) == 4
