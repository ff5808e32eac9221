"""The compiled loops of the cleaner's rewrite (:class:`broker.log.chunk_rewriter.ChunkRewriter`):
:func:`keep_records` decides which records of a chunk stay and sums what each batch keeps,
:func:`copy_kept` copies the kept headers and records out of the chunk, in runs of consecutive bytes.

Imported on first use (it imports numba: :mod:`broker.compiled`). Stateless: the arrays are the calling
cleaner thread's.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from broker.compiled import inlined, kernel

__all__ = ["copy_kept", "keep_records"]

_NO_TIMESTAMP = np.iinfo(np.int64).min


@kernel
def keep_records(
    batch_starts: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    key_lengths: npt.NDArray[np.int64],
    null_values: npt.NDArray[np.bool_],
    record_starts: npt.NDArray[np.int64],
    record_ends: npt.NDArray[np.int64],
    timestamp_deltas: npt.NDArray[np.int64],
    mapped: npt.NDArray[np.int64],
    latest_offset: int,
    drop_tombstones: npt.NDArray[np.bool_],
    keep: npt.NDArray[np.bool_],
    kept: npt.NDArray[np.int64],
    kept_tombstones: npt.NDArray[np.int64],
    kept_bytes: npt.NDArray[np.int64],
    newest: npt.NDArray[np.int64],
) -> None:
    """Which records stay (``keep``, one per record; the rule is :mod:`broker.log.log_cleaner`'s step 3):
    a record past ``latest_offset`` (the map's end), or a keyed record at or after its key's mapped
    offset (``mapped``, one per keyed record, in order) unless it is a tombstone of a batch in
    ``drop_tombstones``. Per batch (records ``[batch_starts[b], batch_starts[b + 1])``): how many records
    it keeps, how many of them are tombstones, their bytes, and their largest timestamp delta (the
    smallest int64 when none)."""
    k = 0
    for b in range(len(batch_starts) - 1):
        count = 0
        tombstones = 0
        size = 0
        latest = _NO_TIMESTAMP
        drop = drop_tombstones[b]
        for r in range(batch_starts[b], batch_starts[b + 1]):
            offset = offsets[r]
            stays = offset > latest_offset
            if key_lengths[r] >= 0:
                if offset >= mapped[k] and not (drop and null_values[r]):
                    stays = True
                k += 1
            keep[r] = stays
            if stays:
                count += 1
                if null_values[r]:
                    tombstones += 1
                size += record_ends[r] - record_starts[r]
                latest = max(latest, timestamp_deltas[r])
        kept[b] = count
        kept_tombstones[b] = tombstones
        kept_bytes[b] = size
        newest[b] = latest


@kernel
def copy_kept(
    data: npt.NDArray[np.uint8],
    batch_starts: npt.NDArray[np.int64],
    positions: npt.NDArray[np.int64],
    header_size: int,
    header_kept: npt.NDArray[np.bool_],
    records_kept: npt.NDArray[np.bool_],
    record_starts: npt.NDArray[np.int64],
    record_ends: npt.NDArray[np.int64],
    keep: npt.NDArray[np.bool_],
    out: npt.NDArray[np.uint8],
    out_positions: npt.NDArray[np.int64],
) -> int:
    """Copy to ``out``, in the chunk's order, the header (``header_size`` bytes of ``data`` at
    ``positions[b]``) of every batch in ``header_kept`` and the kept records (``keep``) of every batch in
    ``records_kept``, consecutive byte ranges of ``data`` as one copy (a stretch of whole batches is one);
    ``out_positions[b]``: where batch ``b``'s bytes start in ``out`` (the last entry: the end). Returns
    the bytes copied. ``out`` has room for every batch of the chunk; ranges outside ``data`` are not
    copied and the result is then -1."""
    limit = len(data)
    copied = 0
    run_start = 0  # the pending range of data, not yet copied
    run_end = 0
    for b in range(len(positions)):
        out_positions[b] = copied + run_end - run_start
        if header_kept[b]:
            start = positions[b]
            if start != run_end:
                copied = _copy_run(data, out, copied, run_start, run_end, limit)
                if copied < 0:
                    return -1
                run_start = start
            run_end = start + header_size
        if records_kept[b]:
            for r in range(batch_starts[b], batch_starts[b + 1]):
                if keep[r]:
                    start = record_starts[r]
                    if start != run_end:
                        copied = _copy_run(data, out, copied, run_start, run_end, limit)
                        if copied < 0:
                            return -1
                        run_start = start
                    run_end = record_ends[r]
    copied = _copy_run(data, out, copied, run_start, run_end, limit)
    if copied < 0:
        return -1
    out_positions[len(positions)] = copied
    return copied


@inlined
def _copy_run(
    data: npt.NDArray[np.uint8],
    out: npt.NDArray[np.uint8],
    copied: int,
    run_start: int,
    run_end: int,
    limit: int,
) -> int:
    """Copy ``data[run_start:run_end]`` to ``out`` at ``copied``; the bytes copied so far after it, or -1
    when the range does not lie inside ``data`` (nothing copied)."""
    if run_end > limit or run_start < 0:
        return -1
    out[copied : copied + run_end - run_start] = data[run_start:run_end]
    return copied + run_end - run_start
