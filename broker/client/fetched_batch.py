"""A record batch as fetched by the consumer: a CRC-checked, zero-copy view, decoded only on demand.

:class:`FetchedBatch` is what :meth:`~broker.client.consumer.Consumer.poll_batches` returns: the bytes the
broker sent (sharing the response's buffer), for callers that ship whole batches elsewhere or decode them
their own way. :meth:`FetchedBatch.values` is the fast path when only offsets and values matter: it walks
the records without building an object per record and skips headers by length; :func:`decode_values`
does the same for many batches at once (what :meth:`~broker.client.consumer.Consumer.poll_values` uses).
:meth:`FetchedBatch.records` builds a :class:`~broker.client.consumer_record.ConsumerRecord` per record.
All skip records before ``from_offset`` (a fetch returns whole batches, so the first one may start before
the position asked for).

The record layout is documented in :mod:`broker.record.record_batch`; the decoders check every length
against the batch and raise :class:`~broker.client.errors.CorruptBatchError` naming the topic-partition
and the batch's base offset.

Two value decoders, one result:

* :func:`_decode_values_python` walks one batch's records in Python: about 0.8 us per record, nothing
  fixed. It is the reference, and the one that says what is wrong with a corrupt batch.
* :func:`_decode_values_vectorised` decodes the records of many batches in one numpy pass over their
  concatenated record bytes: about 30 us per call, plus about 1 us per batch, plus 0.07-0.1 us per
  record when records have the same size (a 200 KiB fetch of 50-record batches of 200-byte values:
  0.12 us per record, against 0.70 before, when each batch was walked on its own). Records of varied
  sizes are located one by one (about 0.3 us per record), then decoded at once. It declines (returns
  ``None``) whatever it cannot vouch for, and the Python walk then decodes, or names the corruption.

Measured break-even (``bench/consumer_decode.py``, 200-byte values with a ``host`` header, 2026-11-23):
45-50 records per call in one batch (48: 0.73 us per record vectorised against 0.76 walked; 32: 1.07
against 0.82), 30-40 when they come in batches of one record; hence :data:`_VECTORISED_MIN_RECORDS` = 48
records per :func:`decode_values` call. A 200 KiB fetch holds about 900 such records, so
:func:`decode_values` decodes a whole fetch in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING, NamedTuple

from broker.client.consumer_record import ConsumerRecord, Header
from broker.client.errors import CorruptBatchError
from broker.record.compression import decompress
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import HEADER_SIZE, CompressionType, RecordBatch, decode_varint
from broker.record.topic_partition import TopicPartition

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

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
        batch = self.batch
        count = batch.record_count
        if count >= _VECTORISED_MIN_RECORDS:
            found = _decode_values_vectorised([data], [count], [batch.base_offset], [self.from_offset])
            if found is not None:
                return PartitionValues(self.topic_partition, *found[0])
        return self._values_python(data)

    def _values_python(self, data: bytes | memoryview) -> PartitionValues:
        if type(data) is memoryview:
            data = data.tobytes()  # slicing bytes is cheaper than slicing a view, per record
        try:
            offsets, values = _decode_values_python(
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


@cache
def load_decoder() -> bool:
    """Import numpy, which the vectorised decoder needs, now rather than in the middle of the first
    decoding (50-100 ms, once per process); ``False`` when numpy is not installed (the Python walk then
    decodes everything)."""
    try:
        import numpy  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def decode_values(batches: Sequence[FetchedBatch]) -> list[PartitionValues]:
    """``[batch.values() for batch in batches]``, decoded in one vectorised pass when they hold enough
    records between them (the batches may belong to different partitions).

    A batch that does not decode raises :class:`~broker.client.errors.CorruptBatchError` naming it, as
    :meth:`FetchedBatch.values` would; the batches before it are decoded, but not returned.
    """
    total = 0
    for fetched in batches:
        total += fetched.batch.record_count
    if total < _VECTORISED_MIN_RECORDS:
        return [fetched.values() for fetched in batches]
    bodies = [fetched._records_data() for fetched in batches]
    found = _decode_values_vectorised(
        bodies,
        [fetched.batch.record_count for fetched in batches],
        [fetched.batch.base_offset for fetched in batches],
        [fetched.from_offset for fetched in batches],
    )
    if found is None:  # something is off: decode batch by batch, so that the culprit is named
        return [fetched._values_python(body) for fetched, body in zip(batches, bodies, strict=True)]
    return [
        PartitionValues(fetched.topic_partition, offsets, values)
        for fetched, (offsets, values) in zip(batches, found, strict=True)
    ]


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
            elif key_length < -1:
                raise ValueError(f"record #{index}: key length {key_length}")
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
            if value_length < -1 or p + max(value_length, 0) > record_end:
                raise ValueError(f"record #{index}: value length {value_length} overruns the record")
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


#: Records per call from which the vectorised decoder is used (the break-even: see the module docstring).
_VECTORISED_MIN_RECORDS = 48
#: Equal-size records in a row worth one vectorised check (fewer are walked one by one).
_MIN_RUN = 16
#: Equal-size values at an equal distance in a row worth one strided copy (fewer are sliced one by one).
_MIN_VALUE_RUN = 8
_MAX_VARINT_BYTES = 10
#: Appended to the records so that reading a varint at any record's end stays inside the array.
_PADDING = bytes(2 * _MAX_VARINT_BYTES)


def _decode_values_vectorised(
    bodies: Sequence[bytes | memoryview],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    from_offsets: Sequence[int],
) -> list[tuple[range, list[bytes | None]]] | None:
    """Per batch (its record bytes, record count, base offset and ``from_offset``), what
    :func:`_decode_values_python` returns, all decoded in one numpy pass; or ``None`` when some batch is
    not as expected (malformed, or offsets other than ``base_offset``, ``base_offset + 1``, ... in order),
    and the Python walk must look at each batch.

    The batches' records are concatenated. The one sequential part is finding where each record starts:
    see :func:`_record_bounds`. Every batch must end exactly where its last record does. Then every field
    of every record is read at once, one varint per record per pass, and every value is checked to lie
    inside its record, so a record is accepted only when the walk would accept it too. Values that have
    the same length and lie at the same distance from each other are copied out by one strided numpy view
    (``.tolist()`` of a ``V<length>`` array gives ``bytes``), others by slicing.
    """
    if not load_decoder():
        return None
    import numpy as np  # noqa: PLC0415 - loaded on first use (see load_decoder)

    total = sum(counts)
    if total <= 0 or min(counts) < 0:
        return None
    data = b"".join([*bodies, _PADDING])
    end = len(data) - len(_PADDING)
    arr = np.frombuffer(data, dtype=np.uint8)
    bounds = _record_bounds(data, arr, total, end)
    if bounds is None:
        return None
    starts, ends = bounds
    first_indexes = list(accumulate(counts, initial=0))[:-1]
    local = np.arange(total, dtype=np.int64)  # each record's index in its batch
    if len(bodies) > 1:
        body_ends = list(accumulate(len(body) for body in bodies))
        if 0 in counts:
            if any(count == 0 and len(body) for count, body in zip(counts, bodies, strict=True)):
                return None  # a batch without records has bytes
            body_ends = [e for e, count in zip(body_ends, counts, strict=True) if count]
        last_indexes = [
            first + count - 1 for first, count in zip(first_indexes, counts, strict=True) if count
        ]
        if np.count_nonzero(ends[last_indexes] != body_ends):
            return None  # some batch's records do not end where the batch does
        size = counts[0]
        if counts.count(size) == len(counts):
            local %= size
        else:
            local -= np.repeat(first_indexes, counts)
    try:
        position = _varint_ends(arr, starts + 1)  # attributes: unused; timestamp delta: not needed
        if position is None:
            return None
        deltas = arr[position]
        if not np.count_nonzero(deltas >= 0x80):  # one byte each: the zigzag of delta k >= 0 is 2k
            if np.count_nonzero(deltas != 2 * local):
                return None  # offsets not consecutive from the base offset: the walk sorts them out
            position = position + 1
        else:
            parsed = _varints(arr, position)
            if parsed is None or np.count_nonzero(parsed[0] != local):
                return None
            position = parsed[1]
        parsed = _varints(arr, position)
        if parsed is None:
            return None
        key_lengths, position = parsed
        if isinstance(key_lengths, int):
            if key_lengths < -1:
                return None
            if key_lengths > 0:
                position = position + key_lengths
        else:
            if np.count_nonzero(key_lengths < -1):
                return None
            position = position + np.maximum(key_lengths, 0)
        parsed = _varints(arr, position)
        if parsed is None:
            return None
        value_lengths, value_starts = parsed
    except IndexError:  # a key length pointing past the end of the array
        return None
    if isinstance(value_lengths, int):
        if value_lengths < -1:
            return None
        value_ends = value_starts + max(value_lengths, 0)
    else:
        if np.count_nonzero(value_lengths < -1):
            return None
        value_ends = value_starts + np.maximum(value_lengths, 0)
    if np.count_nonzero(value_ends > ends):
        return None
    values = _values(data, value_starts, value_lengths, value_ends)
    out: list[tuple[range, list[bytes | None]]] = []
    for first, count, base_offset, from_offset in zip(
        first_indexes, counts, base_offsets, from_offsets, strict=True
    ):
        skip = from_offset - base_offset
        if skip <= 0:
            out.append((range(base_offset, base_offset + count), values[first : first + count]))
        elif skip < count:
            out.append((range(from_offset, base_offset + count), values[first + skip : first + count]))
        else:
            out.append((range(0), []))
    return out


def _record_bounds(
    data: bytes, arr: NDArray[np.uint8], count: int, end: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """Where each of ``count`` records in ``data[:end]`` starts (after its length varint) and ends, or
    ``None`` when they do not fill ``data[:end]`` exactly or a length is below the minimum.

    Done by runs: when a record is ``size`` bytes long, the next ``k`` records are presumed to be too, and
    numpy checks that the length varint at each presumed start says exactly that; the longest prefix that
    passes is exact by induction (each checked start is the previous start plus the previous record's own
    length). Records of varying sizes are walked one by one, in chunks that grow while runs keep failing.
    """
    import numpy as np  # noqa: PLC0415

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
            if room >= _MIN_RUN:
                presumed = np.arange(pos, pos + size * room, size, dtype=np.int64)
                same = arr[presumed] == byte
                for k in range(1, width):
                    same &= arr[presumed + k] == data[pos + k]
                run = room if np.count_nonzero(same) == room else int(np.argmin(same))
                if run >= _MIN_RUN:
                    starts[index : index + run] = presumed[:run] + width
                    ends[index : index + run] = presumed[:run] + size
                    index += run
                    pos += run * size
                    chunk = 32
                    continue
            stop = min(count, index + chunk)
            walked_starts: list[int] = []
            walked_ends: list[int] = []
            for _ in range(stop - index):
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
                if length < 6:
                    return None
                walked_starts.append(pos)
                pos += length
                walked_ends.append(pos)
            starts[index:stop] = walked_starts
            ends[index:stop] = walked_ends
            index = stop
            chunk = min(2 * chunk, 4096)
    except (IndexError, ValueError):
        return None
    if pos != end:
        return None
    return starts, ends


def _varint_ends(arr: NDArray[np.uint8], at: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """Where the varints starting at ``at`` end (``None`` when one is longer than 10 bytes)."""
    import numpy as np  # noqa: PLC0415

    more = arr[at] >= 0x80
    if not np.count_nonzero(more):
        return at + 1
    after = at + 1
    for _ in range(1, _MAX_VARINT_BYTES):
        after = after + more
        more &= arr[after - 1] >= 0x80
        if not np.count_nonzero(more):
            return after
    return None


def _varints(
    arr: NDArray[np.uint8], at: NDArray[np.int64]
) -> tuple[int | NDArray[np.int64], NDArray[np.int64]] | None:
    """The zigzag varints starting at ``at`` (one ``int`` when they are all the same one or two bytes),
    and where they end; ``None`` when one is longer than 10 bytes."""
    import numpy as np  # noqa: PLC0415

    first = arr[at]
    byte = int(first[0])
    if not np.count_nonzero(first != byte):  # the same first byte everywhere
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), at + 1
        second = arr[at + 1]
        next_byte = int(second[0])
        if next_byte < 0x80 and not np.count_nonzero(second != next_byte):
            raw = (byte & 0x7F) | (next_byte << 7)
            return (raw >> 1) ^ -(raw & 1), at + 2
    value = first.astype(np.int64)
    more = value >= 0x80
    if not np.count_nonzero(more):
        return (value >> 1) ^ -(value & 1), at + 1
    value &= 0x7F
    after = at + 1
    for shift in range(7, 7 * _MAX_VARINT_BYTES, 7):
        byte_array = arr[after].astype(np.int64)
        value |= np.where(more, (byte_array & 0x7F) << shift, 0)
        after = after + more
        more &= byte_array >= 0x80
        if not np.count_nonzero(more):
            return (value >> 1) ^ -(value & 1), after
    return None


def _values(
    data: bytes,
    starts: NDArray[np.int64],
    lengths: int | NDArray[np.int64],
    ends: NDArray[np.int64],
) -> list[bytes | None]:
    """``data[start:end]`` for each value (``None`` where the length is -1), as ``bytes``; ``lengths``
    is one ``int`` when all values have that length."""
    import numpy as np  # noqa: PLC0415

    count = len(starts)
    if isinstance(lengths, int):
        if lengths < 0:
            return [None] * count
        if lengths == 0:
            return [b""] * count
        if count >= _MIN_VALUE_RUN:
            # Runs of values at an equal distance from each other: one strided view, copied out at once.
            distances = np.diff(starts)
            breaks = np.flatnonzero(distances[1:] != distances[:-1])
            if len(breaks) * _MIN_VALUE_RUN <= count:
                dtype = np.dtype((np.void, lengths))
                edges = [0, *(breaks + 1).tolist(), count]
                values: list[bytes | None] = []
                for first, stop in pairwise(edges):
                    view = np.ndarray(
                        (stop - first,),
                        dtype=dtype,
                        buffer=data,
                        offset=int(starts[first]),
                        strides=(int(distances[first]),),  # every run starts before the last value
                    )
                    values.extend(view.tolist())
                return values
        return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    values = [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    if np.count_nonzero(lengths < 0):
        for null in np.flatnonzero(lengths < 0).tolist():
            values[null] = None
    return values


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
