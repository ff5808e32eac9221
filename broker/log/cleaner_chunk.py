"""The log cleaner's unit of work: a *chunk*, whole batches of one segment read at once (one ``pread`` into
the cleaner thread's :class:`ChunkBuffer`), their headers as numpy columns
(:mod:`broker.record.batch_header_columns`) and, for a chunk of uncompressed data batches, their key
columns read in place (:mod:`broker.record.key_columns`). :func:`dirty_chunks` yields the chunks of a
log's dirty section, :func:`keys_of` the keyed records' hashes and offsets of one chunk. How the cleaner
uses them: :mod:`broker.log.cleaner`.

A chunk's bytes are valid until the next chunk is read into the same buffer; the cleaner patches rebuilt
batches' headers in them. One thread's (each cleaner thread has its own buffer).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from broker.log.errors import LogStorageError
from broker.log.offset_map import Hashes, Offsets, hash_key_columns, hash_keys
from broker.log.segment import Segment
from broker.record.batch_header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
)
from broker.record.batch_header_columns import BatchHeaderColumns, batch_header_columns
from broker.record.key_columns import KeyColumns, batch_key_columns, key_columns_in
from broker.record.record_batch import RecordBatch

#: Records read, mapped or looked up in the map at once (bounds the per-chunk arrays and bytes: about
#: 100 bytes of arrays per record besides the records' own bytes).
CHUNK_RECORDS = 16_384
#: The largest read of a chunk (a batch larger than it is read whole).
MAX_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(slots=True)
class CleanerChunk:
    """Whole batches of one segment read at once (:func:`chunks_of`): the bytes (the read, at the buffer's
    start) and the batches' header columns. The buffer is the cleaner's own (it patches headers in it)."""

    data: bytearray
    batches: BatchHeaderColumns
    #: The buffer's position in its segment file, the file (for messages), and whether the chunk ends
    #: the segment.
    position: int
    where: str
    last: bool

    @property
    def plain(self) -> bool:
        """Whether every batch is an uncompressed data batch (the key columns read them in place)."""
        return not np.count_nonzero(self.batches.attributes & (COMPRESSION_MASK | CONTROL_MASK))

    def key_columns(self, *, keys_only: bool = False) -> KeyColumns | None:
        """The key columns of a :attr:`plain` chunk's records, read in place (None: declined);
        ``keys_only``: keys and offsets only (:func:`~broker.record.key_columns.key_columns_in`)."""
        batches = self.batches
        return key_columns_in(
            self.data,
            batches.positions + HEADER_SIZE,
            batches.positions + batches.sizes,
            batches.record_counts,
            batches.base_offsets,
            keys_only=keys_only,
        )

    def record_batch(self, i: int) -> RecordBatch:
        """Batch ``i`` as a :class:`RecordBatch` (a copy of its bytes: the buffer may be patched)."""
        at = int(self.batches.positions[i])
        size = int(self.batches.sizes[i])
        return RecordBatch(bytes(self.data[at : at + size]), where=self.where, position=self.position + at)

    def record_batches(self) -> list[RecordBatch]:
        view = memoryview(self.data)
        return [
            RecordBatch(view[at : at + size], where=self.where, position=self.position + at)
            for at, size in zip(self.batches.positions.tolist(), self.batches.sizes.tolist(), strict=True)
        ]

    def select(self, first: int, stop: int) -> CleanerChunk:
        """The chunk of batches ``[first, stop)`` (the same buffer)."""
        return CleanerChunk(self.data, self.batches.select(first, stop), self.position, self.where, self.last)


def chunks_of(
    segment: Segment, position: int, max_position: int, read_bytes: int, buffer: ChunkBuffer
) -> Iterator[CleanerChunk]:
    """The batches of ``segment`` from ``position`` (a batch start) to ``max_position``, in chunks of about
    :data:`CHUNK_RECORDS` records (at least one batch), each read with one ``pread`` into one of
    ``buffer``'s two buffers (of at most :data:`MAX_CHUNK_BYTES`; a batch larger than that is read whole
    into a buffer of its own). While a chunk is worked on, the next one is read into the other buffer
    (:meth:`ChunkBuffer.read_ahead`). A chunk's bytes are valid until the next one is asked for."""
    where = str(segment.path)
    bytes_per_record = 128  # a guess, then what the last chunk had
    ahead: tuple[int, int, Future[bytearray]] | None = None  # a read in flight: position, size, buffer
    try:
        while position < max_position:
            want = min(
                max(read_bytes, bytes_per_record * CHUNK_RECORDS), MAX_CHUNK_BYTES, max_position - position
            )
            if ahead is not None and ahead[:2] == (position, want):
                data = ahead[2].result()
            else:
                if ahead is not None:
                    ahead[2].result()  # not the read wanted after all: done with before its buffer is reused
                data = _read(segment, position, want, buffer.take(want))
            ahead = None
            batches = batch_header_columns(data, end=want, where=where, base_position=position)
            if not batches.count:  # one batch larger than the read
                size = LOG_OVERHEAD + int.from_bytes(data[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True)
                if size <= want or size > max_position - position:
                    raise LogStorageError(
                        f"{where}: no whole batch at position {position} (below {max_position}): the batch "
                        f"there announces {size} bytes"
                    )
                data = _read(segment, position, size, bytearray(size))
                batches = batch_header_columns(data, end=size, where=where, base_position=position)
                if not batches.count:
                    raise LogStorageError(
                        f"{where}: no whole batch at position {position} ({size} bytes read)"
                    )
            records = np.cumsum(batches.record_counts)
            take = min(max(int(np.searchsorted(records, CHUNK_RECORDS)) + 1, 1), batches.count)
            batches = batches.select(0, take)
            taken = batches.complete_bytes
            bytes_per_record = max(taken // max(int(records[take - 1]), 1), 8)
            following = position + taken
            if following < max_position:
                size = min(
                    max(read_bytes, bytes_per_record * CHUNK_RECORDS),
                    MAX_CHUNK_BYTES,
                    max_position - following,
                )
                ahead = (following, size, buffer.read_ahead(segment, following, size))
            yield CleanerChunk(data, batches, position, where, following >= max_position)
            position = following
    finally:
        if ahead is not None:  # the caller stopped early: its buffer is not reused while it is read into
            wait([ahead[2]])


class ChunkBuffer:
    """A cleaner thread's two buffers for chunks, taken in turn (:meth:`take`), each grown to the largest
    read so far (allocated, and zeroed, only as far as reads need): one holds the chunk being worked on
    while the next chunk is read into the other by the buffer's reader thread (:meth:`read_ahead`: a
    ``pread`` waits on the disk without the interpreter lock, and the cleaner's compiled loops run without
    it too). One cleaner thread's; its reader thread only writes the buffer it was given."""

    def __init__(self) -> None:
        self._buffers = [bytearray(), bytearray()]
        self._turn = 0
        self._reader: ThreadPoolExecutor | None = None
        self._reading: Future[bytearray] | None = None

    def take(self, size: int) -> bytearray:
        """The buffer not taken last time, of at least ``size`` bytes, once no read is in flight (a pass
        that stopped early may have left one)."""
        if self._reading is not None:
            wait([self._reading])
            self._reading = None
        turn = self._turn
        self._turn = 1 - turn
        if len(self._buffers[turn]) < size:
            self._buffers[turn] = bytearray(size)
        return self._buffers[turn]

    def read_ahead(self, segment: Segment, position: int, size: int) -> Future[bytearray]:
        """Read ``size`` bytes of ``segment`` from ``position`` into the next buffer, on the reader thread."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lumber-log-cleaner-read")
        into = self.take(size)
        self._reading = self._reader.submit(_read, segment, position, size, into)
        return self._reading


def _read(segment: Segment, position: int, size: int, buffer: bytearray) -> bytearray:
    """``buffer`` holding ``size`` bytes of ``segment`` from ``position`` at its start."""
    got = segment.read_into(buffer, size, position)
    if got != size:
        raise LogStorageError(
            f"{segment.path}: {got} bytes at position {position}, expected {size}: the segment is cut short"
        )
    return buffer


def dirty_chunks(
    segments: Sequence[Segment], from_offset: int, until_offset: int, read_bytes: int, buffer: ChunkBuffer
) -> Iterator[tuple[Segment, CleanerChunk]]:
    """The batches of ``segments`` holding offsets in ``[from_offset, until_offset)``, in chunks, each
    with its segment."""
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        if segment.base_offset >= until_offset:
            return
        size = segment.size_bytes
        found = segment.position_of(from_offset, size) if segment.base_offset < from_offset else (0,)
        if found is None:
            continue
        for chunk in chunks_of(segment, found[0], size, read_bytes, buffer):
            batches = chunk.batches
            first = int(np.searchsorted(batches.base_offsets + batches.last_offset_deltas, from_offset))
            stop = int(np.searchsorted(batches.base_offsets, until_offset))
            if first < stop:
                yield segment, chunk.select(first, stop)
            if stop < batches.count:
                return


def keys_of(chunk: CleanerChunk) -> tuple[Hashes, Offsets, Offsets]:
    """The hashes and offsets of the keyed records of ``chunk``, in order, and how many each batch holds
    (by columns, or by the walk when the columns strategy declines)."""
    columns = chunk.key_columns(keys_only=True) if chunk.plain else None
    if columns is not None:
        return _keyed(columns)
    batches = chunk.record_batches()
    by_batch = batch_key_columns([b for b in batches if not b.is_control_batch])
    if by_batch is not None:
        hashes, keyed_offsets, data_keyed = _keyed(by_batch)
        per_data_batch = iter(data_keyed.tolist())
        keyed = [0 if b.is_control_batch else next(per_data_batch) for b in batches]
        return hashes, keyed_offsets, np.asarray(keyed, dtype=np.int64)
    keys: list[bytes] = []
    offsets: list[int] = []
    keyed = []
    for batch in batches:
        records = [] if batch.is_control_batch else batch.records()
        before = len(keys)
        for record in records:
            if record.key is not None:
                keys.append(record.key)
                offsets.append(record.offset)
        keyed.append(len(keys) - before)
    return hash_keys(keys), np.asarray(offsets, dtype=np.int64), np.asarray(keyed, dtype=np.int64)


def _keyed(columns: KeyColumns) -> tuple[Hashes, Offsets, Offsets]:
    """The hashes and offsets of the keyed records of ``columns``, and how many each of its batches holds."""
    keyed_mask = columns.key_lengths >= 0
    hashes = hash_key_columns(columns.array, columns.key_starts[keyed_mask], columns.key_lengths[keyed_mask])
    return hashes, columns.offsets[keyed_mask], columns.per_batch(keyed_mask)
