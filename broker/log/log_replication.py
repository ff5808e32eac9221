"""Replication in a partition's log (issue 19, Kafka's ``UnifiedLog``), mixed into
:class:`~broker.log.log.Log` (its state lives there; these methods are the part of ``Log`` that
replicates):

* **The replicated high watermark.** While :meth:`Log.set_replicated` is on (a partition with more than
  one replica), the exposed high watermark is ``min(exposure point, replicated high watermark)``; the
  replicated high watermark is the ISR's lowest log end, which the server reports through
  :meth:`Log.update_replicated_high_watermark` (it only moves up, except by truncation and
  :meth:`Log.reset_replicated_high_watermark`). It always lies at a batch boundary (an offset inside a
  batch is rounded down to that batch's base offset); its byte position is found with
  :meth:`~broker.log.segment.Segment.position_of`. While off, nothing of this runs: an append computes
  the high watermark as before. The :class:`~broker.log.log_manager.LogManager` keeps it in
  ``replication-offset-checkpoint`` and hands it back at load (``replicated_high_watermark``, capped at
  the log end).
* **Leader epochs.** ``append(batches, leader_epoch=E)`` (a leader, ``E >= 0``) stamps ``E`` into bytes
  12..15 of every batch (``partitionLeaderEpoch``, not under the CRC) where it rewrites the base offset,
  and records ``E`` at the first offset in the :class:`~broker.log.leader_epoch_cache.LeaderEpochCache`
  *before* writing; ``leader_epoch=-1`` writes the bytes the batch carried, exactly as before.
  :meth:`Log.append_as_follower` writes a leader's batches unchanged (same offsets, same bytes) and
  records each new epoch they carry, also before writing.
* **The follower's append** (:meth:`Log.append_as_follower`): a leader's batches as they are, at the
  leader's offsets, gaps included.

Concurrency (the rules of :mod:`broker.log.log`): the replicated high watermark, the switch and the leader
epochs change under the append lock ``_lock``; every change that moves the exposed high watermark
publishes a new :class:`~broker.log.log_view.LogView` under it, and the listeners hear of it after the lock
is released.
"""

from __future__ import annotations

import logging
import sys
import threading
from bisect import bisect_right
from typing import TYPE_CHECKING

from broker.config import LogConfig
from broker.log.errors import UnexpectedAppendOffsetError
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_listeners import LogListeners
from broker.log.log_validator import ValidatedAppend, validate_append
from broker.log.log_view import LogView
from broker.record.record_batch import RecordBatch

if TYPE_CHECKING:
    from broker.log.append_info import AppendInfo
    from broker.log.log import Buffer
    from broker.log.segment import Segment

logger = logging.getLogger(__name__)

#: A follower accepts batches of any size: the leader accepted them (Kafka's ``ignoreRecordSize``).
_NO_SIZE_LIMIT = sys.maxsize


class LogReplication:
    """The replicating part of :class:`~broker.log.log.Log` (see the module docstring)."""

    # The log's state these methods use (set by Log.__init__).
    _where: str
    _config: LogConfig
    _lock: threading.Lock
    _listeners: LogListeners
    _view: LogView
    _next_offset: int
    _flushed_offset: int
    _epochs: LeaderEpochCache
    _replicated: bool
    _replicated_hw: int | None
    _hw_follows_appends: bool

    if TYPE_CHECKING:

        def _append_validated(
            self, validated: ValidatedAppend, leader_epoch: int, follower: bool
        ) -> AppendInfo: ...

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The leader epochs (read it freely; only the log changes it)."""
        return self._epochs

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch recorded in the log (-1 when none)."""
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for a requested leader epoch, Kafka's ``endOffsetForEpoch``
        (:meth:`~broker.log.leader_epoch_cache.LeaderEpochCache.end_offset_for` with this log's end);
        ``(-1, -1)`` when undefined."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._next_offset)

    @property
    def replicated(self) -> bool:
        return self._replicated

    @property
    def replicated_high_watermark(self) -> int | None:
        """The replicated high watermark (None while the log has none: replication off and none loaded)."""
        return self._replicated_hw

    def append_as_follower(self, batches: Buffer) -> AppendInfo:
        """Append a leader's batches unchanged: same offsets, same bytes (Kafka's ``appendAsFollower``).

        Checks framing and CRC (the validator's steps 2 and 3; not the size limit, and not the records,
        which the leader checked: the CRC proves they are its bytes), then that the first batch starts at
        or after ``log_end_offset`` and each following batch at or after the previous one's next offset
        (a leader's cleaned log has gaps: :mod:`broker.log.log_cleaner`), else
        :class:`~broker.log.errors.UnexpectedAppendOffsetError` with nothing written. The idempotent
        producers' state is updated from the batches without any duplicate or sequence check (the
        leader decided), and every epoch above the latest one is recorded in the leader epoch cache at its
        batch's base offset. Rolls segments like :meth:`append`; raises as it does otherwise.
        """
        validated = validate_append(
            batches,
            where=f"{self._where} follower append",
            max_message_bytes=_NO_SIZE_LIMIT,
            from_leader=True,
        )
        previous = validated.batches[0]
        for index, batch in enumerate(validated.batches[1:], start=1):
            if batch.base_offset < previous.next_offset:
                raise UnexpectedAppendOffsetError(
                    self._where, previous.next_offset, batch.base_offset, batch_index=index
                )
            previous = batch
        return self._append_validated(validated, -1, True)

    def _assign_batch_epochs(self, batches: tuple[RecordBatch, ...]) -> None:
        """Record in the leader epoch cache every epoch of ``batches`` above the latest one, at its batch's
        base offset (a follower's append; caller holds the lock, before the batches are written)."""
        epochs = self._epochs
        latest = epochs.latest_epoch
        for batch in batches:
            epoch = batch.partition_leader_epoch
            if epoch > latest:
                epochs.assign(epoch, batch.base_offset)
                latest = epoch

    # ------------------------------------------------------------------------------------ replication

    def set_replicated(self, on: bool) -> None:
        """Turn the replicated high watermark on (the partition has more than one replica) or off.

        Turning it on starts from the loaded ``replicated_high_watermark``, else from the high watermark
        exposed now; the exposed high watermark becomes ``min(exposure point, replicated high watermark)``
        (it may move down: a new follower exposes only what the leader said is replicated). Turning it
        off forgets the replicated high watermark and exposes the exposure point again.
        """
        with self._lock:
            if on == self._replicated:
                return
            view = self._view
            self._replicated = on
            self._hw_follows_appends = not on and self._config.expose == "appended"
            if on:
                if self._replicated_hw is None:
                    self._replicated_hw = view.high_watermark
            else:
                self._replicated_hw = None
            self._view = self._with_exposed_hw(self._view)
            advanced = self._view.high_watermark > view.high_watermark
            high_watermark = self._view.high_watermark
        logger.info(
            "%s: replication %s; high watermark %d", self._where, "on" if on else "off", high_watermark
        )
        if advanced:
            self._listeners.publish(high_watermark)

    def update_replicated_high_watermark(self, offset: int) -> bool:
        """Move the replicated high watermark up to ``offset`` (capped at the log end, rounded down to a
        batch boundary); a lower offset is ignored. Returns whether the exposed high watermark advanced.
        The listeners hear of every advance of the replicated high watermark, exposed or not: an
        ``acks=all`` produce waits for the in-sync replicas, never for the flush that exposes its batches
        (``expose = "flushed"``). While replication is off the value is only recorded (and checkpointed):
        it caps the exposed high watermark once :meth:`set_replicated` turns it on."""
        with self._lock:
            view = self._view
            current = self._replicated_hw
            if current is not None and offset <= current:
                return False
            candidate = self._hw_at(view, min(offset, view.log_end_offset))[0]
            if current is not None and candidate <= current:
                return False
            self._replicated_hw = candidate
            if not self._replicated:
                return False
            new_view = self._with_exposed_hw(view)
            advanced = new_view.high_watermark > view.high_watermark
            if advanced:
                self._view = new_view
        self._listeners.publish(new_view.high_watermark if advanced else view.high_watermark)
        return advanced

    def reset_replicated_high_watermark(self, offset: int) -> None:
        """Set the replicated high watermark to ``offset`` (capped at the log end, rounded down to a batch
        boundary), down as well as up: a follower takes the leader's, a new leader starts from its own.
        The exposed high watermark follows when replication is on."""
        with self._lock:
            view = self._view
            self._replicated_hw = self._hw_at(view, min(max(offset, 0), view.log_end_offset))[0]
            if not self._replicated:
                return
            self._view = self._with_exposed_hw(view)
            advanced = self._view.high_watermark > view.high_watermark
            high_watermark = self._view.high_watermark
        if advanced:
            self._listeners.publish(high_watermark)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader's epoch starts at ``start_offset``, its log end, before any append in it (Kafka's
        ``maybeAssignEpochStartOffset``): a follower asking where an older epoch ends gets the point from
        which this leader's log may differ from its own."""
        with self._lock:
            self._epochs.assign(epoch, start_offset)

    def _with_exposed_hw(self, view: LogView) -> LogView:
        """``view`` with the high watermark the log's state exposes: the exposure point, capped by the
        replicated high watermark while replication is on (caller holds the lock)."""
        end = view.log_end_offset
        exposed = end if self._config.expose == "appended" else min(self._flushed_offset, end)
        if self._replicated and self._replicated_hw is not None:
            exposed = min(exposed, self._replicated_hw)
        high_watermark, segment, position = self._hw_at(view, exposed)
        return view._replace(high_watermark=high_watermark, hw_segment=segment, hw_position=position)

    @staticmethod
    def _hw_at(view: LogView, offset: int) -> tuple[int, Segment, int]:
        """``(offset, segment, position)`` of the batch boundary at or below ``offset`` in ``view``: the
        segment and byte position where reads exposed up to that offset stop."""
        segments = view.segments
        last = len(segments) - 1
        if offset >= view.log_end_offset:
            return view.log_end_offset, segments[last], view.end_position
        i = max(bisect_right(view.base_offsets, offset) - 1, 0)
        segment = segments[i]
        max_position = view.end_position if i == last else segment.size_bytes
        found = segment.position_of(offset, max_position)
        if found is None:
            return offset, segment, max_position
        position, base_offset = found[0], found[1]
        return min(offset, base_offset), segment, position
