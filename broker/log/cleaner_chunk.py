"""The log cleaner's unit of work: a *chunk*, whole batches of one segment, at most :data:`CHUNK_RECORDS`
records, lying in one buffer of the cleaner thread's :class:`~broker.log.chunk_reader.ChunkReader`, their
headers as numpy columns (:mod:`broker.record.batch_header_columns`) and their key columns, read by the
reader the batches choose (:meth:`~broker.record.record_batch.RecordBatch.key_columns_of`: in place for a
chunk of uncompressed data batches). :func:`span_chunks`
yields the chunks of spans of segments, :func:`dirty_chunks` those of a log's dirty section,
:func:`keys_of` the keyed records' hashes and offsets of one chunk. How the cleaner uses them:
:mod:`broker.log.cleaner`.

The reader reads blocks of a fixed size, which cut batches anywhere. A block is framed by the one segment
framer (:func:`~broker.log.segment_framer.frame_columns`: the compiled loop, with the framer's checks and
messages); the chunks of a block are its whole batches; the start of a batch it cuts at its end is copied
before the next block's bytes, into the room the reader leaves there
(:data:`~broker.log.chunk_reader.CARRY_ROOM`), or, when larger, joined with them in a buffer of its own (a
batch larger than a block is read over several). A batch that fails a framing check raises the framer's
:class:`~broker.record.errors.CorruptRecordError`: a header that cannot be right before the block's
chunks, a batch its span's end cuts (a torn tail) after the whole batches before it.

A chunk's bytes are valid until the next chunk is asked for; the cleaner patches rebuilt batches' headers
in them. One thread's (each cleaner thread has its own reader).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass

import numpy as np

from broker.log.chunk_reader import Block, ChunkReader, Span
from broker.log.offset_map import Hashes, Offsets, hash_key_columns
from broker.log.segment import Segment
from broker.log.segment_framer import frame_columns
from broker.record.batch_header import COMPRESSION_MASK, CONTROL_MASK
from broker.record.batch_header_columns import BatchHeaderColumns
from broker.record.key_columns import KeyColumns
from broker.record.record_batch import RecordBatch

#: Records read, mapped or looked up in the map at once (bounds the per-chunk arrays and bytes: about
#: 100 bytes of arrays per record besides the records' own bytes).
CHUNK_RECORDS = 16_384
#: The size of the reader's blocks: ``[log] cleaner_io_buffer_bytes`` (Kafka's ``log.cleaner.io.buffer.size``)
#: raised to at least :data:`MIN_BLOCK_BYTES` (one ``pread`` per block) and at most
#: :data:`MAX_CHUNK_BYTES`.
MIN_BLOCK_BYTES = 1024 * 1024
MAX_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(slots=True)
class CleanerChunk:
    """Whole batches of one segment (:func:`span_chunks`): the bytes they lie in (a view of one of the
    reader's buffers, or of a buffer of their own) and the batches' header columns, whose positions are
    in ``data``. The buffer is the cleaner's own (it patches headers in it)."""

    data: memoryview
    batches: BatchHeaderColumns
    #: The buffer's position in its segment file, the file (for messages), and whether the chunk ends
    #: the segment.
    position: int
    where: str
    last: bool

    @property
    def plain(self) -> bool:
        """Whether every batch is an uncompressed data batch (the key columns read them in place, and the
        rewrite patches their headers there)."""
        return not np.count_nonzero(self.batches.attributes & (COMPRESSION_MASK | CONTROL_MASK))

    def key_columns(self, *, keys_only: bool = False) -> KeyColumns:
        """The key columns of the chunk's records, read by the reader its batches choose
        (:meth:`RecordBatch.key_columns_of <broker.record.record_batch.RecordBatch.key_columns_of>`: in place
        when the chunk is :attr:`plain`); ``keys_only``: keys and offsets only."""
        return RecordBatch.key_columns_of(
            self.data, self.batches, keys_only=keys_only, where=self.where, position=self.position
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


def span_chunks(
    spans: Sequence[Span], read_bytes: int, reader: ChunkReader
) -> Generator[tuple[Segment, CleanerChunk]]:
    """The chunks of ``spans`` (each span starting at a batch), one after the other, each with its
    segment: read by ``reader`` ahead of the caller, in blocks (see the module docstring). A chunk's bytes
    are valid until the next one is asked for. Close the generator when leaving early (the reads stop)."""
    reader.start(spans, min(max(read_bytes, MIN_BLOCK_BYTES), MAX_CHUNK_BYTES))
    previous: Block | None = None
    carry: memoryview | None = None  # the start of a batch the previous block cut, at ``carried_from``
    carried_from = 0
    try:
        while (block := reader.next_block()) is not None:
            segment, _, max_position = spans[block.span]
            if carry is None:
                data, position = block.data, block.position
            else:
                data, position = _joined(carry, block), carried_from
            if previous is not None:
                reader.give_back(previous)  # after the carry was copied out of it
            previous = block
            where = str(segment.path)
            batches, error = frame_columns(data, position, max_position)
            if error is not None and not error.torn:
                raise error.exception(where)
            whole = batches.complete_bytes
            carry = None
            if error is None and whole < len(data):
                carry, carried_from = data[whole:], position + whole
            ends_span = error is None and position + len(data) >= max_position
            yield from _chunks(segment, data, batches, position, where, ends_span)
            if error is not None:  # a torn tail: after the whole batches before it
                raise error.exception(where)
    finally:
        reader.stop()
        if previous is not None:
            reader.give_back(previous)


def _joined(carry: memoryview, block: Block) -> memoryview:
    """The batch start ``carry`` followed by ``block``'s bytes, in one buffer: ``block``'s own when the
    room before its bytes takes it (no copy of the block), else a new one."""
    size = len(carry)
    start = block.start
    if size <= start:
        block.buffer[start - size : start] = carry
        return memoryview(block.buffer)[start - size : start + block.length]
    joined = bytearray(size + block.length)
    joined[:size] = carry
    joined[size:] = block.data
    return memoryview(joined)


def _chunks(
    segment: Segment, data: memoryview, batches: BatchHeaderColumns, position: int, where: str, last: bool
) -> Iterator[tuple[Segment, CleanerChunk]]:
    """The whole batches of a block, in chunks of at most :data:`CHUNK_RECORDS` records (at least one
    batch); ``last``: they end the span."""
    if not batches.count:
        return
    records = np.cumsum(batches.record_counts)
    first = 0
    while first < batches.count:
        before = int(records[first - 1]) if first else 0
        stop = max(int(np.searchsorted(records, before + CHUNK_RECORDS, side="right")), first + 1)
        yield (
            segment,
            CleanerChunk(data, batches.select(first, stop), position, where, last and stop == batches.count),
        )
        first = stop


def dirty_chunks(
    segments: Sequence[Segment], from_offset: int, until_offset: int, read_bytes: int, reader: ChunkReader
) -> Generator[tuple[Segment, CleanerChunk]]:
    """The batches of ``segments`` holding offsets in ``[from_offset, until_offset)``, in chunks, each
    with its segment (read ahead by ``reader``, across segments)."""
    spans: list[Span] = []
    for segment in segments:
        if segment.next_offset <= from_offset:
            continue
        if segment.base_offset >= until_offset:
            break
        size = segment.size_bytes
        found = segment.position_of(from_offset, size) if segment.base_offset < from_offset else (0,)
        if found is not None:
            spans.append((segment, found[0], size))
    with closing(span_chunks(spans, read_bytes, reader)) as chunks:
        for segment, chunk in chunks:
            batches = chunk.batches
            first = int(np.searchsorted(batches.base_offsets + batches.last_offset_deltas, from_offset))
            stop = int(np.searchsorted(batches.base_offsets, until_offset))
            if first < stop:
                yield segment, chunk.select(first, stop)
            if stop < batches.count:
                return


def keys_of(chunk: CleanerChunk) -> tuple[Hashes, Offsets, Offsets]:
    """The hashes and offsets of the keyed records of ``chunk``, in order, and how many each batch holds
    (a control batch none): from the chunk's key columns (:meth:`CleanerChunk.key_columns`)."""
    return _keyed(chunk.key_columns(keys_only=True))


def _keyed(columns: KeyColumns) -> tuple[Hashes, Offsets, Offsets]:
    """The hashes and offsets of the keyed records of ``columns``, and how many each of its batches holds."""
    keyed_mask = columns.key_lengths >= 0
    hashes = hash_key_columns(columns.array, columns.key_starts[keyed_mask], columns.key_lengths[keyed_mask])
    return hashes, columns.offsets[keyed_mask], columns.per_batch(keyed_mask)
