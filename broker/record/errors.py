"""Errors of the record format, all under :class:`RecordError` (itself a :class:`broker.errors.BrokerError`).

The Kafka protocol error code each answers with, noted in brackets below, comes from the broker's one
table, :mod:`broker.server.error_codes`::

    BrokerError
    └── RecordError                    (CORRUPT_MESSAGE 2)
        ├── CorruptRecordError         (CORRUPT_MESSAGE 2): magic, lengths, CRC, undecodable records
        │   └── UnsupportedCompressionError (UNSUPPORTED_COMPRESSION_TYPE 76)
        ├── InvalidRecordError         (INVALID_RECORD 87): intact but not acceptable (count, control...)
        └── InvalidTopicError          (INVALID_TOPIC_EXCEPTION 17): a name against Kafka's topic rules

Storage's own errors (:mod:`broker.log.errors`) sit beside these, under ``LogError``: the record format
is below storage and knows nothing of it.
"""

from __future__ import annotations

from broker.errors import BrokerError


class RecordError(BrokerError):
    """Root of the record format's errors."""


class CorruptRecordError(RecordError):
    """A record batch fails validation: bad magic, impossible lengths, CRC mismatch or undecodable records.

    ``where`` names the file or topic-partition (or request) the bytes came from, ``position`` the byte
    position of the batch there, ``offset`` its base offset when known, ``reason`` what was wrong with
    expected vs actual values.
    """

    def __init__(
        self, where: str, reason: str, *, position: int | None = None, offset: int | None = None
    ) -> None:
        self.where = where
        self.reason = reason
        self.position = position
        self.offset = offset
        at = []
        if position is not None:
            at.append(f"position {position}")
        if offset is not None:
            at.append(f"base offset {offset}")
        super().__init__(
            f"{where}: corrupt record batch" + (f" at {', '.join(at)}" if at else "") + f": {reason}"
        )


class UnsupportedCompressionError(CorruptRecordError):
    """A batch names a compression codec that Kafka does not define (attributes bits 0-2 above 4)."""


class InvalidRecordError(RecordError):
    """An intact batch that a partition does not accept (record count, offset range, control batch...)."""

    def __init__(self, where: str, reason: str, *, position: int | None = None) -> None:
        self.where = where
        self.reason = reason
        self.position = position
        at = f" at position {position}" if position is not None else ""
        super().__init__(f"{where}: invalid record batch{at}: {reason}")


class InvalidTopicError(RecordError):
    """A topic name or partition breaks Kafka's rules (``[a-zA-Z0-9._-]``, 1-249 chars, not . or ..)."""
