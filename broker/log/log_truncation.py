"""Truncating a partition's log (issue 19), mixed into :class:`~broker.log.log.Log` (its state lives there;
these methods are the part of ``Log`` that truncates).

:meth:`Log.truncate_to` and :meth:`Log.truncate_fully_and_start_at`: a follower drops what the leader
does not have. Whole batches go, as in Kafka's ``LogSegment.truncateTo``.

Readers across a truncation: a reader keeps the view (and the :class:`~broker.log.segment.Segment`
objects) it took. A truncation never changes a byte below the cut and never writes new bytes where an
old view could look: segments above the cut are unlinked (their open descriptors keep the old bytes
readable, as after retention); the segment holding the cut is truncated in place and replaced in the new
view by a new :class:`~broker.log.segment.Segment` object (fresh indexes; the old object keeps its
in-memory entries); and appends continue in a new segment at the new log end, so the cut file never
grows again. A reader holding an old view therefore reads either the bytes it would have read, or, past
the cut, a short read that fails (:class:`~broker.record.errors.CorruptRecordError`, or a region the
network layer cannot finish sending, which closes that connection): never another batch's bytes. A cut at
a segment's first batch unlinks the whole segment instead, so its old readers keep every byte. (Where
Lumber differs: Kafka keeps appending to the cut segment; Lumber starts a segment per truncation, which
is rare: a follower's, after a leader change.)

Concurrency (the rules of :mod:`broker.log.log`): a truncation enters the truncation guard, then takes the
flush lock ``_flush_lock`` and then the append lock ``_lock``, so that no flush captures segments or
offsets that it removes; it publishes its new view under both.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from broker.config import LogConfig
from broker.log.errors import LogStorageError
from broker.log.file_handle import fsync_dir
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_listeners import LogListeners
from broker.log.log_view import LogView
from broker.log.producer_state import ProducerStateManager
from broker.log.segment import Segment

if TYPE_CHECKING:
    from broker.log.log import Log

logger = logging.getLogger(__name__)

#: ``guard(log, offset)``: a context entered around a truncation of ``log`` (see Log.set_truncation_guard).
TruncationGuard = Callable[["Log", int], AbstractContextManager[None]]


@contextmanager
def no_truncation_guard(_log: Log, _offset: int) -> Iterator[None]:
    """The guard of a log nobody guards: enters and leaves."""
    yield


class LogTruncation:
    """The truncating part of :class:`~broker.log.log.Log` (see the module docstring)."""

    # The log's state these methods use (set by Log.__init__).
    _dir: Path
    _where: str
    _config: LogConfig
    _clock: Callable[[], int]
    _lock: threading.Lock
    _flush_lock: threading.Lock
    _listeners: LogListeners
    _view: LogView
    _offline_reason: str | None
    _next_offset: int
    _start_floor: int
    _flushed_offset: int
    _unflushed_messages: int
    _first_unflushed_ms: int | None
    _flush_requested_offset: int
    _producers: ProducerStateManager
    _epochs: LeaderEpochCache
    _replicated_hw: int | None
    _truncation_guard: TruncationGuard

    if TYPE_CHECKING:

        @property
        def log_start_offset(self) -> int: ...

        def _check_writable(self) -> None: ...

        def _with_exposed_hw(self, view: LogView) -> LogView: ...

    def set_truncation_guard(self, guard: TruncationGuard) -> None:
        """Enter ``guard(log, offset)`` around every truncation (``offset`` -1 for a full one), before the
        log's locks: the :class:`~broker.log.log_manager.LogManager` stops and pauses the log cleaner on
        this log meanwhile (Kafka's ``abortAndPauseCleaning``)."""
        self._truncation_guard = guard

    # ------------------------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Drop every offset at and above ``offset`` (Kafka's ``UnifiedLog.truncateTo``); returns the new
        log end offset.

        Whole batches go: when ``offset`` lies inside a batch, that batch goes too, so the new log end is
        its base offset. Segments above it are deleted, the segment holding it is cut (its indexes
        rewritten, its ``.log`` truncated and fsynced) and appends continue in a new segment at the new
        log end (see the module docstring for why readers stay safe). The producer state is rebuilt as of
        the new end, the leader epoch cache truncated from it, and the high watermark, the replicated high
        watermark, the flushed offset (the recovery point) and the requested flush capped at it.
        ``offset`` at or past the log end changes nothing but the leader epochs (an entry a leader
        recorded without appending anything is removed, as Kafka does); ``offset`` below the log start
        offset is :meth:`truncate_fully_and_start_at`. :class:`LogStorageError` on an I/O error, after
        which the log is offline.
        """
        if offset < 0:
            raise ValueError(f"{self._where}: cannot truncate to a negative offset ({offset})")
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return offset
        with self._truncation_guard(cast("Log", self), offset), self._flush_lock, self._lock:
            self._check_writable()
            view = self._view
            old_end = view.log_end_offset
            if offset >= old_end:
                self._epochs.truncate_from_end(old_end)
                return old_end
            if offset < view.base_offsets[0]:  # retention moved the start meanwhile
                raise ValueError(
                    f"{self._where}: offset {offset} is now below the log start offset {view.base_offsets[0]}"
                )
            try:
                return self._truncate_locked(view, offset)
            except LogStorageError as exc:
                self._offline_reason = str(exc)
                logger.error("%s: log is offline after a failed truncation: %s", self._where, exc)  # noqa: TRY400
                raise

    def _truncate_locked(self, view: LogView, offset: int) -> int:
        now = self._clock()
        segments = view.segments
        last = len(segments) - 1
        i = bisect_right(view.base_offsets, offset) - 1
        cut = segments[i]
        found = cut.position_of(offset, view.end_position if i == last else cut.size_bytes)
        if found is None:  # cannot happen: offset < log end lies in segment i
            raise LogStorageError(
                f"{cut.path}: no batch holds offset {offset} below the log end {view.log_end_offset}"
            )
        size_before = cut.size_bytes  # the active segment's size is view.end_position: we hold the lock
        whole = found[0] == 0  # the cut takes the whole segment: delete it, its readers keep every byte
        doomed = segments[i:] if whole else segments[i + 1 :]
        deleted_bytes = sum(s.size_bytes for s in doomed)
        # Newest first, before the cut: a kill at any point leaves a log without a hole (a longer one
        # than asked at worst, which the next truncation cuts again).
        for segment in reversed(doomed):
            segment.delete()
        kept: tuple[Segment, ...]
        if whole:
            kept, new_end, cut_bytes = segments[:i], cut.base_offset, 0
        else:
            truncated = cut.truncate_to(offset, now_ms=now)
            truncated.on_become_inactive()
            kept, new_end = (*segments[:i], truncated), truncated.next_offset
            cut_bytes = size_before - truncated.size_bytes
        active = Segment.create(
            self._dir, new_end, index_interval_bytes=self._config.index_interval_bytes, now_ms=now
        )
        fsync_dir(self._dir)
        new_segments = (*kept, active)
        self._producers.rebuild(new_segments, new_end, now)
        self._producers.take_snapshot(new_end)
        self._epochs.truncate_from_end(new_end)
        self._next_offset = new_end
        self._flushed_offset = min(self._flushed_offset, new_end)
        self._flush_requested_offset = min(self._flush_requested_offset, new_end)
        self._unflushed_messages = new_end - self._flushed_offset
        if self._unflushed_messages <= 0:
            self._first_unflushed_ms = None
        if self._replicated_hw is not None:
            self._replicated_hw = min(self._replicated_hw, new_end)
        base_view = LogView(
            segments=new_segments,
            base_offsets=tuple(s.base_offset for s in new_segments),
            log_end_offset=new_end,
            end_position=0,
            high_watermark=new_end,
            hw_segment=active,
            hw_position=0,
        )
        new_view = self._with_exposed_hw(base_view)  # never above the old one: every term is capped
        self._view = new_view
        logger.warning(
            "%s: truncated to offset %d: offsets [%d, %d) removed; %s cut by %d bytes, deleted %s "
            "(%d bytes); new segment %s; high watermark %d",
            self._where,
            offset,
            new_end,
            view.log_end_offset,
            cut.path if found[0] else "no segment",
            cut_bytes,
            [str(s.path) for s in doomed],
            deleted_bytes,
            active.path,
            new_view.high_watermark,
        )
        return new_end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (Kafka's ``truncateFullyAndStartAt``:
        a follower's answer to OFFSET_OUT_OF_RANGE below the leader's log start offset). The producer
        state, its snapshots and the leader epochs are cleared; every offset of the log is ``offset``.
        Readers holding old views keep reading the deleted segments (unlinked, descriptors open). The
        segments are deleted newest first before the new one is created: a kill part way leaves a shorter
        log (at worst an empty one at offset 0), which the follower's next fetch finds out of range
        again."""
        if offset < 0:
            raise ValueError(f"{self._where}: cannot start the log at a negative offset ({offset})")
        with self._truncation_guard(cast("Log", self), -1), self._flush_lock, self._lock:
            self._check_writable()
            view = self._view
            now = self._clock()
            try:
                # newest first: a kill part way leaves a shorter log, never one with a hole
                for segment in reversed(view.segments):
                    segment.delete()
                self._producers.clear()
                self._producers.delete_snapshots_above(-1)
                self._epochs.clear()
                active = Segment.create(
                    self._dir, offset, index_interval_bytes=self._config.index_interval_bytes, now_ms=now
                )
                fsync_dir(self._dir)
            except LogStorageError as exc:
                self._offline_reason = str(exc)
                logger.error("%s: log is offline after a failed truncation: %s", self._where, exc)  # noqa: TRY400
                raise
            self._next_offset = self._flushed_offset = offset
            self._start_floor = offset
            self._flush_requested_offset = min(self._flush_requested_offset, offset)
            self._unflushed_messages = 0
            self._first_unflushed_ms = None
            if self._replicated_hw is not None:
                self._replicated_hw = offset
            self._view = LogView(
                segments=(active,),
                base_offsets=(offset,),
                log_end_offset=offset,
                end_position=0,
                high_watermark=offset,
                hw_segment=active,
                hw_position=0,
            )
        logger.warning(
            "%s: truncated fully: deleted %s (offsets [%d, %d), %d bytes); the log starts at %d",
            self._where,
            [str(s.path) for s in view.segments],
            view.base_offsets[0],
            view.log_end_offset,
            sum(s.size_bytes for s in view.segments[:-1]) + view.end_position,
            offset,
        )
        if offset > view.high_watermark:
            self._listeners.publish(offset)
