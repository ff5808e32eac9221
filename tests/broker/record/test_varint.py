"""Zigzag varints: round trips, Kafka's known encodings, cut-short and over-long input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.record.varint import decode_varint, encode_varint, size_of_varint

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(INT64)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value)
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))


def test_varint_known_encodings() -> None:
    # zigzag: 0 -> 0, -1 -> 1, 1 -> 2, 63 -> 126, -64 -> 127, 64 -> 128 (two bytes)
    assert encode_varint(0) == b"\x00"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(-64) == b"\x7f"
    assert encode_varint(64) == b"\x80\x01"
    assert encode_varint(2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"


def test_varint_cut_short_and_too_long() -> None:
    with pytest.raises(IndexError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        decode_varint(b"\xff" * 11, 0)
