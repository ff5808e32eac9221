"""The log cleaner's compiled strategy of the record walk: where every record of many batches lies, with its
offset, timestamp delta, key and whether its value is null, in one compiled loop over the records
(:func:`~broker.record.column_kernels.walk_records`) and without a Python object per record.

A strategy of :mod:`broker.record.record_walker`, next to the consumer's (:mod:`broker.record.value_columns`):
:func:`key_columns` returns the columns of the records :meth:`~broker.record.record_batch.RecordBatch.records`
would decode, or ``None`` when it cannot vouch for them; :func:`walked_key_columns_in` returns the same
columns by the walk, or the walk's error naming the record. Which one reads is the batches' choice
(:meth:`~broker.record.record_batch.RecordBatch.key_columns`, ``key_columns_of``), not the caller's. The log
cleaner builds its offset map from the key columns and decides from them, per batch, whether any record is
dropped: a batch that keeps every record is copied as it is, one that loses some is rebuilt from the byte
ranges of the records it keeps (:func:`~broker.record.record_batch_builder.retained_batch_of_bytes`), so no
record is decoded into fields at all. :func:`key_columns_in` reads the bodies where they lie, between their
headers in a read of a segment (no copy), and has a keys-only mode for the map.

What it checks is what :func:`~broker.record.record_walker.walk_values` checks (the records fill each
batch's body exactly; the length, timestamp delta, offset delta, key length and value length varints and
the key and value lie inside their record), not the headers' inner framing: it reads the broker's own log,
whose batches were validated when they were appended. Offset deltas may have gaps (batches the cleaner
rebuilt before).

numpy is imported on first use (:func:`~broker.record.value_columns.load_decoder`; without numpy every
call declines), and numba with the kernel's module on the first call (:mod:`broker.compiled`).
Stateless: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from broker.record.batch_header import COMPRESSION_MASK, HEADER_SIZE
from broker.record.errors import CorruptRecordError
from broker.record.record_walker import walk_records
from broker.record.value_columns import load_decoder
from broker.record.varint import decode_varint

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from broker.record.record_batch import RecordBatch

__all__ = ["KeyColumns", "batch_key_columns", "key_columns", "key_columns_in", "walked_key_columns_in"]


@dataclass(frozen=True, slots=True)
class KeyColumns:
    """The records of some batches, one array entry per record, in order (see the module docstring).

    Positions are into :attr:`data`: the batches' (decompressed) record bodies end to end, or the buffer
    the bodies lie in (:func:`key_columns_in`)."""

    data: bytes | bytearray | memoryview
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
    bodies: Sequence[bytes | memoryview],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    *,
    keys_only: bool = False,
) -> KeyColumns | None:
    """The columns of the records of batches given by their record bodies (decompressed), record counts
    and base offsets; ``None`` when some batch is not as expected (then walk them)."""
    if not bodies or not load_decoder():
        return None
    data = b"".join(bodies)
    body_starts = list(accumulate((len(body) for body in bodies), initial=0))
    return key_columns_in(data, body_starts[:-1], body_starts[1:], counts, base_offsets, keys_only=keys_only)


def key_columns_in(
    data: bytes | bytearray | memoryview,
    body_starts: Sequence[int] | NDArray[np.int64],
    body_ends: Sequence[int] | NDArray[np.int64],
    counts: Sequence[int] | NDArray[np.int64],
    base_offsets: Sequence[int] | NDArray[np.int64],
    *,
    keys_only: bool = False,
) -> KeyColumns | None:
    """:func:`key_columns` of batches whose record bodies lie in ``data`` at ``[body_starts[i],
    body_ends[i])``, in order (other bytes may lie between them, such as the batches' headers in a read
    of a segment: the log cleaner's way, with no copy of the bodies). ``None`` when some batch is not as
    expected.

    ``keys_only`` (what the cleaner's offset map needs): the timestamp deltas are skipped, not read, and
    the values not read at all (:attr:`KeyColumns.timestamp_deltas` all 0, :attr:`KeyColumns.null_values`
    all ``False``); each key is checked to lie inside its record, as the value is otherwise."""
    if not len(counts) or not load_decoder():
        return None
    import numpy as np  # noqa: PLC0415 - loaded on first use (see load_decoder)

    from broker.record.column_kernels import walk_records as compiled_walk  # noqa: PLC0415 - numba

    counts_array = np.asarray(counts, dtype=np.int64)
    if int(counts_array.min()) < 0:
        return None
    columns = _empty_columns(data, counts_array, keys_only=keys_only)
    failed = compiled_walk(
        columns.array,
        np.asarray(body_starts, dtype=np.int64),
        np.asarray(body_ends, dtype=np.int64),
        counts_array,
        np.asarray(base_offsets, dtype=np.int64),
        keys_only,
        columns.record_starts,
        columns.record_ends,
        columns.offsets,
        columns.timestamp_deltas,
        columns.key_starts,
        columns.key_lengths,
        columns.null_values,
    )
    return columns if failed < 0 else None


def batch_key_columns(batches: Sequence[RecordBatch]) -> KeyColumns | None:
    """:func:`key_columns` of ``batches`` (none of them a control batch), decompressing their bodies where
    needed; ``None`` when there are none or the strategy declines them."""
    if not batches:
        return None
    bodies = [
        b.buffer[HEADER_SIZE:] if b.attributes & COMPRESSION_MASK == 0 else b.records_data() for b in batches
    ]
    return key_columns(bodies, [b.record_count for b in batches], [b.base_offset for b in batches])


def walked_key_columns_in(
    data: bytes | bytearray | memoryview,
    body_starts: Sequence[int] | NDArray[np.int64],
    body_ends: Sequence[int] | NDArray[np.int64],
    counts: Sequence[int] | NDArray[np.int64],
    base_offsets: Sequence[int] | NDArray[np.int64],
    names: Sequence[tuple[str, int | None]],
    *,
    keys_only: bool = False,
) -> KeyColumns:
    """:func:`key_columns_in` by the walk (:func:`~broker.record.record_walker.walk_records`, the
    reference): the same columns, or the walk's :class:`~broker.record.errors.CorruptRecordError` naming
    the record that is wrong, its batch named by ``names[i]`` (where, position). The reader of what the
    compiled loop declines; needs numpy."""
    import numpy as np  # noqa: PLC0415 - the storage's (see the module docstring)

    counts_list = [int(count) for count in counts]
    for count, (where, position) in zip(counts_list, names, strict=True):
        if count < 0:
            raise CorruptRecordError(where, f"negative record count {count}", position=position)
    bases = [int(base) for base in base_offsets]
    columns = _empty_columns(data, np.asarray(counts_list, dtype=np.int64), keys_only=keys_only)
    r = 0
    starts = np.asarray(body_starts).tolist()
    ends = np.asarray(body_ends).tolist()
    for start, end, count, base_offset, (where, position) in zip(
        starts, ends, counts_list, bases, names, strict=True
    ):
        # the walk raises its error naming the record that is wrong
        walk_records(bytes(data[start:end]), count, base_offset, 0, None, where, position)
        pos = start
        for _ in range(count):  # the walk proved every field to lie inside its record
            columns.record_starts[r] = pos
            length, pos = decode_varint(data, pos)
            record_end = pos + length
            columns.record_ends[r] = record_end
            timestamp_delta, pos = decode_varint(data, pos + 1)  # after the attributes byte
            offset_delta, pos = decode_varint(data, pos)
            key_length, pos = decode_varint(data, pos)
            columns.offsets[r] = base_offset + offset_delta
            columns.key_starts[r] = pos
            columns.key_lengths[r] = key_length
            if not keys_only:
                columns.timestamp_deltas[r] = timestamp_delta
                value_length, _ = decode_varint(data, pos + max(key_length, 0))
                columns.null_values[r] = value_length < 0
            pos = record_end
            r += 1
    return columns


def _empty_columns(
    data: bytes | bytearray | memoryview, counts: NDArray[np.int64], *, keys_only: bool
) -> KeyColumns:
    """Columns for ``counts[i]`` records of each batch, to be filled (timestamp deltas 0 and values not
    null when ``keys_only``: they are not read)."""
    import numpy as np  # noqa: PLC0415 - see key_columns_in

    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    total = int(starts[-1])
    return KeyColumns(
        data=data,
        array=np.frombuffer(data, dtype=np.uint8),
        batch_starts=starts.tolist(),
        record_starts=np.empty(total, dtype=np.int64),
        record_ends=np.empty(total, dtype=np.int64),
        offsets=np.empty(total, dtype=np.int64),
        timestamp_deltas=np.zeros(total, dtype=np.int64) if keys_only else np.empty(total, dtype=np.int64),
        key_starts=np.empty(total, dtype=np.int64),
        key_lengths=np.empty(total, dtype=np.int64),
        null_values=np.zeros(total, dtype=np.bool_),
    )
