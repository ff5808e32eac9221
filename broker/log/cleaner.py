"""One cleaning pass over one log (:class:`Cleaner`, Kafka's ``Cleaner``): map the dirty section's keys,
group the segments, rewrite each group keeping the last value of every key, swap the cleaned segments in,
checkpoint. The steps, what each keeps and drops, and where Lumber differs from Kafka are described once,
in :mod:`broker.log.log_cleaner`; what stays of each chunk, :mod:`broker.log.chunk_rewriter`. A
:class:`Cleaner` belongs to one cleaner thread (its offset map, reader and slot cache are that thread's); it
reads segments below the active one without the log's lock and takes it only for the swap.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing

import numpy as np

from broker.clock import Clock, system_clock_ms
from broker.log.chunk_reader import ChunkReader, Span
from broker.log.chunk_rewriter import ChunkRewriter
from broker.log.cleaner_chunk import CleanerChunk, dirty_chunks, keys_of, span_chunks
from broker.log.cleaner_stats import CleanerStats
from broker.log.deferred_release import DeferredRelease
from broker.log.errors import CleaningAbortedError, LogStorageError
from broker.log.file_names import CLEANED_SUFFIX
from broker.log.index_file import MAX_RELATIVE_OFFSET
from broker.log.kernel_load import load_kernels
from broker.log.log import Log
from broker.log.log_cleaner_manager import LogToClean
from broker.log.mapped_slots import MappedSlots
from broker.log.offset_map import OffsetMap
from broker.log.segment import Segment
from broker.log.segment_swap import delete_cleaned
from broker.log.throttler import Throttler
from broker.record.batch_header import (
    CONTROL_MASK,
)
from broker.record.topic_partition import TopicPartition

__all__ = ["Cleaner", "group_segments_by_size"]

logger = logging.getLogger(__name__)


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
        replaced: DeferredRelease | None = None,
    ) -> None:
        self._throttler = throttler or Throttler(0)
        self._replaced = replaced
        self._map = offset_map
        self._io_bytes = io_buffer_bytes
        self._check_done = check_done
        self._clock = clock
        self._reader = ChunkReader()
        self._rewriter = ChunkRewriter(offset_map, self._throttler)

    @property
    def offset_map(self) -> OffsetMap:
        return self._map

    def close(self) -> None:
        """End the cleaner's reader thread (its own thread is ending; a later pass would start another)."""
        self._reader.close()

    def clean(self, to_clean: LogToClean) -> CleanerStats:
        """One pass over ``to_clean``; the stats' ``end_offset`` is the log's new first dirty offset.

        Raises :class:`CleaningAbortedError` when stopped (nothing of the unfinished group swapped in)."""
        load_kernels()
        log = to_clean.log
        stats = CleanerStats()
        segments = log.segments
        started = time.perf_counter()
        mapped_slots = MappedSlots(self._map.slots // 2)
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
        groups = group_segments_by_size(
            below_end, log.config.segment_bytes, to_clean.first_uncleanable_offset
        )
        self._clean_groups(log, groups, producers, to_clean.first_uncleanable_offset, mapped_slots, stats)
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
        mapped_slots: MappedSlots,
        stats: CleanerStats,
    ) -> int:
        """Fill the map from ``first_dirty`` on, noting in ``mapped_slots`` where each record's key went;
        returns the end of what the map covers (its first unmapped offset)."""
        offset_map = self._map
        offset_map.clear()
        capacity = offset_map.max_entries
        tp = log.topic_partition
        end = first_dirty
        chunks = dirty_chunks(segments[:-1], first_dirty, uncleanable, self._io_bytes, self._reader)
        with closing(chunks):  # left early (a full map, an abort, an error): the reads ahead stop
            for segment, chunk in chunks:
                self._check_done(tp)
                hashes, offsets, keyed = keys_of(chunk)
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

    def _clean_groups(
        self,
        log: Log,
        groups: list[list[Segment]],
        producers: dict[int, int],
        upper_bound: int,
        mapped_slots: MappedSlots,
        stats: CleanerStats,
    ) -> None:
        """Rewrite each group into a ``.cleaned`` segment, then swap it in (steps 3 and 4), the swap of a
        group (fsyncs and renames: I/O waits) on a thread of the pass while this one rewrites the next
        group; that thread also creates the next group's ``.cleaned`` files meanwhile (creating a file
        waits on the file system's journal). Groups are still swapped one at a time and in order, each
        through the same crash-safe sequence; a failure or an abort waits for the swap in flight, deletes
        the ``.cleaned`` files not swapped and raises (the first error: a failed swap before the rewrite
        that followed it)."""
        tp = log.topic_partition
        swapping: Future[None] | None = None
        creating: Future[Segment] | None = None
        # one reading over every group's segments (those with bytes), so that reads run ahead across groups
        spans = [[(segment, 0, segment.size_bytes) for segment in group] for group in groups]
        every_span = [span for group_spans in spans for span in group_spans if span[2]]
        chunks = span_chunks(every_span, self._io_bytes, self._reader)
        with (
            closing(chunks),  # left early (an abort, an error): the reads ahead stop
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="lumber-log-cleaner-swap") as swapper,
        ):
            try:
                for i, (group, group_spans) in enumerate(zip(groups, spans, strict=True)):
                    base_offset = group[0].base_offset
                    if creating is None:
                        creating = swapper.submit(self._create_cleaned, log, base_offset)
                    cleaned = creating.result()
                    creating = None
                    if i + 1 < len(groups):
                        creating = swapper.submit(self._create_cleaned, log, groups[i + 1][0].base_offset)
                    try:
                        self._write_group(
                            cleaned, log, group_spans, chunks, producers, upper_bound, mapped_slots, stats
                        )
                        _finish(swapping)
                    except BaseException:
                        cleaned.close()
                        delete_cleaned(log.dir, base_offset)
                        raise
                    stats.segments_cleaned += len(group)
                    stats.bytes_written += cleaned.size_bytes
                    swapping = swapper.submit(self._swap_group, log, group, cleaned)
                _finish(swapping)
            except BaseException:
                _abandon(creating, log)
                _finish(swapping)  # a swap that failed before this error is raised instead
                raise
        logger.debug("%s: %d groups swapped in", tp, len(groups))

    def _create_cleaned(self, log: Log, base_offset: int) -> Segment:
        """The empty ``.cleaned`` segment a group starting at ``base_offset`` is rewritten into (on the
        pass's swap thread), after deleting an earlier pass's leftovers (a failure, not a crash)."""
        delete_cleaned(log.dir, base_offset)
        return Segment.create(
            log.dir,
            base_offset,
            index_interval_bytes=log.config.index_interval_bytes,
            now_ms=self._clock(),
            suffix=CLEANED_SUFFIX,
        )

    def _swap_group(self, log: Log, group: list[Segment], cleaned: Segment) -> None:
        """Step 4 for one group rewritten into ``cleaned`` (on the pass's swap thread)."""
        tp = log.topic_partition
        base_offset = group[0].base_offset
        try:
            cleaned.flush()
            cleaned.close()
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
        if self._replaced is not None:
            self._replaced.later(group)  # their unlinked files closed off this pass (deferred_release)

    def _write_group(
        self,
        cleaned: Segment,
        log: Log,
        spans: list[Span],
        chunks: Iterator[tuple[Segment, CleanerChunk]],
        producers: dict[int, int],
        upper_bound: int,
        mapped_slots: MappedSlots,
        stats: CleanerStats,
    ) -> None:
        """Rewrite the group of segments ``spans`` covers into ``cleaned`` (not flushed: :meth:`_swap_group`
        does), taking their chunks from ``chunks`` (the pass's reading: its next chunks are the group's).
        ``cleaned`` may end up empty: a group whose every record a later one superseded (Kafka's
        ``cleanSegments`` swaps such an empty segment in too)."""
        tp = log.topic_partition
        now = self._clock()
        new_horizon_ms = now + log.config.delete_retention_ms
        with_bytes = [segment for segment, _, size in spans if size]
        if with_bytes:
            final = with_bytes[-1]
            for segment, chunk in chunks:
                self._check_done(tp)
                last = segment is final and chunk.last
                slots = mapped_slots.slots_of(segment, chunk.position + chunk.batches.positions)
                self._rewriter.write(
                    cleaned, chunk, now, new_horizon_ms, producers, upper_bound, slots, stats
                )
                if chunk.last:
                    mapped_slots.forget(segment)
                if last:
                    break
        stats.bytes_read += sum(size for _, _, size in spans)
        cleaned.on_become_inactive()


def _finish(swapping: Future[None] | None) -> None:
    """Wait for the swap in flight, if any; its error, raised."""
    if swapping is not None:
        swapping.result()


def _abandon(creating: Future[Segment] | None, log: Log) -> None:
    """Close and delete the ``.cleaned`` segment created ahead for a group the pass does not rewrite."""
    if creating is None:
        return
    try:
        segment = creating.result()
    except Exception:  # noqa: BLE001 - nothing created (Segment.create cleans up after itself)
        return
    segment.close()
    delete_cleaned(log.dir, segment.base_offset)
