"""The records of a fetched batch as columns: offsets, timestamps, keys, values and ``host`` headers.

The load needs, per record, exactly these five things, and it needs them for millions of records, so this
walks the records of a :class:`~broker.client.fetched_batch.FetchedBatch` (layout: :mod:`broker.record
.record_batch`) once and appends to five lists, with inline single-byte varint fast paths, instead of
building a :class:`~broker.client.consumer_record.ConsumerRecord` per record (about twice as fast). Only
the ``host`` header is kept; other headers are skipped by length. Records before the batch's
``from_offset`` or at or after ``until_offset`` are left out. Every length is checked against the record
and the batch: a malformed batch raises :class:`~broker.client.errors.CorruptBatchError` naming the
topic-partition and the batch's base offset (the batch's CRC was already checked by the consumer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.client.consumer_record import ConsumerRecord
from broker.client.errors import CorruptBatchError
from broker.client.fetched_batch import FetchedBatch
from broker.record.compression import CompressionType, decompress
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import HEADER_SIZE, decode_varint

_TIMESTAMP_TYPE_MASK = 0x08
_COMPRESSION_MASK = 0x07
_HOST = b"host"


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
    header = batch.batch
    attributes = header.attributes
    body = header.buffer[HEADER_SIZE:]
    codec = attributes & _COMPRESSION_MASK
    tp = batch.topic_partition
    try:
        data = body.tobytes() if codec == 0 else decompress(CompressionType(codec), body, where=str(tp))
    except (CorruptRecordError, ValueError) as exc:
        raise CorruptBatchError(
            tp.topic, tp.partition, header.base_offset, f"cannot decompress: {exc}"
        ) from exc
    log_append_ms = header.max_timestamp_ms if attributes & _TIMESTAMP_TYPE_MASK else None
    try:
        return _walk(
            data,
            header.record_count,
            header.base_offset,
            header.first_timestamp_ms,
            log_append_ms,
            batch.from_offset,
            until_offset,
        )
    except (IndexError, ValueError) as exc:
        raise CorruptBatchError(
            tp.topic, tp.partition, header.base_offset, f"records do not decode: {exc}"
        ) from exc


def _walk(
    data: bytes,
    count: int,
    base_offset: int,
    first_timestamp_ms: int,
    log_append_ms: int | None,
    from_offset: int,
    until_offset: int,
) -> RecordColumns:
    out = RecordColumns()
    offsets, timestamps, keys, values, hosts = out.offsets, out.timestamps_ms, out.keys, out.values, out.hosts
    pos = 0
    end = len(data)
    for index in range(count):
        byte = data[pos]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            pos += 1
        else:
            length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < 6 or record_end > end:
            raise ValueError(f"record #{index} has length {length} with {end - pos} bytes left")
        p = pos + 1  # attributes: unused
        ts_delta, p = decode_varint(data, p)
        byte = data[p]
        if byte < 0x80:
            offset_delta = (byte >> 1) ^ -(byte & 1)
            p += 1
        else:
            offset_delta, p = decode_varint(data, p)
        byte = data[p]
        if byte < 0x80:
            key_length = (byte >> 1) ^ -(byte & 1)
            p += 1
        else:
            key_length, p = decode_varint(data, p)
        key = None
        if key_length >= 0:
            key = data[p : p + key_length]
            p += key_length
        elif key_length != -1:
            raise ValueError(f"record #{index}: key length {key_length}")
        byte = data[p]
        if byte < 0x80:
            value_length = (byte >> 1) ^ -(byte & 1)
            p += 1
        else:
            value_length, p = decode_varint(data, p)
        value = None
        if value_length >= 0:
            value = data[p : p + value_length]
            p += value_length
        elif value_length != -1:
            raise ValueError(f"record #{index}: value length {value_length}")
        header_count, p = decode_varint(data, p)
        host = None
        if header_count:
            if header_count < 0:
                raise ValueError(f"record #{index}: header count {header_count}")
            seen_host = False
            for _ in range(header_count):
                name_length, p = decode_varint(data, p)
                if name_length < 0:
                    raise ValueError(f"record #{index}: header key length {name_length}")
                name = data[p : p + name_length]
                p += name_length
                header_length, p = decode_varint(data, p)
                if name == _HOST and not seen_host:  # the first host header counts, even a null one
                    seen_host = True
                    host = data[p : p + header_length] if header_length >= 0 else None
                if header_length > 0:
                    p += header_length
        if p != record_end:
            raise ValueError(f"record #{index}: length says {length} bytes, its fields take {p - pos}")
        pos = record_end
        offset = base_offset + offset_delta
        if offset < from_offset or offset >= until_offset:
            continue
        offsets.append(offset)
        timestamps.append(first_timestamp_ms + ts_delta if log_append_ms is None else log_append_ms)
        keys.append(key)
        values.append(value)
        hosts.append(host)
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after {count} records")
    return out
