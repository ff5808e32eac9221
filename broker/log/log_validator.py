"""What a partition accepts (Kafka's ``LogValidator``): every produced batch is checked before it is appended.

:meth:`broker.log.log.Log.append` makes one call, :func:`validate_append`, before it takes its lock, and
appends nothing of the request when anything is refused. The request's bytes must be whole batches, at
least one (a partial batch at the end is CORRUPT_MESSAGE, none at all INVALID_RECORD); then
:func:`validate_batches` runs these checks, in order, per batch:

1. size: at most ``max_message_bytes`` (:class:`RecordTooLargeError`, MESSAGE_TOO_LARGE);
2. header and CRC (:meth:`RecordBatch.validate`): magic 2, record count not negative, a codec Kafka defines,
   the CRC-32C (:class:`CorruptRecordError`, CORRUPT_MESSAGE; UNSUPPORTED_COMPRESSION_TYPE for the codec);
3. the offset range: at least one record, ``lastOffsetDelta == recordCount - 1``, not a control batch
   (:class:`InvalidRecordError`, INVALID_RECORD);
4. the records (:meth:`RecordBatch.validate_records`, the one record walker of
   :mod:`broker.record.record_walker`): the payload is decompressed per its codec, then every record is
   walked: varints, the record length against what its fields take, key, value and header lengths inside
   the record, header keys in UTF-8 (CORRUPT_MESSAGE); exactly ``recordCount`` records that fill the
   (decompressed) data exactly, offset deltas 0, 1, 2, ... (INVALID_RECORD). The walk has two strategies
   for the usual input, which decline what they cannot vouch for (the walker then walks it record by
   record and names what is wrong): records of one layout in a batch (the walker checks the first of each
   run of them, strided byte compares prove the others pass the same checks: about 0.2 us per record
   instead of 0.85), and a run of one-record batches of one size (a pipelining producer's batch 1),
   whose records are proved together the same way before the per-batch checks below. The batches choose
   (:meth:`RecordBatch.records_validator`): this module picks no reader.

5. on a compacted log (``cleanup_policy`` with ``compact``, read from the log's own config), every record
   must have a key: the cleaner keeps the last value *per key*, so a record without one could never be
   compacted (Kafka refuses it the same way: INVALID_RECORD). The message names the partition and the
   first keyless record's offset in its batch, which the batches find
   (:meth:`RecordBatch.first_keyless_record`): the keys of a request of many records are read by columns
   (:mod:`broker.record.key_columns`: one compiled loop over the request's batches, once it is loaded:
   the first such request starts loading it here, :mod:`broker.log.kernel_load`, and is walked), not by
   decoding records.

6. the topic's codec (``compression.type``, :data:`TARGET_CODECS`): a leader of a topic whose codec is not
   ``producer`` stores every batch of another codec recompressed with it
   (:func:`~broker.record.record_batch_builder.recompressed_batch`, Kafka's
   ``LogValidator.buildRecordsAndAssignOffsets``: the producer id, epoch and base sequence, the
   transactional bit and every record kept; the offsets, leader epoch and LogAppendTime are the append's,
   as for any batch), then checks the new batch's size again (:class:`RecordTooLargeError`, as Kafka's
   ``UnifiedLog.append`` does after a recompression). The codec's level is the topic's
   (``compression.gzip.level``, ``compression.lz4.level``, ``compression.zstd.level``: ``target_level``).
   A batch already of that codec is kept as it is, whatever level its producer used (Kafka's
   ``inPlaceAssignment`` compares codecs, not levels), and ``producer`` (the default) costs one
   comparison per request. Kafka takes one batch per request (v2);
   Lumber takes several and recompresses each on its own.

A follower's append (``from_leader``) skips steps 1, 4 and 6 and takes the leader's offsets as they are: a
batch the log cleaner rewrote covers its original offset range with fewer records (``lastOffsetDelta``
above ``recordCount - 1``), or none at all (an empty batch kept for a producer's last sequence).

A CRC only proves the bytes are what the producer sent; step 4 proves consumers can read them. Without it
one buggy producer could append a CRC-valid batch of garbage that stops every consumer of the partition at
that offset. ``[log] validate_records = false`` skips step 4; it exists to measure what it costs
(``bench/paper.py``), never to run a broker with.

:func:`validate_stored_batch` is the same walk for batches already on disk (``lumber log verify``), where
control batches and the log cleaner's rewritten batches (fewer records than offsets) are legal. Stateless
functions: thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from broker.log.errors import RecordTooLargeError
from broker.log.kernel_load import start_loading_kernels
from broker.record.batch_header import COMPRESSION_MASK, NO_TIMESTAMP
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.errors import CorruptRecordError, InvalidRecordError
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import recompressed_batch
from broker.record.varint import Buffer

__all__ = [
    "TARGET_CODECS",
    "ValidatedAppend",
    "ValidatedBatches",
    "validate_append",
    "validate_batches",
    "validate_stored_batch",
]


#: A topic's ``compression.type`` -> the codec its stored batches get (None: each keeps its producer's).
TARGET_CODECS: Mapping[str, CompressionType | None] = {
    "producer": None,
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


@dataclass(frozen=True, slots=True)
class ValidatedBatches:
    """What :func:`validate_batches` learnt of the batches it accepted."""

    record_count: int
    #: The largest record timestamp among the batches (-1 when none had one).
    max_timestamp_ms: int


class ValidatedAppend(NamedTuple):
    """The batches of one produce request to one partition, accepted by :func:`validate_append` (a tuple:
    one is built per append)."""

    batches: tuple[RecordBatch, ...]
    #: The request's bytes (all of them: whole batches).
    size_bytes: int
    record_count: int
    #: The largest record timestamp among the batches (-1 when none had one).
    max_timestamp_ms: int


def validate_append(
    buffer: Buffer,
    *,
    where: str,
    max_message_bytes: int,
    validate_records: bool = True,
    compacted: bool = False,
    target_codec: CompressionType | None = None,
    target_level: int | None = None,
    from_leader: bool = False,
) -> ValidatedAppend:
    """Split ``buffer`` into whole batches and check each (see the module docstring); raises the first
    failure, and the caller appends nothing then. ``compacted``: refuse records without a key (step 5);
    ``target_codec``: the topic's codec (step 6, :data:`TARGET_CODECS`; None keeps the producer's),
    ``target_level`` its level (None: the codec's default);
    ``from_leader``: a follower's append of its leader's batches."""
    scan = scan_batches(buffer, where=where)
    if scan.partial_tail_bytes:
        raise CorruptRecordError(
            where,
            f"the request ends with {scan.partial_tail_bytes} bytes of a partial batch",
            position=scan.complete_bytes,
        )
    if not scan.batches:
        raise InvalidRecordError(where, "the request holds no record batch")
    if from_leader:
        record_count, max_timestamp_ms = _check_leader_batches(scan.batches, where)
        return ValidatedAppend(scan.batches, scan.complete_bytes, record_count, max_timestamp_ms)
    record_count, max_timestamp_ms = _check_batches(scan.batches, where, max_message_bytes, validate_records)
    if compacted:
        _check_keys(scan.batches, where)
    if target_codec is not None and any(
        batch.attributes & COMPRESSION_MASK != target_codec for batch in scan.batches
    ):
        batches, size_bytes = _recompressed(
            scan.batches, target_codec, target_level, where, max_message_bytes
        )
        return ValidatedAppend(batches, size_bytes, record_count, max_timestamp_ms)
    return ValidatedAppend(scan.batches, scan.complete_bytes, record_count, max_timestamp_ms)


def validate_batches(
    batches: Sequence[RecordBatch], *, where: str, max_message_bytes: int, validate_records: bool = True
) -> ValidatedBatches:
    """Check every batch of one produce request to one partition (steps 1-4 of the module docstring).

    Raises the first failure; the caller appends nothing then.
    """
    return ValidatedBatches(*_check_batches(batches, where, max_message_bytes, validate_records))


def _check_batches(
    batches: Sequence[RecordBatch], where: str, max_message_bytes: int, validate_records: bool
) -> tuple[int, int]:
    """Steps 1-4 for every batch: their record count and largest timestamp."""
    record_count = 0
    max_timestamp_ms = NO_TIMESTAMP
    check_records = RecordBatch.records_validator(batches) if validate_records else None
    for batch in batches:
        if batch.size_bytes > max_message_bytes:
            raise RecordTooLargeError(where, batch.size_bytes, max_message_bytes, position=batch.position)
        batch.validate()
        count = batch.record_count
        if count < 1:
            raise InvalidRecordError(
                where, f"a batch must hold records, this one has {count}", position=batch.position
            )
        if batch.last_offset_delta != count - 1:
            raise InvalidRecordError(
                where,
                f"lastOffsetDelta {batch.last_offset_delta} does not match the record count {count}",
                position=batch.position,
            )
        if batch.is_control_batch:
            raise InvalidRecordError(where, "clients may not append control batches", position=batch.position)
        if check_records is not None:
            check_records(batch)
        record_count += count
        max_timestamp_ms = max(max_timestamp_ms, batch.max_timestamp_ms)
    return record_count, max_timestamp_ms


def _check_leader_batches(batches: Sequence[RecordBatch], where: str) -> tuple[int, int]:
    """A follower's checks: header and CRC, and an offset range that holds the records (a cleaned batch's
    range may hold fewer records than offsets, or none)."""
    record_count = 0
    max_timestamp_ms = NO_TIMESTAMP
    for batch in batches:
        batch.validate()
        count = batch.record_count
        if batch.last_offset_delta < 0 or batch.last_offset_delta < count - 1:
            raise InvalidRecordError(
                where,
                f"lastOffsetDelta {batch.last_offset_delta} cannot hold {count} records",
                position=batch.position,
            )
        record_count += count
        max_timestamp_ms = max(max_timestamp_ms, batch.max_timestamp_ms)
    return record_count, max_timestamp_ms


def _check_keys(batches: Sequence[RecordBatch], where: str) -> None:
    """Step 5: every record of ``batches`` has a key; the batches find the first without one
    (:meth:`RecordBatch.first_keyless_record`), and a request of many records before the compiled key
    columns are loaded starts their load in the background
    (:func:`~broker.log.kernel_load.start_loading_kernels`: a produce request never waits for it)."""
    keyless = RecordBatch.first_keyless_record(batches, load_columns=start_loading_kernels)
    if keyless is not None:
        batch, index, record = keyless
        raise InvalidRecordError(
            where,
            f"a compacted topic does not accept a record without a key: record #{index} at offset "
            f"{record.offset - batch.base_offset} of the batch (of {batch.record_count} records) has none",
            position=batch.position,
        )


def _recompressed(
    batches: tuple[RecordBatch, ...],
    codec: CompressionType,
    level: int | None,
    where: str,
    max_message_bytes: int,
) -> tuple[tuple[RecordBatch, ...], int]:
    """Step 6: ``batches`` with each of another codec than ``codec`` recompressed with it at ``level``, and
    their bytes.
    A recompressed batch over ``max_message_bytes`` refuses the request."""
    stored: list[RecordBatch] = []
    for batch in batches:
        if batch.compression == codec:
            stored.append(batch)
            continue
        new = RecordBatch(recompressed_batch(batch, codec, level), where=where, position=batch.position)
        if new.size_bytes > max_message_bytes:
            raise RecordTooLargeError(
                f"{where} (recompressed: compression.type {_codec_name(codec)})",
                new.size_bytes,
                max_message_bytes,
                position=batch.position,
            )
        stored.append(new)
    return tuple(stored), sum(batch.size_bytes for batch in stored)


def _codec_name(codec: CompressionType) -> str:
    return next(name for name, target in TARGET_CODECS.items() if target == codec)


def validate_stored_batch(batch: RecordBatch) -> None:
    """Check a batch read back from a segment: header, CRC, offset range and every record.

    The batch's ``where`` and ``position`` (its file and byte position) name it in the error.
    """
    batch.validate()
    count = batch.record_count
    if batch.last_offset_delta == count - 1:
        batch.validate_records()
        return
    # a batch the log cleaner rewrote: fewer records than offsets, at increasing offsets inside its range
    if batch.last_offset_delta < count - 1:
        raise InvalidRecordError(
            batch.where,
            f"lastOffsetDelta {batch.last_offset_delta} cannot hold {count} records",
            position=batch.position,
        )
    previous = batch.base_offset - 1
    records = batch.records()
    for index, record in enumerate(records):
        if not previous < record.offset <= batch.last_offset:
            raise InvalidRecordError(
                batch.where,
                f"record #{index}: offset {record.offset} after {previous}, outside or out of order in "
                f"the batch's range [{batch.base_offset}, {batch.last_offset}]",
                position=batch.position,
            )
        previous = record.offset
    if len(records) != count:
        raise InvalidRecordError(
            batch.where,
            f"the header counts {count} records, the data holds {len(records)}",
            position=batch.position,
        )
