"""The cleaner's key-columns strategy (broker/record/key_columns.py) against the reference walk
(``RecordBatch.records``), record for record, and the rebuilt batch from record bytes
(``retained_batch_of_bytes``) against the one from decoded records (``retained_batch``), byte for byte."""

from __future__ import annotations

import random
from itertools import accumulate

import pytest

from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.key_columns import KeyColumns, key_columns, key_columns_in
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder, retained_batch, retained_batch_of_bytes

FIRST_TS = 1_700_000_000_000


def build(
    records: list[tuple[int, bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    codec: CompressionType = CompressionType.NONE,
    headers: bool = False,
) -> RecordBatch:
    builder = RecordBatchBuilder(codec, base_offset)
    for ts_delta, key, value in records:
        builder.append(FIRST_TS + ts_delta, key, value, [("host", b"h1")] if headers else ())
    return RecordBatch(builder.build())


def body(batch: RecordBatch) -> bytes:
    return (
        bytes(batch.buffer[HEADER_SIZE:])
        if batch.compression == CompressionType.NONE
        else batch.records_data()
    )


def columns_of(batches: list[RecordBatch]) -> KeyColumns | None:
    return key_columns(
        [body(b) for b in batches], [b.record_count for b in batches], [b.base_offset for b in batches]
    )


def assert_columns_match_the_walk(batches: list[RecordBatch]) -> KeyColumns:
    columns = columns_of(batches)
    assert columns is not None
    assert columns.batch_starts == [0, *accumulate(b.record_count for b in batches)]
    records = [r for b in batches for r in b.records()]
    assert columns.offsets.tolist() == [r.offset for r in records]
    firsts = [b.first_timestamp_ms for b in batches for _ in range(b.record_count)]
    assert (columns.timestamp_deltas + firsts).tolist() == [r.timestamp_ms for r in records]
    keys = [
        None if length < 0 else columns.data[start : start + length]
        for start, length in zip(columns.key_starts.tolist(), columns.key_lengths.tolist(), strict=True)
    ]
    assert keys == [r.key for r in records]
    assert columns.null_values.tolist() == [r.value is None for r in records]
    # the records' byte ranges tile the bodies exactly
    starts, ends = columns.record_starts.tolist(), columns.record_ends.tolist()
    assert starts[1:] == ends[:-1]
    assert b"".join(columns.data[a:b] for a, b in zip(starts, ends, strict=True)) == b"".join(
        body(b) for b in batches
    )
    return columns


def test_batches_of_one_record_size_crossing_the_offset_delta_widths_are_predicted_exactly() -> None:
    rng = random.Random(1)
    batches = [
        build([(0, b"key-%08d" % rng.randrange(10**8), b"v" * 100) for _ in range(100)], base_offset=100 * i)
        for i in range(5)
    ]
    big = build([(0, b"k%05d" % i, b"x") for i in range(9_000)], base_offset=500)  # deltas of 1, 2, 3 bytes
    assert_columns_match_the_walk([*batches, big])


def test_records_of_varied_sizes_timestamps_null_keys_tombstones_and_headers_are_walked() -> None:
    rng = random.Random(2)
    mixed = build(
        [
            (rng.randrange(0, 100_000), None if i % 7 == 0 else b"k%d" % i, None if i % 5 == 0 else b"v" * i)
            for i in range(300)
        ],
        base_offset=40,
        headers=True,
    )
    same = build([(0, b"same", b"value")] * 80, base_offset=340, headers=True)
    assert_columns_match_the_walk([mixed, same, mixed])


def test_compressed_bodies_gapped_offsets_and_empty_batches() -> None:
    source = build([(i, b"k%d" % (i % 4), b"v%d" % i) for i in range(20)], base_offset=1_000)
    records = source.records()
    gapped = RecordBatch(retained_batch(source, [records[i] for i in (0, 5, 7, 19)]))
    empty = RecordBatch(retained_batch(source, []))
    zipped = build(
        [(i, b"k%d" % i, b"z" * 30) for i in range(70)], base_offset=2_000, codec=CompressionType.GZIP
    )
    columns = assert_columns_match_the_walk([gapped, empty, zipped, empty])
    assert columns.offsets.tolist()[:4] == [1_000, 1_005, 1_007, 1_019]
    assert columns.batch_starts == [0, 4, 4, 74, 74]


def test_bodies_that_do_not_hold_their_records_are_declined() -> None:
    batch = build([(0, b"k%d" % i, b"v" * 10) for i in range(10)])
    data = body(batch)
    assert columns_of([batch]) is not None
    assert key_columns([data[:-1]], [10], [0]) is None  # the last record cut short
    assert key_columns([data + b"\x00"], [10], [0]) is None  # a byte left over
    assert key_columns([data], [11], [0]) is None  # one record too many announced
    assert key_columns([data, data], [9, 11], [0, 0]) is None  # the first body's records spill into the next
    assert key_columns([b"\x02"], [0], [0]) is None  # bytes in a batch without records
    assert key_columns([b"\xff" * 12], [1], [0]) is None  # a length varint of more than 10 bytes
    corrupt = bytearray(data)
    corrupt[4] = 0x7E  # the first record's key length: 63 bytes, past its record
    assert key_columns([bytes(corrupt)], [10], [0]) is None


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_a_batch_rebuilt_from_its_records_bytes_equals_the_one_rebuilt_from_decoded_records(
    codec: CompressionType,
) -> None:
    builder = RecordBatchBuilder(
        codec, 500, producer_id=9, producer_epoch=3, base_sequence=40, partition_leader_epoch=7
    )
    for i in range(120):
        builder.append(FIRST_TS + 3 * i, b"k%d" % (i % 9), None if i % 11 == 0 else b"v%d" % i, [("h", b"x")])
    batch = RecordBatch(builder.build())
    columns = columns_of([batch])
    assert columns is not None
    records = batch.records()
    for kept in ([3, 4, 5], [0, 64, 65, 119], list(range(0, 120, 2)), [119]):
        data = b"".join(columns.data[columns.record_starts[i] : columns.record_ends[i]] for i in kept)
        newest = FIRST_TS + max(int(columns.timestamp_deltas[i]) for i in kept)
        rebuilt = retained_batch_of_bytes(batch, data, len(kept), newest)
        assert rebuilt == retained_batch(batch, [records[i] for i in kept])
        RecordBatch(rebuilt).validate()


def test_batches_read_in_place_from_a_segments_bytes_give_the_same_columns_and_keys_only_its_keys() -> None:
    """``key_columns_in``: the bodies left where they lie, between their headers (a read of a segment),
    and the keys-only mode the cleaner's map reads: the same keys, offsets and record bounds."""
    rng = random.Random(4)
    batches = [
        build(
            [
                (rng.randrange(50), None if i % 9 == 0 else b"k%d" % i, None if i % 4 == 0 else b"v" * i)
                for i in range(n)
            ],
            base_offset=1_000 * j,
            headers=j % 2 == 0,
        )
        for j, n in enumerate((1, 70, 0, 5, 130))
        if n
    ]
    empty = RecordBatch(retained_batch(batches[1], []))
    batches.insert(2, empty)
    joined = bytes(b"".join(bytes(b.buffer) for b in batches))
    positions = list(accumulate((b.size_bytes for b in batches), initial=0))[:-1]
    args = (
        joined,
        [p + HEADER_SIZE for p in positions],
        [p + b.size_bytes for p, b in zip(positions, batches, strict=True)],
        [b.record_count for b in batches],
        [b.base_offset for b in batches],
    )
    in_place = key_columns_in(*args)
    keys_only = key_columns_in(*args, keys_only=True)
    joined_columns = columns_of(batches)
    assert in_place is not None
    assert keys_only is not None
    assert joined_columns is not None
    records = [r for b in batches for r in b.records()]
    for columns in (in_place, keys_only):
        assert columns.offsets.tolist() == [r.offset for r in records]
        keys = [
            None if length < 0 else bytes(joined[start : start + length])
            for start, length in zip(columns.key_starts.tolist(), columns.key_lengths.tolist(), strict=True)
        ]
        assert keys == [r.key for r in records]
        assert [
            bytes(joined[a:b]) for a, b in zip(columns.record_starts, columns.record_ends, strict=True)
        ] == [
            bytes(joined_columns.data[a:b])
            for a, b in zip(joined_columns.record_starts, joined_columns.record_ends, strict=True)
        ]
    assert in_place.null_values.tolist() == [r.value is None for r in records]
    firsts = [b.first_timestamp_ms for b in batches for _ in range(b.record_count)]
    assert (in_place.timestamp_deltas + firsts).tolist() == [r.timestamp_ms for r in records]
    assert not keys_only.null_values.any()
    assert not keys_only.timestamp_deltas.any()
    assert key_columns_in(joined[:-1], *args[1:]) is None  # the last body runs past the data
