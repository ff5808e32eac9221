"""The one builder of record batches: records in, record batch v2 bytes out (layout:
:mod:`broker.record.record_batch`).

Two ways in, one way out:

* :class:`RecordBatchBuilder`, a record at a time (the mirror, tools, tests): each record is encoded on
  :meth:`~RecordBatchBuilder.append` by :func:`~broker.record.record_encoder.encode_record`, so the size so
  far is exact;
* a producer batch's segments, encoded at once by :func:`~broker.record.record_encoder.encode_records`.

Both finish in :func:`pack_batch`: compress when the codec makes the records smaller (otherwise the batch is
written uncompressed, as kafka-python does), pack the 61-byte header and compute the CRC-32C over
attributes to the end.

A third way in, for the log cleaner: :func:`retained_batch` rebuilds a stored batch with only some of its
records (offset deltas, timestamps, headers, the producer fields, the leader epoch, the attributes and the
offset range kept: Kafka's ``MemoryRecords.filterTo`` for magic 2); :func:`retained_batch_of_bytes` does the
same from the retained records' own bytes, for the common case where none of their deltas changes.

A fourth, for the leader of a topic whose ``compression.type`` names a codec: :func:`recompressed_batch`
stores a produced batch's records with that codec (Kafka's ``LogValidator.buildRecordsAndAssignOffsets``).

Thread safety: a :class:`RecordBatchBuilder` belongs to one thread; :func:`pack_batch` and
:func:`retained_batch` are stateless.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from broker.record.batch_header import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from broker.record.compression import CompressionType, compress
from broker.record.record import Record
from broker.record.record_batch import RecordBatch
from broker.record.record_encoder import NULL_PART, encode_record, key_part
from broker.record.record_header import NO_HEADERS, Header, encode_headers
from broker.record.varint import VARINT_CACHE_HIGH, VARINT_CACHE_LOW, VARINTS, encode_varint

__all__ = [
    "RecordBatchBuilder",
    "pack_batch",
    "recompressed_batch",
    "retained_batch",
    "retained_batch_of_bytes",
]

# The header split at the CRC boundary: [0, 21) baseOffset, batchLength, partitionLeaderEpoch, magic, crc;
# [21, 61) attributes, lastOffsetDelta, firstTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount.
_HEADER_BEFORE_ATTRIBUTES = struct.Struct(">qiibI")
_HEADER_FROM_ATTRIBUTES = struct.Struct(">hiqqqhii")


def pack_batch(
    records: bytes,
    count: int,
    first_timestamp_ms: int,
    max_timestamp_ms: int,
    codec: CompressionType = CompressionType.NONE,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    level: int | None = None,
) -> bytes:
    """The batch of ``count`` encoded ``records`` (offset deltas 0 .. count - 1): compressed with
    ``codec`` at ``level`` (None: the codec's default) when that makes them smaller, with its header and
    CRC. Every argument may be given by position: the producer calls it once per batch (``send()`` at
    batch size 1), where keywords cost."""
    attributes = 0
    if codec:  # CompressionType.NONE is 0
        compressed = compress(codec, records, level)
        if len(compressed) < len(records):
            records = compressed
            attributes = int(codec)
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    tail = _HEADER_FROM_ATTRIBUTES.pack(
        attributes,
        count - 1,
        first_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c.crc32c(records, crc32c.crc32c(tail))
    head = _HEADER_BEFORE_ATTRIBUTES.pack(
        base_offset, MIN_BATCH_LENGTH + len(records), partition_leader_epoch, MAGIC, crc
    )
    return b"".join((head, tail, records))


class RecordBatchBuilder:
    """Builds one record batch v2 from records appended in offset order.

    ``size_in_bytes()`` is an upper bound of what :meth:`build` returns: when a codec would not make the
    records smaller, the batch is written uncompressed (kafka-python does the same), so the uncompressed
    size bounds every outcome. The producer fields default to Kafka's "none" values (-1); ``level`` is the
    codec's (None: its default).
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_built",
        "_codec",
        "_count",
        "_first_timestamp_ms",
        "_is_transactional",
        "_level",
        "_max_timestamp_ms",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_records",
        "_records_bytes",
    )

    def __init__(
        self,
        codec: CompressionType = CompressionType.NONE,
        base_offset: int = 0,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        is_transactional: bool = False,
        level: int | None = None,
    ) -> None:
        self._codec = CompressionType(codec)
        self._level = level
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._is_transactional = is_transactional
        self._records: list[bytes] = []
        self._records_bytes = 0
        self._count = 0
        self._first_timestamp_ms = NO_TIMESTAMP
        self._max_timestamp_ms = NO_TIMESTAMP
        self._built = False

    @property
    def codec(self) -> CompressionType:
        return self._codec

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def record_count(self) -> int:
        return self._count

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Add a record; returns its offset delta (its offset is ``base_offset + delta``)."""
        if self._built:
            raise ValueError("this RecordBatchBuilder has already built its batch")
        offset_delta = self._count
        if offset_delta == 0:
            self._first_timestamp_ms = timestamp_ms
            self._max_timestamp_ms = timestamp_ms
        elif timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = timestamp_ms
        if key is None:
            key_part = NULL_PART
        else:
            n = len(key)
            key_part = (VARINTS[n - VARINT_CACHE_LOW] if n < VARINT_CACHE_HIGH else encode_varint(n)) + bytes(
                key
            )
        record = encode_record(
            timestamp_ms - self._first_timestamp_ms,
            offset_delta,
            key_part,
            value,
            encode_headers(headers) if headers else NO_HEADERS,
        )
        self._records.append(record)
        self._records_bytes += len(record)
        self._count = offset_delta + 1
        return offset_delta

    def size_in_bytes(self) -> int:
        """An upper bound of the size of the batch :meth:`build` would return now."""
        return HEADER_SIZE + self._records_bytes

    @staticmethod
    def estimate_size_in_bytes(key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()) -> int:
        """An upper bound of the bytes one more record adds (varints at their widest)."""
        size = 5 + 1 + 10 + 5  # length, attributes, timestamp delta, offset delta
        size += 5 + (len(key) if key is not None else 0)
        size += 5 + (len(value) if value is not None else 0)
        size += 5 + sum(10 + len(k.encode()) + (len(v) if v is not None else 0) for k, v in headers)
        return size

    def build(self) -> bytes:
        """The finished batch. The builder cannot be appended to afterwards."""
        if self._count == 0:
            raise ValueError("cannot build a record batch without records")
        self._built = True
        return pack_batch(
            b"".join(self._records),
            self._count,
            self._first_timestamp_ms,
            self._max_timestamp_ms,
            self._codec,
            base_offset=self._base_offset,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            partition_leader_epoch=self._partition_leader_epoch,
            is_transactional=self._is_transactional,
            level=self._level,
        )


def retained_batch(
    batch: RecordBatch, records: Sequence[Record], *, delete_horizon_ms: int | None = None
) -> bytes:
    """``batch`` with only ``records``, some of its own decoded records in offset order (the log cleaner's
    rewrite; Kafka's ``filterTo`` for magic 2).

    Kept as they were: the base offset and ``lastOffsetDelta`` (so the batch covers the same offsets and
    an idempotent producer's last sequence still follows from it), each record's offset delta, timestamp,
    key, value and headers, ``firstTimestamp``, the producer id, epoch and base sequence, the partition
    leader epoch, and every attribute bit, the codec included (the records are compressed with it). The
    max timestamp is the retained records' largest (unchanged for LogAppendTime batches). With no records
    left the result is Kafka's empty batch: the header alone, uncompressed (there is no payload to
    compress), which keeps a producer's last sequence or the offset range's end.

    ``delete_horizon_ms`` (KIP-534): stamp the batch with the time after which the cleaner drops its
    tombstones: attribute bit 6 set and ``firstTimestamp`` holding it, with every record's timestamp
    delta taken from it (so record timestamps read back unchanged).
    """
    attributes = batch.attributes
    first_timestamp_ms = batch.first_timestamp_ms
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        first_timestamp_ms = delete_horizon_ms
    base_offset = batch.base_offset
    log_append_time = bool(attributes & TIMESTAMP_TYPE_MASK)
    max_timestamp_ms = batch.max_timestamp_ms
    data = b""
    if records:
        parts: list[bytes] = []
        newest = NO_TIMESTAMP
        for record in records:
            timestamp_ms = batch.max_timestamp_ms if log_append_time else record.timestamp_ms
            newest = max(newest, timestamp_ms)
            parts.append(
                encode_record(
                    timestamp_ms - first_timestamp_ms,
                    record.offset - base_offset,
                    key_part(record.key),
                    record.value,
                    encode_headers(record.headers) if record.headers else NO_HEADERS,
                )
            )
        data = b"".join(parts)
        if not log_append_time:
            max_timestamp_ms = newest
    return _pack_retained(batch, attributes, first_timestamp_ms, max_timestamp_ms, len(records), data)


def retained_batch_of_bytes(
    batch: RecordBatch, records_data: bytes, record_count: int, max_timestamp_ms: int
) -> bytes:
    """What :func:`retained_batch` builds without a ``delete_horizon_ms`` for a CreateTime ``batch``, from
    the retained records' own bytes (``records_data``: ``record_count`` of the batch's records, as they are
    in its decompressed body, in offset order) and their largest timestamp: the base offset and
    ``firstTimestamp`` stay, so every record's offset and timestamp deltas stay valid and its bytes are
    copied, not decoded and encoded again (the log cleaner's fast path)."""
    if batch.attributes & TIMESTAMP_TYPE_MASK:
        raise ValueError(f"{batch!r}: a LogAppendTime batch is rebuilt by retained_batch")
    return _pack_retained(
        batch, batch.attributes, batch.first_timestamp_ms, max_timestamp_ms, record_count, records_data
    )


def _pack_retained(
    batch: RecordBatch,
    attributes: int,
    first_timestamp_ms: int,
    max_timestamp_ms: int,
    record_count: int,
    data: bytes,
) -> bytes:
    if record_count:
        codec = attributes & COMPRESSION_MASK
        if codec:
            data = compress(CompressionType(codec), data)
    else:
        data = b""
        attributes &= ~COMPRESSION_MASK
    tail = _HEADER_FROM_ATTRIBUTES.pack(
        attributes,
        batch.last_offset_delta,
        first_timestamp_ms,
        max_timestamp_ms,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        record_count,
    )
    crc = crc32c.crc32c(data, crc32c.crc32c(tail))
    head = _HEADER_BEFORE_ATTRIBUTES.pack(
        batch.base_offset, MIN_BATCH_LENGTH + len(data), batch.partition_leader_epoch, MAGIC, crc
    )
    return b"".join((head, tail, data))


def recompressed_batch(batch: RecordBatch, codec: CompressionType, level: int | None = None) -> bytes:
    """``batch`` (a validated produced batch: offset deltas 0 .. count - 1) with its records compressed
    with ``codec`` at ``level`` (None: the codec's default), always (``NONE``: stored plain), even where
    that makes them larger: what a topic's ``compression.type`` and its codec's level
    (``compression.gzip.level``...) ask of the leader (Kafka's ``buildRecordsAndAssignOffsets``).

    Kept, as Kafka keeps them: the producer id, epoch and base sequence, the transactional bit, the
    record count and offset range, and every record's offset, timestamp, key, value and headers. The
    records' bytes are the producer's, decompressed: their deltas stay valid because ``firstTimestamp``
    and ``maxTimestamp`` are kept too. Set afresh: the codec, and the timestamp type CreateTime (a
    LogAppendTime topic's append stamps it after, as it stamps every batch); the control and
    delete-horizon bits are clear (a produced batch has neither). The base offset and leader epoch are
    the batch's, rewritten by the append like any batch's."""
    data = batch.records_data()
    if codec:  # CompressionType.NONE is 0
        data = compress(codec, data, level)
    attributes = int(codec) | (batch.attributes & TRANSACTIONAL_MASK)
    tail = _HEADER_FROM_ATTRIBUTES.pack(
        attributes,
        batch.last_offset_delta,
        batch.first_timestamp_ms,
        batch.max_timestamp_ms,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.record_count,
    )
    crc = crc32c.crc32c(data, crc32c.crc32c(tail))
    head = _HEADER_BEFORE_ATTRIBUTES.pack(
        batch.base_offset, MIN_BATCH_LENGTH + len(data), batch.partition_leader_epoch, MAGIC, crc
    )
    return b"".join((head, tail, data))
