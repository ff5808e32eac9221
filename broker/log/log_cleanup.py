"""What a log's ``cleanup_policy`` does below its active segment, mixed into :class:`~broker.log.log.Log`
(its state lives there; these methods are the part of ``Log`` that deletes and swaps old segments).

Retention deletes whole segments (:mod:`broker.log.retention`), only with ``delete`` in the log's
``cleanup_policy``; with ``compact`` the log cleaner (:mod:`broker.log.log_cleaner`) rewrites segments
below the active one and :meth:`Log.replace_segments` swaps them in (offsets, and so the producer state,
its snapshots and the leader epochs, stay valid: cleaning only leaves gaps, which readers and followers
step over: a read finds the first batch at or after its offset).

DeleteRecords (:meth:`LogCleanup.delete_records_before`, Kafka's ``maybeIncrementLogStartOffset``) raises
the log start offset to an offset at most the high watermark, whatever the policy allows (the caller,
:mod:`broker.server.log_admin_apis`, refuses a log without ``delete`` as Kafka does): reads below it are out
of range at once, and the segments wholly below it (never the active one) are deleted as retention
deletes them. The raised start is kept across restarts by the log manager's ``log-start-offset-checkpoint``
(written with the other checkpoints, as Kafka writes its own), and followers raise theirs to the leader's
from its fetch responses.

Concurrency (the rules of :mod:`broker.log.log`): both change the segment list under the append lock
``_lock`` and publish a new :class:`~broker.log.log_view.LogView`; retention deletes the files after
releasing it, the swap renames them under it. Readers holding older views keep reading the old segments'
unlinked files.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from broker.config import LogConfig
from broker.log.errors import CorruptIndexError, LogClosedError, LogStorageError, OffsetOutOfRangeError
from broker.log.file_region import FileRegion
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_view import LogView
from broker.log.producer_state import ProducerStateManager
from broker.log.retention import segments_past_retention
from broker.log.segment import Segment
from broker.log.segment_swap import commit_swap, finish_swap
from broker.record.batch_scan import scan_batches
from broker.record.errors import CorruptRecordError

logger = logging.getLogger(__name__)

#: What :meth:`LogCleanup._found_from_start` reads at a time.
_TIMESTAMP_READ_BYTES = 1024 * 1024


class LogCleanup:
    """The cleaning-up part of :class:`~broker.log.log.Log` (see the module docstring)."""

    # The log's state these methods use (set by Log.__init__).
    _dir: Path
    _where: str
    _config: LogConfig
    _clock: Callable[[], int]
    _lock: threading.Lock
    _view: LogView
    _closed: bool
    _offline_reason: str | None
    _producers: ProducerStateManager
    _epochs: LeaderEpochCache
    _start_floor: int

    if TYPE_CHECKING:

        @staticmethod
        def _hw_at(view: LogView, offset: int) -> tuple[int, Segment, int]: ...

        def read(
            self, offset: int, max_bytes: int, *, max_offset: int | None = None
        ) -> FileRegion | None: ...

    # ------------------------------------------------------------------------------------ retention

    def apply_retention(self, now_ms: int | None = None) -> tuple[int, ...]:
        """Delete the segments the retention policy (:mod:`broker.log.retention`) names; returns their
        base offsets. Only with ``delete`` in ``cleanup_policy``: a compact-only log deletes nothing by time
        or size."""
        config = self._config
        if "delete" not in config.cleanup_policy:
            return ()  # a compact-only log keeps its segments; the log cleaner compacts them (Kafka)
        if config.retention_ms < 0 and config.retention_bytes < 0:
            return ()
        now = self._clock() if now_ms is None else now_ms
        with self._lock:
            if self._closed:
                return ()
            view = self._view
            doomed = segments_past_retention(view, config, now)
            if not doomed:
                return ()
            kept = view.segments[len(doomed) :]
            self._view = view._replace(segments=kept, base_offsets=view.base_offsets[len(doomed) :])
            self._producers.evict_below(kept[0].base_offset)
            self._producers.delete_snapshots_below(kept[0].base_offset)
            self._epochs.truncate_from_start(kept[0].base_offset)
        for segment in doomed:
            segment.delete()
        logger.info(
            "%s: retention deleted segments %s; log start offset is now %d",
            self._where,
            [s.base_offset for s in doomed],
            kept[0].base_offset,
        )
        return tuple(s.base_offset for s in doomed)

    # ------------------------------------------------------------------------------------ DeleteRecords

    def delete_records_before(self, offset: int, *, limit: int | None = None) -> int:
        """Raise the log start offset to ``offset`` (DeleteRecords: see the module docstring) and delete
        the segments wholly below it; returns the log start offset after it (never lowered: an offset
        below it changes nothing). ``limit``: the highest start allowed (by default the high watermark;
        a follower passes its log end). :class:`OffsetOutOfRangeError` past it."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"{self._where}: the log is closed")
            view = self._view
            highest = view.high_watermark if limit is None else limit
            start = max(view.base_offsets[0], self._start_floor)
            if offset > highest:
                raise OffsetOutOfRangeError(self._where, offset, start, highest)
            if offset <= start:
                return start
            self._start_floor = offset
            doomed = [s for s in view.segments[:-1] if s.next_offset <= offset]
            if doomed:
                kept = view.segments[len(doomed) :]
                self._view = view._replace(segments=kept, base_offsets=view.base_offsets[len(doomed) :])
            self._producers.evict_below(offset)
            self._producers.delete_snapshots_below(self._view.base_offsets[0])
            self._epochs.truncate_from_start(offset)
        for segment in doomed:
            segment.delete()
        logger.info(
            "%s: log start offset raised to %d (DeleteRecords); deleted segments %s",
            self._where,
            offset,
            [s.base_offset for s in doomed],
        )
        return offset

    def _found_from_start(self, found: tuple[int, int] | None, timestamp_ms: int) -> tuple[int, int] | None:
        """``found`` (the first exposed record at or after ``timestamp_ms``), unless it lies below the log
        start offset DeleteRecords raised: then the first such record from the log start on (Kafka's
        ``findOffsetByTimestamp`` from the log start), read batch by batch."""
        start = self._start_floor
        if found is None or found[0] >= start:
            return found
        offset = start
        while (region := self.read(offset, _TIMESTAMP_READ_BYTES)) is not None:
            for batch in scan_batches(region.read_bytes()).batches:
                if batch.max_timestamp_ms >= timestamp_ms:
                    for record in batch.records(from_offset=start):
                        if record.timestamp_ms >= timestamp_ms:
                            return record.offset, record.timestamp_ms
                offset = batch.next_offset
        return None

    # ------------------------------------------------------------------------------------ cleaning

    def replace_segments(self, old: Sequence[Segment]) -> Segment | None:
        """Swap the cleaned segment (closed and fsynced under ``.cleaned`` names, with the base offset of
        ``old[0]``: :mod:`broker.log.log_cleaner`) in for ``old``, consecutive segments of the log below
        the active one, and publish a view with it (steps 2-4 of :mod:`broker.log.segment_swap`, under the
        append lock). Readers holding older views keep reading the old segments' unlinked files.

        Returns the new segment, or None when ``old`` are no longer segments of the log (retention, a
        truncation or a close replaced them meanwhile): then nothing was renamed, and the caller deletes
        the cleaned files. :class:`LogStorageError` on an I/O error, after which the log is offline (a
        restart finishes or rolls back the swap).
        """
        base_offset = old[0].base_offset
        with self._lock:
            if self._closed or self._offline_reason is not None:
                return None
            view = self._view
            segments = view.segments
            first = next((i for i, s in enumerate(segments) if s is old[0]), None)
            count = len(old)
            if (
                first is None
                or first + count >= len(segments)
                or any(a is not b for a, b in zip(segments[first : first + count], old, strict=True))
            ):
                return None
            try:
                commit_swap(self._dir, base_offset)
                for segment in old:
                    segment.delete()
                finish_swap(self._dir, base_offset)
                swapped = Segment.load(
                    self._dir,
                    base_offset,
                    index_interval_bytes=self._config.index_interval_bytes,
                    now_ms=self._clock(),
                )
            except (OSError, LogStorageError, CorruptIndexError, CorruptRecordError) as exc:
                self._offline_reason = f"the swap of cleaned segment {base_offset} failed: {exc}"
                logger.error("%s: log is offline: %s", self._where, self._offline_reason)  # noqa: TRY400
                raise LogStorageError(f"{self._where}: {self._offline_reason}") from exc
            new_segments = (*segments[:first], swapped, *segments[first + count :])
            new_view = view._replace(
                segments=new_segments, base_offsets=tuple(s.base_offset for s in new_segments)
            )
            if any(view.hw_segment is s for s in old):
                high_watermark, hw_segment, hw_position = self._hw_at(new_view, view.high_watermark)
                new_view = new_view._replace(
                    high_watermark=high_watermark, hw_segment=hw_segment, hw_position=hw_position
                )
            self._view = new_view
        logger.info(
            "%s: swapped cleaned segment %s (%d bytes) in for %s (%d bytes)",
            self._where,
            swapped.path.name,
            swapped.size_bytes,
            [s.path.name for s in old],
            sum(s.size_bytes for s in old),
        )
        return swapped

    def active_producers(self) -> list[tuple[int, int, int, int]]:
        """``(producer id, epoch, last sequence, last timestamp)`` of each idempotent producer the log holds
        state for, by producer id (DescribeProducers; read under the append lock)."""
        with self._lock:
            return [
                (pid, entry.producer_epoch, entry.last_sequence, entry.last_timestamp_ms)
                for pid, entry in sorted(self._producers.producers.items())
            ]

    def last_offsets_of_producers(self) -> dict[int, int]:
        """Each idempotent producer's last appended offset (the cleaner keeps the batch ending there)."""
        with self._lock:
            return {
                pid: entry.batches[-1].last_offset
                for pid, entry in self._producers.producers.items()
                if entry.batches
            }
