"""The cleaner's chunks over real segment files (broker/log/cleaner_chunk.py, read by
broker/log/chunk_reader.py): whatever the blocks cut, the chunks are exactly the segments' batches, byte
for byte; a batch cut by its span's end (the segment framer's message) or a file cut short is an error
naming the file and position; a reading left early gives back every buffer and stops its thread's reads."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log import chunk_reader, cleaner_chunk
from broker.log.chunk_reader import ChunkReader
from broker.log.cleaner_chunk import CleanerChunk, span_chunks
from broker.log.errors import LogStorageError
from broker.log.segment import Segment
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.log.helpers import BASE_TS

KIB = 1024


def batch(records: int, value_bytes: int, first_key: int) -> RecordBatch:
    builder = RecordBatchBuilder()
    for i in range(records):
        builder.append(BASE_TS + i, b"key-%d" % (first_key + i), bytes([i % 251]) * value_bytes)
    return RecordBatch(builder.build())


def segment_of(directory: Path, base_offset: int, sizes: list[tuple[int, int]]) -> Segment:
    """A segment holding a batch of ``records`` records of ``value_bytes`` each per entry of ``sizes``."""
    segment = Segment.create(directory, base_offset, index_interval_bytes=4 * KIB, now_ms=BASE_TS)
    offset = base_offset
    for records, value_bytes in sizes:
        built = batch(records, value_bytes, offset)
        segment.append([built], [offset])
        offset += records
    return segment


#: Small batches, one larger than the carry room (16 KiB below), one larger than a block (64 KiB below).
LAYOUT = [(5, 90)] * 250 + [(3, 6 * KIB)] + [(7, 50)] * 150 + [(4, 50 * KIB)] + [(2, 30)] * 300


def drain(chunks: Iterator[tuple[Segment, CleanerChunk]], seen: list[int]) -> None:
    """Take every chunk, noting how many batches each holds in ``seen``."""
    for _, chunk in chunks:
        seen.append(chunk.batches.count)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunk_reader, "CARRY_ROOM", 16 * KIB)
    monkeypatch.setattr(cleaner_chunk, "MIN_BLOCK_BYTES", 64 * KIB)
    monkeypatch.setattr(cleaner_chunk, "CHUNK_RECORDS", 40)


def batches_in_file(segment: Segment) -> list[tuple[int, int, int, bytes]]:
    """(position, size, base offset, bytes) of every batch of ``segment``, read plainly."""
    data = segment.path.read_bytes()
    out = []
    for b in segment.batches(0, segment.size_bytes, 1024 * KIB):
        position = b.position or 0
        out.append((position, b.size_bytes, b.base_offset, data[position : position + b.size_bytes]))
    return out


def batches_in_chunks(
    chunks: list[tuple[Segment, CleanerChunk]], segment: Segment
) -> list[tuple[int, int, int, bytes]]:
    out = []
    for owner, chunk in chunks:
        if owner is not segment:
            continue
        for at, size, base in zip(
            chunk.batches.positions.tolist(),
            chunk.batches.sizes.tolist(),
            chunk.batches.base_offsets.tolist(),
            strict=True,
        ):
            out.append((chunk.position + at, size, base, bytes(chunk.data[at : at + size])))
    return out


@pytest.mark.usefixtures("small_blocks")
def test_the_chunks_are_the_segments_batches_byte_for_byte_whatever_the_blocks_cut(tmp_path: Path) -> None:
    first = segment_of(tmp_path, 0, LAYOUT)
    second = segment_of(tmp_path, 10_000, list(reversed(LAYOUT)))
    assert first.size_bytes > 4 * 64 * KIB  # several blocks, some batches across two or more of them
    reader = ChunkReader()
    try:
        # each chunk is copied out before the next is asked for (its bytes are valid until then)
        chunks = [
            (segment, CleanerChunk(memoryview(bytes(c.data)), c.batches, c.position, c.where, c.last))
            for segment, c in span_chunks(
                [(first, 0, first.size_bytes), (second, 0, second.size_bytes)], 4 * KIB, reader
            )
        ]
        for segment in (first, second):
            expected = batches_in_file(segment)
            assert len(expected) == len(LAYOUT)
            assert batches_in_chunks(chunks, segment) == expected
            mine = [c for owner, c in chunks if owner is segment]
            assert [c.last for c in mine] == [False] * (len(mine) - 1) + [True]
            assert all(int(c.batches.record_counts.sum()) <= 40 or c.batches.count == 1 for c in mine)
        # a span from a batch in the middle of a segment: its batches from there on
        start = batches_in_file(first)[45][0]
        middle = [c for _, c in span_chunks([(first, start, first.size_bytes)], 4 * KIB, reader)]
        assert middle[0].position + int(middle[0].batches.positions[0]) == start
        assert sum(c.batches.count for c in middle) == len(LAYOUT) - 45
        assert reader.blocks_ahead == 0
    finally:
        reader.close()
        first.close()
        second.close()


@pytest.mark.usefixtures("small_blocks")
def test_a_batch_cut_by_its_span_end_names_the_file_and_position(tmp_path: Path) -> None:
    segment = segment_of(tmp_path, 0, LAYOUT)
    last = batches_in_file(segment)[-1]
    reader = ChunkReader()
    seen: list[int] = []  # batches per chunk, up to the error
    try:
        chunks = span_chunks([(segment, 0, segment.size_bytes - 10)], 4 * KIB, reader)
        with pytest.raises(CorruptRecordError) as caught:
            drain(chunks, seen)
        assert str(caught.value) == (  # the segment framer's message
            f"{segment.path}: corrupt record batch at position {last[0]}, base offset {last[2]}: torn tail: "
            f"batchLength announces {last[1]} bytes, only {last[1] - 10} remain in the file"
        )
        assert sum(seen) == len(LAYOUT) - 1  # every batch before it
    finally:
        reader.close()
        segment.close()


@pytest.mark.usefixtures("small_blocks")
def test_a_file_cut_short_under_the_reader_is_an_error_after_the_chunks_before_it(tmp_path: Path) -> None:
    segment = segment_of(tmp_path, 0, LAYOUT)
    size = segment.size_bytes
    cut = size - 3 * KIB
    os.truncate(segment.path, cut)  # the segment still believes it holds ``size`` bytes
    reader = ChunkReader()
    seen: list[int] = []  # batches per chunk, up to the error
    try:
        chunks = span_chunks([(segment, 0, size)], 4 * KIB, reader)
        with pytest.raises(LogStorageError) as caught:
            drain(chunks, seen)
        block_start = size - (size % (64 * KIB) or 64 * KIB)
        assert str(caught.value) == (
            f"{segment.path}: {cut - block_start} bytes at position {block_start}, expected "
            f"{size - block_start}: the segment is cut short"
        )
        assert 0 < sum(seen) < len(LAYOUT)
    finally:
        reader.close()
        segment.close()


@pytest.mark.usefixtures("small_blocks")
def test_a_reading_left_early_gives_every_buffer_back_and_the_next_reads_from_its_start(
    tmp_path: Path,
) -> None:
    segment = segment_of(tmp_path, 0, LAYOUT)
    spans = [(segment, 0, segment.size_bytes)]
    reader = ChunkReader()
    try:
        chunks = span_chunks(spans, 4 * KIB, reader)
        next(chunks)
        # the reader runs ahead, up to its bound: the block worked on and two more
        deadline = time.monotonic() + 10
        while reader.blocks_ahead < chunk_reader.MAX_BUFFERS - 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert reader.blocks_ahead == chunk_reader.MAX_BUFFERS - 1
        chunks.close()
        assert reader.blocks_ahead == 0
        assert reader._held == 0
        again = [c.batches.count for _, c in span_chunks(spans, 4 * KIB, reader)]
        assert sum(again) == len(LAYOUT)
        assert reader._held == 0
    finally:
        reader.close()
        segment.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("lumber-log-cleaner-read")]
