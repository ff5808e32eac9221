"""Every reader of record bodies over the same batches, compared: the plain walk (``RecordBatch.records``),
the values walk, the columnar reader (``value_columns``), the compiled reader of many batches
(``key_columns``) and its walk (``walked_key_columns_in``), and the readers the batches choose themselves
(``RecordBatch.values``, ``RecordBatch.values_of``, ``RecordBatch.key_columns``,
``RecordBatch.key_columns_of``): the same offsets,
keys and values, record for record (broker/record/record_batch.py's body readers)."""

from __future__ import annotations

import random

import pytest

from broker.record.batch_header_columns import batch_header_columns
from broker.record.compression import CompressionType
from broker.record.errors import CorruptRecordError
from broker.record.key_columns import KeyColumns, batch_key_columns, walked_key_columns_in
from broker.record.record_batch import RecordBatch, restamp_crc, set_base_offset, set_producer_fields
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_walker import VECTORISED_MIN_RECORDS, walk_values
from broker.record.value_columns import decode_values_vectorised


def build(count: int, codec: CompressionType, base_offset: int, seed: int) -> RecordBatch:
    """``count`` records of mixed shapes: null and empty values, keys or none, headers or none, sizes
    varied."""
    rng = random.Random(seed)
    builder = RecordBatchBuilder(codec, base_offset)
    for i in range(count):
        key = None if i % 3 == 0 else b"k%d" % rng.randrange(50)
        value = None if i % 7 == 3 else bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 200, 300))))
        headers = (("host", b"h%d" % (i % 2)),) if i % 2 else ()
        builder.append(1_700_000_000_000 + i, key, value, headers)
    return RecordBatch(builder.build())


CASES = [
    (count, codec)
    for count in (1, 5, VECTORISED_MIN_RECORDS - 1, VECTORISED_MIN_RECORDS, 300)
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD)
]


@pytest.mark.parametrize(("count", "codec"), CASES)
@pytest.mark.parametrize("from_index", [0, 1, -1])
def test_every_reader_reads_the_same_records(count: int, codec: CompressionType, from_index: int) -> None:
    batch = build(count, codec, 1_000, seed=count)
    batch.validate()
    batch.validate_records()
    records = batch.records()
    assert [r.offset for r in records] == list(range(1_000, 1_000 + count))
    from_offset = 1_000 + (from_index % count)
    kept = [r for r in records if r.offset >= from_offset]
    expected = ([r.offset for r in kept], [r.value for r in kept])

    offsets, values = batch.values(from_offset)
    assert (list(offsets), values) == expected
    body = batch.body()
    walked = walk_values(bytes(body), count, 1_000, from_offset)
    assert (list(walked[0]), walked[1]) == expected
    columnar = decode_values_vectorised([body], [count], [1_000], [from_offset])
    assert columnar is not None  # it vouches for well-formed batches of any size
    assert (list(columnar[0][0]), columnar[0][1]) == expected

    compiled = batch_key_columns([batch])
    assert compiled is not None
    data = bytes(compiled.data)
    assert compiled.offsets.tolist() == [r.offset for r in records]
    keys = [
        None if length < 0 else data[start : start + length]
        for start, length in zip(compiled.key_starts.tolist(), compiled.key_lengths.tolist(), strict=True)
    ]
    assert keys == [r.key for r in records]
    assert compiled.null_values.tolist() == [r.value is None for r in records]


def test_the_readers_of_many_batches_agree_with_each_batch_alone() -> None:
    batches = [
        build(n, codec, base, seed=n)
        for n, codec, base in (
            (3, CompressionType.NONE, 0),
            (60, CompressionType.GZIP, 3),
            (1, CompressionType.NONE, 63),
        )
    ]
    one_by_one = [batch.values() for batch in batches]
    together = decode_values_vectorised([b.body() for b in batches], [3, 60, 1], [0, 3, 63], [0, 3, 63])
    assert together is not None
    assert [(list(o), v) for o, v in together] == [(list(o), v) for o, v in one_by_one]
    compiled = batch_key_columns(batches)
    assert compiled is not None
    assert compiled.offsets.tolist() == list(range(64))
    assert compiled.batch_starts == [0, 3, 63, 64]
    chosen = RecordBatch.values_of(batches, [0, 3, 63])
    assert [(list(o), v) for o, v in chosen] == [(list(o), v) for o, v in one_by_one]
    walked = [batch.records() for batch in batches]
    assert [(list(o), v) for o, v in chosen] == [
        ([r.offset for r in w], [r.value for r in w]) for w in walked
    ]


@pytest.mark.parametrize("columnar", [True, False], ids=["columnar", "declined"])
@pytest.mark.parametrize("counts", [(3, 60, 1), (3, 5, 1)], ids=["together", "too-few-records"])
def test_the_values_of_many_batches_the_batches_choose_are_each_batchs_walk(
    columnar: bool, counts: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RecordBatch.values_of`` reads many batches by the columnar reader from enough records between
    them, else (too few records, or the reader declining) batch by batch: the same offsets and values as
    the plain walk of each batch, from each batch's own from-offset."""
    codecs = (CompressionType.NONE, CompressionType.GZIP, CompressionType.NONE)
    bases = (0, counts[0], counts[0] + counts[1])
    batches = [build(n, codec, base, seed=n) for n, codec, base in zip(counts, codecs, bases, strict=True)]
    starts = [base + 1 if n > 1 else base for n, base in zip(counts, bases, strict=True)]
    calls: list[int] = []

    def columnar_reader(*args: object) -> object:
        calls.append(len(args[0]))  # type: ignore[arg-type]
        return decode_values_vectorised(*args) if columnar else None  # type: ignore[arg-type]

    monkeypatch.setattr("broker.record.record_batch.decode_values_vectorised", columnar_reader)
    chosen = RecordBatch.values_of(batches, starts)
    expected = [
        ([r.offset for r in walked], [r.value for r in walked])
        for walked in (b.records(from_offset=s) for b, s in zip(batches, starts, strict=True))
    ]
    assert [(list(o), v) for o, v in chosen] == expected
    together = sum(counts) >= VECTORISED_MIN_RECORDS
    # together: one call over the three batches (then, declined, one per batch of enough records alone)
    assert calls == ([3] + ([] if columnar else [1]) if together else [])


def test_a_corrupt_batch_among_many_is_named_by_its_own_walk() -> None:
    batches = [
        build(n, CompressionType.NONE, base, seed=n) for n, base in ((30, 0), (VECTORISED_MIN_RECORDS, 30))
    ]
    data = bytearray(batches[1].buffer)
    data[61] = 0x7F  # the first record's length varint: 63 bytes, not what it holds
    restamp_crc(data)
    broken = RecordBatch(data, where="clicks-0", position=4096)
    with pytest.raises(CorruptRecordError) as raised:
        RecordBatch.values_of([batches[0], broken], [0, 30])
    assert (raised.value.where, raised.value.position) == ("clicks-0", 4096)


def test_a_corrupt_body_is_named_by_the_reader_the_batch_falls_back_to() -> None:
    batch = build(VECTORISED_MIN_RECORDS, CompressionType.NONE, 0, seed=1)
    data = bytearray(batch.buffer)
    data[61] = 0x7F  # the first record's length varint: 63 bytes, not what it holds
    restamp_crc(data)
    broken = RecordBatch(data, where="clicks-0", position=4096)
    broken.validate()  # the CRC was restamped: only the records are wrong
    assert decode_values_vectorised([broken.body()], [broken.record_count], [0], [0]) is None
    with pytest.raises(CorruptRecordError) as raised:
        broken.values()
    assert (raised.value.where, raised.value.position) == ("clicks-0", 4096)
    assert "record" in raised.value.reason


def column_lists(columns: KeyColumns) -> dict[str, object]:
    """Every column of ``columns`` as lists, the keys and record bytes read out of its data."""
    data = bytes(columns.data)
    starts, ends = columns.record_starts.tolist(), columns.record_ends.tolist()
    return {
        "batch_starts": columns.batch_starts,
        "records": [data[a:b] for a, b in zip(starts, ends, strict=True)],
        "offsets": columns.offsets.tolist(),
        "timestamp_deltas": columns.timestamp_deltas.tolist(),
        "keys": [
            None if length < 0 else data[at : at + length]
            for at, length in zip(columns.key_starts.tolist(), columns.key_lengths.tolist(), strict=True)
        ],
        "null_values": columns.null_values.tolist(),
    }


def control_batch(base_offset: int) -> RecordBatch:
    """A transaction marker (a control batch: its one record is not a data record)."""
    data = bytearray(build(1, CompressionType.NONE, base_offset, seed=9).buffer)
    data[22] |= 0x20  # attributes' low byte: the control bit
    restamp_crc(data)
    return RecordBatch(data)


@pytest.mark.parametrize("keys_only", [False, True])
def test_the_key_columns_the_batches_choose_are_the_compiled_loops_and_the_walks(keys_only: bool) -> None:
    """``RecordBatch.key_columns`` (bodies end to end, a control batch without records) and
    ``key_columns_of`` (in place in a segment's bytes, or by batch views when some batch is compressed or
    a control batch) give the compiled loop's columns, and the walk's where the loop declines: equal."""
    plain = [build(n, CompressionType.NONE, base, seed=n) for n, base in ((3, 0), (70, 3), (1, 73))]
    mixed = [plain[0], build(60, CompressionType.GZIP, 3, seed=4), control_batch(63), plain[2]]
    for batches in (plain, mixed):
        chosen = RecordBatch.key_columns(batches, keys_only=keys_only)
        records = [[] if b.is_control_batch else b.records() for b in batches]
        assert chosen.offsets.tolist() == [r.offset for rs in records for r in rs]
        assert column_lists(chosen)["keys"] == [r.key for rs in records for r in rs]
        bodies = [b"" if b.is_control_batch else bytes(b.body()) for b in batches]
        ends = [sum(len(body) for body in bodies[:i]) for i in range(len(bodies) + 1)]
        walked = walked_key_columns_in(
            b"".join(bodies),
            ends[:-1],
            ends[1:],
            [len(rs) for rs in records],
            [b.base_offset for b in batches],
            [("t-0", None)] * len(batches),
            keys_only=keys_only,
        )
        assert column_lists(walked) == column_lists(chosen)
        segment = bytearray(b"".join(bytes(b.buffer) for b in batches))
        headers = batch_header_columns(segment)
        in_place = RecordBatch.key_columns_of(segment, headers, keys_only=keys_only)
        assert column_lists(in_place)["keys"] == column_lists(chosen)["keys"]
        assert column_lists(in_place)["offsets"] == column_lists(chosen)["offsets"]
        assert column_lists(in_place)["null_values"] == column_lists(chosen)["null_values"]
        assert in_place.per_batch(in_place.key_lengths >= 0).tolist() == [
            sum(r.key is not None for r in rs) for rs in records
        ]
    segment = bytearray(b"".join(bytes(b.buffer) for b in plain))
    headers = batch_header_columns(segment)
    body_starts, body_ends = headers.positions + 61, headers.positions + headers.sizes
    walked_in_place = walked_key_columns_in(
        segment, body_starts, body_ends, headers.record_counts, headers.base_offsets, [("t-0", 0)] * 3
    )
    assert column_lists(walked_in_place) == column_lists(RecordBatch.key_columns_of(segment, headers))
    assert walked_in_place.record_starts[0] == 61  # positions into the segment's bytes


def test_a_corrupt_body_the_compiled_loop_declines_is_named_by_the_walk() -> None:
    batch = build(5, CompressionType.NONE, 0, seed=3)
    segment = bytearray(bytes(build(2, CompressionType.NONE, 100, seed=1).buffer) + bytes(batch.buffer))
    second = len(segment) - batch.size_bytes
    segment[second + 61] = 0x7F  # the second batch's first record length varint: 63 bytes
    restamp_crc(segment, second)
    headers = batch_header_columns(segment)
    with pytest.raises(CorruptRecordError) as raised:
        RecordBatch.key_columns_of(segment, headers, where="topic-0/00000000000000000000.log", position=4096)
    assert (raised.value.where, raised.value.position) == ("topic-0/00000000000000000000.log", 4096 + second)
    assert "record #0" in str(raised.value)
    broken = RecordBatch(segment[second:], where="clicks-0", position=8)
    with pytest.raises(CorruptRecordError) as by_batches:
        RecordBatch.key_columns([broken])
    assert (by_batches.value.where, by_batches.value.position) == ("clicks-0", 8)


def test_the_in_place_changes_keep_the_batch_valid() -> None:
    batch = build(4, CompressionType.NONE, 0, seed=2)
    data = bytearray(batch.buffer)
    set_base_offset(data, 500)
    set_producer_fields(data, 77, 3, 1_000)
    with pytest.raises(CorruptRecordError, match="expected CRC"):
        RecordBatch(data).validate()  # the producer fields are covered by the CRC
    restamp_crc(data)
    changed = RecordBatch(data)
    changed.validate()
    fields = (changed.base_offset, changed.producer_id, changed.producer_epoch, changed.base_sequence)
    assert fields == (500, 77, 3, 1_000)
    assert [r.offset for r in changed.records()] == [500, 501, 502, 503]
    prefix = changed.stamped_prefix(900, 12)
    moved = RecordBatch(prefix + bytes(data[16:]))
    moved.validate()
    assert (moved.base_offset, moved.partition_leader_epoch, moved.batch_length) == (
        900,
        12,
        changed.batch_length,
    )
