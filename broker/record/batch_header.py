"""The record batch v2 header (magic 2): its 61 bytes, field by field, and what the CRC covers.

Byte layout (all integers big-endian; offsets are byte positions inside the batch)::

     0  baseOffset           int64   offset of the first record; the broker rewrites it on append
     8  batchLength          int32   bytes after this field (= total size - 12)
    12  partitionLeaderEpoch int32   -1 when unknown
    16  magic                int8    2
    17  crc                  uint32  CRC-32C (Castagnoli) of bytes [21, end): attributes to the end
    21  attributes           int16   bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                     bit 3 timestamp type (0 CreateTime, 1 LogAppendTime),
                                     bit 4 transactional, bit 5 control batch, bit 6 the first
                                     timestamp is the delete horizon (KIP-534: set by the log
                                     cleaner), bits 7-15 unused
    23  lastOffsetDelta      int32   last record's offset - baseOffset
    27  firstTimestamp       int64   first record's timestamp (ms)
    35  maxTimestamp         int64   largest record timestamp (ms)
    43  producerId           int64   -1 without an idempotent producer
    51  producerEpoch        int16   -1
    53  baseSequence         int32   -1
    57  recordCount          int32
    61  records              the records (layout: :mod:`broker.record.record`), concatenated; when
                             compressed, one blob framed per codec (see :mod:`broker.record.compression`)

The CRC does not cover baseOffset, batchLength or partitionLeaderEpoch, so the broker assigns offsets by
rewriting bytes [0, 8) (:func:`~broker.record.record_batch.set_base_offset`) without touching the records
or the CRC. A batch is read through :class:`~broker.record.record_batch.RecordBatch` and built by
:mod:`broker.record.record_batch_builder`.

Framing batches that lie end to end (a fetch response, a request, a segment) checks each header the same
way, with the same messages: :func:`header_fault` (``batchLength`` below the minimum: nothing after it can
be framed; a magic other than 2: no batch starts there), asked by :mod:`broker.record.batch_scan` and by
the segment framer (:mod:`broker.log.segment_framer`) once their inline test of the usual case fails.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from broker.record.varint import Buffer

__all__ = [
    "ATTRIBUTES_OFFSET",
    "COMPRESSION_MASK",
    "CONTROL_MASK",
    "CRC_OFFSET",
    "DELETE_HORIZON_MASK",
    "FIRST_TIMESTAMP_OFFSET",
    "HEADER",
    "HEADER_PREFIX",
    "HEADER_SIZE",
    "LAST_OFFSET_DELTA_OFFSET",
    "LENGTH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_FIELDS_OFFSET",
    "RECORD_COUNT_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "HeaderFault",
    "TimestampType",
    "header_fault",
]

MAGIC = 2
#: baseOffset + batchLength: the bytes in front of what batchLength counts.
LOG_OVERHEAD = 12
#: The whole fixed header, records count included.
HEADER_SIZE = 61
#: The smallest legal batchLength (a header with no records).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
FIRST_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
#: producerId int64, producerEpoch int16, baseSequence int32
PRODUCER_FIELDS_OFFSET = 43
RECORD_COUNT_OFFSET = 57

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
#: The batch's firstTimestamp is the time after which the log cleaner drops its tombstones; record
#: timestamp deltas are relative to it, so record timestamps read the same (KIP-534).
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

#: The whole header, one field per item (indexes 0-12 in the order of the layout above).
HEADER = struct.Struct(
    ">"
    "q"  # 0 baseOffset
    "i"  # 1 batchLength
    "i"  # 2 partitionLeaderEpoch
    "b"  # 3 magic
    "I"  # 4 crc
    "h"  # 5 attributes
    "i"  # 6 lastOffsetDelta
    "q"  # 7 firstTimestamp
    "q"  # 8 maxTimestamp
    "q"  # 9 producerId
    "h"  # 10 producerEpoch
    "i"  # 11 baseSequence
    "i"  # 12 recordCount
)

#: The header up to and including lastOffsetDelta (items 0-6 of :data:`HEADER`): what a reader needs to
#: find a batch's offsets and size without reading the rest.
HEADER_PREFIX = struct.Struct(">qiibIhi")


class TimestampType(IntEnum):
    """Bit 3 of the attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class HeaderFault(NamedTuple):
    """Why bytes cannot start a batch (:func:`header_fault`): the base offset they hold, and the reason."""

    base_offset: int
    reason: str


_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_MAGIC = struct.Struct(">b")


def header_fault(data: Buffer, at: int, available: int, *, magic: bool = True) -> HeaderFault | None:
    """Why the ``available`` bytes at ``data[at]`` cannot start a batch, as far as they go: ``batchLength``
    below the minimum (once its 12 bytes are there), then, when ``magic``, a magic other than 2 (once its
    17 are); None when nothing there says so (the batch may still be cut short: that is its reader's to
    say)."""
    if available < LOG_OVERHEAD:
        return None
    base_offset, length = _PREFIX.unpack_from(data, at)
    if length < MIN_BATCH_LENGTH:
        return HeaderFault(
            base_offset,
            f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}: nothing after it can be framed",
        )
    if magic and available > MAGIC_OFFSET:
        (found,) = _MAGIC.unpack_from(data, at + MAGIC_OFFSET)
        if found != MAGIC:
            return HeaderFault(base_offset, f"expected magic {MAGIC} got {found}")
    return None
