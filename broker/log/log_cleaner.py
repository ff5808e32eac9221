"""The log cleaner: background threads that compact logs whose ``cleanup_policy`` holds ``compact``, keeping
at least the last value of every key (Kafka's ``LogCleaner``; the implementation chapter's "Log
Compaction").

A log is a clean head and a dirty tail::

      log start          first dirty offset        first uncleanable offset    active segment
      |   clean (compacted before)  |   dirty (written since)   |   too young / unexposed   |   ...
                                    |<-- map built over this -->|

One cleaning pass of one log (:meth:`Cleaner.clean`), chosen by
:class:`~broker.log.log_cleaner_manager.LogCleanerManager` (dirtiest first, over its ratio):

1. **Map.** Walk the dirty section in chunks of batches and put every keyed record's key -> offset in the
   thread's :class:`~broker.log.offset_map.OffsetMap` (later offsets win), stopping before the first
   batch whose keys might not fit: the map then covers ``[first dirty, end)`` and the rest of the dirty
   section waits for the next pass (a log too dirty for the buffer takes several passes, never more
   memory). Only keys and offsets are read, by the record walk's key-columns strategy
   (:mod:`broker.record.key_columns`: numpy over the records' bytes, keys hashed by columns), never a
   record object (Kafka's ``buildOffsetMapForSegment`` reads keys only too). The slot each key took is
   noted (:class:`_MappedSlots`, bounded), so that step 3 reads a record's mapped offset without
   hashing its key again.

   A *chunk* is about :data:`_CHUNK_RECORDS` records of whole batches of one segment, read with one
   ``pread`` into the thread's buffer, its batch headers read as numpy columns
   (:mod:`broker.record.batch_header_columns`), not as batch objects, and, when every batch is an uncompressed
   data batch (the common case), its key columns read in place from the buffer. Other chunks
   (compressed or control batches) go batch by batch, as below.
2. **Group.** The segments from the log start holding offsets below ``end`` (never the active one) are
   grouped, in order, while a group's bytes stay within the log's ``segment_bytes`` and its offsets fit
   relative to its base offset (Kafka's ``groupSegmentsBySize``): small segments become one.
3. **Rewrite** each group into ``<base>.log.cleaned`` (and its indexes), a chunk of batches at a time
   (Kafka's ``cleanInto`` / ``MemoryRecords.filterTo``). A record is kept when its offset is past
   the map (``> end - 1``), or it has a key whose mapped offset is not later than its own, unless it is a
   tombstone (null value) whose batch's delete horizon has passed. Tombstones follow KIP-534: the first
   time a batch holding tombstones is rewritten, it is stamped with a delete horizon of now +
   ``delete_retention_ms`` (:func:`~broker.record.record_batch_builder.retained_batch`, attribute bit 6),
   and a later pass after that time drops them, so a consumer reading from the start within
   ``delete_retention_ms`` of the cleaning still sees the delete. Records without a key are dropped, as Kafka
   does (a compacted log refuses them at append: :mod:`broker.log.log_validator`). The decision is taken
   per batch from the key columns (offsets, key hashes, null values, for all records of the chunk at
   once): a batch whose records all stay is copied byte for byte (Kafka's ``writeOriginalBatch``); one
   that loses some is rebuilt with the rest, keeping its offset range, timestamps, headers, producer
   fields, leader epoch and codec, from the kept records' own bytes
   (:func:`~broker.record.record_batch_builder.retained_batch_of_bytes`: the base offset and first
   timestamp stay, so their deltas stay valid), or, when its tombstones get their horizon stamped or it
   is a LogAppendTime batch, from its decoded records
   (:func:`~broker.record.record_batch_builder.retained_batch`);
   one that loses all is dropped, except (as an empty batch, Kafka's ``RETAIN_EMPTY``) an idempotent
   producer's last batch (its sequence) and the group's last batch (so the cleaned segment ends where the
   group did, which recovery relies on: :mod:`broker.log.segment_swap`). Control batches are copied. A
   chunk of uncompressed data batches is decided and written by columns (:meth:`Cleaner._write_by_columns`:
   the kept bytes as runs of slices of the read buffer, the rebuilt batches' headers patched in it, one
   write per chunk); other chunks batch by batch (:meth:`Cleaner._retained`), to the same bytes. A chunk
   the key-columns strategy declines (it never should: the log was validated at append) is decided by
   decoding its records through the one record walker
   (:meth:`~broker.record.record_batch.RecordBatch.records`), to the same bytes.
4. **Swap.** The cleaned files are fsynced, given the last old segment's modification time (what
   retention falls back on for segments without timestamps), and swapped in through
   :meth:`broker.log.log.Log.replace_segments` (``.cleaned`` -> ``.swap`` -> final names, crash-safe:
   :mod:`broker.log.segment_swap`).
5. **Checkpoint.** ``end`` becomes the log's first dirty offset in ``cleaner-offset-checkpoint``.

What stays right: offsets never change, so the indexes are rebuilt for the cleaned segment only (by its
append), and the producer state, its snapshots and the leader epoch cache stay valid; readers and
followers step over the gaps (a read returns the first batch at or after its offset). Each replica
cleans its own log.

Differences from Kafka: a log is cleaned only over its dirty ratio (Kafka also cleans a log whose
tombstones' delete horizons passed; in Lumber they go at the log's next pass); every group keeps its last
batch (Kafka keeps only the pass's last), which makes the swap's offset range readable from the swap file
itself; transactions (aborted-transaction indexes, markers) do not exist in Lumber; there is no I/O
throttle by default: ``cleaner_io_max_bytes_per_second`` (Kafka's ``log.cleaner.io.max.bytes.per.second``)
caps what the threads read and write together (:class:`Throttler`), 0 (the default, Kafka's unlimited)
means no cap.

Threads: ``cleaner_threads`` threads (:class:`LogCleaner`), each with its own map of
``cleaner_dedupe_buffer_bytes / cleaner_threads`` bytes; each takes one log at a time, so two threads
never clean one log. A thread reads segments below the active one without the log's lock (they never
change), writes only ``.cleaned`` files, and takes the log's lock only for the swap. Between batches and
before the swap it checks whether the pass must stop (the log is being truncated or deleted, or the
cleaner is shutting down): :class:`~broker.log.errors.CleaningAbortedError`, and the cleaned files are
deleted.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress

import crc32c
import numpy as np
import numpy.typing as npt

from broker.clock import Clock, system_clock_ms
from broker.config import LogConfig
from broker.log.errors import CleaningAbortedError, LogError, LogStorageError
from broker.log.file_names import CLEANED_SUFFIX
from broker.log.index_file import MAX_RELATIVE_OFFSET
from broker.log.log import Log
from broker.log.log_cleaner_manager import LogCleanerManager, LogToClean
from broker.log.offset_map import Hashes, OffsetMap, Offsets, hash_key_columns, hash_keys
from broker.log.segment import Segment
from broker.log.segment_swap import delete_cleaned
from broker.record.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    RECORD_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from broker.record.batch_header_columns import BatchHeaderColumns, batch_header_columns
from broker.record.errors import RecordError
from broker.record.key_columns import PADDING_BYTES, KeyColumns, batch_key_columns, key_columns_in
from broker.record.record import Record
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import retained_batch, retained_batch_of_bytes
from broker.record.topic_partition import TopicPartition

__all__ = ["Cleaner", "CleanerStats", "LogCleaner", "group_segments_by_size"]

logger = logging.getLogger(__name__)

#: Records read, mapped or looked up in the map at once (bounds the per-chunk arrays and bytes: about
#: 100 bytes of arrays per record besides the records' own bytes).
_CHUNK_RECORDS = 16_384
#: The largest read of a chunk (a batch larger than it is read whole).
_MAX_CHUNK_BYTES = 8 * 1024 * 1024
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class CleanerStats:
    """What one pass did (Kafka's ``CleanerStats``)."""

    map_records: int = 0
    map_keys: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    segments_cleaned: int = 0
    map_seconds: float = 0.0
    clean_seconds: float = 0.0
    end_offset: int = -1

    @property
    def recopy_percent(self) -> float:
        """Bytes written as a share of bytes read (Kafka's ``cleaner-recopy-percent``)."""
        return 100.0 * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


@dataclass(slots=True)
class CleanerTotals:
    """Every pass of a :class:`LogCleaner` so far (metrics)."""

    passes: int = 0
    aborted: int = 0
    failed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    last: CleanerStats = field(default_factory=CleanerStats)


def group_segments_by_size(
    segments: Sequence[Segment], max_bytes: int, first_uncleanable_offset: int
) -> list[list[Segment]]:
    """Consecutive ``segments`` in groups whose bytes stay within ``max_bytes`` and whose offsets fit one
    segment's relative offsets (a segment alone always makes a group: Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[Segment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size_bytes
        while (
            rest
            and size + rest[0].size_bytes <= max_bytes
            and rest[0].next_offset - 1 - group[0].base_offset <= MAX_RELATIVE_OFFSET
            and rest[0].base_offset < first_uncleanable_offset
        ):
            size += rest[0].size_bytes
            group.append(rest.pop(0))
        groups.append(group)
    return groups


class Throttler:
    """Kafka's ``Throttler``: callers report the bytes they handled and sleep when the rate since the window
    began exceeds ``max_bytes_per_second`` (0: never). Shared by the cleaner threads; thread-safe."""

    def __init__(self, max_bytes_per_second: float, *, check_s: float = 0.1) -> None:
        self._max = max_bytes_per_second
        self._check_s = check_s
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._bytes = 0

    def maybe_throttle(self, size_bytes: int) -> None:
        if self._max <= 0:
            return
        with self._lock:
            self._bytes += size_bytes
            now = time.monotonic()
            elapsed = now - self._window_start
            if elapsed < self._check_s:
                return
            sleep_s = self._bytes / self._max - elapsed
            self._window_start, self._bytes = now, 0
        if sleep_s > 0:
            time.sleep(sleep_s)


class Cleaner:
    """One thread's cleaning machinery: its offset map and :meth:`clean` (see the module docstring)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        io_buffer_bytes: int,
        check_done: Callable[[TopicPartition], None],
        clock: Clock = system_clock_ms,
        throttler: Throttler | None = None,
    ) -> None:
        self._throttler = throttler or Throttler(0)
        self._map = offset_map
        self._io_bytes = io_buffer_bytes
        self._check_done = check_done
        self._clock = clock
        self._buffer = _ReadBuffer()

    @property
    def offset_map(self) -> OffsetMap:
        return self._map

    def clean(self, to_clean: LogToClean) -> CleanerStats:
        """One pass over ``to_clean``; the stats' ``end_offset`` is the log's new first dirty offset.

        Raises :class:`CleaningAbortedError` when stopped (nothing of the unfinished group swapped in)."""
        log = to_clean.log
        stats = CleanerStats()
        segments = log.segments
        started = time.perf_counter()
        mapped_slots = _MappedSlots(self._map.slots // 2)
        end = self._build_map(
            log, segments, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, mapped_slots, stats
        )
        stats.map_seconds = time.perf_counter() - started
        stats.end_offset = end
        if end <= to_clean.first_dirty_offset:
            return stats
        started = time.perf_counter()
        producers = log.last_offsets_of_producers()
        below_end = [s for s in log.segments[:-1] if s.base_offset < end]
        for group in group_segments_by_size(
            below_end, log.config.segment_bytes, to_clean.first_uncleanable_offset
        ):
            self._clean_group(log, group, producers, mapped_slots, stats)
        stats.clean_seconds = time.perf_counter() - started
        logger.info(
            "%s: cleaned offsets [%d, %d): %d segments, %d -> %d bytes (%.1f%%), %d -> %d records, %d keys "
            "mapped, map %.2f s, rewrite %.2f s",
            log.topic_partition,
            log.log_start_offset,
            end,
            stats.segments_cleaned,
            stats.bytes_read,
            stats.bytes_written,
            stats.recopy_percent,
            stats.records_read,
            stats.records_written,
            stats.map_keys,
            stats.map_seconds,
            stats.clean_seconds,
        )
        return stats

    # ------------------------------------------------------------------------------------ 1. map

    def _build_map(
        self,
        log: Log,
        segments: Sequence[Segment],
        first_dirty: int,
        uncleanable: int,
        mapped_slots: _MappedSlots,
        stats: CleanerStats,
    ) -> int:
        """Fill the map from ``first_dirty`` on, noting in ``mapped_slots`` where each record's key went;
        returns the end of what the map covers (its first unmapped offset)."""
        offset_map = self._map
        offset_map.clear()
        capacity = offset_map.max_entries
        tp = log.topic_partition
        end = first_dirty
        for segment, chunk in _dirty_chunks(
            segments[:-1], first_dirty, uncleanable, self._io_bytes, self._buffer
        ):
            self._check_done(tp)
            hashes, offsets, keyed = _keys_of(chunk)
            # the batches whose keys surely fit go in at once; the map's real size (duplicates take no
            # room) then decides on the next ones, down to a batch that does not fit (Kafka's check)
            bounds = np.cumsum(keyed)
            batches = chunk.batches
            data_records = np.where(batches.attributes & CONTROL_MASK, 0, batches.record_counts)
            done = 0  # batches of the chunk put
            while done < batches.count:
                before = int(bounds[done - 1]) if done else 0
                room = capacity - offset_map.size + before
                fits = max(done, int(np.searchsorted(bounds, room, side="right")))
                if fits == done:
                    if end == first_dirty:
                        raise LogStorageError(
                            f"{tp}: the batch at offset {int(batches.base_offsets[done])} holds "
                            f"{int(keyed[done])} keys, more than the cleaner's offset map takes "
                            f"({capacity}): raise [log] cleaner_dedupe_buffer_bytes"
                        )
                    break
                last = int(bounds[fits - 1])
                slots = offset_map.put_many(hashes[before:last], offsets[before:last])
                mapped_slots.add(
                    segment, chunk.position + batches.positions[done:fits], keyed[done:fits], slots
                )
                stats.map_records += int(data_records[done:fits].sum())
                self._throttler.maybe_throttle(int(batches.sizes[done:fits].sum()))
                end = int(batches.base_offsets[fits - 1] + batches.last_offset_deltas[fits - 1]) + 1
                offset_map.update_latest_offset(end - 1)
                done = fits
            if done < batches.count:
                break
        stats.map_keys = offset_map.size
        return end

    # ------------------------------------------------------------------------------------ 3. rewrite

    def _clean_group(
        self,
        log: Log,
        group: list[Segment],
        producers: dict[int, int],
        mapped_slots: _MappedSlots,
        stats: CleanerStats,
    ) -> None:
        tp = log.topic_partition
        base_offset = group[0].base_offset
        delete_cleaned(log.dir, base_offset)  # an earlier pass's leftovers (a failure, not a crash)
        cleaned = Segment.create(
            log.dir,
            base_offset,
            index_interval_bytes=log.config.index_interval_bytes,
            now_ms=self._clock(),
            suffix=CLEANED_SUFFIX,
            durable=False,  # flushed before the swap
        )
        try:
            self._write_group(cleaned, log, group, producers, mapped_slots, stats)
            modified_ns = group[-1].path.stat().st_mtime_ns
            os.utime(cleaned.path, ns=(modified_ns, modified_ns))
            self._check_done(tp)
            swapped = log.replace_segments(group)
        except BaseException:
            cleaned.close()
            delete_cleaned(log.dir, base_offset)
            raise
        if swapped is None:
            delete_cleaned(log.dir, base_offset)
            raise CleaningAbortedError(f"{tp}: segments {[s.base_offset for s in group]} changed meanwhile")
        stats.segments_cleaned += len(group)
        stats.bytes_written += cleaned.size_bytes

    def _write_group(
        self,
        cleaned: Segment,
        log: Log,
        group: list[Segment],
        producers: dict[int, int],
        mapped_slots: _MappedSlots,
        stats: CleanerStats,
    ) -> None:
        """Rewrite ``group`` into ``cleaned``, then flush and close it."""
        tp = log.topic_partition
        now = self._clock()
        new_horizon_ms = now + log.config.delete_retention_ms
        for i, segment in enumerate(group):
            last_segment = i == len(group) - 1
            size = segment.size_bytes
            for chunk in _chunks_of(segment, 0, size, self._io_bytes, self._buffer):
                self._check_done(tp)
                last = last_segment and chunk.last
                slots = mapped_slots.slots_of(segment, chunk.position + chunk.batches.positions)
                self._write_chunk(cleaned, chunk, now, new_horizon_ms, producers, last, slots, stats)
            mapped_slots.forget(segment)
            stats.bytes_read += size
        if cleaned.size_bytes == 0:
            raise LogStorageError(f"{tp}: cleaning segments {[s.base_offset for s in group]} wrote nothing")
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.close()

    def _write_chunk(
        self,
        cleaned: Segment,
        chunk: _Chunk,
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        last: bool,
        slots: npt.NDArray[np.int32] | None,
        stats: CleanerStats,
    ) -> None:
        """Write what stays of ``chunk`` (``last``: it ends the group, so its last batch stays) to
        ``cleaned``: by the chunk's columns when it holds only uncompressed data batches (the common
        case), otherwise batch by batch (:meth:`_retained`, or :meth:`_retained_walked` when the key
        columns decline)."""
        columns = chunk.key_columns() if chunk.plain else None
        read_bytes = int(chunk.batches.sizes.sum())
        if columns is not None:
            written = self._write_by_columns(
                cleaned, chunk, columns, now_ms, new_horizon_ms, producers, last, slots, stats
            )
            self._throttler.maybe_throttle(read_bytes + written)
            return
        batches = chunk.record_batches()
        last_batch = batches[-1] if last else None
        data_batches = [b for b in batches if not b.is_control_batch]
        by_batch = batch_key_columns(data_batches)
        if by_batch is None:
            out = self._retained_walked(batches, now_ms, new_horizon_ms, producers, last_batch, stats)
        else:
            out = self._retained(batches, by_batch, now_ms, new_horizon_ms, producers, last_batch, stats)
        if out:
            cleaned.append(out, [b.base_offset for b in out])
        self._throttler.maybe_throttle(read_bytes + sum(b.size_bytes for b in out))

    def _write_by_columns(
        self,
        cleaned: Segment,
        chunk: _Chunk,
        columns: KeyColumns,
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        last: bool,
        slots: npt.NDArray[np.int32] | None,
        stats: CleanerStats,
    ) -> int:
        """:meth:`_retained` for a chunk of uncompressed data batches, decided and written by columns
        (Kafka's ``filterTo``), with no object per batch but for the few rebuilt by decoding; returns the
        bytes written.

        Every batch's header and every record is a *unit* of the chunk's buffer, in the buffer's order (a
        batch's header, then its records). A batch keeping all its records keeps all its units; one
        keeping some, rebuilt from their bytes, keeps its header (patched in the buffer: length, record
        count, max timestamp, CRC) and those records; an empty batch kept (an idempotent producer's last,
        the group's last) keeps its header alone (patched likewise). Runs of consecutive kept units are
        then one slice each, so a stretch of batches kept whole is one slice. Batches whose tombstones get
        their delete horizon stamped, and LogAppendTime batches that lose records, are rebuilt from their
        decoded records (:func:`~broker.record.record_batch_builder.retained_batch`) and slotted in
        between the slices. The bytes written are those :meth:`_retained` writes."""
        batches = chunk.batches
        buffer = chunk.data
        attributes = batches.attributes
        counts = batches.record_counts
        horizon_set = (attributes & DELETE_HORIZON_MASK) != 0
        keep = self._keep(columns, horizon_set & (now_ms >= batches.first_timestamps), slots)
        starts = np.asarray(columns.batch_starts, dtype=np.int64)
        kept_so_far = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept_so_far[1:])
        kept = kept_so_far[starts[1:]] - kept_so_far[starts[:-1]]
        tombstones_so_far = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep & columns.null_values, out=tombstones_so_far[1:])
        stamp = ~horizon_set & (tombstones_so_far[starts[1:]] > tombstones_so_far[starts[:-1]])
        whole = (kept == counts) & ~stamp
        log_append_time = (attributes & TIMESTAMP_TYPE_MASK) != 0
        by_bytes = ~whole & (kept > 0) & ~stamp & ~log_append_time
        by_records = ~whole & (kept > 0) & ~by_bytes
        # emptied batches kept (as their header alone): the group's last, an idempotent producer's last
        empty = np.zeros(batches.count, dtype=np.bool_)
        if last and kept[-1] == 0 and counts[-1] > 0:
            empty[-1] = True
        if producers:
            last_offsets = batches.base_offsets + batches.last_offset_deltas
            ids = np.fromiter(producers.keys(), dtype=np.int64, count=len(producers))
            ends = np.fromiter(producers.values(), dtype=np.int64, count=len(producers))
            order = np.argsort(ids)
            ids, ends = ids[order], ends[order]
            at = np.minimum(np.searchsorted(ids, batches.producer_ids), len(ids) - 1)
            producers_last = (ids[at] == batches.producer_ids) & (ends[at] == last_offsets)
            empty |= (kept == 0) & (counts > 0) & producers_last
        stats.records_read += int(counts.sum())
        stats.records_written += int(kept.sum())

        # the units: batch i's header at index starts[i] + i, record r of batch b at r + b + 1
        batch_of_record = np.repeat(np.arange(batches.count), counts)
        header_units = starts[:-1] + np.arange(batches.count)
        record_units = np.arange(len(keep)) + batch_of_record + 1
        unit_starts = np.empty(len(keep) + batches.count, dtype=np.int64)
        unit_ends = np.empty_like(unit_starts)
        unit_kept = np.empty(len(unit_starts), dtype=np.bool_)
        unit_starts[header_units] = batches.positions
        unit_ends[header_units] = batches.positions + HEADER_SIZE
        unit_kept[header_units] = whole | by_bytes | empty
        unit_starts[record_units] = columns.record_starts
        unit_ends[record_units] = columns.record_ends
        unit_kept[record_units] = keep & (whole | by_bytes)[batch_of_record]

        # patch the headers of the batches rebuilt from bytes (and of the empty ones) in the buffer
        record_sizes = columns.record_ends - columns.record_starts
        bytes_so_far = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(np.where(keep, record_sizes, 0), out=bytes_so_far[1:])
        kept_bytes = bytes_so_far[starts[1:]] - bytes_so_far[starts[:-1]]
        patched = np.flatnonzero(by_bytes | empty)
        new_sizes = batches.sizes.copy()
        new_sizes[patched] = HEADER_SIZE + np.where(empty[patched], 0, kept_bytes[patched])
        max_timestamps = batches.max_timestamps.copy()
        with_records = np.flatnonzero(counts > 0)
        if len(np.flatnonzero(by_bytes)):
            newest = np.maximum.reduceat(
                np.where(keep, columns.timestamp_deltas, np.iinfo(np.int64).min), starts[with_records]
            )
            rebuilt = np.flatnonzero(by_bytes[with_records])
            max_timestamps[with_records[rebuilt]] = (
                batches.first_timestamps[with_records[rebuilt]] + newest[rebuilt]
            )
        if len(patched):
            array = np.frombuffer(buffer, dtype=np.uint8)
            at = batches.positions[patched]
            _put_big_endian(array, at + LENGTH_OFFSET, new_sizes[patched] - LOG_OVERHEAD, 4)
            _put_big_endian(array, at + MAX_TIMESTAMP_OFFSET, max_timestamps[patched], 8)
            _put_big_endian(array, at + RECORD_COUNT_OFFSET, np.where(empty[patched], 0, kept[patched]), 4)

        # the kept units in runs of consecutive bytes, one slice each
        units = np.flatnonzero(unit_kept)
        run_starts = unit_starts[units]
        run_ends = unit_ends[units]
        if len(units):
            breaks = np.flatnonzero(run_starts[1:] != run_ends[:-1]) + 1
            run_starts = run_starts[np.concatenate(([0], breaks))]
            run_ends = run_ends[np.concatenate((breaks - 1, [len(units) - 1]))]
        view = memoryview(buffer)
        pieces: list[bytes | memoryview] = [
            view[a:b] for a, b in zip(run_starts.tolist(), run_ends.tolist(), strict=True)
        ]
        decoded = np.flatnonzero(by_records)
        if len(decoded):
            for i in reversed(decoded.tolist()):
                batch = chunk.record_batch(i)
                first = int(starts[i])
                records = list(compress(batch.records(), keep[first : first + int(counts[i])].tolist()))
                horizon = new_horizon_ms if stamp[i] else None
                rebuilt_batch = retained_batch(batch, records, delete_horizon_ms=horizon)
                pieces.insert(int(np.searchsorted(run_starts, batches.positions[i])), rebuilt_batch)
                new_sizes[i] = len(rebuilt_batch)
                max_timestamps[i] = RecordBatch(rebuilt_batch).max_timestamp_ms
        out_batches = np.flatnonzero(whole | by_bytes | empty | by_records)
        if not len(out_batches):
            return 0
        out = bytearray().join(pieces)
        out_sizes = new_sizes[out_batches]
        out_starts = np.zeros(len(out_batches), dtype=np.int64)
        np.cumsum(out_sizes[:-1], out=out_starts[1:])
        if len(out) != int(out_sizes.sum()):
            raise LogStorageError(
                f"{chunk.where}: the cleaned batches at position {chunk.position} come to {len(out)} bytes, "
                f"expected {int(out_sizes.sum())}"
            )
        # the CRCs of the patched headers, over their new bytes
        out_view = memoryview(out)
        is_patched = (by_bytes | empty)[out_batches]
        crc_at = out_starts[is_patched].tolist()
        crc_ends = (out_starts + out_sizes)[is_patched].tolist()
        for at, stop in zip(crc_at, crc_ends, strict=True):
            _CRC.pack_into(out, at + CRC_OFFSET, crc32c.crc32c(out_view[at + ATTRIBUTES_OFFSET : stop]))
        base_offsets = batches.base_offsets[out_batches]
        cleaned.append_bytes(
            out,
            out_sizes.tolist(),
            base_offsets.tolist(),
            (base_offsets + batches.last_offset_deltas[out_batches]).tolist(),
            max_timestamps[out_batches].tolist(),
        )
        return len(out)

    def _keep(
        self,
        columns: KeyColumns,
        drop_tombstones: Sequence[bool] | npt.NDArray[np.bool_],
        slots: npt.NDArray[np.int32] | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Which records of ``columns`` stay (see the module docstring, step 3). ``slots``: where the map
        phase put the keys of the keyed records, in order (their mapped offsets are read there, not
        hashed and looked up again)."""
        keyed = columns.key_lengths >= 0
        mapped = np.full(len(keyed), -1, dtype=np.int64)
        keyed_count = np.count_nonzero(keyed)
        if slots is not None and len(slots) == keyed_count:
            mapped[keyed] = self._map.offsets_at(slots)
        elif keyed_count:
            mapped[keyed] = self._map.get_many(
                hash_key_columns(columns.array, columns.key_starts[keyed], columns.key_lengths[keyed])
            )
        offsets = columns.offsets
        counts = np.diff(columns.batch_starts)
        dropped_tombstone = columns.null_values & np.repeat(np.asarray(drop_tombstones, dtype=bool), counts)
        keep: npt.NDArray[np.bool_] = (offsets > self._map.latest_offset) | (
            keyed & (offsets >= mapped) & ~dropped_tombstone
        )
        return keep

    def _retained(
        self,
        batches: list[RecordBatch],
        columns: KeyColumns,
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        last_batch: RecordBatch | None,
        stats: CleanerStats,
    ) -> list[RecordBatch]:
        """What stays of ``batches``, decided by columns: whole batches copied, the others rebuilt from
        the bytes of the records they keep (Kafka's ``filterTo``: ``writeOriginalBatch`` or a new batch)."""
        data_batches = [b for b in batches if not b.is_control_batch]
        horizons = [b.delete_horizon_ms for b in data_batches]
        keep = self._keep(columns, [h is not None and now_ms >= h for h in horizons])
        kept_so_far = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept_so_far[1:])
        tombstones_so_far = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep & columns.null_values, out=tombstones_so_far[1:])
        starts = columns.batch_starts
        kept_counts = (kept_so_far[starts[1:]] - kept_so_far[starts[:-1]]).tolist()
        kept_tombstones = (tombstones_so_far[starts[1:]] - tombstones_so_far[starts[:-1]]).tolist()
        data = columns.data
        out: list[RecordBatch] = []
        i = 0
        for batch in batches:
            if batch.is_control_batch:
                out.append(batch)
                continue
            first, count, kept = starts[i], starts[i + 1] - starts[i], kept_counts[i]
            stamp = new_horizon_ms if horizons[i] is None and kept_tombstones[i] else None
            i += 1
            stats.records_read += count
            stats.records_written += kept
            if kept == count and stamp is None:
                out.append(batch)
            elif kept and stamp is None and batch.timestamp_type == TimestampType.CREATE_TIME:
                chosen = np.flatnonzero(keep[first : first + count]) + first
                body = b"".join(
                    [
                        data[a:b]
                        for a, b in zip(
                            columns.record_starts[chosen].tolist(),
                            columns.record_ends[chosen].tolist(),
                            strict=True,
                        )
                    ]
                )
                newest = batch.first_timestamp_ms + int(columns.timestamp_deltas[chosen].max())
                out.append(RecordBatch(retained_batch_of_bytes(batch, body, kept, newest)))
            elif kept:
                records = batch.records()
                chosen_records = list(compress(records, keep[first : first + count].tolist()))
                out.append(RecordBatch(retained_batch(batch, chosen_records, delete_horizon_ms=stamp)))
            elif batch is last_batch or producers.get(batch.producer_id, -2) == batch.last_offset:
                out.append(RecordBatch(retained_batch(batch, [])))
        return out

    def _retained_walked(
        self,
        batches: list[RecordBatch],
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        last_batch: RecordBatch | None,
        stats: CleanerStats,
    ) -> list[RecordBatch]:
        """What stays of ``batches``, decided by walking their records (when :func:`key_columns`
        declines them)."""
        decoded: list[list[Record]] = [[] if b.is_control_batch else b.records() for b in batches]
        flat = [record for records in decoded for record in records]
        keyed = [(record.offset, record.key) for record in flat if record.key is not None]
        mapped = self._map.get_many(hash_keys([k for _, k in keyed])) if keyed else np.empty(0, np.int64)
        latest = self._map.latest_offset
        later = {offset for (offset, _), found in zip(keyed, mapped.tolist(), strict=True) if offset < found}
        out: list[RecordBatch] = []
        for batch, records in zip(batches, decoded, strict=True):
            stats.records_read += len(records)
            if batch.is_control_batch:
                out.append(batch)
                continue
            horizon_ms = batch.delete_horizon_ms
            drop_tombstones = horizon_ms is not None and now_ms >= horizon_ms
            kept = [
                r
                for r in records
                if r.offset > latest
                or (
                    r.key is not None
                    and r.offset not in later
                    and (r.value is not None or not drop_tombstones)
                )
            ]
            stats.records_written += len(kept)
            stamp = new_horizon_ms if horizon_ms is None and any(r.value is None for r in kept) else None
            if len(kept) == len(records) and stamp is None:
                out.append(batch)
            elif kept:
                out.append(RecordBatch(retained_batch(batch, kept, delete_horizon_ms=stamp)))
            elif batch is last_batch or producers.get(batch.producer_id, -2) == batch.last_offset:
                out.append(RecordBatch(retained_batch(batch, [])))
        return out


def _put_big_endian(array: npt.NDArray[np.uint8], at: Offsets, values: Offsets, width: int) -> None:
    """Write ``values[i]`` as a big-endian integer of ``width`` bytes at ``array[at[i]:]``."""
    as_bytes = values.astype(f">i{width}").view(np.uint8).reshape(-1, width)
    array[at[:, None] + np.arange(width)] = as_bytes


class _MappedSlots:
    """Where the map phase put the key of each keyed record (its slot in the offset map: a key keeps its
    slot until the map is cleared), by segment and batch position, so that the rewrite reads each
    record's mapped offset with one gather (:meth:`OffsetMap.offsets_at`) instead of hashing its key and
    probing again. Bounded: slots of at most ``max_records`` records (4 bytes each; the cleaner takes half
    as many as the map has slots: a twelfth of its memory); the rest are looked up. A segment's are
    dropped once it is rewritten. One pass's, of one thread."""

    def __init__(self, max_records: int) -> None:
        self._room = max_records
        self._parts: dict[Segment, list[tuple[Offsets, Offsets, npt.NDArray[np.int32]]]] = {}
        self._joined: dict[Segment, tuple[Offsets, Offsets, npt.NDArray[np.int32]]] = {}

    def add(self, segment: Segment, positions: Offsets, keyed: Offsets, slots: Offsets) -> None:
        """The batches at ``positions`` (in the file) of ``segment`` hold ``keyed`` keyed records each,
        whose keys went to ``slots``, in order."""
        if len(slots) > self._room:
            self._room = 0
            return
        self._room -= len(slots)
        self._parts.setdefault(segment, []).append((positions, keyed.copy(), slots.astype(np.int32)))

    def forget(self, segment: Segment) -> None:
        self._parts.pop(segment, None)
        self._joined.pop(segment, None)

    def slots_of(self, segment: Segment, positions: Offsets) -> npt.NDArray[np.int32] | None:
        """The slots of the keyed records of the batches at ``positions`` (consecutive batches of
        ``segment``), or None unless every one of them was put."""
        joined = self._joined.get(segment)
        if joined is None:
            parts = self._parts.pop(segment, None)
            if not parts:
                return None
            all_positions = np.concatenate([p[0] for p in parts])
            starts = np.zeros(len(all_positions) + 1, dtype=np.int64)
            np.cumsum(np.concatenate([p[1] for p in parts]), out=starts[1:])
            joined = (all_positions, starts, np.concatenate([p[2] for p in parts]))
            self._joined[segment] = joined
        all_positions, starts, slots = joined
        first = int(np.searchsorted(all_positions, positions[0]))
        stop = first + len(positions)
        if stop > len(all_positions) or not np.array_equal(all_positions[first:stop], positions):
            return None
        return slots[int(starts[first]) : int(starts[stop])]


@dataclass(slots=True)
class _Chunk:
    """Whole batches of one segment read at once (:func:`_chunks_of`): the bytes, padded for the key
    columns, and the batches' header columns. The buffer is the cleaner's own (it patches headers in it)."""

    data: bytearray
    batches: BatchHeaderColumns
    #: The buffer's position in its segment file, the file (for messages), and whether the chunk ends
    #: the segment.
    position: int
    where: str
    last: bool

    @property
    def plain(self) -> bool:
        """Whether every batch is an uncompressed data batch (the key columns read them in place)."""
        return not np.count_nonzero(self.batches.attributes & (COMPRESSION_MASK | CONTROL_MASK))

    def key_columns(self, *, keys_only: bool = False) -> KeyColumns | None:
        """The key columns of a :attr:`plain` chunk's records, read in place (None: declined);
        ``keys_only``: keys and offsets only (:func:`~broker.record.key_columns.key_columns_in`)."""
        batches = self.batches
        return key_columns_in(
            self.data,
            batches.positions + HEADER_SIZE,
            batches.positions + batches.sizes,
            batches.record_counts,
            batches.base_offsets,
            keys_only=keys_only,
        )

    def record_batch(self, i: int) -> RecordBatch:
        """Batch ``i`` as a :class:`RecordBatch` (a copy of its bytes: the buffer may be patched)."""
        at = int(self.batches.positions[i])
        size = int(self.batches.sizes[i])
        return RecordBatch(bytes(self.data[at : at + size]), where=self.where, position=self.position + at)

    def record_batches(self) -> list[RecordBatch]:
        view = memoryview(self.data)
        return [
            RecordBatch(view[at : at + size], where=self.where, position=self.position + at)
            for at, size in zip(self.batches.positions.tolist(), self.batches.sizes.tolist(), strict=True)
        ]

    def select(self, first: int, stop: int) -> _Chunk:
        """The chunk of batches ``[first, stop)`` (the same buffer)."""
        return _Chunk(self.data, self.batches.select(first, stop), self.position, self.where, self.last)


def _chunks_of(
    segment: Segment, position: int, max_position: int, read_bytes: int, buffer: _ReadBuffer
) -> Iterator[_Chunk]:
    """The batches of ``segment`` from ``position`` (a batch start) to ``max_position``, in chunks of about
    :data:`_CHUNK_RECORDS` records (at least one batch), each read with one ``pread`` into ``buffer`` (of
    at most :data:`_MAX_CHUNK_BYTES`; a batch larger than that is read whole into a buffer of its own).
    A chunk's bytes are valid until the next one is read."""
    where = str(segment.path)
    bytes_per_record = 128  # a guess, then what the last chunk had
    while position < max_position:
        want = min(
            max(read_bytes, bytes_per_record * _CHUNK_RECORDS), _MAX_CHUNK_BYTES, max_position - position
        )
        data = _padded_read(segment, position, want, buffer.at_least(want + PADDING_BYTES))
        batches = batch_header_columns(data, end=want, where=where, base_position=position)
        if not batches.count:  # one batch larger than the read
            size = LOG_OVERHEAD + int.from_bytes(data[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True)
            if size <= want or size > max_position - position:
                raise LogStorageError(
                    f"{where}: no whole batch at position {position} (below {max_position}): the batch "
                    f"there announces {size} bytes"
                )
            data = _padded_read(segment, position, size, bytearray(size + PADDING_BYTES))
            batches = batch_header_columns(data, end=size, where=where, base_position=position)
            if not batches.count:
                raise LogStorageError(f"{where}: no whole batch at position {position} ({size} bytes read)")
        records = np.cumsum(batches.record_counts)
        take = min(max(int(np.searchsorted(records, _CHUNK_RECORDS)) + 1, 1), batches.count)
        batches = batches.select(0, take)
        taken = batches.complete_bytes
        bytes_per_record = max(taken // max(int(records[take - 1]), 1), 8)
        yield _Chunk(data, batches, position, where, position + taken >= max_position)
        position += taken


class _ReadBuffer:
    """A cleaner thread's buffer for chunks (one at a time), grown to the largest read so far: allocated
    (and zeroed) only as far as reads need."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def at_least(self, size: int) -> bytearray:
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        return self._buffer


def _padded_read(segment: Segment, position: int, size: int, buffer: bytearray) -> bytearray:
    """``buffer`` holding ``size`` bytes of ``segment`` from ``position``, followed by the key columns'
    padding (zeros)."""
    got = segment.read_into(buffer, size, position)
    if got != size:
        raise LogStorageError(
            f"{segment.path}: {got} bytes at position {position}, expected {size}: the segment is cut short"
        )
    buffer[size : size + PADDING_BYTES] = bytes(PADDING_BYTES)
    return buffer


def _dirty_chunks(
    segments: Sequence[Segment], from_offset: int, until_offset: int, read_bytes: int, buffer: _ReadBuffer
) -> Iterator[tuple[Segment, _Chunk]]:
    """The batches of ``segments`` holding offsets in ``[from_offset, until_offset)``, in chunks, each
    with its segment."""
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        if segment.base_offset >= until_offset:
            return
        size = segment.size_bytes
        found = segment.position_of(from_offset, size) if segment.base_offset < from_offset else (0,)
        if found is None:
            continue
        for chunk in _chunks_of(segment, found[0], size, read_bytes, buffer):
            batches = chunk.batches
            first = int(np.searchsorted(batches.base_offsets + batches.last_offset_deltas, from_offset))
            stop = int(np.searchsorted(batches.base_offsets, until_offset))
            if first < stop:
                yield segment, chunk.select(first, stop)
            if stop < batches.count:
                return


def _keys_of(chunk: _Chunk) -> tuple[Hashes, Offsets, Offsets]:
    """The hashes and offsets of the keyed records of ``chunk``, in order, and how many each batch holds
    (by columns, or by the walk when the columns strategy declines)."""
    columns = chunk.key_columns(keys_only=True) if chunk.plain else None
    if columns is not None:
        keyed_mask = columns.key_lengths >= 0
        so_far = np.zeros(len(keyed_mask) + 1, dtype=np.int64)
        np.cumsum(keyed_mask, out=so_far[1:])
        starts = np.asarray(columns.batch_starts, dtype=np.int64)
        keyed_counts = so_far[starts[1:]] - so_far[starts[:-1]]
        hashes = hash_key_columns(
            columns.array, columns.key_starts[keyed_mask], columns.key_lengths[keyed_mask]
        )
        return hashes, columns.offsets[keyed_mask], keyed_counts
    batches = chunk.record_batches()
    data_batches = [b for b in batches if not b.is_control_batch]
    by_batch = batch_key_columns(data_batches)
    if by_batch is not None:
        keyed_mask = by_batch.key_lengths >= 0
        so_far = np.zeros(len(keyed_mask) + 1, dtype=np.int64)
        np.cumsum(keyed_mask, out=so_far[1:])
        starts = np.asarray(by_batch.batch_starts, dtype=np.int64)
        data_keyed = iter((so_far[starts[1:]] - so_far[starts[:-1]]).tolist())
        keyed = [0 if b.is_control_batch else next(data_keyed) for b in batches]
        hashes = hash_key_columns(
            by_batch.array,
            by_batch.key_starts[keyed_mask],
            by_batch.key_lengths[keyed_mask],
        )
        return hashes, by_batch.offsets[keyed_mask], np.asarray(keyed, dtype=np.int64)
    keys: list[bytes] = []
    offsets: list[int] = []
    keyed = []
    for batch in batches:
        records = [] if batch.is_control_batch else batch.records()
        before = len(keys)
        for record in records:
            if record.key is not None:
                keys.append(record.key)
                offsets.append(record.offset)
        keyed.append(len(keys) - before)
    return hash_keys(keys), np.asarray(offsets, dtype=np.int64), np.asarray(keyed, dtype=np.int64)


class LogCleaner:
    """The cleaner threads of a broker (see the module docstring). :meth:`clean_once` runs one pass in the
    caller's thread (tests, tools); :meth:`start` / :meth:`shutdown` run the threads."""

    def __init__(
        self, config: LogConfig, manager: LogCleanerManager, *, clock: Clock = system_clock_ms
    ) -> None:
        self._config = config
        self._manager = manager
        self._clock = clock
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.totals = CleanerTotals()
        self._map_bytes = config.cleaner_dedupe_buffer_bytes // max(config.cleaner_threads, 1)
        self._throttler = Throttler(config.cleaner_io_max_bytes_per_second)

    @property
    def manager(self) -> LogCleanerManager:
        return self._manager

    def new_cleaner(self) -> Cleaner:
        """A cleaner with its own map of ``cleaner_dedupe_buffer_bytes / cleaner_threads`` bytes."""
        return Cleaner(
            OffsetMap(self._map_bytes),
            io_buffer_bytes=self._config.cleaner_io_buffer_bytes,
            check_done=self._check_done,
            clock=self._clock,
            throttler=self._throttler,
        )

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop.is_set():
            raise CleaningAbortedError(f"{tp}: cleaning stopped: the cleaner is shutting down")
        self._manager.check_done(tp)

    def clean_once(self, cleaner: Cleaner) -> CleanerStats | None:
        """Clean the dirtiest log over its ratio, if any; its stats, or None (no log, aborted, failed)."""
        to_clean = self._manager.grab_filthiest_log()
        if to_clean is None:
            return None
        tp = to_clean.log.topic_partition
        try:
            stats = cleaner.clean(to_clean)
        except CleaningAbortedError as exc:
            logger.info("%s", exc)
            self._manager.abort_cleaning(tp)
            with self._lock:
                self.totals.aborted += 1
            return None
        except (LogError, RecordError, OSError):
            logger.exception("%s: cleaning failed; the log is retried after the back-off", tp)
            self._manager.abort_cleaning(tp)
            with self._lock:
                self.totals.failed += 1
            return None
        except BaseException:
            self._manager.abort_cleaning(tp)
            raise
        self._manager.done_cleaning(to_clean, stats.end_offset)
        with self._lock:
            totals = self.totals
            totals.passes += 1
            totals.bytes_read += stats.bytes_read
            totals.bytes_written += stats.bytes_written
            totals.last = stats
        return stats

    def start(self) -> None:
        """Start ``cleaner_threads`` threads (none when it is 0)."""
        with self._lock:
            if self._threads or self._config.cleaner_threads == 0:
                return
            self._threads = [
                threading.Thread(target=self._run, name=f"lumber-log-cleaner-{i}", daemon=True)
                for i in range(self._config.cleaner_threads)
            ]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        cleaner = self.new_cleaner()
        backoff_s = self._config.cleaner_backoff_ms / 1000
        while not self._stop.is_set():
            try:
                stats = self.clean_once(cleaner)
            except Exception:
                logger.exception("log cleaner iteration failed")
                stats = None
            if stats is None:
                self._stop.wait(backoff_s)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads: a pass in progress stops at its next check (bounded wait)."""
        self._stop.set()
        with self._lock:
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
            if thread.is_alive():
                logger.warning("%s did not stop within %.0f s", thread.name, timeout_s)
