"""One partition's records in a Fetch response, split into whole, CRC-checked batches without copying.

The records field is record batches v2 end to end (:mod:`broker.record.record_batch`), possibly ending
with a batch the response's byte limit cut short. :func:`parse_partition_records` skips batches entirely
before the fetch offset, checks each batch's CRC when asked, stops at the first that fails (naming it in a
:class:`~broker.client.errors.CorruptBatchError`) and, when no whole batch came, says how many bytes the
next fetch must allow. Stateless: safe from any thread.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.client.errors import CorruptBatchError
from broker.record.batch_header import LOG_OVERHEAD
from broker.record.batch_scan import scan_batches
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from broker.record.topic_partition import TopicPartition

__all__ = ["PartitionRecords", "parse_partition_records"]


class PartitionRecords(NamedTuple):
    """One partition's records in a fetch response, split into whole batches."""

    #: the whole batches at or after the fetch offset, in order (CRC-checked when asked)
    batches: list[RecordBatch]
    size_bytes: int
    #: where the next fetch starts: after the last whole batch (the fetch offset when there is none)
    next_offset: int
    #: a batch that failed its CRC or its header check (the batches before it are in ``batches``)
    error: CorruptBatchError | None
    #: when no whole batch came, only the start of one: the bytes that batch takes (0 otherwise)
    needed_bytes: int


def parse_partition_records(
    records: bytes | bytearray | memoryview, tp: TopicPartition, fetch_offset: int, *, check_crcs: bool
) -> PartitionRecords:
    """Split a fetch response's ``records`` for ``tp`` into whole batches (no copy).

    Batches entirely before ``fetch_offset`` are skipped; a batch cut short by the response's byte limit
    at the end is left out (and sized in ``needed_bytes`` when nothing else came).
    """
    try:
        scan = scan_batches(records, where=str(tp))
    except CorruptRecordError as exc:
        offset = exc.offset if exc.offset is not None else fetch_offset
        return PartitionRecords(
            [], 0, fetch_offset, CorruptBatchError(tp.topic, tp.partition, offset, exc.reason), 0
        )
    batches: list[RecordBatch] = []
    size = 0
    next_offset = fetch_offset
    error: CorruptBatchError | None = None
    for batch in scan.batches:
        if batch.next_offset <= fetch_offset:
            continue  # entirely before what was asked for
        if check_crcs:
            try:
                batch.validate()
            except CorruptRecordError as exc:
                error = CorruptBatchError(tp.topic, tp.partition, batch.base_offset, exc.reason)
                break
        batches.append(batch)
        size += batch.size_bytes
        next_offset = batch.next_offset
    needed = 0
    if not batches and error is None and scan.partial_tail_bytes:
        tail = memoryview(records)[scan.complete_bytes :]
        needed = LOG_OVERHEAD + int.from_bytes(tail[8:12], "big") if len(tail) >= 12 else 2 * len(tail) + 64
    return PartitionRecords(batches, size, next_offset, error, needed)
