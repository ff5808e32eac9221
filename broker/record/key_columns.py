"""The log cleaner's numpy strategy of the record walk: where every record of many batches lies, with its
offset, timestamp delta, key and whether its value is null, in one pass and without a Python object per
record.

A strategy of :mod:`broker.record.record_walker`, next to the consumer's
(:mod:`broker.record.value_columns`, whose record-locating and varint passes it shares): :func:`key_columns`
returns the columns of the records :meth:`~broker.record.record_batch.RecordBatch.records` would decode,
or ``None`` when it cannot vouch for them (then the caller walks the batches). The log cleaner builds its
offset map from the key columns and decides from them, per batch, whether any record is dropped: a batch
that keeps every record is copied as it is, one that loses some is rebuilt from the byte ranges of the
records it keeps (:func:`~broker.record.record_batch_builder.retained_batch_of_bytes`), so no record is
decoded into fields at all. :func:`key_columns_in` reads the bodies where they lie, between their headers
in a read of a segment (no copy), and has a keys-only mode for the map.

What it checks is what :func:`~broker.record.record_walker.walk_values` checks (the records fill each
batch's body exactly, the length, key length and value length varints fit their record), not the headers'
inner framing: it reads the broker's own log, whose batches were validated when they were appended.
Offset deltas may have gaps (batches the cleaner rebuilt before).

numpy is imported on first use (:func:`~broker.record.value_columns.load_decoder`); without numpy every
call declines. Stateless: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from broker.record.batch_header import COMPRESSION_MASK, HEADER_SIZE
from broker.record.value_columns import _PADDING, _varint_ends, _varints, load_decoder
from broker.record.varint import decode_varint

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from broker.record.record_batch import RecordBatch

__all__ = ["PADDING_BYTES", "KeyColumns", "batch_key_columns", "key_columns", "key_columns_in"]

#: Bytes :func:`key_columns_in` needs after the last body (varints are read a few bytes ahead).
PADDING_BYTES = len(_PADDING)


@dataclass(frozen=True, slots=True)
class KeyColumns:
    """The records of some batches, one array entry per record, in order (see the module docstring).

    Positions are into :attr:`data`: the batches' (decompressed) record bodies end to end, or the buffer
    the bodies lie in (:func:`key_columns_in`)."""

    data: bytes | bytearray
    array: NDArray[np.uint8]
    #: Where each batch's records start among the entries (``len(batches) + 1`` entries, the last the total).
    batch_starts: list[int]
    #: Where each record starts (at its length varint) and ends.
    record_starts: NDArray[np.int64]
    record_ends: NDArray[np.int64]
    offsets: NDArray[np.int64]
    timestamp_deltas: NDArray[np.int64]
    key_starts: NDArray[np.int64]
    #: -1 for a record without a key.
    key_lengths: NDArray[np.int64]
    null_values: NDArray[np.bool_]

    def per_batch(self, values: NDArray[np.bool_] | NDArray[np.int64]) -> NDArray[np.int64]:
        """The sum of ``values`` (one per record, in order) over each batch's records: one entry per
        batch (a record mask gives how many records of each batch it holds)."""
        import numpy as np  # noqa: PLC0415 - loaded already: these columns were made with it

        so_far = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(values, out=so_far[1:])
        starts = np.asarray(self.batch_starts, dtype=np.int64)
        return so_far[starts[1:]] - so_far[starts[:-1]]


def key_columns(
    bodies: Sequence[bytes | memoryview], counts: Sequence[int], base_offsets: Sequence[int]
) -> KeyColumns | None:
    """The columns of the records of batches given by their record bodies (decompressed), record counts
    and base offsets; ``None`` when some batch is not as expected (then walk them)."""
    if not bodies or not load_decoder():
        return None
    data = b"".join([*bodies, _PADDING])
    body_starts = list(accumulate((len(body) for body in bodies), initial=0))
    return key_columns_in(data, body_starts[:-1], body_starts[1:], counts, base_offsets)


def key_columns_in(
    data: bytes | bytearray,
    body_starts: Sequence[int] | NDArray[np.int64],
    body_ends: Sequence[int] | NDArray[np.int64],
    counts: Sequence[int] | NDArray[np.int64],
    base_offsets: Sequence[int] | NDArray[np.int64],
    *,
    keys_only: bool = False,
) -> KeyColumns | None:
    """:func:`key_columns` of batches whose record bodies lie in ``data`` at ``[body_starts[i],
    body_ends[i])``, in order (other bytes may lie between them, such as the batches' headers in a read
    of a segment: the log cleaner's way, with no copy of the bodies); ``data`` must hold at least
    :data:`PADDING_BYTES` bytes after the last body. ``None`` when some batch is not as expected.

    ``keys_only`` (what the cleaner's offset map needs): the timestamp deltas are skipped, not read, and
    the values not read at all (:attr:`KeyColumns.timestamp_deltas` all 0, :attr:`KeyColumns.null_values`
    all ``False``); each key is checked to lie inside its record, as the value is otherwise."""
    if not len(counts) or not load_decoder():
        return None
    import numpy as np  # noqa: PLC0415 - loaded on first use (see load_decoder)

    counts_array = np.asarray(counts, dtype=np.int64)
    body_starts_array = np.asarray(body_starts, dtype=np.int64)
    body_ends_array = np.asarray(body_ends, dtype=np.int64)
    total = int(counts_array.sum())
    if int(counts_array.min()) < 0 or len(data) - int(body_ends_array[-1]) < len(_PADDING):
        return None
    starts_array = np.zeros(len(counts_array) + 1, dtype=np.int64)
    np.cumsum(counts_array, out=starts_array[1:])
    batch_starts: list[int] = starts_array.tolist()
    arr = np.frombuffer(data, dtype=np.uint8)
    empty = np.empty(0, dtype=np.int64)
    sized = body_ends_array > body_starts_array
    if total == 0:
        if np.count_nonzero(sized):
            return None  # batches without records have bytes
        return KeyColumns(
            data, arr, batch_starts, empty, empty, empty, empty, empty, empty, np.empty(0, dtype=np.bool_)
        )
    if np.count_nonzero(sized & (counts_array == 0)):
        return None  # a batch without records has bytes
    bounds = _record_bounds(data, arr, body_starts_array, body_ends_array, counts_array, starts_array)
    if bounds is None:
        return None
    record_starts, starts, ends = bounds
    try:
        if keys_only:
            skipped = _varint_ends(arr, starts + 1)
            if skipped is None:
                return None
            timestamp_deltas: int | NDArray[np.int64] = 0
            position = skipped
        else:
            parsed = _varints(arr, starts + 1)  # after the attributes byte (unused)
            if parsed is None:
                return None
            timestamp_deltas, position = parsed
        parsed = _varints(arr, position)
        if parsed is None:
            return None
        offset_deltas, position = parsed
        parsed = _varints(arr, position)
        if parsed is None:
            return None
        key_lengths, key_starts = parsed
        key_lengths = np.broadcast_to(np.asarray(key_lengths, dtype=np.int64), (total,))
        if np.count_nonzero(key_lengths < -1):
            return None
        if keys_only:
            if np.count_nonzero(key_starts + np.maximum(key_lengths, 0) > ends):
                return None
            return KeyColumns(
                data=data,
                array=arr,
                batch_starts=batch_starts,
                record_starts=record_starts,
                record_ends=ends,
                offsets=np.repeat(np.asarray(base_offsets, dtype=np.int64), counts_array) + offset_deltas,
                timestamp_deltas=np.zeros(total, dtype=np.int64),
                key_starts=key_starts,
                key_lengths=key_lengths,
                null_values=np.zeros(total, dtype=np.bool_),
            )
        parsed = _varints(arr, key_starts + np.maximum(key_lengths, 0))
        if parsed is None:
            return None
        value_lengths, value_starts = parsed
    except IndexError:  # a length pointing past the end of the array
        return None
    value_lengths = np.broadcast_to(np.asarray(value_lengths, dtype=np.int64), (total,))
    if np.count_nonzero(value_lengths < -1) or np.count_nonzero(
        value_starts + np.maximum(value_lengths, 0) > ends
    ):
        return None
    offsets = np.repeat(np.asarray(base_offsets, dtype=np.int64), counts_array) + offset_deltas
    return KeyColumns(
        data=data,
        array=arr,
        batch_starts=batch_starts,
        record_starts=record_starts,
        record_ends=ends,
        offsets=offsets,
        timestamp_deltas=np.broadcast_to(np.asarray(timestamp_deltas, dtype=np.int64), (total,)),
        key_starts=key_starts,
        key_lengths=key_lengths,
        null_values=value_lengths < 0,
    )


def batch_key_columns(batches: Sequence[RecordBatch]) -> KeyColumns | None:
    """:func:`key_columns` of ``batches`` (none of them a control batch), decompressing their bodies where
    needed; ``None`` when there are none or the strategy declines them."""
    if not batches:
        return None
    bodies = [
        b.buffer[HEADER_SIZE:] if b.attributes & COMPRESSION_MASK == 0 else b.records_data() for b in batches
    ]
    return key_columns(bodies, [b.record_count for b in batches], [b.base_offset for b in batches])


def _record_bounds(
    data: bytes | bytearray,
    arr: NDArray[np.uint8],
    body_starts: NDArray[np.int64],
    body_ends: NDArray[np.int64],
    counts: NDArray[np.int64],
    batch_starts: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]] | None:
    """Where each record starts (at its length varint), where its fields start (after it) and where it
    ends; ``None`` when the records of some batch do not fill its body exactly.

    A producer's batch is mostly records of one size, one byte longer from the 65th record on (its offset
    delta takes two bytes) and one more from the 8,193rd: every record's start is predicted from the size
    of its batch's first one, and numpy proves the prediction by reading the length varint at every
    predicted start, which must reach exactly the next predicted start (the body's end for the last
    record): by induction from the body's first byte, the predicted starts are then the records' starts.
    Batches whose prediction fails are walked one record at a time (about 0.2 us per record).
    """
    import numpy as np  # noqa: PLC0415

    total = int(batch_starts[-1])
    with_records = np.flatnonzero(counts)
    nonempty_counts = counts[with_records]
    first_starts = body_starts[with_records]
    try:
        parsed = _varints(arr, first_starts)  # the first record's length in each batch with records
    except IndexError:
        return None
    if parsed is None:
        return None
    firsts = parsed[1] - first_starts + parsed[0]  # the first record's size
    if int(firsts.min()) < 7:
        return None
    index = np.arange(total, dtype=np.int64) - np.repeat(batch_starts[with_records], nonempty_counts)
    predicted = np.repeat(first_starts, nonempty_counts)
    predicted += index * np.repeat(firsts, nonempty_counts)
    predicted += np.maximum(index - 64, 0)
    predicted += np.maximum(index - 8192, 0)
    next_start = np.empty(total, dtype=np.int64)
    next_start[:-1] = predicted[1:]
    last = np.cumsum(nonempty_counts) - 1
    next_start[last] = body_ends[with_records]
    try:
        parsed = _varints(arr, predicted)
    except IndexError:  # a prediction past the end of the data
        parsed = None
    after: NDArray[np.int64] = np.zeros(total, dtype=np.int64)
    ends: NDArray[np.int64] = np.zeros(total, dtype=np.int64)
    wrong: NDArray[np.bool_] = np.ones(total, dtype=np.bool_)
    if parsed is not None:
        lengths = np.broadcast_to(np.asarray(parsed[0], dtype=np.int64), (total,))
        after = parsed[1]
        ends = after + lengths
        wrong = (ends != next_start) | (lengths < 6)
    if np.count_nonzero(wrong):
        for batch in np.unique(np.searchsorted(last, np.flatnonzero(wrong))).tolist():
            i = int(with_records[batch])
            first, count = int(batch_starts[i]), int(counts[i])
            walked = _walk_bounds(data, int(body_starts[i]), int(body_ends[i]), count)
            if walked is None:
                return None
            predicted[first : first + count] = walked[0]
            after[first : first + count] = walked[1]
            ends[first : first + count] = walked[2]
    return predicted, after, ends


def _walk_bounds(
    data: bytes | bytearray, pos: int, end: int, count: int
) -> tuple[list[int], list[int], list[int]] | None:
    """The starts, field starts and ends of ``count`` records from ``pos``, which must end at ``end``."""
    starts: list[int] = []
    fields: list[int] = []
    ends: list[int] = []
    try:
        for _ in range(count):
            starts.append(pos)
            byte = data[pos]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                length, pos = decode_varint(data, pos)
            if length < 6:
                return None
            fields.append(pos)
            pos += length
            ends.append(pos)
    except (IndexError, ValueError):
        return None
    return (starts, fields, ends) if pos == end else None
