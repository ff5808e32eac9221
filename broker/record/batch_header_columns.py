"""The headers of many concatenated record batches as numpy columns: :func:`batch_header_columns`, the log
cleaner's way through a segment's bytes without a :class:`~broker.record.record_batch.RecordBatch` per batch.

The header layout is :mod:`broker.record.batch_header`'s. Batches lie end to end in a buffer (a read of a
segment); one compiled loop (:func:`~broker.record.column_kernels.batch_headers`, numba imported on
the first call: :mod:`broker.compiled`) finds where each starts from its ``batchLength`` and reads the
header fields the cleaner uses, into one array per field (:class:`BatchHeaderColumns`). It stops before a
batch cut short and before one whose header it cannot frame (a length below the minimum, a magic other
than 2); which it was, and the message, is the segment framer's to say
(:func:`broker.log.segment_framer.frame_columns`, the cleaner's way in). CRCs are not checked (the
cleaner reads its own log, validated at append). Unlike the walker's strategies, this module imports numpy
when imported: only the broker's storage uses it, never a client. Stateless: safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker.record.batch_header import LOG_OVERHEAD, MIN_BATCH_LENGTH

__all__ = ["BatchHeaderColumns", "batch_header_columns"]

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
    buffer: bytes | bytearray | memoryview, *, end: int | None = None
) -> BatchHeaderColumns:
    """The whole batches in ``buffer[:end]`` from its start, up to the first one cut short or whose header
    cannot be framed (:attr:`~BatchHeaderColumns.complete_bytes` says where they end)."""
    from broker.record.column_kernels import batch_headers  # noqa: PLC0415 - numba, on first use

    total = len(buffer) if end is None else end
    arr = np.frombuffer(buffer, dtype=np.uint8)
    room = total // (LOG_OVERHEAD + MIN_BATCH_LENGTH) + 1
    positions = np.empty(room, dtype=np.int64)
    sizes = np.empty(room, dtype=np.int64)
    fields = np.empty((7, room), dtype=np.int64)
    count, _ = batch_headers(arr, total, positions, sizes, fields)
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
