"""Request headers v0, v1 and v2."""

from __future__ import annotations

import pytest

from broker.protocol.errors import MalformedMessageError
from broker.protocol.request_header import (
    RequestHeader,
    decode_request_header,
    encode_request_header,
    peek_request_header,
)


@pytest.mark.parametrize(
    ("version", "header", "encoded"),
    [
        (0, RequestHeader(7, 0, 5), b"\x00\x07\x00\x00\x00\x00\x00\x05"),
        (1, RequestHeader(3, 12, -1, "cli"), b"\x00\x03\x00\x0c\xff\xff\xff\xff\x00\x03cli"),
        (1, RequestHeader(3, 1, 2, None), b"\x00\x03\x00\x01\x00\x00\x00\x02\xff\xff"),
        (2, RequestHeader(18, 3, 1, "c"), b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01c\x00"),
    ],
)
def test_round_trip(version, header, encoded):
    assert encode_request_header(header, version) == encoded
    assert decode_request_header(memoryview(encoded + b"body"), version) == (header, len(encoded))


def test_v2_skips_tagged_fields():
    encoded = b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01c" + b"\x01\x05\x02zz"
    header, pos = decode_request_header(memoryview(encoded), 2)
    assert header == RequestHeader(18, 3, 1, "c")
    assert pos == len(encoded)


def test_peek_reads_the_common_prefix():
    assert peek_request_header(memoryview(b"\x00\x12\x00\x09\x00\x00\x01\x00")) == (18, 9, 256)


@pytest.mark.parametrize(
    ("data", "version", "message"),
    [
        (b"\x00\x12\x00", 1, r"request header: needs at least 8 bytes, the frame has 3 at position 0"),
        (
            b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x09c",
            1,
            r"request header: client_id: length 9 exceeds remaining 1 bytes at position 8",
        ),
        (
            b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01c",
            2,
            r"request header: <tagged fields>: tagged field count is cut off after 0 bytes at position 11",
        ),
    ],
)
def test_malformed(data, version, message):
    with pytest.raises(MalformedMessageError, match=message):
        decode_request_header(memoryview(data), version)
