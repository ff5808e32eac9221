"""The validation walk's fast strategies: records proved valid by comparing bytes, not by walking them.

Validation (:meth:`~broker.record.record_batch.RecordBatch.validate_records`, the log validator) must
accept exactly what :func:`~broker.record.record_walker.walk_records` accepts in validation mode. Two
strategies do it faster for what producers usually send, and decline (return ``False``) anything else,
which the walk then checks and names:

* :func:`records_of_one_layout`: a batch of records of one layout (same lengths and header bytes);
* :func:`one_record_batches_valid`: a pipelining producer's run of one-record batches, proved together.

Both never raise for bad data. Stateless: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from broker.record.batch_header import COMPRESSION_MASK, HEADER_SIZE
from broker.record.errors import CorruptRecordError, InvalidRecordError
from broker.record.record_walker import walk_records
from broker.record.varint import decode_varint, encode_varint

if TYPE_CHECKING:
    from broker.record.record_batch import RecordBatch

__all__ = ["one_record_batches_valid", "records_of_one_layout"]

# The first index whose offset delta takes one more varint byte: the zigzag of delta d is 2d.
_OFFSET_DELTA_WIDTH_ENDS = (0, 1 << 6, 1 << 13, 1 << 20, 1 << 27)


def one_record_batches_valid(batches: Sequence[RecordBatch]) -> bool:
    """``True`` when every batch of ``batches`` would pass :meth:`RecordBatch.validate_records`, proved
    together; ``False`` when this cannot vouch for them (then validate each). Never raises.

    For a pipelining producer's run of batches of one record each (``linger`` 0, as the paper's batch 1),
    appended together: when they are all uncompressed, of one record and of one size, their records are
    laid end to end and checked as one batch's by :func:`records_of_one_layout`, every offset delta 0.
    About 0.3 us per batch instead of 1.5.
    """
    if len(batches) < 2:
        return False
    size = batches[0].size_bytes
    for batch in batches:
        header = batch._header
        if header[12] != 1 or header[5] & COMPRESSION_MASK or batch.size_bytes != size:
            return False
    data = b"".join([batch.buffer[HEADER_SIZE:] for batch in batches])
    first = batches[0]
    return records_of_one_layout(data, len(batches), first.where, first.position, one_per_batch=True)


def records_of_one_layout(
    data: bytes, count: int, where: str, position: int | None, *, one_per_batch: bool = False
) -> bool:
    """The validation walk's fast strategy: ``True`` when the ``count`` records of ``data`` all pass
    :func:`~broker.record.record_walker.walk_records`'s validation, ``False`` when it cannot vouch for
    them (the caller then walks them, which also names what is wrong). Never raises for bad data.

    A producer's batch is mostly records of one layout: the same length, key and value lengths and
    header bytes, timestamp deltas of one varint width, offset deltas counting up. The records whose
    offset deltas have the same varint width (0-63, 64-8191, ...) lie then at a fixed distance from each
    other; the first of them is checked by the walker itself (``first_index``), and every other is proved
    to pass the same checks by comparing its framing bytes with the first's, one strided slice per byte
    position (C loops): the length, key length and value length varints and the header block byte for byte,
    the timestamp varint's continuation bits, and the offset delta against the expected one. Keys, values,
    attributes and timestamp values are not framing: the walker accepts any. About 0.1 us per record for
    50-record batches of 200-byte values with a header, against 0.85 us for the walk.

    ``one_per_batch``: ``data`` is the records of ``count`` batches of one record each, end to end (see
    :func:`one_record_batches_valid`): every offset delta must be 0.
    """
    end = len(data)
    pos = 0
    index = 0
    try:
        while index < count:
            # the layout of the record at pos
            p = pos
            length, p = decode_varint(data, p)
            length_width = p - pos
            stride = length_width + length
            if length < 6 or pos + stride > end:
                return False
            p += 1  # attributes
            ts_at = p - pos
            _, p = decode_varint(data, p)
            ts_width = p - pos - ts_at
            od_at = p - pos
            _, p = decode_varint(data, p)
            od_width = p - pos - od_at
            key_at = p - pos
            key_len, p = decode_varint(data, p)
            key_end = p - pos
            p += max(key_len, 0)
            value_at = p - pos
            value_len, p = decode_varint(data, p)
            value_end = p - pos
            p += max(value_len, 0)
            headers_at = p - pos
            if od_width >= len(_OFFSET_DELTA_WIDTH_ENDS) or headers_at >= stride:
                return False
            n = count if one_per_batch else min(count, _OFFSET_DELTA_WIDTH_ENDS[od_width]) - index
            stop = pos + n * stride
            if n < 1 or stop > end:
                return False
            # the first record of the run, by the walker
            try:
                walk_records(
                    data[pos : pos + stride],
                    1,
                    0,
                    0,
                    None,
                    where,
                    position,
                    decode=False,
                    first_index=0 if one_per_batch else index,
                )
            except (CorruptRecordError, InvalidRecordError):
                return False
            if n > 1:
                for at in (
                    *range(length_width),
                    *range(key_at, key_end),
                    *range(value_at, value_end),
                    *range(headers_at, stride),
                ):
                    if data[pos + at : stop : stride].count(data[pos + at]) != n:
                        return False
                last = pos + ts_at + ts_width - 1
                if not data[last:stop:stride].isascii():
                    return False
                for at in range(pos + ts_at, last):
                    if min(data[at:stop:stride]) < 0x80:
                        return False
                expected = (bytes(n),) if one_per_batch else _offset_delta_columns(index, n, od_width)
                for column, at in enumerate(range(pos + od_at, pos + od_at + od_width)):
                    if data[at:stop:stride] != expected[column]:
                        return False
            pos = stop
            index += n
    except (IndexError, ValueError):
        return False
    return pos == end


@lru_cache(maxsize=64)
def _offset_delta_columns(first: int, n: int, width: int) -> tuple[bytes, ...]:
    """Byte ``i`` of the varints of offset deltas ``first .. first + n - 1`` (all ``width`` bytes long),
    for ``i`` in ``range(width)``."""
    joined = b"".join(encode_varint(delta) for delta in range(first, first + n))
    return tuple(joined[i::width] for i in range(width))
