"""What stays of a chunk when the log cleaner rewrites it (:class:`ChunkRewriter`, Kafka's
``MemoryRecords.filterTo`` with the cleaner's ``RecordFilter``): which records are kept, and the batches
written to the ``.cleaned`` segment, byte for byte as Kafka would write them. What is kept, and why, is
described once, in :mod:`broker.log.log_cleaner` (step 3). Decided from the key columns of the chunk's
records, which the batches' reader gives (:meth:`~broker.record.record_batch.RecordBatch.key_columns_of`:
the compiled loop, or the walk where it declines); written by two routes to the same bytes: in the chunk's
buffer (uncompressed data batches, the common case) or batch by batch (compressed or control batches among
them). One cleaner thread's, with its offset map.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress

import numpy as np
import numpy.typing as npt

from broker.log.cleaner_chunk import CleanerChunk
from broker.log.cleaner_stats import CleanerStats
from broker.log.errors import LogStorageError
from broker.log.offset_map import OffsetMap, Offsets, hash_key_columns
from broker.log.segment import Segment
from broker.log.throttler import Throttler
from broker.record.batch_header import (
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    RECORD_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)
from broker.record.key_columns import KeyColumns
from broker.record.record_batch import RecordBatch, restamp_crc
from broker.record.record_batch_builder import retained_batch, retained_batch_of_bytes

__all__ = ["ChunkRewriter"]


class ChunkRewriter:
    """Writes what stays of each chunk to a ``.cleaned`` segment (see the module docstring), deciding with
    ``offset_map`` (the pass's, filled by its map phase), its reads and writes counted by ``throttler``."""

    def __init__(self, offset_map: OffsetMap, throttler: Throttler) -> None:
        self._map = offset_map
        self._throttler = throttler

    def write(
        self,
        cleaned: Segment,
        chunk: CleanerChunk,
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        upper_bound: int,
        slots: npt.NDArray[np.int32] | None,
        stats: CleanerStats,
    ) -> None:
        """Write what stays of ``chunk`` to ``cleaned``, decided from its key columns
        (:meth:`~broker.log.cleaner_chunk.CleanerChunk.key_columns`): in its buffer when it holds only
        uncompressed data batches (the common case), otherwise batch by batch (:meth:`_retained`).
        ``upper_bound``: the pass's first
        uncleanable offset (the batch ending just below it stays, empty if need be: Kafka's
        ``upperBoundOffsetOfCleaningRound``)."""
        columns = chunk.key_columns()
        read_bytes = int(chunk.batches.sizes.sum())
        if chunk.plain:  # the columns lie in the chunk's buffer: decided and written there
            written = self._write_by_columns(
                cleaned, chunk, columns, now_ms, new_horizon_ms, producers, upper_bound, slots, stats
            )
            self._throttler.maybe_throttle(read_bytes + written)
            return
        out = self._retained(
            chunk.record_batches(), columns, now_ms, new_horizon_ms, producers, upper_bound, stats
        )
        if out:
            cleaned.append(out, [b.base_offset for b in out])
        self._throttler.maybe_throttle(read_bytes + sum(b.size_bytes for b in out))

    def _write_by_columns(
        self,
        cleaned: Segment,
        chunk: CleanerChunk,
        columns: KeyColumns,
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        upper_bound: int,
        slots: npt.NDArray[np.int32] | None,
        stats: CleanerStats,
    ) -> int:
        """:meth:`_retained` for a chunk of uncompressed data batches, decided and written by columns
        (Kafka's ``filterTo``), with no object per batch but for the few rebuilt by decoding; returns the
        bytes written.

        Which records stay, and what each batch keeps, is one compiled loop over the records
        (:func:`~broker.log.cleaner_kernels.keep_records`). A batch keeping all its records is copied whole;
        one keeping some, rebuilt from their bytes, keeps its header (patched in the buffer: length, record
        count, max timestamp, CRC) and those records; an empty batch kept (an idempotent producer's last, the
        one ending at ``upper_bound``) keeps its header alone (patched likewise). A second compiled loop
        copies the kept headers and records out, each run of consecutive bytes at once, so a stretch of
        batches kept whole is one copy (:func:`~broker.log.cleaner_kernels.copy_kept`). Batches whose
        tombstones get their delete horizon stamped, and LogAppendTime batches that lose records, are rebuilt
        from their decoded records (:func:`~broker.record.record_batch_builder.retained_batch`) and spliced in
        at their places. The bytes written are those :meth:`_retained` writes."""
        batches = chunk.batches
        buffer = chunk.data
        attributes = batches.attributes
        counts = batches.record_counts
        horizon_set = (attributes & DELETE_HORIZON_MASK) != 0
        keep, kept, kept_tombstones, kept_bytes, newest = self._keep(
            columns, horizon_set & (now_ms >= batches.first_timestamps), slots
        )
        starts = np.asarray(columns.batch_starts, dtype=np.int64)
        stamp = ~horizon_set & (kept_tombstones > 0)
        whole = (kept == counts) & (kept > 0) & ~stamp
        log_append_time = (attributes & TIMESTAMP_TYPE_MASK) != 0
        by_bytes = ~whole & (kept > 0) & ~stamp & ~log_append_time
        by_records = ~whole & (kept > 0) & ~by_bytes
        # batches left without records (emptied now, or already empty) are dropped, but for those kept
        # as their header alone (Kafka's RETAIN_EMPTY): the one ending just below the pass's upper bound,
        # an idempotent producer's last
        last_offsets = batches.base_offsets + batches.last_offset_deltas
        empty = (kept == 0) & (last_offsets + 1 == upper_bound)
        if producers:
            ids = np.fromiter(producers.keys(), dtype=np.int64, count=len(producers))
            ends = np.fromiter(producers.values(), dtype=np.int64, count=len(producers))
            order = np.argsort(ids)
            ids, ends = ids[order], ends[order]
            at = np.minimum(np.searchsorted(ids, batches.producer_ids), len(ids) - 1)
            producers_last = (ids[at] == batches.producer_ids) & (ends[at] == last_offsets)
            empty |= (kept == 0) & producers_last
        stats.records_read += int(counts.sum())
        stats.records_written += int(kept.sum())

        # patch the headers of the batches rebuilt from bytes (and of the empty ones) in the buffer
        patched = np.flatnonzero(by_bytes | empty)
        new_sizes = batches.sizes.copy()
        new_sizes[patched] = HEADER_SIZE + np.where(empty[patched], 0, kept_bytes[patched])
        max_timestamps = batches.max_timestamps.copy()
        rebuilt = np.flatnonzero(by_bytes)
        max_timestamps[rebuilt] = batches.first_timestamps[rebuilt] + newest[rebuilt]
        if len(patched):
            array = np.frombuffer(buffer, dtype=np.uint8)
            at = batches.positions[patched]
            _put_big_endian(array, at + LENGTH_OFFSET, new_sizes[patched] - LOG_OVERHEAD, 4)
            _put_big_endian(array, at + MAX_TIMESTAMP_OFFSET, max_timestamps[patched], 8)
            _put_big_endian(array, at + RECORD_COUNT_OFFSET, np.where(empty[patched], 0, kept[patched]), 4)

        # the kept headers and records, copied out in runs of consecutive bytes
        from broker.log.cleaner_kernels import copy_kept  # noqa: PLC0415 - numba, on first use

        copied = np.empty(int(batches.sizes.sum()), dtype=np.uint8)
        out_positions = np.empty(batches.count + 1, dtype=np.int64)
        length = copy_kept(
            np.frombuffer(buffer, dtype=np.uint8),
            starts,
            batches.positions,
            HEADER_SIZE,
            whole | by_bytes | empty,
            whole | by_bytes,
            columns.record_starts,
            columns.record_ends,
            keep,
            copied,
            out_positions,
        )
        if length < 0:
            raise LogStorageError(
                f"{chunk.where}: the kept records of the chunk at position {chunk.position} lie outside its "
                f"{len(buffer)} bytes (its key columns are wrong)"
            )
        out = copied.data[:length]
        decoded = np.flatnonzero(by_records).tolist()
        if decoded:  # batches rebuilt from their decoded records, spliced in at their places
            view = copied.data
            pieces: list[bytes | memoryview] = []
            done = 0
            for i in decoded:
                batch = chunk.record_batch(i)
                first = int(starts[i])
                records = list(compress(batch.records(), keep[first : first + int(counts[i])].tolist()))
                horizon = new_horizon_ms if stamp[i] else None
                rebuilt_batch = retained_batch(batch, records, delete_horizon_ms=horizon)
                pieces += (view[done : int(out_positions[i])], rebuilt_batch)
                done = int(out_positions[i])
                new_sizes[i] = len(rebuilt_batch)
                max_timestamps[i] = RecordBatch(rebuilt_batch).max_timestamp_ms
            pieces.append(view[done:length])
            out = memoryview(bytearray().join(pieces))
        out_batches = np.flatnonzero(whole | by_bytes | empty | by_records)
        if not len(out_batches):
            return 0
        out_sizes = new_sizes[out_batches]
        out_starts = np.zeros(len(out_batches), dtype=np.int64)
        np.cumsum(out_sizes[:-1], out=out_starts[1:])
        if len(out) != int(out_sizes.sum()):
            raise LogStorageError(
                f"{chunk.where}: the cleaned batches at position {chunk.position} come to {len(out)} bytes, "
                f"expected {int(out_sizes.sum())}"
            )
        # the CRCs of the patched headers, over their new bytes
        is_patched = (by_bytes | empty)[out_batches]
        crc_at = out_starts[is_patched].tolist()
        crc_ends = (out_starts + out_sizes)[is_patched].tolist()
        for at, stop in zip(crc_at, crc_ends, strict=True):
            restamp_crc(out, at, stop)
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
    ) -> tuple[npt.NDArray[np.bool_], Offsets, Offsets, Offsets, Offsets]:
        """Which records of ``columns`` stay (see the module docstring, step 3), and per batch how many
        records it keeps, how many of them are tombstones, their bytes and their largest timestamp delta
        (:func:`~broker.log.cleaner_kernels.keep_records`). ``slots``: where the map phase put the keys of
        the keyed records, in order (their mapped offsets are read there, not hashed and looked up
        again)."""
        from broker.log.cleaner_kernels import keep_records  # noqa: PLC0415 - numba, on first use

        keyed = columns.key_lengths >= 0
        keyed_count = np.count_nonzero(keyed)
        if slots is not None and len(slots) == keyed_count:
            mapped = self._map.offsets_at(slots)
        elif keyed_count:
            mapped = self._map.get_many(
                hash_key_columns(columns.array, columns.key_starts[keyed], columns.key_lengths[keyed])
            )
        else:
            mapped = np.empty(0, dtype=np.int64)
        batch_count = len(columns.batch_starts) - 1
        keep = np.empty(len(keyed), dtype=np.bool_)
        kept, kept_tombstones, kept_bytes, newest = np.empty((4, batch_count), dtype=np.int64)
        keep_records(
            np.asarray(columns.batch_starts, dtype=np.int64),
            columns.offsets,
            columns.key_lengths,
            columns.null_values,
            columns.record_starts,
            columns.record_ends,
            columns.timestamp_deltas,
            mapped,
            self._map.latest_offset,
            np.asarray(drop_tombstones, dtype=np.bool_),
            keep,
            kept,
            kept_tombstones,
            kept_bytes,
            newest,
        )
        return keep, kept, kept_tombstones, kept_bytes, newest

    def _retained(
        self,
        batches: list[RecordBatch],
        columns: KeyColumns,
        now_ms: int,
        new_horizon_ms: int,
        producers: dict[int, int],
        upper_bound: int,
        stats: CleanerStats,
    ) -> list[RecordBatch]:
        """What stays of ``batches``, decided by their ``columns`` (:meth:`RecordBatch.key_columns
        <broker.record.record_batch.RecordBatch.key_columns>`: a control batch has no records there, and
        stays): whole batches copied, the others rebuilt from the bytes of the records they keep (Kafka's
        ``filterTo``: ``writeOriginalBatch`` or a new batch)."""
        horizons = [b.delete_horizon_ms for b in batches]
        keep, kept_per_batch, tombstones_per_batch, _, newest_per_batch = self._keep(
            columns, [h is not None and now_ms >= h for h in horizons]
        )
        starts = columns.batch_starts
        kept_counts = kept_per_batch.tolist()
        kept_tombstones = tombstones_per_batch.tolist()
        data = columns.data
        out: list[RecordBatch] = []
        for i, batch in enumerate(batches):
            if batch.is_control_batch:
                out.append(batch)
                continue
            first, count, kept = starts[i], starts[i + 1] - starts[i], kept_counts[i]
            stamp = new_horizon_ms if horizons[i] is None and kept_tombstones[i] else None
            stats.records_read += count
            stats.records_written += kept
            if kept == count and kept and stamp is None:
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
                newest = batch.first_timestamp_ms + int(newest_per_batch[i])
                out.append(RecordBatch(retained_batch_of_bytes(batch, body, kept, newest)))
            elif kept:
                records = batch.records()
                chosen_records = list(compress(records, keep[first : first + count].tolist()))
                out.append(RecordBatch(retained_batch(batch, chosen_records, delete_horizon_ms=stamp)))
            elif _retained_empty(batch, producers, upper_bound):
                out.append(RecordBatch(retained_batch(batch, [])))
        return out


def _retained_empty(batch: RecordBatch, producers: dict[int, int], upper_bound: int) -> bool:
    """Whether ``batch``, left without records, stays as its header alone (Kafka's ``RETAIN_EMPTY``): it
    ends just below the pass's upper bound, or it holds an idempotent producer's last sequence."""
    return batch.next_offset == upper_bound or producers.get(batch.producer_id, -2) == batch.last_offset


def _put_big_endian(array: npt.NDArray[np.uint8], at: Offsets, values: Offsets, width: int) -> None:
    """Write ``values[i]`` as a big-endian integer of ``width`` bytes at ``array[at[i]:]``."""
    as_bytes = values.astype(f">i{width}").view(np.uint8).reshape(-1, width)
    array[at[:, None] + np.arange(width)] = as_bytes
