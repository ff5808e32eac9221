"""The headers of many concatenated record batches as numpy columns: :func:`batch_header_columns`, the log
cleaner's way through a segment's bytes without a :class:`~broker.record.record_batch.RecordBatch` per batch.

The header layout is :mod:`broker.record.batch_header`'s. Batches lie end to end in a buffer (a read of a
segment); one compiled loop (:func:`~broker.record.column_kernels.batch_positions`, numba imported on
the first call: :mod:`broker.compiled`) finds where each starts from its ``batchLength`` (with the checks
:func:`~broker.record.batch_scan.scan_batches` makes: a length below the minimum or a magic other than 2
is a :class:`~broker.record.errors.CorruptRecordError`), and then every header field of every batch is
read at once, as one array per field (:class:`BatchHeaderColumns`). CRCs are not checked (the cleaner
reads its own log, validated at append). Unlike the walker's strategies, this module imports numpy when
imported: only the broker's storage uses it, never a client. Stateless: safe from any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.record.batch_header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    FIRST_TIMESTAMP_OFFSET,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_FIELDS_OFFSET,
    RECORD_COUNT_OFFSET,
)
from broker.record.errors import CorruptRecordError

__all__ = ["HEADER_DTYPE", "BatchHeaderColumns", "batch_header_columns"]

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength

#: The 61-byte header as one numpy record (big-endian fields at the layout's byte positions).
HEADER_DTYPE = np.dtype(
    {
        "names": [
            "base_offset",
            "batch_length",
            "partition_leader_epoch",
            "magic",
            "crc",
            "attributes",
            "last_offset_delta",
            "first_timestamp",
            "max_timestamp",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "record_count",
        ],
        "formats": [">i8", ">i4", ">i4", "i1", ">u4", ">i2", ">i4", ">i8", ">i8", ">i8", ">i2", ">i4", ">i4"],
        "offsets": [
            0,
            LENGTH_OFFSET,
            PARTITION_LEADER_EPOCH_OFFSET,
            MAGIC_OFFSET,
            CRC_OFFSET,
            ATTRIBUTES_OFFSET,
            LAST_OFFSET_DELTA_OFFSET,
            FIRST_TIMESTAMP_OFFSET,
            MAX_TIMESTAMP_OFFSET,
            PRODUCER_FIELDS_OFFSET,  # producerId (8 bytes), producerEpoch (2), baseSequence (4)
            PRODUCER_FIELDS_OFFSET + 8,
            PRODUCER_FIELDS_OFFSET + 10,
            RECORD_COUNT_OFFSET,
        ],
        "itemsize": HEADER_SIZE,
    }
)

Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class BatchHeaderColumns:
    """The whole batches at the start of a buffer, one array entry per batch, in order."""

    #: Where each batch starts in the buffer, and its size in bytes.
    positions: Int64s
    sizes: Int64s
    #: The batches' 61-byte headers, as they are (``HEADER_DTYPE`` records; copies, not views).
    headers: npt.NDArray[np.void]
    base_offsets: Int64s
    attributes: Int64s
    last_offset_deltas: Int64s
    first_timestamps: Int64s
    max_timestamps: Int64s
    producer_ids: Int64s
    record_counts: Int64s

    @property
    def count(self) -> int:
        return len(self.positions)

    @property
    def complete_bytes(self) -> int:
        """Bytes the batches cover from the buffer's start."""
        return int(self.positions[-1] + self.sizes[-1]) if len(self.positions) else 0

    @property
    def last_offsets(self) -> Int64s:
        return self.base_offsets + self.last_offset_deltas

    def select(self, first: int, stop: int) -> BatchHeaderColumns:
        """The batches ``[first, stop)``."""
        return BatchHeaderColumns(
            self.positions[first:stop],
            self.sizes[first:stop],
            self.headers[first:stop],
            self.base_offsets[first:stop],
            self.attributes[first:stop],
            self.last_offset_deltas[first:stop],
            self.first_timestamps[first:stop],
            self.max_timestamps[first:stop],
            self.producer_ids[first:stop],
            self.record_counts[first:stop],
        )


def batch_header_columns(
    buffer: bytes | bytearray, *, end: int | None = None, where: str = "<buffer>", base_position: int = 0
) -> BatchHeaderColumns:
    """The whole batches in ``buffer[:end]`` from its start (a batch cut short at the end is left out).
    ``base_position`` is added to positions in error messages (the buffer's place in its file)."""
    from broker.record.column_kernels import batch_positions  # noqa: PLC0415 - numba, on first use

    total = len(buffer) if end is None else end
    arr = np.frombuffer(buffer, dtype=np.uint8)
    found = np.empty(total // (LOG_OVERHEAD + MIN_BATCH_LENGTH) + 1, dtype=np.int64)
    count, pos, bad = batch_positions(arr, total, found)
    starts = found[:count]
    magics = arr[starts + MAGIC_OFFSET]
    if np.count_nonzero(magics != MAGIC) or bad >= 0:
        wrong = np.flatnonzero(magics != MAGIC)
        at = int(starts[wrong[0]]) if len(wrong) else bad
        base_offset, length = _PREFIX.unpack_from(buffer, at)
        reason = (
            f"expected magic {MAGIC} got {buffer[at + MAGIC_OFFSET]}"
            if len(wrong)
            else f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}"
        )
        raise CorruptRecordError(where, reason, position=base_position + at, offset=base_offset)
    sizes = np.empty(count, dtype=np.int64)
    if count:
        sizes[:-1] = np.diff(starts)
        sizes[-1] = pos - int(starts[-1])
    headers = arr[starts[:, None] + np.arange(HEADER_SIZE)].view(HEADER_DTYPE).reshape(count)
    return BatchHeaderColumns(
        positions=starts,
        sizes=sizes,
        headers=headers,
        base_offsets=headers["base_offset"].astype(np.int64),
        attributes=headers["attributes"].astype(np.int64),
        last_offset_deltas=headers["last_offset_delta"].astype(np.int64),
        first_timestamps=headers["first_timestamp"].astype(np.int64),
        max_timestamps=headers["max_timestamp"].astype(np.int64),
        producer_ids=headers["producer_id"].astype(np.int64),
        record_counts=headers["record_count"].astype(np.int64),
    )
