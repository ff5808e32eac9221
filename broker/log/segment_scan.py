"""Scanning a segment's ``.log`` file batch by batch: the segment half of recovery (see
:mod:`broker.log.recovery`, whose passes 1-3 call :func:`scan_segment`, :func:`write_indexes` and
:func:`truncate_log_file`).

The ``.log`` file's format is :mod:`broker.log.segment`'s. A scan frames it from the start with the one
segment framer (:class:`~broker.log.segment_framer.SegmentFramer`: large chunks, a torn tail or an
impossible length ends it, with the framer's messages), validates every batch (magic, CRC, increasing
offsets, offsets that fit the indexes) and stops at the first that is torn, corrupt or out of sequence;
the result (:class:`SegmentScan`) says where the valid prefix ends and which index entries it should have.
Runs on a segment no one else uses yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.log.file_handle import FileHandle
from broker.log.file_names import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from broker.log.index_file import MAX_RELATIVE_OFFSET
from broker.log.offset_index import OffsetIndex
from broker.log.segment_framer import SegmentFramer, offset_regression
from broker.log.time_index import TimeIndex
from broker.record.batch_header import NO_TIMESTAMP
from broker.record.errors import CorruptRecordError

__all__ = ["SegmentScan", "fsync_file", "scan_segment", "truncate_log_file", "write_indexes"]

_SCAN_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What validating every batch of a ``.log`` file found (recovery pass 1)."""

    path: Path
    base_offset: int
    #: The file's size when it was scanned.
    size_bytes: int
    #: Bytes of whole, valid batches from the start of the file: where a truncation would cut.
    valid_bytes: int
    batch_count: int
    #: The offset after the last valid batch (the base offset when there is none).
    next_offset: int
    max_timestamp_ms: int
    #: Max timestamp of the first batch (the base of time-based rolling), or -1.
    first_batch_max_timestamp_ms: int
    offset_index_entries: tuple[tuple[int, int], ...]
    time_index_entries: tuple[tuple[int, int], ...]
    #: Why the batch at ``valid_bytes`` is invalid; None when the whole file is valid.
    error: str | None

    @property
    def truncated_bytes(self) -> int:
        return self.size_bytes - self.valid_bytes


def scan_segment(path: Path, base_offset: int, *, index_interval_bytes: int) -> SegmentScan:
    """Validate every batch of a ``.log`` file from the start (recovery pass 1).

    Stops at the first batch that is torn (cut short), corrupt (bad magic, impossible length, CRC
    mismatch) or out of sequence (base offset below the previous batch's next offset: a cleaned segment
    has gaps, never overlaps), and computes
    the index entries the valid prefix should have.
    """
    file = FileHandle.open(path)
    try:
        return _scan(file, base_offset, index_interval_bytes)
    finally:
        file.close()


def _scan(file: FileHandle, base_offset: int, interval: int) -> SegmentScan:
    size = file.size()
    framer = SegmentFramer(file, end=size, chunk_bytes=_SCAN_CHUNK_BYTES)
    position = 0
    expected = base_offset
    max_ts = NO_TIMESTAMP
    first_ts = NO_TIMESTAMP
    batches = 0
    since_index = 0
    offset_entries: list[tuple[int, int]] = []
    time_entries: list[tuple[int, int]] = []
    error: str | None = None
    for batch in framer:
        batch_base = batch.base_offset
        batch_size = batch.size_bytes
        try:
            batch.validate()
        except CorruptRecordError as exc:
            error = exc.reason
            break
        error = offset_regression(expected, batch_base)
        if error is not None:
            break
        if batch.last_offset_delta < 0 or batch.last_offset_delta + 1 < batch.record_count:
            error = f"lastOffsetDelta {batch.last_offset_delta} does not cover {batch.record_count} records"
            break
        last_offset = batch_base + batch.last_offset_delta
        if last_offset - base_offset > MAX_RELATIVE_OFFSET:
            error = f"offset {last_offset} does not fit relative to the segment's base offset {base_offset}"
            break
        batch_max_ts = batch.max_timestamp_ms
        if position == 0:
            first_ts = batch_max_ts
        max_ts = max(max_ts, batch_max_ts)
        if since_index > interval:
            offset_entries.append((batch_base, position))
            if max_ts >= 0 and (not time_entries or max_ts > time_entries[-1][0]):
                time_entries.append((max_ts, last_offset))
            since_index = 0
        since_index += batch_size
        batches += 1
        position += batch_size
        expected = last_offset + 1
    else:
        if framer.error is not None:
            error = framer.error.reason
    if max_ts >= 0 and batches and (not time_entries or max_ts > time_entries[-1][0]):
        time_entries.append((max_ts, expected - 1))
    return SegmentScan(
        path=file.path,
        base_offset=base_offset,
        size_bytes=size,
        valid_bytes=position,
        batch_count=batches,
        next_offset=expected,
        max_timestamp_ms=max_ts,
        first_batch_max_timestamp_ms=first_ts,
        offset_index_entries=tuple(offset_entries),
        time_index_entries=tuple(time_entries),
        error=error,
    )


def write_indexes(scan: SegmentScan) -> None:
    """Replace a segment's ``.index`` and ``.timeindex`` with the entries a scan computed (pass 2)."""
    directory = scan.path.parent
    OffsetIndex.create(
        segment_path(directory, scan.base_offset, INDEX_SUFFIX), scan.base_offset, scan.offset_index_entries
    ).close()
    TimeIndex.create(
        segment_path(directory, scan.base_offset, TIME_INDEX_SUFFIX),
        scan.base_offset,
        scan.time_index_entries,
    ).close()


def truncate_log_file(path: Path, size_bytes: int) -> None:
    """Cut a ``.log`` file to ``size_bytes`` and fsync it (pass 3)."""
    file = FileHandle.open(path)
    try:
        file.truncate(size_bytes)
        file.fsync()
    finally:
        file.close()


def fsync_file(path: Path) -> None:
    file = FileHandle.open(path)
    try:
        file.fsync()
    finally:
        file.close()
