"""One partition's log: a sorted, copy-on-write list of segments (paper section 3.1, "Simple storage").

Appends go to the last (active) segment, after :mod:`broker.log.log_validator` accepted them; the log
rolls to a new segment at ``segment_bytes`` or ``segment_ms``. Offsets are logical and consecutive: an
append assigns them by rewriting each batch's base offset, never re-encoding records (a topic's
``compression.type`` recompresses a batch before, in the validator). Reads return a
:class:`~broker.log.file_region.FileRegion` of whole batches for ``sendfile``.

Offsets a log maintains::

    log_start_offset <= high_watermark <= log_end_offset        flushed_offset <= log_end_offset

* ``log_start_offset``: base offset of the first segment (moves up when retention deletes segments), or
  past it where DeleteRecords raised it (:meth:`~broker.log.log_cleanup.LogCleanup.delete_records_before`);
* ``log_end_offset``: the offset the next appended record gets;
* ``flushed_offset``: every offset below it is fsynced (the recovery point);
* ``high_watermark``: every offset below it is exposed to readers. With ``expose = "appended"`` (the
  default, Kafka's rule) it is the log end offset; with ``expose = "flushed"`` (the paper's semantics: "a
  message is only exposed to the consumers after it is flushed", for single-copy deployments) it is the
  flushed offset. That is the *exposure point*; a replicated partition caps it by the replicated high
  watermark (:mod:`broker.log.log_replication`).

Layout: :class:`Log` is one class, its methods grouped by concept in mixins beside this module; its state
lives here (set in ``Log.__init__``, under the concurrency rules below) and each mixin lists the
attributes it uses:

* this module: loading, rolling, reading, the listeners, closing and deleting;
* :mod:`broker.log.log_append`: appending, a request at a time or several requests in one write;
* :mod:`broker.log.log_flush`: flushes (the paper's M and S policy, and group commit for ``[log]
  flush_on_ack``);
* :mod:`broker.log.log_replication`: the replicated high watermark, leader epochs and the follower's
  append (issue 19);
* :mod:`broker.log.log_truncation`: a follower's truncation, and why readers holding old views stay safe;
* :mod:`broker.log.log_cleanup`: what ``cleanup_policy`` does below the active segment (retention deletes
  segments, the log cleaner's segments are swapped in).

Idempotent producers (KIP-98): the log owns the partition's
:class:`~broker.log.producer_state.ProducerStateManager`. Under the append lock, before anything is
written, every batch with a producer id is checked against it (a duplicate is not appended and its
original offsets are answered; a gap or a fenced epoch refuses the whole append), and the state is updated
as the batches get their offsets, so that check and append are one atomic step per partition. The state is
snapshotted when a segment rolls and at a clean close, and rebuilt at load from the newest valid snapshot
and the batches after it (retention and cleaning keep it valid: :mod:`broker.log.log_cleanup`).

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
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from broker.clock import Clock, system_clock_ms
from broker.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogConfig
from broker.log.errors import LogClosedError, LogStorageError
from broker.log.file_handle import fsync_dir
from broker.log.file_names import deleted_partition_dir_name, parse_partition_dir_name
from broker.log.file_region import FileRegion
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_append import LogAppend
from broker.log.log_cleanup import LogCleanup
from broker.log.log_flush import LogFlush
from broker.log.log_listeners import EndOffsetListener, HighWatermarkListener, LogListeners
from broker.log.log_replication import LogReplication
from broker.log.log_truncation import LogTruncation, TruncationGuard, no_truncation_guard
from broker.log.log_view import LogView
from broker.log.producer_state import ProducerStateManager
from broker.log.recovery import RecoveryResult, load_segments
from broker.log.segment import Segment
from broker.record.errors import InvalidTopicError
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview


class Log(LogAppend, LogReplication, LogTruncation, LogCleanup, LogFlush):
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
        log_start_offset: int = 0,
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
        self._new_segment_unsynced = self._recovery.created_segment
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
        self._start_floor = min(log_start_offset, end)  # DeleteRecords' start (see log_start_offset)
        self._epochs.truncate_from_start(max(segments[0].base_offset, self._start_floor))
        #: Whether the exposed high watermark is capped by the replicated one (see the module docstring).
        self._replicated = False
        #: The replicated high watermark (a batch boundary), or None while the log has none.
        self._replicated_hw: int | None = None
        if replicated_high_watermark is not None:
            self._replicated_hw = self._hw_at(self._view, min(max(replicated_high_watermark, 0), end))[0]
        #: Entered around every truncation: the log cleaner's abort-and-pause (see set_truncation_guard).
        self._truncation_guard: TruncationGuard = no_truncation_guard
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

    @property
    def recovery_result(self) -> RecoveryResult:
        """What loading (and recovery, after an unclean shutdown) did to this partition's folder."""
        return self._recovery

    @property
    def log_start_offset(self) -> int:
        return max(self._view.base_offsets[0], self._start_floor)

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

    # ------------------------------------------------------------------------------------ append

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
        return view.read(offset, max_bytes, max_offset, self._where, self._start_floor)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first exposed offset whose record timestamp is >= ``timestamp_ms``, via the time indexes,
        with that record's timestamp."""
        view = self._view
        if self._closed or not view.segments:
            raise LogClosedError(f"{self._where}: the log is closed")
        found = view.offset_for_timestamp(timestamp_ms)
        return self._found_from_start(found, timestamp_ms)

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """The first exposed record with the log's largest timestamp, and that timestamp (ListOffsets -3)."""
        view = self._view
        if self._closed or not view.segments:
            raise LogClosedError(f"{self._where}: the log is closed")
        return view.offset_of_max_timestamp()

    # ------------------------------------------------------------------------------------ producers

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


def _batch_epochs(segments: list[Segment]) -> Iterator[tuple[int, int]]:
    """``(partitionLeaderEpoch, base_offset)`` of every batch of ``segments``, in offset order (what a
    torn leader-epoch checkpoint is rebuilt from)."""
    for segment in segments:
        for header in segment.batch_headers(segment.base_offset, segment.size_bytes):
            yield header[2], header[0]
