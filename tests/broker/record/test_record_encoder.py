from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record.record_encoder import (
    ARROW_VARINT_LIMIT,
    Segment,
    encode_records,
    encode_records_arrow,
    encode_records_python,
    key_part,
    record_bound,
)
from broker.record.record_header import encode_headers
from broker.record.record_walker import walk_records

HEADERS = [encode_headers([("host", b"h1")]), encode_headers([("host", b"h2"), ("trace", None), ("n", b"")])]

SEGMENTS = st.lists(
    st.tuples(
        st.lists(
            st.none() | st.binary(max_size=300) | st.sampled_from([b"x" * 70, b"y" * 9000]),
            min_size=1,
            max_size=40,
        ),
        st.integers(min_value=-100, max_value=10**9),
        st.none() | st.binary(max_size=80),
        st.sampled_from(HEADERS),
        st.data(),
    ),
    min_size=1,
    max_size=12,
)


def build_segments(raw: list[Any]) -> tuple[list[Segment], int]:
    segments = []
    count = 0
    for values, ts_delta, key, headers, data in raw:
        start = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
        stop = data.draw(st.integers(min_value=start + 1, max_value=len(values)))
        segments.append(
            Segment(tuple(values), start, stop, 1_700_000_000_000 + ts_delta, key_part(key), headers)
        )
        count += stop - start
    return segments, count


def reference(segments: list[Segment], first_ts: int) -> list[tuple[int, bytes | None]]:
    records: list[tuple[int, bytes | None, bytes | None]] = []
    for segment in segments:
        for value in segment.values[segment.start : segment.stop]:
            key = None if segment.key_part == b"\x01" else segment.key_part
            records.append((segment.timestamp_ms, key, value))
    return [(ts, value) for ts, _, value in records]


@settings(max_examples=60, deadline=None)
@given(SEGMENTS)
def test_arrow_and_python_encoders_agree_and_decode(raw: list[Any]) -> None:
    segments, count = build_segments(raw)
    first_ts = segments[0].timestamp_ms
    python = encode_records_python(segments, first_ts)
    arrow = encode_records_arrow(segments, count, first_ts)
    assert arrow == python
    decoded = list(walk_records(python, count, 100, first_ts, None, "<test>", None, decode=True))
    assert [(r.timestamp_ms, r.value) for r in decoded] == reference(segments, first_ts)
    assert [r.offset for r in decoded] == list(range(100, 100 + count))
    bound = sum(
        record_bound(0 if v is None else len(v), len(s.key_part), len(s.headers))
        for s in segments
        for v in s.values[s.start : s.stop]
    )
    assert len(python) <= bound


def test_arrow_declines_what_its_varint_table_cannot_hold() -> None:
    header = HEADERS[0]
    big = Segment((b"z" * ARROW_VARINT_LIMIT,), 0, 1, 5, b"\x01", header)
    assert encode_records_arrow([big], 1, 5) is None
    assert encode_records([big] * 300, 300, 5) == encode_records_python([big] * 300, 5)
    many = Segment((b"v",) * ARROW_VARINT_LIMIT, 0, ARROW_VARINT_LIMIT, 5, b"\x01", header)
    assert encode_records_arrow([many], ARROW_VARINT_LIMIT, 5) is None


@settings(max_examples=80, deadline=None)
@given(
    st.none() | st.binary(max_size=300) | st.sampled_from([b"z" * 8191, b"z" * 8192, b"w" * 20000]),
    st.none() | st.binary(max_size=80),
    st.sampled_from(HEADERS),
    st.integers(min_value=0, max_value=3),
)
def test_a_one_record_batch_encodes_like_the_loop(
    value: bytes | None, key: bytes | None, headers: bytes, start: int
) -> None:
    values = tuple([b"before"] * start + [value] + [b"after"])
    segment = Segment(values, start, start + 1, 1_700_000_000_123, key_part(key), headers)
    encoded = encode_records([segment], 1, segment.timestamp_ms)
    assert encoded == encode_records_python([segment], segment.timestamp_ms)
    (record,) = walk_records(encoded, 1, 7, segment.timestamp_ms, None, "<test>", None, decode=True)
    expected = (7, segment.timestamp_ms, key, value)
    assert (record.offset, record.timestamp_ms, record.key, record.value) == expected
