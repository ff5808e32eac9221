"""The log cleaner's compiled strategy of the record walk: where every record of many batches lies, with its
offset, timestamp delta, key and whether its value is null, in one compiled loop over the records
(:func:`~broker.record.column_kernels.walk_records`) and without a Python object per record.

A strategy of :mod:`broker.record.record_walker`, next to the consumer's
(:mod:`broker.record.value_columns`): :func:`key_columns`
returns the columns of the records :meth:`~broker.record.record_batch.RecordBatch.records` would decode,
or ``None`` when it cannot vouch for them (then the caller walks the batches). The log cleaner builds its
offset map from the key columns and decides from them, per batch, whether any record is dropped: a batch
that keeps every record is copied as it is, one that loses some is rebuilt from the byte ranges of the
records it keeps (:func:`~broker.record.record_batch_builder.retained_batch_of_bytes`), so no record is
decoded into fields at all. :func:`key_columns_in` reads the bodies where they lie, between their headers
in a read of a segment (no copy), and has a keys-only mode for the map.

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
from broker.record.value_columns import load_decoder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from broker.record.record_batch import RecordBatch

__all__ = ["KeyColumns", "batch_key_columns", "key_columns", "key_columns_in"]


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
    bodies: Sequence[bytes | memoryview], counts: Sequence[int], base_offsets: Sequence[int]
) -> KeyColumns | None:
    """The columns of the records of batches given by their record bodies (decompressed), record counts
    and base offsets; ``None`` when some batch is not as expected (then walk them)."""
    if not bodies or not load_decoder():
        return None
    data = b"".join(bodies)
    body_starts = list(accumulate((len(body) for body in bodies), initial=0))
    return key_columns_in(data, body_starts[:-1], body_starts[1:], counts, base_offsets)


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

    from broker.record.column_kernels import walk_records  # noqa: PLC0415 - numba, on first use

    counts_array = np.asarray(counts, dtype=np.int64)
    if int(counts_array.min()) < 0:
        return None
    starts_array = np.zeros(len(counts_array) + 1, dtype=np.int64)
    np.cumsum(counts_array, out=starts_array[1:])
    total = int(starts_array[-1])
    arr = np.frombuffer(data, dtype=np.uint8)
    columns = KeyColumns(
        data=data,
        array=arr,
        batch_starts=starts_array.tolist(),
        record_starts=np.empty(total, dtype=np.int64),
        record_ends=np.empty(total, dtype=np.int64),
        offsets=np.empty(total, dtype=np.int64),
        timestamp_deltas=np.zeros(total, dtype=np.int64) if keys_only else np.empty(total, dtype=np.int64),
        key_starts=np.empty(total, dtype=np.int64),
        key_lengths=np.empty(total, dtype=np.int64),
        null_values=np.zeros(total, dtype=np.bool_),
    )
    failed = walk_records(
        arr,
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
