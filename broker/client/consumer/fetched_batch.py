"""A record batch as fetched by the consumer: a CRC-checked, zero-copy view, decoded only on demand.

:class:`FetchedBatch` is what :meth:`~broker.client.consumer.consumer.Consumer.poll_batches` returns: the
bytes the broker sent (sharing the response's buffer), for callers that ship whole batches elsewhere or decode
them their own way. :meth:`FetchedBatch.values` is the fast path when only offsets and values matter;
:func:`decode_values` does the same for many batches at once (what
:meth:`~broker.client.consumer.consumer.Consumer.poll_values` uses). :meth:`FetchedBatch.records` builds a
:class:`~broker.client.consumer.consumer_record.ConsumerRecord` per record, :meth:`FetchedBatch.walk` a
:class:`~broker.record.record.Record`. All skip records before ``from_offset`` (a fetch returns whole
batches, so the first one may start before the position asked for).

The batches choose the reader of their records, not this module: :meth:`RecordBatch.values_of
<broker.record.record_batch.RecordBatch.values_of>` for many batches (the columnar reader over all of them
at once, from enough records, else each batch's :meth:`~broker.record.record_batch.RecordBatch.values`),
:meth:`~broker.record.record_batch.RecordBatch.records` for records. A batch that does not decode raises
:class:`~broker.client.errors.CorruptBatchError` naming the topic-partition, the batch's base offset and
what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.errors import CorruptBatchError
from broker.record.errors import CorruptRecordError
from broker.record.record import Record
from broker.record.record_batch import NO_OFFSET_LIMIT, RecordBatch
from broker.record.topic_partition import TopicPartition

__all__ = ["FetchedBatch", "PartitionValues", "decode_values", "load_decoder"]

#: Import numpy now, so that the first :func:`decode_values` does not pause for it (False without numpy).
load_decoder = RecordBatch.load_columns


class PartitionValues(NamedTuple):
    """Offsets and values of consecutive records of one partition (``offsets`` is a ``range`` when the
    offsets are consecutive, as they always are in Lumber's logs)."""

    topic_partition: TopicPartition
    offsets: Sequence[int]
    values: list[bytes | None]


class FetchedBatch:
    """One fetched batch of ``topic_partition``; records before ``from_offset`` are skipped when decoding."""

    __slots__ = ("batch", "from_offset", "topic_partition")

    def __init__(self, topic_partition: TopicPartition, batch: RecordBatch, from_offset: int) -> None:
        self.topic_partition = topic_partition
        self.batch = batch
        self.from_offset = from_offset

    @property
    def base_offset(self) -> int:
        return self.batch.base_offset

    @property
    def last_offset(self) -> int:
        return self.batch.last_offset

    @property
    def next_offset(self) -> int:
        return self.batch.next_offset

    @property
    def record_count(self) -> int:
        return self.batch.record_count

    def __repr__(self) -> str:
        return f"FetchedBatch({self.topic_partition}, {self.batch!r}, from_offset={self.from_offset})"

    def _records_data(self) -> bytes | memoryview:
        """The records' bytes (:meth:`RecordBatch.body`): a view of the fetch's buffer when uncompressed
        (the numpy pass joins the batches' bodies anyway), else decompressed."""
        try:
            return self.batch.body()
        except (CorruptRecordError, ValueError) as exc:
            raise self._corrupt(f"cannot decompress: {exc}") from exc

    def _corrupt(self, reason: str) -> CorruptBatchError:
        tp = self.topic_partition
        return CorruptBatchError(tp.topic, tp.partition, self.batch.base_offset, reason)

    def values(self) -> PartitionValues:
        """Offsets and values of the records from ``from_offset`` on (no per-record objects), by the reader
        the batch chooses (:meth:`RecordBatch.values`)."""
        data = self._records_data()
        tp = self.topic_partition
        try:
            offsets, values = self.batch.values(self.from_offset, body=data, where=str(tp))
        except CorruptRecordError as exc:
            raise self._corrupt(f"records do not decode: {exc.reason}") from exc
        return PartitionValues(tp, offsets, values)

    def walk(self, until_offset: int = NO_OFFSET_LIMIT) -> list[Record]:
        """The records in ``[from_offset, until_offset)``, each a :class:`~broker.record.record.Record`
        (offset, timestamp, key, value, headers)."""
        data = self._records_data()
        try:
            return self.batch.records(from_offset=self.from_offset, until_offset=until_offset, body=data)
        except CorruptRecordError as exc:
            raise self._corrupt(f"records do not decode: {exc.reason}") from exc

    def records(self) -> list[ConsumerRecord]:
        """The records from ``from_offset`` on, each a :class:`ConsumerRecord`."""
        tp = self.topic_partition
        head = (tp.topic, tp.partition)
        tail = (self.batch.timestamp_type.value,)
        new = tuple.__new__
        return [new(ConsumerRecord, head + record + tail) for record in self.walk()]


def decode_values(batches: Sequence[FetchedBatch]) -> list[PartitionValues]:
    """``[batch.values() for batch in batches]``, read together when the batches choose to
    (:meth:`RecordBatch.values_of <broker.record.record_batch.RecordBatch.values_of>`: the batches may belong
    to different partitions).

    A batch that does not decode raises :class:`~broker.client.errors.CorruptBatchError` naming it, as
    :meth:`FetchedBatch.values` would; the batches before it are decoded, but not returned.
    """
    bodies = [fetched._records_data() for fetched in batches]
    try:
        found = RecordBatch.values_of(
            [fetched.batch for fetched in batches],
            [fetched.from_offset for fetched in batches],
            bodies=bodies,
        )
    except CorruptRecordError:  # name the culprit: batch by batch, each naming its own partition and offset
        return [fetched.values() for fetched in batches]
    return [
        PartitionValues(fetched.topic_partition, offsets, values)
        for fetched, (offsets, values) in zip(batches, found, strict=True)
    ]
