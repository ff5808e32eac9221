"""The records of a fetched batch as columns: offsets, timestamps, keys, values and ``host`` headers.

The load needs, per record, exactly these five things, for millions of records: the batch's records are
read by the reader the batch chooses (:meth:`~broker.client.consumer.fetched_batch.FetchedBatch.walk`, which
asks :meth:`~broker.record.record_batch.RecordBatch.records`: the one record walker, inline single-byte
varint fast paths, the header block of consecutive records decoded once) and turned into five lists,
instead of building a :class:`~broker.client.consumer.consumer_record.ConsumerRecord` per record. Only the
first ``host`` header of each record is kept. Records before the batch's ``from_offset`` or at or after
``until_offset`` are left out. Every length is checked against the record and the batch: a malformed batch
raises :class:`~broker.client.errors.CorruptBatchError` naming the topic-partition and the batch's base
offset (the batch's CRC was already checked by the consumer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch
from broker.record.record_header import Header

_HOST = "host"


@dataclass
class RecordColumns:
    """Consecutive records of one partition, column by column."""

    offsets: list[int] = field(default_factory=list)
    timestamps_ms: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    hosts: list[bytes | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def extend(self, other: RecordColumns) -> None:
        self.offsets += other.offsets
        self.timestamps_ms += other.timestamps_ms
        self.keys += other.keys
        self.values += other.values
        self.hosts += other.hosts

    def split(self, count: int) -> tuple[RecordColumns, RecordColumns]:
        """The first ``count`` records, and the rest."""
        return (
            RecordColumns(
                self.offsets[:count],
                self.timestamps_ms[:count],
                self.keys[:count],
                self.values[:count],
                self.hosts[:count],
            ),
            RecordColumns(
                self.offsets[count:],
                self.timestamps_ms[count:],
                self.keys[count:],
                self.values[count:],
                self.hosts[count:],
            ),
        )

    @classmethod
    def from_records(cls, records: list[ConsumerRecord]) -> RecordColumns:
        """The columns of records decoded some other way (tests, other sources)."""
        return cls(
            [r.offset for r in records],
            [r.timestamp_ms for r in records],
            [r.key for r in records],
            [r.value for r in records],
            [r.header("host") for r in records],
        )


def batch_columns(batch: FetchedBatch, until_offset: int) -> RecordColumns:
    """The records of ``batch`` in ``[batch.from_offset, until_offset)`` (see the module docstring)."""
    records = batch.walk(until_offset)
    if not records:
        return RecordColumns()
    offsets, timestamps, keys, values, header_blocks = zip(*records, strict=True)
    return RecordColumns(list(offsets), list(timestamps), list(keys), list(values), _hosts(header_blocks))


def _hosts(header_blocks: tuple[tuple[Header, ...], ...]) -> list[bytes | None]:
    """The first ``host`` header of each record (``None`` without one). Consecutive records mostly share
    one headers tuple (the walker reuses it for equal header bytes): looked up once per distinct tuple."""
    hosts: list[bytes | None] = []
    append = hosts.append
    last: tuple[Header, ...] | None = None
    host: bytes | None = None
    for headers in header_blocks:
        if headers is not last:
            last = headers
            host = None
            for name, value in headers:
                if name == _HOST:
                    host = value
                    break
        append(host)
    return hosts
