"""Framing a segment's ``.log`` file into batches: the one sequential reader of a file's batch boundaries.

Recovery (:mod:`broker.log.segment_scan`), ``lumber log verify`` (:mod:`broker.log.log_verifier`) and a
segment read through (:meth:`broker.log.segment.Segment.batches`) walk a file with :class:`SegmentFramer`,
as Kafka's ``LogSegment.recover()`` iterates ``log.batches()`` (``FileRecords``' batch iterator, framing by
``batchLength``) before it calls ``batch.ensureValid()`` on each. The framer cuts the file at each batch's
``batchLength`` and checks only what framing needs, in this order, at each position:

1. the rest of the file holds a batch header: else ``torn tail: the last N bytes cannot hold a batch
   header (61 bytes)`` (the file ends inside a batch: a torn write);
2. ``batchLength`` is at least the minimum (a header without records): else ``batchLength L is below the
   minimum 49: the rest of the file cannot be framed`` (nothing after it can be found);
3. the batch ends inside the file: else ``torn tail: batchLength announces S bytes, only R remain in the
   file``.

It stops at the first that fails; :attr:`SegmentFramer.error` then says which (a :class:`FrameError`,
whose ``torn`` tells a torn tail from a length that cannot be right). What a batch holds (magic, CRC,
records) is its reader's to check (:meth:`~broker.record.record_batch.RecordBatch.validate`); the order of
batches, which every reader of a segment checks the same way, is :func:`offset_regression`.

The file is read sequentially in large chunks (a batch larger than a chunk is read whole) and handed out as
zero-copy :class:`~broker.record.record_batch.RecordBatch` views of them. A framer is one walk, by one
thread, of a file no one truncates under it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from broker.log.file_handle import FileHandle
from broker.record.batch_header import HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch

__all__ = ["FrameError", "SegmentFramer", "offset_regression"]

#: How much of the file one read takes.
CHUNK_BYTES = 8 * 1024 * 1024
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength


@dataclass(frozen=True, slots=True)
class FrameError:
    """Why framing stopped: where, the base offset there (when its 12 bytes were there), and the reason."""

    position: int
    base_offset: int | None
    #: True when the file ends inside a batch (a torn tail); False for a length that cannot be right.
    torn: bool
    reason: str


def offset_regression(expected: int, base_offset: int) -> str | None:
    """Why a batch with ``base_offset`` cannot follow one that ended before offset ``expected`` (offsets
    only grow: a cleaned segment has gaps, never overlaps); None when it can."""
    if base_offset < expected:
        return f"expected a base offset of at least {expected} got {base_offset}"
    return None


class SegmentFramer:
    """The whole batches of a ``.log`` file between ``start`` (a batch start) and ``end`` (default: the
    file's size), in order; see the module docstring."""

    __slots__ = ("_buffer", "_buffer_start", "_chunk_bytes", "_file", "end", "error", "position", "where")

    def __init__(
        self, file: FileHandle, *, start: int = 0, end: int | None = None, chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        self._file = file
        self._chunk_bytes = max(chunk_bytes, HEADER_SIZE)
        self._buffer = memoryview(b"")
        self._buffer_start = start
        self.where = str(file.path)
        self.end = file.size() if end is None else end
        #: Where the next batch starts: after the iteration, the end of the whole batches framed.
        self.position = start
        #: Why the iteration stopped before ``end``, or None.
        self.error: FrameError | None = None

    def __iter__(self) -> Iterator[RecordBatch]:
        end = self.end
        where = self.where
        while self.position < end:
            position = self.position
            remaining = end - position
            if remaining < HEADER_SIZE:
                self._stop(
                    position,
                    None,
                    True,
                    f"torn tail: the last {remaining} bytes cannot hold a batch header ({HEADER_SIZE} bytes)",
                )
                return
            base_offset, length = _PREFIX.unpack_from(self._read(position, LOG_OVERHEAD))
            if length < MIN_BATCH_LENGTH:
                self._stop(
                    position,
                    base_offset,
                    False,
                    f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}: the rest of the file "
                    "cannot be framed",
                )
                return
            size = LOG_OVERHEAD + length
            if size > remaining:
                self._stop(
                    position,
                    base_offset,
                    True,
                    f"torn tail: batchLength announces {size} bytes, only {remaining} remain in the file",
                )
                return
            self.position = position + size
            yield RecordBatch(self._read(position, size), where=where, position=position)

    def raise_error(self) -> None:
        """Raise :class:`CorruptRecordError` for :attr:`error`, if framing stopped on one."""
        error = self.error
        if error is not None:
            raise CorruptRecordError(
                self.where, error.reason, position=error.position, offset=error.base_offset
            )

    def _stop(self, position: int, base_offset: int | None, torn: bool, reason: str) -> None:
        self.error = FrameError(position, base_offset, torn, reason)

    def _read(self, position: int, size: int) -> memoryview:
        """``size`` bytes at ``position``, from the chunk in memory or a new read of one."""
        start = self._buffer_start
        if start <= position and position + size <= start + len(self._buffer):
            return self._buffer[position - start : position - start + size]
        data = self._file.pread(max(size, min(self._chunk_bytes, self.end - position)), position)
        self._buffer = memoryview(data)
        self._buffer_start = position
        return self._buffer[:size]
