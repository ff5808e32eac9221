"""Encoding the records of a producer batch: the record batch v2 record format, for many records at once.

A producer batch keeps what ``send``/``send_many`` handed it as *segments*: runs of values that share a
timestamp, a key and headers (:class:`Segment`). Encoding happens once, when the batch is sent, into the
layout of :mod:`broker.record.record`::

    length varint | attributes 0 | timestampDelta varint | offsetDelta varint | key (varint length + bytes,
    or -1) | value (varint length + bytes, or -1) | headers (count, then key/value pairs)

:func:`encode_record` encodes one record (what :class:`~broker.record.record_batch_builder.RecordBatchBuilder`
appends). A producer batch keeps what ``send``/``send_many`` handed it as *segments*: runs of values that
share a timestamp, a key and headers (:class:`Segment`), encoded once, when the batch is sent, by one of
two strategies that produce the same bytes:

* :func:`encode_records_python`, a loop per record: for small batches (and records of 16 KiB and more);
* :func:`encode_records_arrow`, vectorised with pyarrow's compute kernels (one pass per field over all
  records: lengths, varints by table lookup, then an element-wise join). Per record it costs a fraction of
  the Python loop, and the kernels run without the GIL, so the caller's thread keeps producing meanwhile.
  It needs every value, record and offset delta below :data:`ARROW_VARINT_LIMIT`; other batches take the
  Python loop.

:func:`encode_records` picks one. Sizes: :func:`record_bound` is an upper bound of a record's encoded size
(varints at their widest), which the producer uses for ``batch_size`` and ``buffer_memory`` accounting
without encoding anything.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import chain, islice
from typing import Any, NamedTuple

from broker.record.varint import VARINT_CACHE_HIGH, VARINT_CACHE_LOW, VARINTS, encode_varint

#: Batches with at least this many records are encoded with pyarrow.
ARROW_MIN_RECORDS = 256
#: Varints of 0 .. ARROW_VARINT_LIMIT - 1 come from a table in the vectorised encoder.
ARROW_VARINT_LIMIT = 1 << 16
#: Bytes a record adds beyond its value, key part, timestamp part and headers: the widest record length,
#: offset delta and value length varints for records below 2 GiB.
RECORD_VARINTS_BOUND = 5 + 5 + 5

# The varints of 0 .. 16383: the part of broker.record.varint's table the loops below index from 0.
_SMALL_LIMIT = VARINT_CACHE_HIGH
_SMALL: tuple[bytes, ...] = VARINTS[-VARINT_CACHE_LOW:]
NULL_PART = b"\x01"  # varint -1: a null key or value


def varint(value: int) -> bytes:
    """The zigzag varint of ``value`` (precomputed for 0 .. 16383)."""
    return _SMALL[value] if 0 <= value < _SMALL_LIMIT else encode_varint(value)


def encode_record(
    timestamp_delta: int, offset_delta: int, key: bytes, value: bytes | None, headers: bytes
) -> bytes:
    """One record: ``key`` is its key part (:func:`key_part`), ``headers`` its encoded headers block
    (:func:`~broker.record.record_header.encode_headers`)."""
    low = VARINT_CACHE_LOW
    high = VARINT_CACHE_HIGH
    cache = VARINTS
    ts = cache[timestamp_delta - low] if low <= timestamp_delta < high else encode_varint(timestamp_delta)
    od = cache[offset_delta - low] if 0 <= offset_delta < high else encode_varint(offset_delta)
    if value is None:
        value_prefix, value = NULL_PART, b""
    else:
        n = len(value)
        value_prefix = cache[n - low] if n < high else encode_varint(n)
    body = 1 + len(ts) + len(od) + len(key) + len(value_prefix) + len(value) + len(headers)
    length = cache[body - low] if body < high else encode_varint(body)
    return b"".join((length, b"\x00", ts, od, key, value_prefix, value, headers))


def key_part(key: bytes | None) -> bytes:
    """A record's key field: varint length and bytes, or -1 for a null key."""
    return NULL_PART if key is None else varint(len(key)) + bytes(key)


class Segment(NamedTuple):
    """``values[start:stop]``, all with one timestamp, key and headers (the latter two already encoded)."""

    values: Sequence[bytes | None]
    start: int
    stop: int
    timestamp_ms: int
    key_part: bytes
    headers: bytes


def record_bound(value_bytes: int, key_part_bytes: int, header_bytes: int) -> int:
    """An upper bound of the encoded size of one record (timestamp delta at its widest, 10 bytes)."""
    return 1 + 10 + key_part_bytes + value_bytes + header_bytes + RECORD_VARINTS_BOUND


def encode_records(segments: Sequence[Segment], count: int, first_timestamp_ms: int) -> bytes:
    """The records of ``segments`` (``count`` in all), offset deltas from 0, timestamps relative to
    ``first_timestamp_ms``."""
    if count == 1:
        return _encode_one(segments[0])
    if count >= ARROW_MIN_RECORDS:
        encoded = encode_records_arrow(segments, count, first_timestamp_ms)
        if encoded is not None:
            return encoded
    return encode_records_python(segments, first_timestamp_ms)


def _encode_one(segment: Segment) -> bytes:
    """The one record of a one-record batch (batch size 1): :func:`encode_record` with timestamp and offset
    deltas 0, inlined (one call per batch less, no varint look-ups for the deltas: it runs once per
    ``send()`` at batch size 1)."""
    values, start, _stop, _timestamp_ms, key, headers = segment
    value = values[start]
    if value is None:
        value_prefix, value = NULL_PART, b""
    else:
        n = len(value)
        value_prefix = _SMALL[n] if n < _SMALL_LIMIT else encode_varint(n)
    body = 3 + len(key) + len(value_prefix) + len(value) + len(headers)  # attributes and both deltas: 1 byte
    length = _SMALL[body] if body < _SMALL_LIMIT else encode_varint(body)
    return b"".join((length, b"\x00\x00\x00", key, value_prefix, value, headers))


def encode_records_python(segments: Sequence[Segment], first_timestamp_ms: int) -> bytes:
    """:func:`encode_records`, one record at a time."""
    buffer = bytearray()
    small = _SMALL
    limit = _SMALL_LIMIT
    index = 0
    for values, start, stop, timestamp_ms, key, headers in segments:
        delta = timestamp_ms - first_timestamp_ms
        ts_part = b"\x00" + (small[delta] if 0 <= delta < limit else encode_varint(delta))
        fixed = len(ts_part) + len(key) + len(headers)
        for position in range(start, stop):
            value = values[position]
            if value is None:
                value_prefix = NULL_PART
                value = b""
            else:
                n = len(value)
                value_prefix = small[n] if n < limit else encode_varint(n)
            od_part = small[index] if index < limit else encode_varint(index)
            body = fixed + len(od_part) + len(value_prefix) + len(value)
            buffer += small[body] if body < limit else encode_varint(body)
            buffer += ts_part
            buffer += od_part
            buffer += key
            buffer += value_prefix
            buffer += value
            buffer += headers
            index += 1
    return bytes(buffer)


class _Arrow:
    """pyarrow, its compute module and the varint table, loaded on first use (pyarrow is slow to import)."""

    _lock = threading.Lock()
    _loaded: tuple[Any, Any, Any, Any] | None = None

    @classmethod
    def load(cls) -> tuple[Any, Any, Any, Any]:
        loaded = cls._loaded
        if loaded is None:
            with cls._lock:
                loaded = cls._loaded
                if loaded is None:
                    loaded = cls._loaded = cls._build()
        return loaded

    @staticmethod
    def _build() -> tuple[Any, Any, Any, Any]:
        import numpy as np  # noqa: PLC0415 - loaded with pyarrow, on first use only
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.compute as pc  # noqa: PLC0415

        # zigzag varints of 0 .. ARROW_VARINT_LIMIT - 1 (values < 2**16 zigzag to < 2**17: 1-3 bytes)
        zigzag = np.arange(ARROW_VARINT_LIMIT, dtype=np.int64) * 2
        widths = 1 + (zigzag >= 0x80) + (zigzag >= 0x4000)
        offsets = np.zeros(ARROW_VARINT_LIMIT + 1, dtype=np.int32)
        np.cumsum(widths, out=offsets[1:])
        data = np.zeros(int(offsets[-1]), dtype=np.uint8)
        starts = offsets[:-1]
        low = (zigzag & 0x7F) | np.where(widths > 1, 0x80, 0)
        data[starts] = low
        two = widths > 1
        data[starts[two] + 1] = ((zigzag[two] >> 7) & 0x7F) | np.where(widths[two] > 2, 0x80, 0)
        three = widths > 2
        data[starts[three] + 2] = zigzag[three] >> 14
        table = pa.Array.from_buffers(
            pa.binary(),
            ARROW_VARINT_LIMIT,
            [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes())],
        )
        return np, pa, pc, table


def encode_records_arrow(segments: Sequence[Segment], count: int, first_timestamp_ms: int) -> bytes | None:
    """:func:`encode_records`, vectorised; ``None`` when a length is beyond the varint table."""
    if count >= ARROW_VARINT_LIMIT:
        return None
    np, pa, pc, table = _Arrow.load()
    binary = pa.binary()
    values = pa.array(
        list(chain.from_iterable(islice(s.values, s.start, s.stop) for s in segments)), type=binary
    )
    if len(values) != count:
        raise ValueError(f"segments hold {len(values)} records, the batch counts {count}")
    value_lengths = pc.binary_length(values)
    has_nulls = values.null_count > 0
    if has_nulls:
        value_lengths = pc.fill_null(value_lengths, 0)
    longest = pc.max(value_lengths).as_py()
    if longest is not None and longest >= ARROW_VARINT_LIMIT:
        return None
    value_prefix = table.take(value_lengths)
    if has_nulls:
        nulls = pc.is_null(values)
        value_prefix = pc.if_else(nulls, pa.scalar(NULL_PART, binary), value_prefix)
        values = pc.fill_null(values, pa.scalar(b"", binary))

    def per_record(parts: list[bytes]) -> Any:
        """A column of one part per record, from one part per segment (a scalar when all are equal)."""
        if len(set(parts)) == 1:
            return pa.scalar(parts[0], binary)
        counts = np.fromiter((s.stop - s.start for s in segments), dtype=np.int64, count=len(segments))
        return pa.array(parts, type=binary).take(np.repeat(np.arange(len(segments)), counts))

    ts_parts = per_record([b"\x00" + varint(s.timestamp_ms - first_timestamp_ms) for s in segments])
    keys = per_record([s.key_part for s in segments])
    headers = per_record([s.headers for s in segments])
    offset_deltas = table.slice(0, count)

    def lengths(column: Any) -> Any:
        if isinstance(column, pa.Scalar):
            return len(column.as_py())
        return pc.binary_length(column)

    body = pc.add(
        pc.add(
            pc.add(lengths(ts_parts), lengths(keys)),
            pc.add(lengths(headers), pc.binary_length(offset_deltas)),
        ),
        pc.add(pc.binary_length(value_prefix), value_lengths),
    )
    if pc.max(body).as_py() >= ARROW_VARINT_LIMIT:
        return None
    joined = pc.binary_join_element_wise(
        table.take(body), ts_parts, offset_deltas, keys, value_prefix, values, headers, pa.scalar(b"", binary)
    )
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=count + 1, offset=joined.offset * 4)
    return bytes(memoryview(joined.buffers()[2])[int(offsets[0]) : int(offsets[count])])
