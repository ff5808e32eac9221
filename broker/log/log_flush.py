"""Flushing a partition's log: the paper's flush policy and group commit, mixed into
:class:`~broker.log.log.Log` (its state lives there; these methods are the part of ``Log`` that flushes).

Flush policy (the paper's M and S): a flush is due once ``flush_messages`` messages are unflushed, or the
oldest unflushed message is ``flush_ms`` old. When an append makes a flush due (M reached) or starts a new
S deadline (the first unflushed message), the log calls ``wake_flusher``: the
:class:`~broker.log.log_manager.LogManager` wakes its background flusher, which flushes by M at once and
sleeps until the earliest S deadline. A log without a ``wake_flusher`` flushes inline when M is reached.

Flush on ack (``[log] flush_on_ack``), as group commit: an ``acks=-1`` produce that must wait for its
batches to be on disk calls :meth:`Log.request_flush` with the offset it needs flushed, which raises
``flush_requested_offset`` and wakes the flusher; the flusher flushes every log whose requested offset is
above its flushed offset, and every waiter below the new flushed offset is answered by that one fsync
(they learn of it through the listeners). Requests that arrive during an fsync wait for the next one,
which the flusher starts as soon as the current one ends: N concurrent producers cost one fsync per turn,
not N. Without a ``wake_flusher`` the requesting thread flushes inline (``_flush_lock`` serialises it with
any other flush, and a flush that finds the offset already flushed returns at once).

What a flush makes durable beyond the segments' bytes: the folder's entries when a segment was rolled
(``_dir_dirty``) and at a new log's first flush (``_new_segment_unsynced``): a new segment's files are
created with no fsync (:meth:`Segment.create <broker.log.segment.Segment.create>`), and the folder is
fsynced when a flush first makes data in them count, as Kafka's ``LocalLog.flush`` does for a segment past
the recovery point (issue 39), unless a leader epoch's checkpoint has fsynced it since (a leader's first
epoch is written when it is made leader, a follower's with the first batches it copies). Until then a
power loss may take the files, and the log is made again, empty, or recovered as any unflushed segment; a
log nothing was ever appended to is never flushed for them.

Concurrency (the rules of :mod:`broker.log.log`): flushes are serialised by ``_flush_lock`` and fsync
outside the append lock ``_lock``, so appends continue during an fsync; the flushed offset and the
counters are changed under ``_lock``. ``flush_requested_offset`` only grows, under ``_lock``; the flusher
reads it without one (a stale read at worst delays a flush to the flusher's next turn, which the
request's own wake-up starts).
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from broker.config import LogConfig
from broker.log.errors import LogStorageError
from broker.log.file_handle import fsync_dir
from broker.log.log_listeners import LogListeners
from broker.log.log_view import LogView

if TYPE_CHECKING:
    from broker.log.leader_epoch_cache import LeaderEpochCache
    from broker.log.log import Log
    from broker.log.segment import Segment

logger = logging.getLogger(__name__)


class LogFlush:
    """The flushing half of :class:`~broker.log.log.Log` (see the module docstring)."""

    # The log's state these methods use (set by Log.__init__).
    _dir: Path
    _where: str
    _config: LogConfig
    _clock: Callable[[], int]
    _wake_flusher: Callable[[Log], None] | None
    _lock: threading.Lock
    _flush_lock: threading.Lock
    _listeners: LogListeners
    _view: LogView
    _closed: bool
    _offline_reason: str | None
    _next_offset: int
    _flushed_offset: int
    _unflushed_messages: int
    _first_unflushed_ms: int | None
    _flush_requested_offset: int
    _dir_dirty: bool
    _new_segment_unsynced: bool
    _epochs: LeaderEpochCache
    _replicated: bool
    _replicated_hw: int | None

    if TYPE_CHECKING:

        def _check_writable(self) -> None: ...

        @staticmethod
        def _hw_at(view: LogView, offset: int) -> tuple[int, Segment, int]: ...

    def flush(self) -> int:
        """fsync everything appended so far; returns the new flushed offset.

        In ``expose = "flushed"`` mode this is what advances the high watermark (up to the replicated
        high watermark while replication is on).
        """
        with self._flush_lock:
            return self._flush_locked()

    def _flush_locked(self) -> int:
        with self._lock:
            self._check_writable()
            target = self._next_offset
            if target == self._flushed_offset and not self._dir_dirty:
                return target
            messages = self._unflushed_messages
            view = self._view
            first = max(bisect_right(view.base_offsets, self._flushed_offset) - 1, 0)
            to_flush = view.segments[first:]
            end_segment = view.segments[-1]
            end_position = view.end_position
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            # a leader-epoch checkpoint written since the log was made fsynced the folder already
            new_segment_unsynced = self._new_segment_unsynced and not self._epochs.folder_synced
            self._new_segment_unsynced = False
        try:
            for segment in to_flush:
                segment.flush()
            if dir_dirty or new_segment_unsynced:
                fsync_dir(self._dir)
        except LogStorageError as exc:
            with self._lock:
                self._offline_reason = str(exc)
            logger.error("%s: log is offline after a failed flush: %s", self._where, exc)  # noqa: TRY400
            raise
        now = self._clock()
        with self._lock:
            self._flushed_offset = max(self._flushed_offset, target)
            self._unflushed_messages -= messages
            self._first_unflushed_ms = now if self._unflushed_messages > 0 else None
            view = self._view
            if self._config.expose == "flushed" and target > view.high_watermark:
                replicated_hw = self._replicated_hw if self._replicated else None
                if replicated_hw is None or target <= replicated_hw:
                    self._view = view._replace(
                        high_watermark=target, hw_segment=end_segment, hw_position=end_position
                    )
                elif replicated_hw > view.high_watermark:
                    high_watermark, hw_segment, hw_position = self._hw_at(view, replicated_hw)
                    self._view = view._replace(
                        high_watermark=high_watermark, hw_segment=hw_segment, hw_position=hw_position
                    )
            published = self._view.high_watermark
        # Listeners hear of every flush, not only of high-watermark advances: acks=-1 producers with
        # ``flush_on_ack`` wait for the flush even when ``expose = "appended"`` moved the high watermark.
        self._listeners.publish(published)
        return target

    def request_flush(self, offset: int) -> bool:
        """Ask for every offset below ``offset`` to be fsynced now (group commit, see the module docstring);
        True when it already is. The caller waits for the flush through a listener."""
        with self._lock:
            if self._flushed_offset >= offset:
                return True
            self._flush_requested_offset = max(self._flush_requested_offset, offset)
        if self._wake_flusher is not None:
            self._wake_flusher(cast("Log", self))
        else:
            self.flush()
        return False

    def flush_pending(self) -> bool:
        """Whether the log has unflushed messages, or a flush requested, that a flush would write (not
        when it is closed or offline: a flush then does nothing)."""
        return (
            (self._unflushed_messages > 0 or self.flush_requested)
            and not self._closed
            and self._offline_reason is None
        )

    @property
    def flush_requested(self) -> bool:
        """Whether a waiter asked for offsets that are not flushed yet (:meth:`request_flush`)."""
        return self._flush_requested_offset > self._flushed_offset

    def flush_due(self, now_ms: int) -> bool:
        """Whether the flush policy (M messages or S milliseconds) or a waiter asks for a flush now."""
        if self._unflushed_messages <= 0 or self._closed or self._offline_reason is not None:
            return False
        if self._flush_requested_offset > self._flushed_offset:
            return True
        if self._unflushed_messages >= self._config.flush_messages:
            return True
        first = self._first_unflushed_ms
        return first is not None and now_ms - first >= self._config.flush_ms

    def next_flush_deadline_ms(self) -> int | None:
        """When the oldest unflushed message reaches ``flush_ms`` (None when all is flushed)."""
        first = self._first_unflushed_ms
        if first is None or self._unflushed_messages <= 0:
            return None
        return first + self._config.flush_ms
