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
   record object (Kafka's ``buildOffsetMapForSegment`` reads keys only too).
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
   chunk the key-columns strategy declines (it never should: the log was validated at append) is
   decided by decoding its records through the one record walker
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
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress

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
from broker.record.batch_header import TimestampType
from broker.record.errors import RecordError
from broker.record.key_columns import KeyColumns, batch_key_columns
from broker.record.record import Record
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import retained_batch, retained_batch_of_bytes
from broker.record.topic_partition import TopicPartition

__all__ = ["Cleaner", "CleanerStats", "LogCleaner", "group_segments_by_size"]

logger = logging.getLogger(__name__)

#: Records read, mapped or looked up in the map at once (bounds the per-chunk arrays and bytes: about
#: 100 bytes of arrays per record besides the records' own bytes).
_CHUNK_RECORDS = 16_384


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
        end = self._build_map(
            log, segments, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, stats
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
            self._clean_group(log, group, producers, stats)
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
        self, log: Log, segments: Sequence[Segment], first_dirty: int, uncleanable: int, stats: CleanerStats
    ) -> int:
        """Fill the map from ``first_dirty`` on; returns the end of what it covers (its first unmapped
        offset)."""
        offset_map = self._map
        offset_map.clear()
        capacity = offset_map.max_entries
        tp = log.topic_partition
        end = first_dirty
        for chunk in _chunks(_batches_from(segments[:-1], first_dirty, uncleanable, self._io_bytes)):
            self._check_done(tp)
            hashes, offsets, keyed = _keys_of(chunk)
            # the batches whose keys surely fit go in at once; the map's real size (duplicates take no
            # room) then decides on the next ones, down to a batch that does not fit (Kafka's check)
            bounds = np.cumsum(keyed).tolist()
            done = 0  # batches of the chunk put
            while done < len(chunk):
                before = bounds[done - 1] if done else 0
                fits = bisect_right(bounds, capacity - offset_map.size + before, lo=done)
                if fits == done:
                    if end == first_dirty:
                        raise LogStorageError(
                            f"{tp}: the batch at offset {chunk[done].base_offset} holds {keyed[done]} keys, "
                            f"more than the cleaner's offset map takes ({capacity}): raise "
                            "[log] cleaner_dedupe_buffer_bytes"
                        )
                    break
                offset_map.put_many(hashes[before : bounds[fits - 1]], offsets[before : bounds[fits - 1]])
                for batch in chunk[done:fits]:
                    stats.map_records += 0 if batch.is_control_batch else batch.record_count
                    self._throttler.maybe_throttle(batch.size_bytes)
                end = chunk[fits - 1].next_offset
                offset_map.update_latest_offset(end - 1)
                done = fits
            if done < len(chunk):
                break
        stats.map_keys = offset_map.size
        return end

    # ------------------------------------------------------------------------------------ 3. rewrite

    def _clean_group(
        self, log: Log, group: list[Segment], producers: dict[int, int], stats: CleanerStats
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
        )
        try:
            self._write_group(cleaned, log, group, producers, stats)
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
        stats: CleanerStats,
    ) -> None:
        """Rewrite ``group`` into ``cleaned``, then flush and close it."""
        tp = log.topic_partition
        now = self._clock()
        new_horizon_ms = now + log.config.delete_retention_ms
        for i, segment in enumerate(group):
            last_segment = i == len(group) - 1
            size = segment.size_bytes
            chunk: list[RecordBatch] = []
            chunk_records = 0
            for batch in segment.batches(0, size, self._io_bytes):
                if chunk_records >= _CHUNK_RECORDS:  # written before the next batch: the last one stays
                    self._check_done(tp)
                    self._write_chunk(cleaned, chunk, now, new_horizon_ms, producers, None, stats)
                    chunk, chunk_records = [], 0
                chunk.append(batch)
                chunk_records += batch.record_count
            last_batch = chunk[-1] if last_segment and chunk else None
            if chunk:
                self._write_chunk(cleaned, chunk, now, new_horizon_ms, producers, last_batch, stats)
            stats.bytes_read += size
        if cleaned.size_bytes == 0:
            raise LogStorageError(f"{tp}: cleaning segments {[s.base_offset for s in group]} wrote nothing")
        cleaned.on_become_inactive()
        cleaned.flush()
        cleaned.close()

    def _write_chunk(
        self,
        cleaned: Segment,
        batches: list[RecordBatch],
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        last_batch: RecordBatch | None,
        stats: CleanerStats,
    ) -> None:
        data_batches = [b for b in batches if not b.is_control_batch]
        columns = batch_key_columns(data_batches)
        if columns is None:
            out = self._retained_walked(batches, now_ms, new_horizon_ms, producers, last_batch, stats)
        else:
            out = self._retained(batches, columns, now_ms, new_horizon_ms, producers, last_batch, stats)
        if out:
            cleaned.append(out, [b.base_offset for b in out])
        self._throttler.maybe_throttle(sum(b.size_bytes for b in batches) + sum(b.size_bytes for b in out))

    def _keep(self, columns: KeyColumns, drop_tombstones: list[bool]) -> npt.NDArray[np.bool_]:
        """Which records of ``columns`` stay (see the module docstring, step 3)."""
        keyed = columns.key_lengths >= 0
        mapped = np.full(len(keyed), -1, dtype=np.int64)
        if np.count_nonzero(keyed):
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


def _chunks(batches: Iterator[RecordBatch]) -> Iterator[list[RecordBatch]]:
    """``batches`` in lists of about :data:`_CHUNK_RECORDS` records (a batch is never split)."""
    chunk: list[RecordBatch] = []
    records = 0
    for batch in batches:
        chunk.append(batch)
        records += batch.record_count
        if records >= _CHUNK_RECORDS:
            yield chunk
            chunk, records = [], 0
    if chunk:
        yield chunk


def _keys_of(chunk: list[RecordBatch]) -> tuple[Hashes, Offsets, list[int]]:
    """The hashes and offsets of the keyed records of ``chunk``, in order, and how many each batch holds
    (by columns, or by the walk when the columns strategy declines)."""
    data_batches = [b for b in chunk if not b.is_control_batch]
    columns = batch_key_columns(data_batches)
    if columns is not None:
        keyed_mask = columns.key_lengths >= 0
        so_far = np.zeros(len(keyed_mask) + 1, dtype=np.int64)
        np.cumsum(keyed_mask, out=so_far[1:])
        starts = columns.batch_starts
        data_keyed = iter((so_far[starts[1:]] - so_far[starts[:-1]]).tolist())
        keyed = [0 if b.is_control_batch else next(data_keyed) for b in chunk]
        hashes = hash_key_columns(
            columns.array, columns.key_starts[keyed_mask], columns.key_lengths[keyed_mask]
        )
        return hashes, columns.offsets[keyed_mask], keyed
    keys: list[bytes] = []
    offsets: list[int] = []
    keyed = []
    for batch in chunk:
        records = [] if batch.is_control_batch else batch.records()
        before = len(keys)
        for record in records:
            if record.key is not None:
                keys.append(record.key)
                offsets.append(record.offset)
        keyed.append(len(keys) - before)
    return hash_keys(keys), np.asarray(offsets, dtype=np.int64), keyed


def _batches_from(
    segments: Sequence[Segment], from_offset: int, until_offset: int, chunk_bytes: int
) -> Iterator[RecordBatch]:
    """Every batch of ``segments`` holding offsets in ``[from_offset, until_offset)``, in order."""
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        if segment.base_offset >= until_offset:
            return
        size = segment.size_bytes
        found = segment.position_of(from_offset, size) if segment.base_offset < from_offset else (0,)
        if found is None:
            continue
        for batch in segment.batches(found[0], size, chunk_bytes):
            if batch.base_offset >= until_offset:
                return
            if batch.last_offset >= from_offset:
                yield batch


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
