"""The headers of many concatenated record batches as numpy columns: :func:`batch_header_columns`, the log
cleaner's way through a segment's bytes without a :class:`~broker.record.record_batch.RecordBatch` per batch.

The header layout is :mod:`broker.record.batch_header`'s. Batches lie end to end in a buffer (a read of a
segment); one compiled loop (:func:`~broker.record.column_kernels.batch_headers`, numba imported on
the first call: :mod:`broker.compiled`) finds where each starts from its ``batchLength`` (with the checks
:func:`~broker.record.batch_scan.scan_batches` makes: a length below the minimum or a magic other than 2
is a :class:`~broker.record.errors.CorruptRecordError`) and reads the header fields the cleaner uses, into
one array per field (:class:`BatchHeaderColumns`). CRCs are not checked (the cleaner
reads its own log, validated at append). Unlike the walker's strategies, this module imports numpy when
imported: only the broker's storage uses it, never a client. Stateless: safe from any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.record.batch_header import (
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
)
from broker.record.errors import CorruptRecordError

__all__ = ["BatchHeaderColumns", "batch_header_columns"]

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength

Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class BatchHeaderColumns:
    """The whole batches at the start of a buffer, one array entry per batch, in order."""

    #: Where each batch starts in the buffer, and its size in bytes.
    positions: Int64s
    sizes: Int64s
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
            self.base_offsets[first:stop],
            self.attributes[first:stop],
            self.last_offset_deltas[first:stop],
            self.first_timestamps[first:stop],
            self.max_timestamps[first:stop],
            self.producer_ids[first:stop],
            self.record_counts[first:stop],
        )


def batch_header_columns(
    buffer: bytes | bytearray | memoryview,
    *,
    end: int | None = None,
    where: str = "<buffer>",
    base_position: int = 0,
) -> BatchHeaderColumns:
    """The whole batches in ``buffer[:end]`` from its start (a batch cut short at the end is left out).
    ``base_position`` is added to positions in error messages (the buffer's place in its file)."""
    from broker.record.column_kernels import (  # noqa: PLC0415 - numba, on first use
        BELOW_MINIMUM_LENGTH,
        batch_headers,
    )

    total = len(buffer) if end is None else end
    arr = np.frombuffer(buffer, dtype=np.uint8)
    room = total // (LOG_OVERHEAD + MIN_BATCH_LENGTH) + 1
    positions = np.empty(room, dtype=np.int64)
    sizes = np.empty(room, dtype=np.int64)
    fields = np.empty((7, room), dtype=np.int64)
    count, at, wrong = batch_headers(arr, total, positions, sizes, fields)
    if wrong:
        base_offset, length = _PREFIX.unpack_from(buffer, at)
        reason = (
            f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}"
            if wrong == BELOW_MINIMUM_LENGTH
            else f"expected magic {MAGIC} got {buffer[at + MAGIC_OFFSET]}"
        )
        raise CorruptRecordError(where, reason, position=base_position + at, offset=base_offset)
    base_offsets, attributes, last_offset_deltas, first_timestamps, max_timestamps, producer_ids, counts = (
        fields[:, :count]
    )
    return BatchHeaderColumns(
        positions=positions[:count],
        sizes=sizes[:count],
        base_offsets=base_offsets,
        attributes=attributes,
        last_offset_deltas=last_offset_deltas,
        first_timestamps=first_timestamps,
        max_timestamps=max_timestamps,
        producer_ids=producer_ids,
        record_counts=counts,
    )
