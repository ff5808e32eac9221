"""Splitting concatenated record batches (a fetch response, a produce request, a read of a segment).

A buffer of batches end to end is cut at each batch's ``batchLength`` (layout:
:mod:`broker.record.record_batch`) into zero-copy :class:`~broker.record.record_batch.RecordBatch` views.
Kafka fetch responses may end with a batch cut short; :func:`scan_batches` stops cleanly there and says how
many bytes are left. Stateless: safe from any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.record.batch_header import LOG_OVERHEAD, MAGIC, MAGIC_OFFSET, MIN_BATCH_LENGTH, header_fault
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from broker.record.varint import Buffer

__all__ = ["BatchScan", "scan_batches"]

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength


@dataclass(frozen=True, slots=True)
class BatchScan:
    """The result of :func:`scan_batches`: the whole batches, and how the buffer ends."""

    batches: tuple[RecordBatch, ...]
    #: Bytes covered by ``batches`` (they start at 0 and are contiguous).
    complete_bytes: int
    #: Bytes after the last whole batch: the start of a batch cut short (0 when the buffer ends cleanly).
    partial_tail_bytes: int


def scan_batches(buffer: Buffer, *, where: str = "<buffer>", base_position: int = 0) -> BatchScan:
    """Split concatenated batches without copying, and say whether the tail is a partial batch.

    Kafka fetch responses may end with a batch cut short; readers stop cleanly there. A batch header
    that cannot be right (``batchLength`` below the minimum, magic other than 2: the checks and messages
    of :func:`~broker.record.batch_header.header_fault`, the segment framer's too) raises
    :class:`CorruptRecordError`. CRCs are not checked here: call :meth:`RecordBatch.validate`.
    ``base_position`` is added to positions in error messages.
    """
    view = memoryview(buffer)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    total = len(view)
    pos = 0
    batches: list[RecordBatch] = []
    unpack_prefix = _PREFIX.unpack_from
    while total - pos >= LOG_OVERHEAD:
        _, length = unpack_prefix(view, pos)
        if length < MIN_BATCH_LENGTH or (total - pos > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != MAGIC):
            fault = header_fault(view, pos, total - pos)
            if fault is not None:  # always: the test above is header_fault's, inline for the usual case
                raise CorruptRecordError(
                    where, fault.reason, position=base_position + pos, offset=fault.base_offset
                )
        size = LOG_OVERHEAD + length
        if size > total - pos:
            break
        batches.append(RecordBatch(view[pos : pos + size], where=where, position=base_position + pos))
        pos += size
    return BatchScan(tuple(batches), pos, total - pos)
