"""One partition's log: a sorted, copy-on-write list of segments (paper section 3.1, "Simple storage").

Appends go to the last (active) segment, after :mod:`broker.log.log_validator` accepted them; the log
rolls to a new segment at ``segment_bytes`` or ``segment_ms``. Offsets are logical and consecutive: an
append assigns them by rewriting each batch's base offset, never re-encoding records. Reads return a
:class:`~broker.log.file_region.FileRegion` of whole batches for ``sendfile``.

Offsets a log maintains::

    log_start_offset <= high_watermark <= log_end_offset        flushed_offset <= log_end_offset

* ``log_start_offset``: base offset of the first segment (moves up when retention deletes segments);
* ``log_end_offset``: the offset the next appended record gets;
* ``flushed_offset``: every offset below it is fsynced (the recovery point);
* ``high_watermark``: every offset below it is exposed to readers. With ``expose = "flushed"`` (the
  paper's semantics: "a message is only exposed to the consumers after it is flushed") it is the flushed
  offset; with ``expose = "appended"`` it is the log end offset. That is the *exposure point*.

Replication (issue 19, Kafka's ``UnifiedLog``):

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
* **Truncation** (:meth:`Log.truncate_to`, :meth:`Log.truncate_fully_and_start_at`): a follower drops
  what the leader does not have. Whole batches go, as in Kafka's ``LogSegment.truncateTo``.

Flushes (the paper's M and S policy, and group commit for ``[log] flush_on_ack``) are
:mod:`broker.log.log_flush`'s, mixed into :class:`Log`.

Idempotent producers (KIP-98): the log owns the partition's
:class:`~broker.log.producer_state.ProducerStateManager`. Under the append lock, before anything is
written, every batch with a producer id is checked against it (a duplicate is not appended and its
original offsets are answered; a gap or a fenced epoch refuses the whole append), and the state is updated
as the batches get their offsets, so that check and append are one atomic step per partition. The state is
snapshotted when a segment rolls and at a clean close, and rebuilt at load from the newest valid snapshot
and the batches after it. Retention deletes whole segments (:mod:`broker.log.retention`), only with
``delete`` in the log's ``cleanup_policy``; with ``compact`` the log cleaner (:mod:`broker.log.log_cleaner`)
rewrites segments below the active one and :meth:`Log.replace_segments` swaps them in (offsets, and so
the producer state, its snapshots and the leader epochs, stay valid: cleaning only leaves gaps, which
readers and followers step over: a read finds the first batch at or after its offset).

Concurrency: one lock (the append lock) serialises appends, rolls, retention, truncation and every
change of the replicated high watermark and of the leader epochs; flushes are serialised by a second lock
and fsync outside the first, so appends continue during an fsync. Truncation takes both (the flush lock
first), so that no flush captures segments or offsets that a truncation then removes.
``flush_requested_offset`` only grows (but for truncation), under the first lock; the flusher reads it
without one (a stale read at worst delays a flush to the flusher's next turn, which the request's own
wake-up starts). Readers take no lock: every change
publishes a new immutable :class:`~broker.log.log_view.LogView`, and a reader uses the view it read once
(that module says why this is safe). Listeners hear of changes after the lock is released
(:mod:`broker.log.log_listeners`); end listeners hear of every append's new log end.

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
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from broker.clock import Clock, system_clock_ms
from broker.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogConfig
from broker.log.errors import CorruptIndexError, LogClosedError, LogStorageError, UnexpectedAppendOffsetError
from broker.log.file_handle import fsync_dir
from broker.log.file_names import deleted_partition_dir_name, parse_partition_dir_name
from broker.log.file_region import FileRegion
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_flush import LogFlush
from broker.log.log_listeners import EndOffsetListener, HighWatermarkListener, LogListeners
from broker.log.log_validator import ValidatedAppend, validate_append
from broker.log.log_view import LogView
from broker.log.producer_state import ProducerStateManager
from broker.log.recovery import RecoveryResult, load_segments
from broker.log.retention import segments_past_retention
from broker.log.segment import Segment
from broker.log.segment_swap import commit_swap, finish_swap
from broker.record.batch_header import NO_PRODUCER_ID
from broker.record.errors import CorruptRecordError, InvalidTopicError
from broker.record.record_batch import RecordBatch
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview
#: ``guard(log, offset)``: a context entered around a truncation of ``log`` (see Log.set_truncation_guard).
TruncationGuard = Callable[["Log", int], AbstractContextManager[None]]

#: A follower accepts batches of any size: the leader accepted them (Kafka's ``ignoreRecordSize``).
_NO_SIZE_LIMIT = sys.maxsize


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did: the offsets it assigned and what it wrote."""

    first_offset: int
    last_offset: int
    #: The largest record timestamp among the appended batches (-1 when none had one).
    max_timestamp_ms: int
    record_count: int
    batch_count: int
    size_bytes: int
    #: True when every batch was a retry of an appended one: nothing was written, and the offsets are
    #: the original batch's (an idempotent producer's duplicate).
    duplicate: bool = False


class Log(LogFlush):
    """One partition's log in ``directory`` (named ``<topic>-<partition>``). Thread-safe."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        clock: Clock = system_clock_ms,
        wake_flusher: Callable[[Log], None] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        replicated_high_watermark: int | None = None,
    ) -> None:
        tp = parse_partition_dir_name(directory.name)
        if tp is None:
            raise InvalidTopicError(f"{directory}: a partition folder is named <topic>-<partition>")
        self._dir = directory
        self._tp = tp
        self._where = str(tp)
        self._config = config
        self._clock = clock
        self._wake_flusher = wake_flusher
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._listeners = LogListeners(tp)
        self._closed = False
        self._offline_reason: str | None = None
        segments, self._recovery = load_segments(
            directory,
            where=self._where,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
            index_interval_bytes=config.index_interval_bytes,
            now_ms=clock(),
        )
        active = segments[-1]
        end = active.next_offset
        self._next_offset = end
        self._flushed_offset = end  # load_segments fsynced whatever it validated
        self._unflushed_messages = 0
        self._first_unflushed_ms: int | None = None
        self._flush_requested_offset = 0
        self._dir_dirty = False
        self._view = LogView(
            segments=tuple(segments),
            base_offsets=tuple(s.base_offset for s in segments),
            log_end_offset=end,
            end_position=active.size_bytes,
            high_watermark=end,
            hw_segment=active,
            hw_position=active.size_bytes,
        )
        self._producers = ProducerStateManager(
            directory, where=self._where, producer_id_expiration_ms=producer_id_expiration_ms
        )
        self._producers.rebuild(self._view.segments, self._view.log_end_offset, clock())
        self._epochs = LeaderEpochCache.load(
            directory, where=self._where, batch_epochs=lambda: _batch_epochs(segments)
        )
        self._epochs.truncate_from_end(end)
        self._epochs.truncate_from_start(segments[0].base_offset)
        #: Whether the exposed high watermark is capped by the replicated one (see the module docstring).
        self._replicated = False
        #: The replicated high watermark (a batch boundary), or None while the log has none.
        self._replicated_hw: int | None = None
        if replicated_high_watermark is not None:
            self._replicated_hw = self._hw_at(self._view, min(max(replicated_high_watermark, 0), end))[0]
        #: Entered around every truncation: the log cleaner's abort-and-pause (see set_truncation_guard).
        self._truncation_guard: TruncationGuard = _no_guard
        #: What an append reads to know whether the high watermark follows the log end (the one attribute
        #: the hot path reads for exposure: ``expose = "appended"`` and replication off).
        self._hw_follows_appends = config.expose == "appended"

    # ------------------------------------------------------------------------------------ properties

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (a topic's configs changed): the next append, roll, flush, retention
        pass and cleaning read it. One reference swap; a reader mid-operation finishes with the old one."""
        self._config = config

    def set_truncation_guard(self, guard: TruncationGuard) -> None:
        """Enter ``guard(log, offset)`` around every truncation (``offset`` -1 for a full one), before the
        log's locks: the :class:`~broker.log.log_manager.LogManager` stops and pauses the log cleaner on
        this log meanwhile (Kafka's ``abortAndPauseCleaning``)."""
        self._truncation_guard = guard

    @property
    def recovery_result(self) -> RecoveryResult:
        """What loading (and recovery, after an unclean shutdown) did to this partition's folder."""
        return self._recovery

    @property
    def log_start_offset(self) -> int:
        return self._view.base_offsets[0]

    @property
    def log_end_offset(self) -> int:
        return self._view.log_end_offset

    @property
    def high_watermark(self) -> int:
        """The exposed end: readers see offsets below it (see the module docstring)."""
        return self._view.high_watermark

    @property
    def flushed_offset(self) -> int:
        """Every offset below it is on disk: the recovery point."""
        return self._flushed_offset

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._view.segments

    @property
    def size_bytes(self) -> int:
        view = self._view
        return sum(s.size_bytes for s in view.segments[:-1]) + view.end_position

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producers' state (read it only while no append runs: tests and tools)."""
        return self._producers

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

    # ------------------------------------------------------------------------------------ append

    def append(self, batches: Buffer, *, leader_epoch: int = -1) -> AppendInfo:
        """Validate the batches (one call of :func:`~broker.log.log_validator.validate_append`), then append
        them all with offsets assigned from the log end offset.

        With ``leader_epoch >= 0`` (a leader's append) every batch is written with its
        ``partitionLeaderEpoch`` set to it, and the leader epoch cache records it at the first offset;
        ``-1`` writes the epoch each batch carried.

        The whole request is rejected, with nothing written, if any batch is invalid:
        :class:`CorruptRecordError` (magic, lengths, CRC, record framing, a partial batch at the end),
        :class:`RecordTooLargeError`, :class:`InvalidRecordError` (no batch, record count not matching the
        offset range or the records, a control batch),
        :class:`~broker.log.errors.OutOfOrderSequenceError` and
        :class:`~broker.log.errors.InvalidProducerEpochError` (an idempotent producer's sequence gap or
        fenced epoch). A batch an idempotent producer already appended is not appended again: when every
        batch is such a retry, the result has ``duplicate`` set and the original batch's offsets.
        :class:`LogStorageError` on an I/O error, after which the log is offline until the broker restarts
        (and recovers it).
        """
        config = self._config
        validated = validate_append(
            batches,
            where=f"{self._where} append",
            max_message_bytes=config.max_message_bytes,
            validate_records=config.validate_records,
            compacted="compact" in config.cleanup_policy,
        )
        return self._append_validated(validated, leader_epoch, False)

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

    def _append_validated(self, validated: ValidatedAppend, leader_epoch: int, follower: bool) -> AppendInfo:
        """The append of :meth:`append` (``follower`` False) and :meth:`append_as_follower` (True)."""
        record_count, max_timestamp_ms = validated.record_count, validated.max_timestamp_ms

        config = self._config
        to_append = validated.batches
        idempotent = any(batch.producer_id != NO_PRODUCER_ID for batch in to_append)
        with self._lock:
            self._check_writable()
            if follower:
                first_base = to_append[0].base_offset
                if first_base < self._next_offset:
                    raise UnexpectedAppendOffsetError(
                        self._where, self._next_offset, first_base, batch_index=0
                    )
                self._assign_batch_epochs(to_append)
            elif idempotent:
                duplicate, to_append = self._producers.prepare().check_batches(to_append, self._next_offset)
                if duplicate is not None and not to_append:
                    return AppendInfo(
                        first_offset=duplicate.first_offset,
                        last_offset=duplicate.last_offset,
                        max_timestamp_ms=duplicate.timestamp_ms,
                        record_count=0,
                        batch_count=0,
                        size_bytes=0,
                        duplicate=True,
                    )
                if duplicate is not None:
                    record_count = sum(b.record_count for b in to_append)
                    max_timestamp_ms = max(b.max_timestamp_ms for b in to_append)
            if leader_epoch >= 0:
                # before any byte of the epoch is written: the checkpoint is never behind the log
                self._epochs.assign(leader_epoch, self._next_offset)
            hw_follows_appends = self._hw_follows_appends
            update_producer = self._producers.update
            now = self._clock()
            view = self._view
            segments = view.segments
            active = segments[-1]
            offset = self._next_offset
            first_offset = to_append[0].base_offset if follower else offset
            pending: list[RecordBatch] = []
            pending_bases: list[int] = []
            pending_bytes = 0
            try:
                for batch in to_append:
                    end = offset  # where a roll starts the next segment: segments stay contiguous
                    if follower:
                        offset = batch.base_offset  # the leader's offsets, gaps included
                    last_offset = offset + batch.last_offset_delta
                    if active.should_roll(
                        batch.size_bytes,
                        batch.max_timestamp_ms,
                        last_offset,
                        now,
                        segment_bytes=config.segment_bytes,
                        segment_ms=config.segment_ms,
                        pending_bytes=pending_bytes,
                    ):
                        if pending:
                            active.append(pending, pending_bases, leader_epoch)
                            pending, pending_bases, pending_bytes = [], [], 0
                        active = self._roll(active, end, now)
                        segments = (*segments, active)
                    pending.append(batch)
                    pending_bases.append(offset)
                    pending_bytes += batch.size_bytes
                    if idempotent:
                        update_producer(
                            batch.producer_id,
                            batch.producer_epoch,
                            batch.base_sequence,
                            offset,
                            last_offset,
                            batch.max_timestamp_ms,
                            now,
                        )
                    offset = last_offset + 1
                active.append(pending, pending_bases, leader_epoch)
            except LogStorageError as exc:
                self._offline_reason = str(exc)
                logger.error("%s: log is offline after a failed append: %s", self._where, exc)  # noqa: TRY400
                raise
            self._next_offset = offset
            self._unflushed_messages += record_count
            new_deadline = self._first_unflushed_ms is None
            if new_deadline:
                self._first_unflushed_ms = now
            if hw_follows_appends:
                high_watermark, hw_segment, hw_position = offset, active, active.size_bytes
            else:
                high_watermark, hw_segment, hw_position = (
                    view.high_watermark,
                    view.hw_segment,
                    view.hw_position,
                )
            self._view = LogView(
                segments=segments,
                base_offsets=view.base_offsets
                if segments is view.segments
                else tuple(s.base_offset for s in segments),
                log_end_offset=offset,
                end_position=active.size_bytes,
                high_watermark=high_watermark,
                hw_segment=hw_segment,
                hw_position=hw_position,
            )
            flush_due = self._unflushed_messages >= config.flush_messages
        listeners = self._listeners
        if hw_follows_appends:
            listeners.publish(offset)
        if listeners.end_listeners:
            listeners.publish_end(offset)
        if self._wake_flusher is not None:
            if flush_due or new_deadline:
                self._wake_flusher(self)
        elif flush_due:
            self.flush()
        return AppendInfo(
            first_offset=first_offset,
            last_offset=offset - 1,
            max_timestamp_ms=max_timestamp_ms,
            record_count=record_count,
            batch_count=len(to_append),
            size_bytes=validated.size_bytes
            if to_append is validated.batches
            else sum(b.size_bytes for b in to_append),
        )

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

    def _roll(self, active: Segment, base_offset: int, now_ms: int) -> Segment:
        """Close off ``active``, snapshot the producer state as of ``base_offset``, and start a segment
        there (caller holds the lock, and the producer state holds every batch below ``base_offset``)."""
        active.on_become_inactive()
        self._producers.take_snapshot(base_offset)
        segment = Segment.create(
            self._dir, base_offset, index_interval_bytes=self._config.index_interval_bytes, now_ms=now_ms
        )
        self._dir_dirty = True
        logger.info("%s: rolled to a new segment at offset %d", self._where, base_offset)
        return segment

    def roll(self) -> None:
        """Start a new segment now (if the active one holds any batch)."""
        with self._lock:
            self._check_writable()
            view = self._view
            active = view.segments[-1]
            if active.size_bytes == 0:
                return
            try:
                segment = self._roll(active, self._next_offset, self._clock())
            except LogStorageError as exc:
                self._offline_reason = str(exc)
                raise
            # The high watermark keeps pointing into the old segment, at or before its end.
            self._view = view._replace(
                segments=(*view.segments, segment),
                base_offsets=(*view.base_offsets, segment.base_offset),
                end_position=0,
            )

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self._where}: the log is closed")
        if self._offline_reason is not None:
            raise LogStorageError(
                f"{self._where}: the log is offline after an I/O error ({self._offline_reason}); "
                "restart the broker to recover it"
            )

    # ------------------------------------------------------------------------------------ listeners

    def add_listener(self, listener: HighWatermarkListener) -> None:
        """Call ``listener(topic_partition, high_watermark)`` after every advance of the high watermark
        and after every flush (:mod:`broker.log.log_listeners`)."""
        self._listeners.add(listener)

    def remove_listener(self, listener: HighWatermarkListener) -> None:
        self._listeners.remove(listener)

    def wait_for_flushed(self, offset: int, timeout_s: float) -> bool:
        """Wait until every offset below ``offset`` is flushed; False on timeout or close."""
        return self._listeners.wait(lambda: self._flushed_offset >= offset, lambda: self._closed, timeout_s)

    def wait_for_high_watermark(self, offset: int, timeout_s: float) -> bool:
        """Wait until the high watermark reaches ``offset``; False on timeout or close."""
        return self._listeners.wait(
            lambda: self._view.high_watermark >= offset, lambda: self._closed, timeout_s
        )

    def add_end_listener(self, listener: EndOffsetListener) -> None:
        """Call ``listener(topic_partition, log_end_offset)`` after every append (a leader's delayed
        follower fetches wait for the log end to move). Costs an append nothing while none is registered."""
        self._listeners.add_end(listener)

    def remove_end_listener(self, listener: EndOffsetListener) -> None:
        self._listeners.remove_end(listener)

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

    # ------------------------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> FileRegion | None:
        """Whole batches from the one holding ``offset``: at least one, then as many as fit ``max_bytes``.

        Only offsets below ``max_offset`` are read; by default the high watermark (pass
        ``log_end_offset`` to read unexposed data too). Returns None when there is nothing to read
        there yet (``offset`` at or past that limit). Raises :class:`OffsetOutOfRangeError` for an
        offset outside ``[log_start_offset, log_end_offset]``. The region never spans two segments.
        """
        view = self._view
        if self._closed or not view.segments:
            raise LogClosedError(f"{self._where}: the log is closed")
        return view.read(offset, max_bytes, max_offset, self._where)

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first exposed offset whose record timestamp is >= ``timestamp_ms``, via the time indexes."""
        view = self._view
        if self._closed or not view.segments:
            raise LogClosedError(f"{self._where}: the log is closed")
        return view.offset_for_timestamp(timestamp_ms)

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
        with self._truncation_guard(self, offset), self._flush_lock, self._lock:
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
        with self._truncation_guard(self, -1), self._flush_lock, self._lock:
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

    def last_offsets_of_producers(self) -> dict[int, int]:
        """Each idempotent producer's last appended offset (the cleaner keeps the batch ending there)."""
        with self._lock:
            return {
                pid: entry.batches[-1].last_offset
                for pid, entry in self._producers.producers.items()
                if entry.batches
            }

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget the idempotent producers whose last batch is ``producer_id_expiration_ms`` old."""
        now = self._clock() if now_ms is None else now_ms
        with self._lock:
            if self._closed:
                return []
            return self._producers.remove_expired_producers(now)

    # ------------------------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush, record the active segment's max timestamp, close every file. Idempotent.

        Raises :class:`LogStorageError` when the log could not be flushed (or was offline): the caller must
        then not mark the shutdown clean, so that recovery checks the log at the next start.
        """
        with self._flush_lock:
            if self._closed:
                return
            failure: LogStorageError | None = None
            if self._offline_reason is None:
                try:
                    self._flush_locked()
                except LogStorageError as exc:
                    failure = exc
            else:
                failure = LogStorageError(f"{self._where}: closed while offline ({self._offline_reason})")
            with self._lock:
                self._closed = True
                segments = self._view.segments
                if self._offline_reason is None and segments:
                    active = segments[-1]
                    try:
                        active.on_become_inactive()
                        active.time_index.flush()
                        if failure is None:
                            self._producers.take_snapshot(self._next_offset)
                    except LogStorageError as exc:
                        failure = failure or exc
                for segment in segments:
                    segment.close()
        self._listeners.wake()
        if failure is not None:
            raise failure

    def delete(self) -> None:
        """Remove the partition: rename its folder to ``<name>.<uuid>-delete``, then delete it.

        Readers still holding regions finish them (the descriptors stay open until the regions go).
        """
        with self._flush_lock, self._lock:
            self._closed = True
            segments = self._view.segments
            for segment in segments:
                segment.offset_index.close()
                segment.time_index.close()
            doomed = self._dir.parent / deleted_partition_dir_name(self._tp)
            try:
                self._dir.rename(doomed)
                fsync_dir(self._dir.parent)
            except OSError as exc:
                raise LogStorageError(
                    f"{self._dir}: cannot rename to {doomed.name} for deletion: {exc}"
                ) from exc
        self._listeners.wake()
        try:
            shutil.rmtree(doomed)
        except OSError as exc:
            raise LogStorageError(f"{doomed}: cannot delete: {exc}") from exc
        logger.info("%s: deleted the partition's log", self._where)

    def __repr__(self) -> str:
        view = self._view
        return (
            f"Log({self._where}, log_start_offset={view.base_offsets[0] if view.base_offsets else None}, "
            f"high_watermark={view.high_watermark}, log_end_offset={view.log_end_offset}, "
            f"segments={len(view.segments)})"
        )


@contextmanager
def _no_guard(_log: Log, _offset: int) -> Iterator[None]:
    yield


def _batch_epochs(segments: list[Segment]) -> Iterator[tuple[int, int]]:
    """``(partitionLeaderEpoch, base_offset)`` of every batch of ``segments``, in offset order (what a
    torn leader-epoch checkpoint is rebuilt from)."""
    for segment in segments:
        for header in segment.batch_headers(segment.base_offset, segment.size_bytes):
            yield header[2], header[0]
