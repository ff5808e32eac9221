"""Errors of the log storage engine, all under :class:`broker.errors.BrokerError`.

The Kafka protocol error code each answers with, noted in brackets below, comes from the broker's one
table, :mod:`broker.server.error_codes`.
The record format's errors (corrupt or invalid batches, bad topic names) are not storage's: they live in
:mod:`broker.record.errors`, under ``RecordError``.

::

    BrokerError
    └── LogError                       (KAFKA_STORAGE_ERROR 56)
        ├── RecordTooLargeError        (MESSAGE_TOO_LARGE 10)
        ├── OffsetOutOfRangeError      (OFFSET_OUT_OF_RANGE 1)
        ├── UnexpectedAppendOffsetError (KAFKA_STORAGE_ERROR 56): a follower's append does not start at
        │                              its log end offset, or its batches are not consecutive (the
        │                              replica fetcher handles it; it never reaches a client)
        ├── OutOfOrderSequenceError    (OUT_OF_ORDER_SEQUENCE_NUMBER 45): an idempotent producer's gap
        ├── InvalidProducerEpochError  (INVALID_PRODUCER_EPOCH 47): a fenced (older) producer epoch
        ├── CorruptSnapshotError       (KAFKA_STORAGE_ERROR 56): a producer-state snapshot fails its check
        ├── CorruptIndexError          (KAFKA_STORAGE_ERROR 56): an index file fails its sanity check
        ├── LogDirLockedError          (KAFKA_STORAGE_ERROR 56): another process holds the log dir
        ├── LogStorageError            (KAFKA_STORAGE_ERROR 56): an I/O error on a log file
        └── LogClosedError             (NOT_LEADER_OR_FOLLOWER 6): the partition is closed or deleted
"""

from __future__ import annotations

from broker.errors import BrokerError


class LogError(BrokerError):
    """Root of the log storage errors."""


class RecordTooLargeError(LogError):
    """A batch is larger than ``max_message_bytes``."""

    def __init__(self, where: str, size_bytes: int, max_bytes: int, *, position: int | None = None) -> None:
        self.where = where
        self.size_bytes = size_bytes
        self.max_bytes = max_bytes
        self.position = position
        at = f" at position {position}" if position is not None else ""
        super().__init__(
            f"{where}: record batch{at} is {size_bytes} bytes, larger than max_message_bytes {max_bytes}"
        )


class OffsetOutOfRangeError(LogError):
    """A read asked for an offset outside ``[log_start_offset, log_end_offset]``."""

    def __init__(self, where: str, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        self.where = where
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(
            f"{where}: offset {offset} is out of range: the log holds [{log_start_offset}, {log_end_offset})"
        )


class UnexpectedAppendOffsetError(LogError):
    """A follower's append (:meth:`broker.log.log.Log.append_as_follower`) holds a batch whose base offset
    lies below the one the log expects: the log end offset for the first batch, the previous batch's next
    offset for the others (Kafka's ``UnexpectedAppendOffsetException``). Above it is a gap the leader's
    log cleaner left, which is legal."""

    def __init__(self, where: str, expected_offset: int, found_offset: int, *, batch_index: int) -> None:
        self.where = where
        self.expected_offset = expected_offset
        self.found_offset = found_offset
        self.batch_index = batch_index
        what = "the log end offset" if batch_index == 0 else f"the next offset of batch {batch_index - 1}"
        super().__init__(
            f"{where}: follower append: batch {batch_index} has base offset {found_offset}, expected "
            f"at least {expected_offset} ({what}); nothing was appended"
        )


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch does not follow its last one (a gap, or a new epoch not at 0)."""


class InvalidProducerEpochError(LogError):
    """An idempotent producer's batch carries an epoch older than the partition has seen (fenced)."""


class CorruptSnapshotError(LogError):
    """A producer-state snapshot is torn or fails its CRC; the state is rebuilt from the log instead."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: corrupt producer-state snapshot: {reason}")


class CorruptIndexError(LogError):
    """An offset or time index file fails its sanity check; the loader rebuilds it from the log."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: corrupt index: {reason}")


class LogDirLockedError(LogError):
    """Another process (or another LogManager in this one) holds a log dir's lock file."""


class LogStorageError(LogError):
    """An I/O error on a log file; the message names the file and what was being done."""


class LogClosedError(LogError):
    """The partition's log has been closed or deleted."""


class CleaningAbortedError(LogError):
    """A cleaning pass of a log stopped because the log is being truncated, deleted or closed (Kafka's
    ``LogCleaningAbortedException``); nothing of the pass was swapped in."""
