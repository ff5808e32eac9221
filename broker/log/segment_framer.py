"""Framing a segment's ``.log`` file into batches: the one reader of a file's batch boundaries, with one set
of checks and messages.

Every reader of a segment's batch boundaries frames through this module, as Kafka's ``LogSegment.recover()``
iterates ``log.batches()`` (``FileRecords``' batch iterator, framing by ``batchLength``) before it calls
``batch.ensureValid()`` on each:

* :class:`SegmentFramer` walks a file from a batch start, batch after batch, as zero-copy
  :class:`~broker.record.record_batch.RecordBatch` views: recovery (:mod:`broker.log.segment_scan`),
  ``lumber log verify`` (:mod:`broker.log.log_verifier`) and a segment read through
  (:meth:`broker.log.segment.Segment.batches`);
* :func:`read_header` and :func:`read_header_prefix` read the header of the batch at a known position (an
  index entry, the batch after one read): the fetch path's batch boundaries
  (:meth:`~broker.log.segment.Segment.position_of`, ``read``, ``batch_headers``,
  ``find_offset_by_timestamp``) and a loaded segment's check (:mod:`broker.log.segment_headers`);
  :class:`HeaderScan` reads the headers of a walk forward from an index entry through one buffer (a fetch
  finding its offset: one ``pread`` per index interval), with the same checks;
* :func:`frame_columns` frames a block of a file read by the log cleaner (:mod:`broker.log.cleaner_chunk`)
  into header columns, by the compiled loop of :mod:`broker.record.batch_header_columns` (no object per
  batch: the cleaner's speed); where that loop stops short, this module says why.

The checks, in this order, at a batch's position, with ``R`` bytes before the end (the file's, or the end
the log has published):

1. the batch header fits: else ``torn tail: the last R bytes cannot hold a batch header (61 bytes)`` (the
   file ends inside a batch: a torn write);
2. ``batchLength`` is at least the minimum (a header without records): else ``batchLength L is below the
   minimum 49: nothing after it can be framed``;
3. by a reader of headers alone (:func:`read_header`, :func:`frame_columns`): magic 2, else ``expected
   magic 2 got M`` (a position that is no batch start).

Checks 2 and 3, and their messages, are the record format's
(:func:`~broker.record.batch_header.header_fault`), which splitting a buffer of batches
(:mod:`broker.record.batch_scan`) asks too. A reader of whole batches leaves magic to
   :meth:`~broker.record.record_batch.RecordBatch.validate`, whose message is the same, and frames on:
   ``lumber log verify`` reports such a batch and walks on to the next;
4. the batch ends inside the file: else ``torn tail: batchLength announces S bytes, only R remain in the
   file``.

:func:`frame_error` makes them (a :class:`FrameError`, whose ``torn`` tells a torn tail from a header that
cannot be right; :meth:`FrameError.exception` the :class:`~broker.record.errors.CorruptRecordError` naming
the file, position and base offset); the walks test the usual case inline and ask :func:`frame_failure`,
the same checks, only for a batch that fails it. What a batch holds (CRC, records) is its reader's to
check; the order of batches, which every reader of a segment checks the same way, is
:func:`offset_regression`.

:class:`SegmentFramer` reads the file sequentially in large chunks (a batch larger than a chunk is read
whole); a framer is one walk, by one thread, of a file no one truncates under it. The functions are
stateless: safe from any thread (below the end the log has published, a file never changes).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.log.file_handle import FileHandle
from broker.record.batch_header import (
    HEADER,
    HEADER_PREFIX,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    header_fault,
)
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from broker.record.varint import Buffer

if TYPE_CHECKING:
    from broker.record.batch_header_columns import BatchHeaderColumns

__all__ = [
    "FrameError",
    "SegmentFramer",
    "frame_columns",
    "frame_error",
    "frame_failure",
    "offset_regression",
    "read_header",
    "read_header_prefix",
]

#: How much of the file one read takes.
CHUNK_BYTES = 8 * 1024 * 1024
#: What :class:`HeaderScan` reads at a time: twice the default ``index_interval_bytes`` (4096), so that a
#: walk from an index entry to the batch holding an offset usually takes one read.
SCAN_READ_BYTES = 8192
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_LENGTH = struct.Struct(">i")
_MAGIC = struct.Struct(">b")


@dataclass(frozen=True, slots=True)
class FrameError:
    """Why framing stopped: where, the base offset there (when its 12 bytes were there), and the reason."""

    position: int
    base_offset: int | None
    #: True when the file ends inside a batch (a torn tail); False for a header that cannot be right.
    torn: bool
    reason: str

    def exception(self, where: str) -> CorruptRecordError:
        """The error to raise for it, naming the file ``where``."""
        return CorruptRecordError(where, self.reason, position=self.position, offset=self.base_offset)


def frame_error(
    data: Buffer, at: int, position: int, remaining: int, *, magic: bool = False
) -> FrameError | None:
    """Why the batch whose bytes start at ``data[at]`` (at ``position`` in its file, ``remaining`` bytes
    before the end) cannot be framed: checks 1, 2 and 4 of the module docstring, and 3 when ``magic``;
    None when it can. ``data`` holds the batch's first 12 bytes (17 for ``magic``) when ``remaining``
    reaches a header's size."""
    if remaining >= HEADER_SIZE:
        (length,) = _LENGTH.unpack_from(data, at + LENGTH_OFFSET)
        if (
            length >= MIN_BATCH_LENGTH
            and LOG_OVERHEAD + length <= remaining
            and (not magic or _MAGIC.unpack_from(data, at + MAGIC_OFFSET)[0] == MAGIC)
        ):
            return None
    return frame_failure(data, at, position, remaining, magic=magic)


def frame_failure(data: Buffer, at: int, position: int, remaining: int, *, magic: bool = False) -> FrameError:
    """The first check the batch at ``data[at]`` fails (as :func:`frame_error`), for a caller that found it
    fails one: the walks test the usual case inline and call this only then."""
    if remaining < HEADER_SIZE:
        return FrameError(
            position,
            None,
            True,
            f"torn tail: the last {remaining} bytes cannot hold a batch header ({HEADER_SIZE} bytes)",
        )
    fault = header_fault(data, at, remaining, magic=magic)
    if fault is not None:
        return FrameError(position, fault.base_offset, False, fault.reason)
    base_offset, length = _PREFIX.unpack_from(data, at)
    return FrameError(
        position,
        base_offset,
        True,
        f"torn tail: batchLength announces {LOG_OVERHEAD + length} bytes, only {remaining} remain in the "
        "file",
    )


def offset_regression(expected: int, base_offset: int) -> str | None:
    """Why a batch with ``base_offset`` cannot follow one that ended before offset ``expected`` (offsets
    only grow: a cleaned segment has gaps, never overlaps); None when it can."""
    if base_offset < expected:
        return f"expected a base offset of at least {expected} got {base_offset}"
    return None


def read_header(file: FileHandle, position: int, end: int, where: str) -> tuple[int, ...]:
    """The 13 fields of the header of the batch at ``position`` (in
    :data:`~broker.record.batch_header.HEADER`'s order), checked (1-4) to be a batch that ends at or before
    ``end``; :class:`CorruptRecordError` with the framer's message otherwise."""
    data = file.pread(HEADER_SIZE, position)
    if len(data) == HEADER_SIZE:
        header: tuple[int, ...] = HEADER.unpack(data)
        length = header[1]
        if header[3] == MAGIC and length >= MIN_BATCH_LENGTH and position + LOG_OVERHEAD + length <= end:
            return header
    raise _read_failure(data, HEADER_SIZE, position, end).exception(where)


def read_header_prefix(file: FileHandle, position: int, end: int, where: str) -> tuple[int, ...]:
    """The header's first 7 fields (baseOffset to lastOffsetDelta:
    :data:`~broker.record.batch_header.HEADER_PREFIX`) of the batch at ``position``, checked as
    :func:`read_header` checks them: what the fetch path needs to find a batch's offsets and size."""
    data = file.pread(HEADER_PREFIX.size, position)
    if len(data) == HEADER_PREFIX.size:
        header: tuple[int, ...] = HEADER_PREFIX.unpack(data)
        length = header[1]
        if header[3] == MAGIC and length >= MIN_BATCH_LENGTH and position + LOG_OVERHEAD + length <= end:
            return header
    raise _read_failure(data, HEADER_PREFIX.size, position, end).exception(where)


class HeaderScan:
    """The header prefixes (as :func:`read_header_prefix` returns them) of batches at increasing positions
    of ``file`` below ``end``, read through one buffer: a position outside it reads :data:`SCAN_READ_BYTES`
    from there (never fewer than a header prefix), so a fetch walking from an index entry to the batch
    holding its offset makes one ``pread`` for the batches an index interval holds instead of one per
    batch; the same checks and errors as :func:`read_header_prefix`. Belongs to the one call that made it."""

    __slots__ = ("_data", "_end", "_file", "_start", "_where")

    def __init__(self, file: FileHandle, end: int, where: str) -> None:
        self._file = file
        self._end = end
        self._where = where
        self._data = b""
        self._start = 0

    def prefix_at(self, position: int) -> tuple[int, ...]:
        """baseOffset, batchLength, epoch, magic, crc, attributes, lastOffsetDelta of the batch at
        ``position``, checked as :func:`read_header_prefix` checks it."""
        at = position - self._start
        if at < 0 or at + HEADER_PREFIX.size > len(self._data):
            wanted = max(HEADER_PREFIX.size, min(SCAN_READ_BYTES, self._end - position))
            self._data = self._file.pread(wanted, position)
            self._start = position
            at = 0
        data = self._data
        if at + HEADER_PREFIX.size <= len(data):
            header: tuple[int, ...] = HEADER_PREFIX.unpack_from(data, at)
            length = header[1]
            if (
                header[3] == MAGIC
                and length >= MIN_BATCH_LENGTH
                and position + LOG_OVERHEAD + length <= self._end
            ):
                return header
        tail = data[at : at + HEADER_PREFIX.size]
        raise _read_failure(tail, HEADER_PREFIX.size, position, self._end).exception(self._where)


def _read_failure(data: bytes, asked: int, position: int, end: int) -> FrameError:
    """The check failed by the header read at ``position`` (fewer bytes than ``asked``: the file ends
    there, before ``end``)."""
    remaining = end - position if len(data) == asked else min(end - position, len(data))
    return frame_failure(data, 0, position, remaining, magic=True)


def frame_columns(data: memoryview, position: int, end: int) -> tuple[BatchHeaderColumns, FrameError | None]:
    """The whole batches at the start of ``data`` (a read of a file from a batch start at ``position``, not
    past ``end``) as header columns, framed by the compiled loop; and why framing stops before the end of
    ``data``: the check (1-4, with ``end``) that the batch there fails, or None when there is none (the
    end of ``data`` cuts a batch the file holds: the next read has its rest)."""
    from broker.record.batch_header_columns import batch_header_columns  # noqa: PLC0415 - numpy, on use

    columns = batch_header_columns(data)
    at = columns.complete_bytes
    left = len(data) - at
    if not left or (left < HEADER_SIZE and position + len(data) < end):
        return columns, None
    return columns, frame_error(data, at, position + at, end - position - at, magic=True)


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
        #: Why the iteration stopped before ``end`` (checks 1, 2 and 4), or None.
        self.error: FrameError | None = None

    def __iter__(self) -> Iterator[RecordBatch]:
        end = self.end
        where = self.where
        read = self._read
        unpack_length = _LENGTH.unpack_from
        while self.position < end:
            position = self.position
            remaining = end - position
            if remaining >= HEADER_SIZE:
                (length,) = unpack_length(read(position, LOG_OVERHEAD), LENGTH_OFFSET)
                size = LOG_OVERHEAD + length
                if length >= MIN_BATCH_LENGTH and size <= remaining:
                    self.position = position + size
                    yield RecordBatch(read(position, size), where=where, position=position)
                    continue
            self.error = frame_failure(read(position, min(remaining, LOG_OVERHEAD)), 0, position, remaining)
            return

    def raise_error(self) -> None:
        """Raise :class:`CorruptRecordError` for :attr:`error`, if framing stopped on one."""
        if self.error is not None:
            raise self.error.exception(self.where)

    def _read(self, position: int, size: int) -> memoryview:
        """``size`` bytes at ``position``, from the chunk in memory or a new read of one."""
        start = self._buffer_start
        if start <= position and position + size <= start + len(self._buffer):
            return self._buffer[position - start : position - start + size]
        data = self._file.pread(max(size, min(self._chunk_bytes, self.end - position)), position)
        self._buffer = memoryview(data)
        self._buffer_start = position
        return self._buffer[:size]
