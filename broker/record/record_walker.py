"""The one reader of record bodies, and how it is used: every decoder of records in Lumber is this module.

The records' layout is :mod:`broker.record.record`'s. A body (the records of one batch, decompressed)
is read by one of these strategies, each proving or decoding exactly what the walk would:

* :func:`walk_records`, the per-record Python walk: every field, with inline single-byte varint fast
  paths and a cache of the last header block (records of one producer carry the same). It decodes
  (the log's :meth:`~broker.record.record_batch.RecordBatch.records`, the consumer's records, the
  load's columns, the mirror's audit) or validates (offset deltas 0, 1, 2 ..., the record count filling
  the data exactly). It is the reference: the other strategies decline what they cannot vouch for, and
  this one names what is wrong.
* :func:`walk_values`, the same walk for offsets and values only (timestamps and headers skipped by
  length): the consumer's ``poll_values`` below :data:`VECTORISED_MIN_RECORDS` records.
* :mod:`broker.record.layout_check`: the validator's fast paths (records of one layout proved by strided
  byte comparisons; runs of one-record batches proved together).
* :mod:`broker.record.value_columns`: the consumer's numpy pass over the values of many batches at once.
* :mod:`broker.record.key_columns`: the log cleaner's numpy pass over many batches at once: where each
  record lies, its offset, timestamp delta, key and whether its value is null, with no object per record.

Thread safety: the walks share nothing but the header cache, one module-level tuple replaced whole (see
``_recent_headers``): threads walking at once are safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.record.errors import CorruptRecordError, InvalidRecordError
from broker.record.record import Record
from broker.record.record_header import Header
from broker.record.varint import decode_varint

__all__ = ["NO_OFFSET_LIMIT", "VECTORISED_MIN_RECORDS", "walk_records", "walk_values"]

#: ``until_offset`` that keeps every record.
NO_OFFSET_LIMIT = 1 << 63
#: Records per call from which the consumer's values are decoded by the numpy pass
#: (:mod:`broker.record.value_columns`) rather than :func:`walk_values`: the measured break-even
#: (``bench/consumer_decode.py``: 45-50 records in one batch, 30-40 in batches of one record).
VECTORISED_MIN_RECORDS = 48

# The header block the walker decoded last, and its headers: batches of one record from one producer carry
# the same. One tuple replaced whole, so threads walking at once read a consistent pair (at worst another
# thread's, which is as valid: the bytes are compared before the headers are used). ``b""`` is never equal
# to a header block, which holds at least the count.
_recent_headers: tuple[bytes, tuple[Header, ...]] = (b"", ())


def walk_records(
    data: bytes,
    count: int,
    base_offset: int,
    first_timestamp_ms: int,
    log_append_time_ms: int | None,
    where: str,
    position: int | None,
    *,
    decode: bool = True,
    first_index: int = 0,
    from_offset: int = 0,
    until_offset: int = NO_OFFSET_LIMIT,
) -> list[Record]:
    """Walk ``count`` records in ``data``: the one reader of record bodies (inline single-byte varint
    fast paths). ``first_index`` is the index of the first of them in its batch (the first offset delta
    expected, and the record number errors name).

    ``decode``: return the :class:`Record` of each record whose offset is in ``[from_offset,
    until_offset)`` (a fetch returns whole batches, so readers skip what they did not ask for). Otherwise
    (validation) build nothing, return ``[]`` and also require offset deltas 0, 1, 2, ...; a record count
    that does not match the data is then an :class:`InvalidRecordError` (Kafka's "incorrect declared
    batch size"), as is a wrong offset delta. Framing errors are :class:`CorruptRecordError` either way;
    they name ``where``, ``position`` and the record.
    """
    records: list[Record] = []
    append = records.append
    new = tuple.__new__
    pos = 0
    end = len(data)
    index = 0
    global _recent_headers  # noqa: PLW0603 - a cache of one entry, replaced whole (see its comment)
    last_header_bytes, last_headers = _recent_headers
    try:
        for index in range(first_index, first_index + count):
            if pos >= end and not decode:
                raise InvalidRecordError(
                    where,
                    f"the header counts {count} records but the data holds {index}",
                    position=position,
                )
            byte = data[pos]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # two bytes: records of 64 B to 8 KiB
                length = (byte & 0x7F) | (data[pos + 1] << 7)
                length = (length >> 1) ^ -(length & 1)
                pos += 2
            else:
                length, pos = decode_varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise _record_error(
                    where, position, index, f"record length {length} with {end - pos} bytes left"
                )
            pos += 1  # attributes: unused
            byte = data[pos]
            if byte < 0x80:
                timestamp_delta = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                timestamp_delta, pos = decode_varint(data, pos)
            byte = data[pos]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                offset_delta, pos = decode_varint(data, pos)
            byte = data[pos]
            if byte < 0x80:
                key_len = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                key_len, pos = decode_varint(data, pos)
            key: bytes | None
            if key_len >= 0:
                if pos + key_len > record_end:
                    raise _record_error(
                        where, position, index, f"key length {key_len} runs past the record's end"
                    )
                key = data[pos : pos + key_len] if decode else None
                pos += key_len
            elif key_len == -1:
                key = None
            else:
                raise _record_error(where, position, index, f"key length {key_len}")
            byte = data[pos]
            if byte < 0x80:
                value_len = (byte >> 1) ^ -(byte & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                value_len = (byte & 0x7F) | (data[pos + 1] << 7)
                value_len = (value_len >> 1) ^ -(value_len & 1)
                pos += 2
            else:
                value_len, pos = decode_varint(data, pos)
            value: bytes | None
            if value_len >= 0:
                if pos + value_len > record_end:
                    raise _record_error(
                        where, position, index, f"value length {value_len} runs past the record's end"
                    )
                value = data[pos : pos + value_len] if decode else None
                pos += value_len
            elif value_len == -1:
                value = None
            else:
                raise _record_error(where, position, index, f"value length {value_len}")
            byte = data[pos]
            headers: tuple[Header, ...]
            if byte == 0:
                headers = ()
                pos += 1
            else:
                # Records mostly carry the same headers (the producer's host): the same bytes as the last
                # record's (of this batch or, for batches of one record, the last batch) decode to the same
                # headers, and fit the same way.
                header_bytes = data[pos:record_end]
                if header_bytes == last_header_bytes:
                    headers = last_headers
                    pos = record_end
                else:
                    headers, pos = _decode_headers(data, pos, where, position, index)
                    if pos == record_end:
                        last_header_bytes, last_headers = _recent_headers = header_bytes, headers
            if pos != record_end:
                raise _record_error(
                    where,
                    position,
                    index,
                    f"record length says {length} bytes, fields take {pos - record_end + length}",
                )
            if decode:
                offset = base_offset + offset_delta
                if from_offset <= offset < until_offset:
                    timestamp_ms = (
                        first_timestamp_ms + timestamp_delta
                        if log_append_time_ms is None
                        else log_append_time_ms
                    )
                    append(new(Record, (offset, timestamp_ms, key, value, headers)))
            elif offset_delta != index:
                raise InvalidRecordError(
                    where,
                    f"record #{index}: offset delta {offset_delta}, expected {index}",
                    position=position,
                )
    except (IndexError, ValueError) as exc:
        raise _record_error(where, position, index, f"record cut short or malformed ({exc})") from exc
    if pos != end:
        if decode:
            raise _record_error(where, position, count, f"{end - pos} bytes left after {count} records")
        raise InvalidRecordError(
            where,
            f"the header counts {count} records but {end - pos} bytes are left after them",
            position=position,
        )
    return records


def walk_values(
    data: bytes,
    count: int,
    base_offset: int,
    from_offset: int,
    where: str = "<records>",
    position: int | None = None,
) -> tuple[Sequence[int], list[bytes | None]]:
    """The values strategy: walk ``count`` records, returning the offsets and values of those at
    ``from_offset`` or later (``offsets`` a ``range`` when they are consecutive). Timestamps are skipped
    by their continuation bits and headers by the record's length, so it checks less than
    :func:`walk_records` (lengths against the record and the data, not the headers' inner framing).
    Raises :class:`CorruptRecordError` naming ``where``, ``position`` and the record.
    """
    try:
        return _walk_values(data, count, base_offset, from_offset)
    except ValueError as exc:
        raise CorruptRecordError(where, str(exc), position=position) from exc


def _walk_values(
    data: bytes, count: int, base_offset: int, from_offset: int
) -> tuple[Sequence[int], list[bytes | None]]:
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


def _decode_headers(
    data: bytes, pos: int, where: str, position: int | None, index: int
) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise _record_error(where, position, index, f"header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        key_len, pos = decode_varint(data, pos)
        if key_len < 0 or pos + key_len > len(data):
            raise _record_error(where, position, index, f"header key length {key_len}")
        try:
            key = data[pos : pos + key_len].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _record_error(where, position, index, f"header key is not UTF-8: {exc}") from exc
        pos += key_len
        value_len, pos = decode_varint(data, pos)
        value: bytes | None
        if value_len >= 0:
            value = data[pos : pos + value_len]
            pos += value_len
        elif value_len == -1:
            value = None
        else:
            raise _record_error(where, position, index, f"header value length {value_len}")
        headers.append((key, value))
    return tuple(headers), pos


def _record_error(where: str, position: int | None, index: int, reason: str) -> CorruptRecordError:
    return CorruptRecordError(where, f"record #{index}: {reason}", position=position)
