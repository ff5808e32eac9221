"""One segment of a partition: a ``.log`` file of record batches with its ``.index`` and ``.timeindex``.

The ``.log`` file is record batches v2 (:mod:`broker.record.record_batch`) back to back, exactly as they
travel on the wire, with no framing of its own. Invariants:

* the file name's base offset (20 digits, :mod:`broker.log.file_names`) is at most the base offset of its
  first batch, and batches follow each other with increasing offsets: each base offset is at least the
  previous batch's next offset (equal to it but in a segment the log cleaner rewrote, which keeps every
  retained batch's offsets and drops others: see :mod:`broker.log.log_cleaner`);
* every batch passed validation (magic, lengths, CRC) before it was written;
* the indexes are sparse and carry no checksum, so they are rebuilt from the ``.log`` after an unclean
  shutdown (see :mod:`broker.log.recovery`) or whenever they fail their sanity check.

Thread safety: one writer (the owning :class:`~broker.log.log.Log`, under its lock) appends, flushes,
rolls and deletes; readers call :meth:`Segment.read` and friends without a lock, always with a
``max_position`` the log has published, below which the file never changes.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

from broker.log.errors import LogStorageError
from broker.log.file_handle import FileHandle
from broker.log.file_names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_path
from broker.log.file_region import FileRegion
from broker.log.index_file import MAX_RELATIVE_OFFSET
from broker.log.offset_index import OffsetIndex
from broker.log.segment_framer import HeaderScan, SegmentFramer, read_header, read_header_prefix
from broker.log.segment_headers import check_loaded
from broker.log.segment_scan import SegmentScan
from broker.log.time_index import TimeIndex
from broker.record.batch_header import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
)
from broker.record.record_batch import RecordBatch

logger = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")


class Segment:
    """A ``.log`` file and its two indexes. Create with :meth:`create`, :meth:`load` or :meth:`from_scan`."""

    __slots__ = (
        "_base_offset",
        "_bytes_since_last_index_entry",
        "_created_ms",
        "_dir",
        "_index_interval_bytes",
        "_log",
        "_max_timestamp_ms",
        "_next_offset",
        "_offset_index",
        "_rolling_base_timestamp_ms",
        "_size_bytes",
        "_time_index",
    )

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        log: FileHandle,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        *,
        size_bytes: int,
        next_offset: int,
        max_timestamp_ms: int,
        rolling_base_timestamp_ms: int,
        index_interval_bytes: int,
        created_ms: int,
    ) -> None:
        self._dir = directory
        self._base_offset = base_offset
        self._log = log
        self._offset_index = offset_index
        self._time_index = time_index
        self._size_bytes = size_bytes
        self._next_offset = next_offset
        self._max_timestamp_ms = max_timestamp_ms
        self._rolling_base_timestamp_ms = rolling_base_timestamp_ms
        self._index_interval_bytes = index_interval_bytes
        self._created_ms = created_ms
        last = offset_index.last_entry()
        self._bytes_since_last_index_entry = size_bytes - (last[1] if last else 0)

    # ------------------------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> Segment:
        """A new, empty segment; fails if its ``.log`` file already exists (index files left without one
        are replaced). ``suffix`` is appended to the three file names (the log cleaner writes ``.cleaned``
        segments). Nothing is fsynced, neither the three files nor the folder
        (:meth:`IndexFile.create_empty`): the owner fsyncs the folder before anything relies on the
        segment (the log at its next flush, a truncation at once, the cleaner before its swap)."""
        log_path = _with_suffix(segment_path(directory, base_offset, LOG_SUFFIX), suffix)
        log = FileHandle.open(log_path, create=True, exclusive=True)
        index_path = _with_suffix(segment_path(directory, base_offset, INDEX_SUFFIX), suffix)
        time_index_path = _with_suffix(segment_path(directory, base_offset, TIME_INDEX_SUFFIX), suffix)
        try:
            offset_index = OffsetIndex.create_empty(index_path, base_offset)
            time_index = TimeIndex.create_empty(time_index_path, base_offset)
        except BaseException:
            log.close()
            log_path.unlink(missing_ok=True)
            raise
        return cls(
            directory,
            base_offset,
            log,
            offset_index,
            time_index,
            size_bytes=0,
            next_offset=base_offset,
            max_timestamp_ms=NO_TIMESTAMP,
            rolling_base_timestamp_ms=NO_TIMESTAMP,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
        )

    @classmethod
    def load(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int) -> Segment:
        """Open an existing segment trusting its data (it was flushed or cleanly closed).

        Checks the indexes against the log and reads the batch headers after the last index entry to
        find the next offset. Raises :class:`FileNotFoundError` (an index is missing),
        :class:`CorruptIndexError` or :class:`CorruptRecordError`; the loader then validates the segment
        and rebuilds its indexes.
        """
        log = FileHandle.open(segment_path(directory, base_offset, LOG_SUFFIX))
        offset_index: OffsetIndex | None = None
        time_index: TimeIndex | None = None
        try:
            size = log.size()
            offset_index = OffsetIndex.load(
                segment_path(directory, base_offset, INDEX_SUFFIX), base_offset, size
            )
            time_index = TimeIndex.load(segment_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset)
            next_offset, max_ts, rolling_base = check_loaded(log, size, base_offset, offset_index, time_index)
        except BaseException:
            log.close()
            if offset_index is not None:
                offset_index.close()
            if time_index is not None:
                time_index.close()
            raise
        return cls(
            directory,
            base_offset,
            log,
            offset_index,
            time_index,
            size_bytes=size,
            next_offset=next_offset,
            max_timestamp_ms=max_ts,
            rolling_base_timestamp_ms=rolling_base,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
        )

    @classmethod
    def from_scan(cls, scan: SegmentScan, *, index_interval_bytes: int, now_ms: int) -> Segment:
        """Open a segment whose indexes :func:`~broker.log.segment_scan.write_indexes` rebuilt, its log
        cut to ``valid_bytes``."""
        directory = scan.path.parent
        log = FileHandle.open(scan.path)
        try:
            size = log.size()
            _check_size(scan.path, scan.valid_bytes, size)
            offset_index = OffsetIndex.load(
                segment_path(directory, scan.base_offset, INDEX_SUFFIX), scan.base_offset, size
            )
            time_index = TimeIndex.load(
                segment_path(directory, scan.base_offset, TIME_INDEX_SUFFIX), scan.base_offset
            )
        except BaseException:
            log.close()
            raise
        return cls(
            directory,
            scan.base_offset,
            log,
            offset_index,
            time_index,
            size_bytes=size,
            next_offset=scan.next_offset,
            max_timestamp_ms=scan.max_timestamp_ms,
            rolling_base_timestamp_ms=scan.first_batch_max_timestamp_ms,
            index_interval_bytes=index_interval_bytes,
            created_ms=now_ms,
        )

    # ------------------------------------------------------------------------------------ properties

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def next_offset(self) -> int:
        """The offset after the last batch written (exclusive)."""
        return self._next_offset

    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    @property
    def max_timestamp_ms(self) -> int:
        """The largest record timestamp in the segment, -1 when it has none."""
        return self._max_timestamp_ms

    @property
    def path(self) -> Path:
        return self._log.path

    @property
    def offset_index(self) -> OffsetIndex:
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        return self._time_index

    def last_modified_ms(self) -> int:
        """The ``.log`` file's mtime: retention's fallback for segments without timestamps."""
        try:
            return self._log.path.stat().st_mtime_ns // 1_000_000
        except OSError:
            return 0

    # ------------------------------------------------------------------------------------ writing

    def should_roll(
        self,
        batch_size_bytes: int,
        batch_max_timestamp_ms: int,
        batch_last_offset: int,
        now_ms: int,
        *,
        segment_bytes: int,
        segment_ms: int,
        pending_bytes: int = 0,
    ) -> bool:
        """Kafka's roll rule: a non-empty segment rolls when the batch would overflow its size, when the
        batch is ``segment_ms`` later than the segment's first batch (by record time, else by the clock
        since the segment was created), or when the batch's offsets no longer fit relative offsets.

        ``pending_bytes``: batches of the same append already bound for this segment but not yet written
        (a request's batches are written together), which count towards its size."""
        size_bytes = self._size_bytes + pending_bytes
        if size_bytes == 0:
            return False
        if size_bytes + batch_size_bytes > segment_bytes:
            return True
        if self._rolling_base_timestamp_ms >= 0 and batch_max_timestamp_ms >= 0:
            waited_ms = batch_max_timestamp_ms - self._rolling_base_timestamp_ms
        else:
            waited_ms = now_ms - self._created_ms
        if waited_ms >= segment_ms:
            return True
        return batch_last_offset - self._base_offset > MAX_RELATIVE_OFFSET

    def append(
        self, batches: Sequence[RecordBatch], base_offsets: Sequence[int], leader_epoch: int = -1
    ) -> None:
        """Write ``batches`` with their base offsets rewritten to ``base_offsets`` and, when
        ``leader_epoch >= 0``, their ``partitionLeaderEpoch`` set to it (the CRC stays valid: it covers
        neither field), then index them. ``-1`` keeps the epoch each batch carries. Raises
        :class:`LogStorageError`."""
        buffers: list[bytes | memoryview] = []
        if leader_epoch < 0:
            pack = _INT64.pack
            for batch, base_offset in zip(batches, base_offsets, strict=True):
                buffers.append(pack(base_offset))
                buffers.append(batch.buffer[8:])
        else:
            for batch, base_offset in zip(batches, base_offsets, strict=True):
                buffers.append(batch.stamped_prefix(base_offset, leader_epoch))
                buffers.append(batch.buffer[16:])
        if len(batches) == 1:  # most appends (a produce request's one batch): no lists to build
            batch, base_offset = batches[0], base_offsets[0]
            self._write_and_index(
                buffers,
                (batch.size_bytes,),
                (base_offset,),
                (base_offset + batch.last_offset_delta,),
                (batch.max_timestamp_ms,),
            )
            return
        self._write_and_index(
            buffers,
            [batch.size_bytes for batch in batches],
            base_offsets,
            [
                base_offset + batch.last_offset_delta
                for batch, base_offset in zip(batches, base_offsets, strict=True)
            ],
            [batch.max_timestamp_ms for batch in batches],
        )

    def append_bytes(
        self,
        data: bytes | bytearray | memoryview,
        sizes: Sequence[int],
        base_offsets: Sequence[int],
        last_offsets: Sequence[int],
        max_timestamps_ms: Sequence[int],
    ) -> None:
        """Write ``data``, whole batches end to end exactly as they are (base offsets included), then index
        them: ``sizes``, ``base_offsets``, ``last_offsets`` and ``max_timestamps_ms`` describe each batch in
        order (the log cleaner's rewritten batches, described by columns rather than
        :class:`RecordBatch` objects). Raises :class:`LogStorageError`."""
        self._write_and_index((data,), sizes, base_offsets, last_offsets, max_timestamps_ms)

    def _write_and_index(
        self,
        buffers: Sequence[bytes | bytearray | memoryview],
        sizes: Sequence[int],
        base_offsets: Sequence[int],
        last_offsets: Sequence[int],
        max_timestamps_ms: Sequence[int],
    ) -> None:
        start = self._size_bytes
        try:
            self._log.append_all(buffers)
        except LogStorageError:
            self._undo_partial_write(start)
            raise
        self._index(start, sizes, base_offsets, last_offsets, max_timestamps_ms)

    def _index(
        self,
        start: int,
        sizes: Sequence[int],
        base_offsets: Sequence[int],
        last_offsets: Sequence[int],
        max_timestamps_ms: Sequence[int],
    ) -> None:
        """Index the batches just written from position ``start`` and count them in."""
        position = start
        interval = self._index_interval_bytes
        next_offset = self._next_offset
        for size, base_offset, last_offset, max_ts in zip(
            sizes, base_offsets, last_offsets, max_timestamps_ms, strict=True
        ):
            if position == 0:
                self._rolling_base_timestamp_ms = max_ts
            self._max_timestamp_ms = max(self._max_timestamp_ms, max_ts)
            if self._bytes_since_last_index_entry > interval:
                self._offset_index.append(base_offset, position)
                self._time_index.maybe_append(self._max_timestamp_ms, last_offset)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += size
            position += size
            next_offset = last_offset + 1
        self._size_bytes = position
        self._next_offset = next_offset

    def _undo_partial_write(self, size_bytes: int) -> None:
        try:
            self._log.truncate(size_bytes)
        except LogStorageError:
            logger.exception("%s: could not cut a failed append back to %d bytes", self._log.path, size_bytes)

    def truncate_to(self, offset: int, *, now_ms: int) -> Segment:
        """Cut off every batch holding an offset >= ``offset`` (whole batches: when ``offset`` lies inside
        a batch, that batch goes too, as Kafka's ``LogSegment.truncateTo``) and return a new
        :class:`Segment` over the cut files; ``self`` is returned unchanged when nothing lies at or above
        ``offset``.

        The indexes are rewritten first (atomically, keeping the entries below the cut), then the
        ``.log`` is truncated and fsynced; a kill in between leaves indexes the loader checks and rebuilds
        if needed. ``self`` keeps its in-memory entries, so readers still holding it never see an entry
        change under them; reading its bytes past the cut fails (short read) instead of returning others.
        The caller stops appending to the returned segment's file (:meth:`broker.log.log.Log.truncate_to`).
        """
        found = self.position_of(offset, self._size_bytes)
        if found is None:
            return self
        cut_position, new_end = found[0], found[1]
        directory = self._dir
        base = self._base_offset
        OffsetIndex.create(
            segment_path(directory, base, INDEX_SUFFIX),
            base,
            [entry for entry in self._offset_index.entries() if entry[1] < cut_position],
        ).close()
        TimeIndex.create(
            segment_path(directory, base, TIME_INDEX_SUFFIX),
            base,
            [entry for entry in self._time_index.entries() if entry[1] < new_end],
        ).close()
        self._log.truncate(cut_position)
        self._log.fsync()
        logger.info(
            "%s: truncated from %d to %d bytes (offsets [%d, %d) removed)",
            self._log.path,
            self._size_bytes,
            cut_position,
            new_end,
            self._next_offset,
        )
        return Segment.load(directory, base, index_interval_bytes=self._index_interval_bytes, now_ms=now_ms)

    def on_become_inactive(self) -> None:
        """Record the segment's max timestamp in its time index (at roll and at close)."""
        if self._size_bytes and self._max_timestamp_ms >= 0:
            self._time_index.maybe_append(self._max_timestamp_ms, self._next_offset - 1)

    def flush(self) -> None:
        """fsync the log and both indexes."""
        self._log.fsync()
        self._offset_index.flush()
        self._time_index.flush()

    def close(self) -> None:
        self._log.close()
        self._offset_index.close()
        self._time_index.close()

    def delete(self) -> None:
        """Unlink the three files. Open descriptors stay valid for readers still holding regions."""
        self._log.path.unlink(missing_ok=True)
        self._offset_index.delete()
        self._time_index.delete()

    # ------------------------------------------------------------------------------------ reading

    def position_of(self, offset: int, max_position: int) -> tuple[int, int, int] | None:
        """``(position, base offset, size)`` of the batch holding ``offset`` (or the first batch after it),
        looking only below ``max_position``; None when there is no such batch. Each header is read by the
        segment framer (:class:`~broker.log.segment_framer.HeaderScan`, one read per index interval): one
        that cannot be right raises :class:`CorruptRecordError` with its message, here and in the reads
        below."""
        _, position = self._offset_index.lookup(offset)
        scan = HeaderScan(self._log, max_position, str(self._log.path))
        while position < max_position:
            header = scan.prefix_at(position)
            size = LOG_OVERHEAD + header[1]
            if header[0] + header[6] >= offset:
                return position, header[0], size
            position += size
        return None

    def read(self, offset: int, max_bytes: int, max_position: int, end_offset: int) -> FileRegion | None:
        """Whole batches from the one holding ``offset``: at least one, then as many as fit ``max_bytes``,
        all below ``max_position``, where offset ``end_offset`` begins. None when no batch at or after
        ``offset`` lies below it."""
        found = self.position_of(offset, max_position)
        if found is None:
            return None
        start, base_offset, first_size = found
        limit = start + max(max_bytes, 0)
        end = start + first_size
        if limit >= max_position:
            end = max_position
        elif end < limit:
            # Every indexed position is a batch start, so every batch before the last one <= limit fits.
            end = max(end, self._offset_index.floor_position(limit))
            scan = HeaderScan(self._log, max_position, str(self._log.path))
            while end < max_position:
                header = scan.prefix_at(end)
                following = end + LOG_OVERHEAD + header[1]
                if following > limit:
                    break
                end = following
            if end < max_position:
                end_offset = header[0]  # the batch at end: the first that did not fit
        elif end < max_position:
            end_offset = read_header_prefix(self._log, end, max_position, str(self._log.path))[0]
        return FileRegion(self._log, start, end - start, base_offset, end_offset)

    def batches(self, position: int, max_position: int, chunk_bytes: int) -> Iterator[RecordBatch]:
        """Every batch from ``position`` (a batch start) to ``max_position``, read sequentially in chunks
        of about ``chunk_bytes`` (a larger batch is read whole) by the one segment framer
        (:class:`~broker.log.segment_framer.SegmentFramer`); a batch that cannot be framed raises
        :class:`CorruptRecordError` with the framer's message. A whole segment read through (the log
        cleaner reads with :mod:`broker.log.chunk_reader` instead)."""
        framer = SegmentFramer(self._log, start=position, end=max_position, chunk_bytes=chunk_bytes)
        yield from framer
        framer.raise_error()

    def read_into(self, buffer: bytearray | memoryview, size: int, position: int) -> int:
        """Read up to ``size`` bytes of the ``.log`` file from ``position`` into the start of ``buffer``;
        returns how many (fewer only at its end): the log cleaner's blocks (chunk_reader)."""
        return self._log.pread_into(buffer, size, position)

    def read_batch(self, position: int, max_position: int) -> RecordBatch:
        """The whole batch at ``position``, read into memory."""
        header = read_header_prefix(self._log, position, max_position, str(self._log.path))
        data = self._log.pread(LOG_OVERHEAD + header[1], position)
        return RecordBatch(data, where=str(self._log.path), position=position)

    def batch_headers(self, offset: int, max_position: int) -> Iterator[tuple[int, ...]]:
        """The 61-byte headers (the fields of :mod:`broker.record.batch_header`'s layout, in order) of the
        batches from the one holding ``offset`` to ``max_position``; used to replay producer state."""
        found = self.position_of(offset, max_position)
        if found is None:
            return
        position = found[0]
        where = str(self._log.path)
        while position < max_position:
            header = read_header(self._log, position, max_position, where)
            yield header
            position += LOG_OVERHEAD + header[1]

    def find_offset_by_timestamp(self, timestamp_ms: int, max_position: int) -> tuple[int, int] | None:
        """The first offset whose record timestamp is >= ``timestamp_ms``, below ``max_position``, with
        that record's timestamp (ListOffsets answers both)."""
        earlier = self._time_index.last_offset_before(timestamp_ms)
        start_offset = self._base_offset if earlier is None else earlier + 1
        found = self.position_of(start_offset, max_position)
        if found is None:
            return None
        position = found[0]
        where = str(self._log.path)
        while position < max_position:
            header = read_header(self._log, position, max_position, where)
            if header[8] >= timestamp_ms:
                batch = self.read_batch(position, max_position)
                for record in batch.records():
                    if record.offset >= start_offset and record.timestamp_ms >= timestamp_ms:
                        return record.offset, record.timestamp_ms
            position += LOG_OVERHEAD + header[1]
        return None

    def __repr__(self) -> str:
        return (
            f"Segment({str(self._log.path)!r}, base_offset={self._base_offset}, "
            f"next_offset={self._next_offset}, size_bytes={self._size_bytes})"
        )


def _with_suffix(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix) if suffix else path


def _check_size(path: Path, expected: int, actual: int) -> None:
    if actual != expected:
        raise LogStorageError(f"{path}: expected {expected} bytes after recovery, found {actual}")
