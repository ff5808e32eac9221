"""Response headers v0 and v1."""

from __future__ import annotations

import pytest

from broker.protocol.errors import EncodeError, MalformedMessageError
from broker.protocol.response_header import ResponseHeader, decode_response_header, encode_response_header


@pytest.mark.parametrize(("version", "encoded"), [(0, b"\x00\x00\x01\x02"), (1, b"\x00\x00\x01\x02\x00")])
def test_round_trip(version, encoded):
    assert encode_response_header(258, version) == encoded
    assert decode_response_header(memoryview(encoded), version) == (ResponseHeader(258), len(encoded))


def test_truncated():
    with pytest.raises(MalformedMessageError, match=r"response header: correlation_id: int32 needs 4 bytes"):
        decode_response_header(memoryview(b"\x00\x01"), 0)
    with pytest.raises(MalformedMessageError, match=r"response header: <tagged fields>"):
        decode_response_header(memoryview(b"\x00\x00\x00\x01"), 1)


def test_correlation_id_out_of_range():
    with pytest.raises(EncodeError, match=r"correlation id 2147483648 does not fit int32"):
        encode_response_header(2**31, 0)
