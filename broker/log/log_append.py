"""Appending to a partition's log, mixed into :class:`~broker.log.log.Log` (its state lives there; these
methods are the part of ``Log`` that appends).

An append is one producer request's batches (:meth:`LogAppend.append`) or a follower's
(:meth:`~broker.log.log_replication.LogReplication.append_as_follower`); :meth:`LogAppend.append_many`
appends several producer requests to one partition in one pass (the pipelined requests of one socket read,
issue 39), with the outcome of appending them one after the other:

1. each request is validated alone (:func:`~broker.log.log_validator.validate_append`, outside the lock); a
   request that fails gets its error and nothing of it is appended, the others go on;
2. under the append lock, request by request in order: the idempotent producers' batches are checked
   against the producer state as the requests before it left it (a gap or a fenced epoch refuses that
   request alone, a retry answers its original offsets), offsets are assigned from the log end, the leader
   epoch recorded, the producer state updated, and the segment rolls where a batch would not fit;
3. the batches of every request reach the active segment in one write (one ``writev``; a roll in the
   middle writes what precedes it first), then the new log end is published once, after that write, to the
   readers (a new :class:`~broker.log.log_view.LogView`) and the listeners.

Each request gets its own result: its :class:`~broker.log.append_info.AppendInfo` (its offset range) or its
error. A failed write (:class:`~broker.log.errors.LogStorageError`) fails them all: nothing of them was
acknowledged, and the log is offline until the broker restarts (and recovers it), as for one request.

Concurrency: the rules of :mod:`broker.log.log` (one append lock; readers use the view published last).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from broker.config import LogConfig
from broker.log.append_info import AppendInfo
from broker.log.errors import (
    InvalidProducerEpochError,
    LogError,
    LogStorageError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_listeners import LogListeners
from broker.log.log_validator import TARGET_CODECS, ValidatedAppend, validate_append
from broker.log.log_view import LogView
from broker.log.producer_state import ProducerStateManager
from broker.record.batch_header import NO_PRODUCER_ID
from broker.record.errors import RecordError
from broker.record.record_batch import RecordBatch

if TYPE_CHECKING:
    from broker.log.log import Buffer, Log
    from broker.log.segment import Segment

logger = logging.getLogger(__name__)

#: One request's outcome in :meth:`LogAppend.append_many`: what it appended, or why nothing.
AppendOutcome = AppendInfo | LogError | RecordError
#: The producer state's refusals of one request (the others of a group go on).
_PRODUCER_ERRORS = (OutOfOrderSequenceError, InvalidProducerEpochError)


class LogAppend:
    """The appending part of :class:`~broker.log.log.Log` (see the module docstring)."""

    # The log's state these methods use (set by Log.__init__).
    _where: str
    _config: LogConfig
    _clock: Callable[[], int]
    _wake_flusher: Callable[[Log], None] | None
    _lock: threading.Lock
    _listeners: LogListeners
    _view: LogView
    _offline_reason: str | None
    _next_offset: int
    _unflushed_messages: int
    _first_unflushed_ms: int | None
    _producers: ProducerStateManager
    _epochs: LeaderEpochCache
    _hw_follows_appends: bool

    if TYPE_CHECKING:

        def _check_writable(self) -> None: ...
        def _roll(self, active: Segment, base_offset: int, now_ms: int) -> Segment: ...
        def _assign_batch_epochs(self, batches: tuple[RecordBatch, ...]) -> None: ...
        def flush(self) -> int: ...

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
        return self._append_validated(self._validate(batches), leader_epoch, False)

    def append_many(self, requests: Sequence[Buffer], *, leader_epoch: int = -1) -> list[AppendOutcome]:
        """Append several producer requests' batches in one pass, with the outcome of :meth:`append` called
        on each in order (see the module docstring): each request's ``AppendInfo``, or the error
        :meth:`append` would have raised for it. Raises what fails them all: :class:`LogStorageError`,
        :class:`~broker.log.errors.LogClosedError`."""
        outcomes: list[AppendOutcome | None] = []
        valid: list[ValidatedAppend] = []
        for batches in requests:
            try:
                valid.append(self._validate(batches))
            except (LogError, RecordError) as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)
        appended = iter(self._append_all(valid, leader_epoch, False) if valid else ())
        return [next(appended) if outcome is None else outcome for outcome in outcomes]

    def _validate(self, batches: Buffer) -> ValidatedAppend:
        config = self._config
        target_codec = TARGET_CODECS[config.compression_type]
        return validate_append(
            batches,
            where=f"{self._where} append",
            max_message_bytes=config.max_message_bytes,
            validate_records=config.validate_records,
            compacted="compact" in config.cleanup_policy,
            target_codec=target_codec,
            target_level=None if target_codec is None else config.compression_level,
        )

    def _append_validated(self, validated: ValidatedAppend, leader_epoch: int, follower: bool) -> AppendInfo:
        """The append of :meth:`append` (``follower`` False) and :meth:`append_as_follower` (True)."""
        [outcome] = self._append_all((validated,), leader_epoch, follower)
        if isinstance(outcome, AppendInfo):
            return outcome
        raise outcome

    def _append_all(
        self, requests: Sequence[ValidatedAppend], leader_epoch: int, follower: bool
    ) -> list[AppendOutcome]:
        """Steps 2 and 3 of the module docstring for ``requests`` (validated), in order."""
        config = self._config
        outcomes: list[AppendOutcome] = []
        with self._lock:
            self._check_writable()
            hw_follows_appends = self._hw_follows_appends
            update_producer = self._producers.update
            now = self._clock()
            log_append_time = not follower and config.message_timestamp_type == "LogAppendTime"
            view = self._view
            segments = view.segments
            active = segments[-1]
            offset = self._next_offset
            pending: list[RecordBatch] = []
            pending_bases: list[int] = []
            pending_bytes = 0
            appended_records = 0
            try:
                for validated in requests:
                    to_append = validated.batches
                    record_count, max_timestamp_ms = validated.record_count, validated.max_timestamp_ms
                    # a follower keeps the producer state too (it may lead next)
                    idempotent = any(batch.producer_id != NO_PRODUCER_ID for batch in to_append)
                    if follower:
                        first_base = to_append[0].base_offset
                        if first_base < offset:
                            raise UnexpectedAppendOffsetError(self._where, offset, first_base, batch_index=0)
                        self._assign_batch_epochs(to_append)
                    elif idempotent:
                        try:
                            duplicate, to_append = self._producers.prepare().check_batches(to_append, offset)
                        except _PRODUCER_ERRORS as exc:
                            outcomes.append(exc)
                            continue
                        if duplicate is not None and not to_append:
                            outcomes.append(
                                AppendInfo(
                                    first_offset=duplicate.first_offset,
                                    last_offset=duplicate.last_offset,
                                    max_timestamp_ms=duplicate.timestamp_ms,
                                    record_count=0,
                                    batch_count=0,
                                    size_bytes=0,
                                    duplicate=True,
                                    # Kafka answers a duplicate with the original batch's max timestamp
                                    # here, on a CreateTime topic too (its UnifiedLog sets logAppendTime)
                                    log_append_time_ms=duplicate.timestamp_ms,
                                )
                            )
                            continue
                        if duplicate is not None:
                            record_count = sum(b.record_count for b in to_append)
                            max_timestamp_ms = max(b.max_timestamp_ms for b in to_append)
                    if leader_epoch >= 0:
                        # before any byte of the epoch is written: the checkpoint is never behind the log
                        self._epochs.assign(leader_epoch, offset)
                    log_append_time_ms = -1
                    if log_append_time:
                        # the leader's clock in every batch (a follower keeps the leader's bytes)
                        to_append = tuple(batch.with_log_append_time(now) for batch in to_append)
                        log_append_time_ms = max_timestamp_ms = now
                    first_offset = to_append[0].base_offset if follower else offset
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
                    appended_records += record_count
                    outcomes.append(
                        AppendInfo(
                            first_offset=first_offset,
                            last_offset=offset - 1,
                            max_timestamp_ms=max_timestamp_ms,
                            record_count=record_count,
                            batch_count=len(to_append),
                            size_bytes=validated.size_bytes
                            if to_append is validated.batches
                            else sum(b.size_bytes for b in to_append),
                            log_append_time_ms=log_append_time_ms,
                        )
                    )
                if not pending:  # every request refused, or a retry: nothing written, nothing to publish
                    return outcomes
                active.append(pending, pending_bases, leader_epoch)
            except LogStorageError as exc:
                self._offline_reason = str(exc)
                logger.error("%s: log is offline after a failed append: %s", self._where, exc)  # noqa: TRY400
                raise
            self._next_offset = offset
            self._unflushed_messages += appended_records
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
                self._wake_flusher(cast("Log", self))
        elif flush_due:
            self.flush()
        return outcomes
