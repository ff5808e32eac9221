"""A record batch as fetched by the consumer: a CRC-checked, zero-copy view, decoded only on demand.

:class:`FetchedBatch` is what :meth:`~broker.client.consumer.Consumer.poll_batches` returns: the bytes the
broker sent (sharing the response's buffer), for callers that ship whole batches elsewhere or decode them
their own way. :meth:`FetchedBatch.values` is the fast path when only offsets and values matter: it walks
the records without building an object per record and skips headers by length. :meth:`FetchedBatch.records`
builds a :class:`~broker.client.consumer_record.ConsumerRecord` per record. Both skip records before
``from_offset`` (a fetch returns whole batches, so the first one may start before the position asked for).

The record layout is documented in :mod:`broker.log.record_batch`; both decoders check every length
against the batch and raise :class:`~broker.client.errors.CorruptBatchError` naming the topic-partition
and the batch's base offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from broker.client.consumer_record import ConsumerRecord, Header
from broker.client.errors import CorruptBatchError
from broker.log.compression import decompress
from broker.log.errors import CorruptRecordError
from broker.log.record_batch import HEADER_SIZE, CompressionType, RecordBatch, decode_varint
from broker.log.topic_partition import TopicPartition

_TIMESTAMP_TYPE_MASK = 0x08
_COMPRESSION_MASK = 0x07


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
        batch = self.batch
        codec = batch.attributes & _COMPRESSION_MASK
        body = batch.buffer[HEADER_SIZE:]
        if codec == 0:
            return body
        try:
            return decompress(CompressionType(codec), body, where=str(self.topic_partition))
        except (CorruptRecordError, ValueError) as exc:
            raise self._corrupt(f"cannot decompress: {exc}") from exc

    def _corrupt(self, reason: str) -> CorruptBatchError:
        tp = self.topic_partition
        return CorruptBatchError(tp.topic, tp.partition, self.batch.base_offset, reason)

    def values(self) -> PartitionValues:
        """Offsets and values of the records from ``from_offset`` on (no per-record objects)."""
        data = self._records_data()
        if type(data) is memoryview:
            data = data.tobytes()  # slicing bytes is cheaper than slicing a view, per record
        try:
            offsets, values = _decode_values(
                data, self.batch.record_count, self.batch.base_offset, self.from_offset
            )
        except (IndexError, ValueError) as exc:
            raise self._corrupt(f"records do not decode: {exc}") from exc
        return PartitionValues(self.topic_partition, offsets, values)

    def records(self) -> list[ConsumerRecord]:
        """The records from ``from_offset`` on, each a :class:`ConsumerRecord`."""
        data = self._records_data()
        if type(data) is memoryview:
            data = data.tobytes()
        batch = self.batch
        attributes = batch.attributes
        log_append = batch.max_timestamp_ms if attributes & _TIMESTAMP_TYPE_MASK else None
        try:
            return _decode_records(
                data,
                batch.record_count,
                batch.base_offset,
                batch.first_timestamp_ms,
                log_append,
                self.topic_partition,
                self.from_offset,
            )
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise self._corrupt(f"records do not decode: {exc}") from exc


def _decode_values(
    data: bytes, count: int, base_offset: int, from_offset: int
) -> tuple[Sequence[int], list[bytes | None]]:
    """The offsets and values of the records at ``from_offset`` or later (vectorised for large batches)."""
    if count >= _VECTORISED_MIN_RECORDS:
        found = _decode_values_vectorised(data, count, base_offset, from_offset)
        if found is not None:
            return found
    return _decode_values_python(data, count, base_offset, from_offset)


def _decode_values_python(
    data: bytes, count: int, base_offset: int, from_offset: int
) -> tuple[Sequence[int], list[bytes | None]]:
    """Walk ``count`` records; returns the offsets and values of those at ``from_offset`` or later."""
    values: list[bytes | None] = []
    append = values.append
    offsets: list[int] | None = None  # built only when offsets turn out not to be consecutive
    first_kept = -1
    pos = 0
    end = len(data)
    index = 0
    try:
        for index in range(count):
            byte = data[pos]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                second = data[pos + 1]
                if second < 0x80:
                    raw = (byte & 0x7F) | (second << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = decode_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise ValueError(f"record #{index} has length {length} with {end - pos} bytes left")
            p = pos + 1  # attributes: unused
            while data[p] & 0x80:  # timestamp delta: not needed here
                p += 1
            byte = data[p + 1]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                p += 2
            else:
                offset_delta, p = decode_varint(data, p + 1)
            byte = data[p]
            if byte < 0x80:
                key_length = (byte >> 1) ^ -(byte & 1)
                p += 1
            else:
                key_length, p = decode_varint(data, p)
            if key_length > 0:
                p += key_length
            byte = data[p]
            if byte < 0x80:
                value_length = (byte >> 1) ^ -(byte & 1)
                p += 1
            else:
                second = data[p + 1]
                if second < 0x80:
                    raw = (byte & 0x7F) | (second << 7)
                    value_length = (raw >> 1) ^ -(raw & 1)
                    p += 2
                else:
                    value_length, p = decode_varint(data, p)
            if p + value_length > record_end:
                raise ValueError(f"record #{index}: value of {value_length} bytes overruns the record")
            pos = record_end
            offset = base_offset + offset_delta
            if offset < from_offset:
                continue
            if first_kept < 0:
                first_kept = offset
            if offsets is None and offset != first_kept + len(values):
                offsets = list(range(first_kept, first_kept + len(values)))
            if offsets is not None:
                offsets.append(offset)
            append(data[p : p + value_length] if value_length >= 0 else None)
    except IndexError:
        raise ValueError(f"record #{index} is cut short at byte {pos} of {end}") from None
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after {count} records")
    if offsets is None:
        return range(first_kept, first_kept + len(values)) if values else range(0), values
    return offsets, values


_VECTORISED_MIN_RECORDS = 64
#: Equal-size records in a row worth one vectorised check (fewer are walked one by one).
_MIN_RUN = 16
_MAX_VARINT_BYTES = 10


def _decode_values_vectorised(
    data: bytes, count: int, base_offset: int, from_offset: int
) -> tuple[Sequence[int], list[bytes | None]] | None:
    """:func:`_decode_values_python` with numpy, or ``None`` when the records are not well formed (the
    Python walk then names what is wrong).

    The one sequential part is finding where each record starts. It is done by runs: when a record is
    ``size`` bytes long, the next ``k`` records are presumed to be too, and numpy checks that the length
    varint at each presumed start says exactly that; the longest prefix that passes is exact by induction
    (each checked start is the previous start plus the previous record's own length). Records of varying
    sizes are walked one by one, in chunks that grow while runs keep failing. Then every field of every
    record is read at once, one varint per record per pass.
    """
    import numpy as np  # noqa: PLC0415 - loaded on first use (with pyarrow it is there anyway)

    end = len(data)
    arr = np.frombuffer(data + bytes(2 * _MAX_VARINT_BYTES), dtype=np.uint8)
    starts = np.empty(count, dtype=np.int64)  # first byte after each record's length varint
    ends = np.empty(count, dtype=np.int64)  # first byte after each record
    index = 0
    pos = 0
    chunk = 32
    try:
        while index < count:
            byte = data[pos]
            if byte < 0x80:
                width = 1
                length = (byte >> 1) ^ -(byte & 1)
            else:
                length, after = decode_varint(data, pos)
                width = after - pos
            size = width + length
            if length < 6:
                return None
            room = min(count - index, (end - pos) // size)
            run = 0
            if room >= _MIN_RUN:
                presumed = pos + size * np.arange(room, dtype=np.int64)
                same = arr[presumed] == byte
                for k in range(1, width):
                    same &= arr[presumed + k] == data[pos + k]
                wrong = np.flatnonzero(~same)
                run = room if len(wrong) == 0 else int(wrong[0])
            if run >= _MIN_RUN:
                starts[index : index + run] = presumed[:run] + width
                ends[index : index + run] = presumed[:run] + size
                index += run
                pos += run * size
                chunk = 32
                continue
            stop = min(count, index + chunk)
            while index < stop:
                byte = data[pos]
                if byte < 0x80:
                    length = (byte >> 1) ^ -(byte & 1)
                    pos += 1
                else:
                    length, pos = decode_varint(data, pos)
                if length < 6:
                    return None
                starts[index] = pos
                pos += length
                ends[index] = pos
                index += 1
            chunk = min(2 * chunk, 4096)
    except (IndexError, ValueError):
        return None
    if pos != end:
        return None

    def varints(at: Any) -> tuple[Any, Any] | None:
        value = arr[at].astype(np.int64)
        more = value >= 0x80
        value &= 0x7F
        after = at + 1
        for shift in range(7, 7 * _MAX_VARINT_BYTES, 7):
            if not more.any():
                return (value >> 1) ^ -(value & 1), after
            byte = arr[after].astype(np.int64)
            value = np.where(more, value | ((byte & 0x7F) << shift), value)
            after = after + more
            more &= byte >= 0x80
        return None

    position = starts + 1  # attributes: unused
    parsed = varints(position)  # timestamp delta: not needed
    if parsed is None:
        return None
    parsed = varints(parsed[1])
    if parsed is None:
        return None
    offset_deltas, position = parsed
    parsed = varints(position)
    if parsed is None:
        return None
    key_lengths, position = parsed
    position = position + np.maximum(key_lengths, 0)
    parsed = varints(position)
    if parsed is None:
        return None
    value_lengths, position = parsed
    value_ends = position + np.maximum(value_lengths, 0)
    if (key_lengths < -1).any() or (value_lengths < -1).any() or (value_ends > ends).any():
        return None
    first = 0
    if base_offset + int(offset_deltas[0]) < from_offset:
        kept = np.flatnonzero(base_offset + offset_deltas >= from_offset)
        if len(kept) == 0:
            return range(0), []
        first = int(kept[0])
        if len(kept) != count - first:
            return None  # offsets out of order: let the walk sort it out
    values: list[bytes | None] = [
        data[a:b] for a, b in zip(position[first:].tolist(), value_ends[first:].tolist(), strict=True)
    ]
    nulls = np.flatnonzero(value_lengths[first:] < 0)
    for null in nulls.tolist():
        values[null] = None
    deltas = offset_deltas[first:]
    if bool((deltas == np.arange(first, count)).all()):
        return range(base_offset + first, base_offset + count), values
    return (base_offset + deltas).tolist(), values


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    first_timestamp_ms: int,
    log_append_time_ms: int | None,
    tp: TopicPartition,
    from_offset: int,
) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    append = records.append
    topic = tp.topic
    partition = tp.partition
    timestamp_type = 0 if log_append_time_ms is None else 1
    new = tuple.__new__
    pos = 0
    end = len(data)
    index = 0
    try:
        for index in range(count):
            length, pos = decode_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise ValueError(f"record #{index} has length {length} with {end - pos} bytes left")
            timestamp_delta, p = decode_varint(data, pos + 1)
            offset_delta, p = decode_varint(data, p)
            key_length, p = decode_varint(data, p)
            key: bytes | None = None
            if key_length >= 0:
                key = data[p : p + key_length]
                p += key_length
            value_length, p = decode_varint(data, p)
            value: bytes | None = None
            if value_length >= 0:
                value = data[p : p + value_length]
                p += value_length
            header_count, p = decode_varint(data, p)
            headers: tuple[Header, ...] = ()
            if header_count:
                if header_count < 0:
                    raise ValueError(f"record #{index}: header count {header_count}")
                found: list[Header] = []
                for _ in range(header_count):
                    name_length, p = decode_varint(data, p)
                    if name_length < 0:
                        raise ValueError(f"record #{index}: header key length {name_length}")
                    name = data[p : p + name_length].decode("utf-8")
                    p += name_length
                    header_length, p = decode_varint(data, p)
                    header_value: bytes | None = None
                    if header_length >= 0:
                        header_value = data[p : p + header_length]
                        p += header_length
                    found.append((name, header_value))
                headers = tuple(found)
            if p != record_end:
                raise ValueError(f"record #{index}: length says {length} bytes, its fields take {p - pos}")
            pos = record_end
            offset = base_offset + offset_delta
            if offset < from_offset:
                continue
            timestamp = (
                first_timestamp_ms + timestamp_delta if log_append_time_ms is None else log_append_time_ms
            )
            append(
                new(
                    ConsumerRecord, (topic, partition, offset, timestamp, key, value, headers, timestamp_type)
                )
            )
    except IndexError:
        raise ValueError(f"record #{index} is cut short at byte {pos} of {end}") from None
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after {count} records")
    return records
