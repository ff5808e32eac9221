"""The compiled loops of the record package's column readers: :func:`batch_headers` finds where the
batches of a read of a segment start and reads their header fields
(:mod:`broker.record.batch_header_columns`), :func:`walk_records` walks the records of many uncompressed
record bodies, one record at a time, filling the key columns (:mod:`broker.record.key_columns`). The
record layout it reads is :mod:`broker.record.record_walker`'s (a record: length varint, attributes byte,
timestamp delta, offset delta, key length and key, value length and value, headers), every varint
zigzag-encoded; the batch header's is :mod:`broker.record.batch_header`'s.

Imported on first use (it imports numba: :mod:`broker.compiled`). Stateless: safe from any thread (the
kernels release the interpreter lock).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from broker.compiled import inlined, kernel
from broker.record.batch_header import (
    ATTRIBUTES_OFFSET,
    FIRST_TIMESTAMP_OFFSET,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    PRODUCER_FIELDS_OFFSET,
    RECORD_COUNT_OFFSET,
)

__all__ = ["FIELDS", "batch_headers", "walk_records"]

#: A varint of more bytes than this is refused (a 64-bit value takes at most 10).
_MAX_VARINT_BYTES = 10
#: The smallest record after its length: attributes, timestamp delta, offset delta, key length, value
#: length and header count, one byte each.
_MIN_RECORD_BYTES = 6


@inlined
def _byte(data: npt.NDArray[np.uint8], at: int) -> int:
    """``data[at]`` as a 64-bit signed integer (numba types ``int()`` of a byte as a byte)."""
    return int(np.int64(data[at]))


@inlined
def _varint(data: npt.NDArray[np.uint8], pos: int, limit: int) -> tuple[int, int]:
    """The zigzag varint at ``data[pos]`` and the position after it; position -1 when it is longer than
    10 bytes or runs to ``limit``."""
    result = 0
    shift = 0
    while shift < 7 * _MAX_VARINT_BYTES:
        if pos >= limit:
            return 0, -1
        byte = _byte(data, pos)
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return ((result >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(result & 1), pos
        shift += 7
    return 0, -1


@kernel
def walk_records(
    data: npt.NDArray[np.uint8],
    body_starts: npt.NDArray[np.int64],
    body_ends: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    base_offsets: npt.NDArray[np.int64],
    keys_only: bool,
    record_starts: npt.NDArray[np.int64],
    record_ends: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    timestamp_deltas: npt.NDArray[np.int64],
    key_starts: npt.NDArray[np.int64],
    key_lengths: npt.NDArray[np.int64],
    null_values: npt.NDArray[np.bool_],
) -> int:
    """Fill the columns (one entry per record, batch after batch) of the records of the bodies
    ``data[body_starts[b] : body_ends[b]]``, ``counts[b]`` records each; returns -1 when every body holds
    exactly its records and every field lies inside its record, else the batch that does not.

    ``keys_only``: the values are not read (``null_values`` left as given), the timestamp deltas not
    stored (left as given); each key is checked to lie inside its record."""
    limit = len(data)
    r = 0
    for b in range(len(counts)):
        pos = body_starts[b]
        end_of_body = body_ends[b]
        base_offset = base_offsets[b]
        if pos < 0 or end_of_body > limit or pos > end_of_body:
            return b
        for _ in range(counts[b]):
            record_starts[r] = pos
            length, pos = _varint(data, pos, end_of_body)
            if pos < 0 or length < _MIN_RECORD_BYTES or length > end_of_body - pos:
                return b
            end = pos + length
            record_ends[r] = end
            # the attributes byte (unused), then the timestamp delta
            timestamp_delta, pos = _varint(data, pos + 1, end)
            if pos < 0:
                return b
            offset_delta, pos = _varint(data, pos, end)
            if pos < 0:
                return b
            key_length, pos = _varint(data, pos, end)
            if pos < 0 or key_length < -1 or key_length > end - pos:
                return b
            offsets[r] = base_offset + offset_delta
            key_starts[r] = pos
            key_lengths[r] = key_length
            if not keys_only:
                timestamp_deltas[r] = timestamp_delta
                value_length, pos = _varint(data, pos + max(key_length, 0), end)
                if pos < 0 or value_length < -1 or value_length > end - pos:
                    return b
                null_values[r] = value_length < 0
            pos = end
            r += 1
        if pos != end_of_body:
            return b
    return -1


@inlined
def _big_endian(data: npt.NDArray[np.uint8], at: int, width: int) -> int:
    """The signed big-endian integer of ``width`` bytes at ``data[at]`` (the caller checked the bounds)."""
    value = 0
    for i in range(width):
        value = (value << 8) | _byte(data, at + i)
    if width < 8 and value >= 1 << (8 * width - 1):
        value -= 1 << (8 * width)
    return value


#: The header fields :func:`batch_headers` reads, one row of its ``fields`` each, in this order.
FIELDS = (
    "base_offset",
    "attributes",
    "last_offset_delta",
    "first_timestamp",
    "max_timestamp",
    "producer_id",
    "record_count",
)


@kernel
def batch_headers(
    data: npt.NDArray[np.uint8],
    total: int,
    positions: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    fields: npt.NDArray[np.int64],
) -> tuple[int, int]:
    """Where the whole batches in ``data[:total]`` start, from each one's ``batchLength``, their sizes,
    and their header fields (:data:`FIELDS`, row by row: ``fields[f, b]`` for batch ``b``), into arrays
    with room for ``total // (LOG_OVERHEAD + MIN_BATCH_LENGTH) + 1`` batches. Returns how many batches and
    where the last one ends: the scan stops before a batch cut short and before a header it cannot frame
    (a length below the minimum, a magic other than 2: the segment framer says which)."""
    total = min(total, len(data))
    count = 0
    pos = 0
    while total - pos >= HEADER_SIZE:
        size = LOG_OVERHEAD + _big_endian(data, pos + LENGTH_OFFSET, 4)
        if size < LOG_OVERHEAD + MIN_BATCH_LENGTH or size > total - pos:
            break
        if _byte(data, pos + MAGIC_OFFSET) != MAGIC:
            break
        positions[count] = pos
        sizes[count] = size
        fields[0, count] = _big_endian(data, pos, 8)
        fields[1, count] = _big_endian(data, pos + ATTRIBUTES_OFFSET, 2)
        fields[2, count] = _big_endian(data, pos + LAST_OFFSET_DELTA_OFFSET, 4)
        fields[3, count] = _big_endian(data, pos + FIRST_TIMESTAMP_OFFSET, 8)
        fields[4, count] = _big_endian(data, pos + MAX_TIMESTAMP_OFFSET, 8)
        fields[5, count] = _big_endian(data, pos + PRODUCER_FIELDS_OFFSET, 8)
        fields[6, count] = _big_endian(data, pos + RECORD_COUNT_OFFSET, 4)
        count += 1
        pos += size
    return count, pos
