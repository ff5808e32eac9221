"""Reading the batch headers of a segment's ``.log`` file at known positions: where the fetch path finds batch
boundaries (:meth:`~broker.log.segment.Segment.position_of`, ``read``, ``batch_headers``,
``find_offset_by_timestamp``) and how a loaded segment's indexes are checked against its file
(:func:`check_loaded`).

A header read at a position is checked to be plausible before it is trusted: magic 2, a ``batchLength`` of
at least a header's and a batch that ends at or before ``max_position`` (the end the log has published);
anything else is a :class:`~broker.record.errors.CorruptRecordError` naming the file, position and offset.
Reading a file from its start, batch after batch, is :mod:`broker.log.segment_framer`'s.
:class:`HeaderScan` reads the headers of a walk forward from an index entry (a fetch finding its offset)
through one buffer of about :data:`SCAN_READ_BYTES`, one ``pread`` for the batches an index interval
holds instead of one per batch, with the same checks and errors as :func:`read_header_prefix`.
The functions are stateless and safe from any thread (the file below ``max_position`` never changes); a
:class:`HeaderScan` belongs to the one call that made it.
"""

from __future__ import annotations

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle
from broker.log.offset_index import OffsetIndex
from broker.log.segment_framer import offset_regression
from broker.log.time_index import TimeIndex
from broker.record.batch_header import (
    HEADER,
    HEADER_PREFIX,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
)
from broker.record.errors import CorruptRecordError

__all__ = [
    "SCAN_READ_BYTES",
    "HeaderScan",
    "check_header",
    "check_loaded",
    "read_full_header",
    "read_header_prefix",
]

#: What :class:`HeaderScan` reads at a time: twice the default ``index_interval_bytes`` (4096), so that a
#: walk from an index entry to the batch holding an offset usually takes one read.
SCAN_READ_BYTES = 8192


def check_loaded(
    log: FileHandle, size: int, base_offset: int, offset_index: OffsetIndex, time_index: TimeIndex
) -> tuple[int, int, int]:
    """Check freshly loaded indexes against the log; return (next offset, max timestamp, rolling base).

    The first and last offset-index entries must point at batches with their offsets; the batches after
    the last entry must follow each other; the time index must not name offsets past the end.
    """
    where = str(log.path)
    for entry in (offset_index.first_entry(), offset_index.last_entry()):
        if entry is None:
            continue
        header = read_header_prefix(log, entry[1], size, where)
        if header[0] != entry[0]:
            raise CorruptIndexError(
                str(offset_index.path),
                f"entry ({entry[0]}, {entry[1]}) points at a batch with base offset {header[0]}",
            )
    last = offset_index.last_entry()
    position, next_offset = (last[1], last[0]) if last else (0, base_offset)
    max_ts = NO_TIMESTAMP
    while position < size:
        header = read_full_header(log, position, size, where)
        regression = offset_regression(next_offset, header[0])
        if regression is not None:
            raise CorruptRecordError(where, regression, position=position)
        next_offset = header[0] + header[6] + 1
        max_ts = max(max_ts, header[8])
        position += LOG_OVERHEAD + header[1]
    time_last = time_index.last_entry()
    if time_last is not None:
        if time_last[1] >= next_offset:
            raise CorruptIndexError(
                str(time_index.path),
                f"last entry names offset {time_last[1]}, the segment ends before {next_offset}",
            )
        max_ts = max(max_ts, time_last[0])
    rolling_base = read_full_header(log, 0, size, where)[8] if size else NO_TIMESTAMP
    return next_offset, max_ts, rolling_base


def read_header_prefix(log: FileHandle, position: int, max_position: int, where: str) -> tuple[int, ...]:
    """baseOffset, batchLength, epoch, magic, crc, attributes, lastOffsetDelta of the batch at ``position``,
    checked to be a plausible batch that ends at or before ``max_position``."""
    data = log.pread(HEADER_PREFIX.size, position)
    if len(data) < HEADER_PREFIX.size:
        raise CorruptRecordError(where, f"batch header cut short: {len(data)} bytes", position=position)
    header = HEADER_PREFIX.unpack(data)
    check_header(header, position, max_position, where)
    return header


class HeaderScan:
    """The header prefixes (as :func:`read_header_prefix` returns them) of batches at increasing positions
    of ``log`` below ``max_position``, read through one buffer: a position outside it reads
    :data:`SCAN_READ_BYTES` from there (never fewer than a header prefix, as one header's read)."""

    __slots__ = ("_data", "_log", "_max_position", "_start", "_where")

    def __init__(self, log: FileHandle, max_position: int, where: str) -> None:
        self._log = log
        self._max_position = max_position
        self._where = where
        self._data = b""
        self._start = 0

    def prefix_at(self, position: int) -> tuple[int, ...]:
        """baseOffset, batchLength, epoch, magic, crc, attributes, lastOffsetDelta of the batch at
        ``position``, checked as :func:`read_header_prefix` checks it (the same errors)."""
        at = position - self._start
        if at < 0 or at + HEADER_PREFIX.size > len(self._data):
            wanted = max(HEADER_PREFIX.size, min(SCAN_READ_BYTES, self._max_position - position))
            self._data = self._log.pread(wanted, position)
            self._start = position
            at = 0
            if len(self._data) < HEADER_PREFIX.size:
                raise CorruptRecordError(
                    self._where, f"batch header cut short: {len(self._data)} bytes", position=position
                )
        header = HEADER_PREFIX.unpack_from(self._data, at)
        check_header(header, position, self._max_position, self._where)
        return header


def read_full_header(log: FileHandle, position: int, max_position: int, where: str) -> tuple[int, ...]:
    data = log.pread(HEADER_SIZE, position)
    if len(data) < HEADER_SIZE:
        raise CorruptRecordError(where, f"batch header cut short: {len(data)} bytes", position=position)
    header = HEADER.unpack(data)
    check_header(header, position, max_position, where)
    return header


def check_header(header: tuple[int, ...], position: int, max_position: int, where: str) -> None:
    if header[3] != MAGIC:
        raise CorruptRecordError(
            where, f"expected magic {MAGIC} got {header[3]}", position=position, offset=header[0]
        )
    if header[1] < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + header[1] > max_position:
        raise CorruptRecordError(
            where,
            f"batchLength {header[1]} does not fit between position {position} and {max_position}",
            position=position,
            offset=header[0],
        )
