"""Every reader of record bodies over the same batches, compared: the plain walk (``RecordBatch.records``),
the values walk, the columnar reader (``value_columns``), the compiled reader of many batches
(``key_columns``), and the reader a batch chooses itself (``RecordBatch.values``): the same offsets, keys and
values, record for record (broker/record/record_batch.py's body readers)."""

from __future__ import annotations

import random

import pytest

from broker.record.compression import CompressionType
from broker.record.errors import CorruptRecordError
from broker.record.key_columns import batch_key_columns
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
