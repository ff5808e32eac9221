from __future__ import annotations

import struct
import sys
from collections.abc import Sequence

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch, PartitionValues, decode_values, load_decoder
from broker.client.errors import CorruptBatchError
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_walker import VECTORISED_MIN_RECORDS
from broker.record.topic_partition import TopicPartition
from broker.record.value_columns import decode_values_vectorised
from broker.record.value_columns import load_decoder as import_numpy
from broker.record.varint import encode_varint

TP = TopicPartition("events", 2)


def fetched(data: bytes, from_offset: int = 0) -> FetchedBatch:
    batch = RecordBatch(data)
    batch.validate()
    return FetchedBatch(TP, batch, from_offset)


def builder_batch(codec: CompressionType, base: int, count: int) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=base)
    for i in range(count):
        key = None if i % 3 == 0 else f"k{i}".encode()
        value = None if i % 7 == 3 else bytes([i % 256]) * (i * 53 % 20_000)
        headers = () if i % 2 else (("host", b"h"), ("trace", None), ("é", bytes(i % 5)))
        builder.append(1_000_000 + i * 3, key, value, headers)
    return builder.build()


@pytest.mark.parametrize("codec", list(CompressionType))
def test_records_and_values_match_the_reference_decoder(codec: CompressionType) -> None:
    data = builder_batch(codec, 500, 90)
    reference = list(RecordBatch(data).records())
    records = fetched(data).records()
    assert records == [
        ConsumerRecord("events", 2, r.offset, r.timestamp_ms, r.key, r.value, r.headers, 0) for r in reference
    ]
    values = fetched(data).values()
    assert values.topic_partition == TP
    assert values.offsets == range(500, 590)
    assert values.values == [r.value for r in reference]


def test_records_before_from_offset_are_skipped() -> None:
    data = builder_batch(CompressionType.NONE, 10, 20)
    assert [r.offset for r in fetched(data, 15).records()] == list(range(15, 30))
    values = fetched(data, 15).values()
    assert values.offsets == range(15, 30)
    assert len(values.values) == 15
    empty = fetched(data, 30).values()
    assert (list(empty.offsets), empty.values) == ([], [])


def test_log_append_time_batches_report_the_broker_time() -> None:
    data = bytearray(builder_batch(CompressionType.NONE, 0, 3))
    data[22] |= 0x08  # attributes low byte: timestamp type LogAppendTime (CRC is not checked here)
    batch = FetchedBatch(TP, RecordBatch(bytes(data)), 0)
    assert {(r.timestamp_ms, r.timestamp_type) for r in batch.records()} == {(1_000_006, 1)}


@pytest.mark.parametrize(("count", "reason"), [(6, "record #5"), (4, "bytes left after 4 records")])
def test_undecodable_records_name_the_partition_and_offset(count: int, reason: str) -> None:
    data = bytearray(builder_batch(CompressionType.NONE, 77, 5))
    data[57:61] = count.to_bytes(4, "big")  # the header's record count no longer matches the records
    batch = FetchedBatch(TP, RecordBatch(bytes(data)), 0)
    with pytest.raises(CorruptBatchError, match=rf"events-2: corrupt record batch at offset 77: .*{reason}"):
        batch.values()
    with pytest.raises(CorruptBatchError, match=rf"events-2: corrupt record batch at offset 77: .*{reason}"):
        batch.records()


def test_broken_compressed_records_name_the_partition_and_offset() -> None:
    data = bytearray(builder_batch(CompressionType.GZIP, 9, 40))
    data[70:80] = bytes(10)
    batch = FetchedBatch(TP, RecordBatch(bytes(data)), 0)
    with pytest.raises(
        CorruptBatchError, match=r"events-2: corrupt record batch at offset 9: cannot decompress"
    ):
        batch.values()


# ------------------------------------------------------------------ many batches at once (decode_values)

HOST = (("host", b"vm"),)


def value_of(offset: int, size: int = 200) -> bytes:
    """A value that names its offset, so that a value handed out under the wrong offset shows."""
    return (b"%08d:" % offset * (size // 9 + 1))[:size]


def paper_batch(base: int, count: int, codec: CompressionType = CompressionType.NONE) -> bytes:
    """Like the paper benchmark's: 200-byte values, no key, one host header."""
    builder = RecordBatchBuilder(codec, base_offset=base)
    for offset in range(base, base + count):
        builder.append(1_700_000_000_000 + offset // 7, None, value_of(offset), HOST)
    return builder.build()


def as_fetched(*batches: bytes, from_offset: int = 0) -> list[FetchedBatch]:
    fetched_batches = []
    for data in batches:
        batch = RecordBatch(data)
        batch.validate()
        fetched_batches.append(FetchedBatch(TP, batch, max(from_offset, batch.base_offset)))
    return fetched_batches


def pairs(chunks: Sequence[PartitionValues]) -> list[tuple[int, bytes | None]]:
    return [pair for chunk in chunks for pair in zip(chunk.offsets, chunk.values, strict=True)]


def record(
    offset_delta: int,
    value: bytes | None,
    *,
    key: bytes | None = None,
    length_delta: int = 0,
    key_length: int | None = None,
    value_length: int | None = None,
) -> bytes:
    """One record, built by hand; ``length_delta``, ``key_length`` and ``value_length`` make its length
    fields lie."""
    if key_length is None:
        key_length = -1 if key is None else len(key)
    if value_length is None:
        value_length = -1 if value is None else len(value)
    body = b"".join(
        (
            b"\x00",
            encode_varint(0),
            encode_varint(offset_delta),
            encode_varint(key_length),
            key or b"",
            encode_varint(value_length),
            value or b"",
            encode_varint(1),
            encode_varint(4),
            b"host",
            encode_varint(2),
            b"vm",
        )
    )
    return encode_varint(len(body) + length_delta) + body


def hand_batch(base: int, records: Sequence[bytes], *, count: int | None = None) -> bytes:
    """A batch around ``records`` with a correct CRC, so that only the decoder can catch what is wrong
    inside (``count`` overrides the header's record count)."""
    body = b"".join(records)
    n = len(records) if count is None else count
    tail = struct.pack(">hiqqqhii", 0, n - 1, 1_000, 1_000, -1, -1, -1, n) + body
    head = struct.pack(">qiibI", base, HEADER_SIZE - 12 + len(body), -1, 2, crc32c.crc32c(tail))
    return head + tail


def test_batches_decoded_together_keep_each_record_under_its_own_offset() -> None:
    batches = as_fetched(paper_batch(0, 50), paper_batch(50, 50), paper_batch(100, 50))
    chunks = decode_values(batches)
    assert [chunk.offsets for chunk in chunks] == [range(50), range(50, 100), range(100, 150)]
    assert [chunk.topic_partition for chunk in chunks] == [TP, TP, TP]
    assert pairs(chunks) == [(offset, value_of(offset)) for offset in range(150)]
    assert all(type(value) is bytes for chunk in chunks for value in chunk.values)


def test_common_layouts_take_the_vectorised_path() -> None:
    shapes = [
        [paper_batch(0, 50), paper_batch(50, 50), paper_batch(100, 50)],  # the paper's
        [paper_batch(0, 1), paper_batch(1, 70), paper_batch(71, 500)],  # offset deltas of 1 and 2 bytes
        [paper_batch(0, 60), hand_batch(60, [], count=0), paper_batch(60, 60)],  # an empty batch
        [hand_batch(0, [record(i, None if i % 2 else b"v" * i, key=b"k") for i in range(80)])],
    ]
    for batches in shapes:
        fetched = as_fetched(*batches)
        bodies = [b.batch.buffer[HEADER_SIZE:] for b in fetched]
        counts = [b.record_count for b in fetched]
        bases = [b.base_offset for b in fetched]
        found = decode_values_vectorised(bodies, counts, bases, bases)
        assert found is not None
        assert [(list(o), v) for o, v in found] == [
            (list(c.offsets), c.values) for c in decode_values(fetched)
        ]
    assert pairs(decode_values(as_fetched(*shapes[2]))) == [
        (offset, value_of(offset)) for offset in range(120)
    ]


def test_records_before_from_offset_are_skipped_in_the_middle_of_a_batch() -> None:
    batches = as_fetched(paper_batch(1_000, 50), paper_batch(1_050, 50), from_offset=1_037)
    chunks = decode_values(batches)
    assert [chunk.offsets for chunk in chunks] == [range(1_037, 1_050), range(1_050, 1_100)]
    assert pairs(chunks) == [(offset, value_of(offset)) for offset in range(1_037, 1_100)]
    alone = as_fetched(paper_batch(1_000, 100), from_offset=1_099)[0].values()
    assert (alone.offsets, alone.values) == (range(1_099, 1_100), [value_of(1_099)])


def test_compressed_and_uncompressed_batches_decode_together() -> None:
    batches = as_fetched(
        paper_batch(0, 40),
        paper_batch(40, 40, CompressionType.ZSTD),
        paper_batch(80, 40, CompressionType.GZIP),
        paper_batch(120, 40),
    )
    assert [b.batch.attributes & 7 for b in batches] == [0, 4, 1, 0]  # really compressed
    chunks = decode_values(batches)
    assert [chunk.offsets for chunk in chunks] == [
        range(40),
        range(40, 80),
        range(80, 120),
        range(120, 160),
    ]
    assert pairs(chunks) == [(offset, value_of(offset)) for offset in range(160)]


def test_batches_of_one_record_and_small_polls() -> None:
    ones = as_fetched(*(paper_batch(offset, 1) for offset in range(200)))
    assert pairs(decode_values(ones)) == [(offset, value_of(offset)) for offset in range(200)]
    few = as_fetched(paper_batch(7, 3))  # below the vectorised threshold: walked in Python
    assert sum(b.record_count for b in few) < VECTORISED_MIN_RECORDS
    assert pairs(decode_values(few)) == [(7, value_of(7)), (8, value_of(8)), (9, value_of(9))]
    assert decode_values([]) == []


def test_null_empty_and_keyed_values_across_batches() -> None:
    first = [
        record(i, None if i % 3 == 0 else b"" if i % 3 == 1 else b"v%d" % i, key=b"k") for i in range(60)
    ]
    second = [record(i, None) for i in range(70)]
    third = [record(i, b"") for i in range(70)]
    chunks = decode_values(as_fetched(hand_batch(0, first), hand_batch(60, second), hand_batch(130, third)))
    expected = [None if i % 3 == 0 else b"" if i % 3 == 1 else b"v%d" % i for i in range(60)]
    assert pairs(chunks) == [
        *zip(range(60), expected, strict=True),
        *((offset, None) for offset in range(60, 130)),
        *((offset, b"") for offset in range(130, 200)),
    ]


def corrupt_batches(kind: str) -> list[bytes]:
    """Three good-looking batches (CRCs right) with ``kind`` of damage in the one at offset 100."""
    good = [record(i, value_of(100 + i)) for i in range(100)]
    if kind == "record length too long":
        bad = hand_batch(100, [*good[:40], record(40, value_of(140), length_delta=+3), *good[41:]])
    elif kind == "record length too short":
        bad = hand_batch(100, [*good[:40], record(40, value_of(140), length_delta=-3), *good[41:]])
    elif kind == "truncated record":
        bad = hand_batch(100, [*good[:99], good[99][:-5]])
    elif kind == "more records announced":
        bad = hand_batch(100, good, count=101)
    elif kind == "fewer records announced":
        bad = hand_batch(100, good, count=99)
    elif kind == "value overruns its record":  # 20 bytes said, 10 there, then the header (7 bytes)
        bad = hand_batch(100, [*good[:7], record(7, b"x" * 10, value_length=20), *good[8:]])
    elif kind == "value length below -1":
        bad = hand_batch(100, [*good[:3], record(3, None, value_length=-2), *good[4:]])
    elif kind == "key length below -1":
        bad = hand_batch(100, [*good[:3], record(3, b"v", key_length=-3), *good[4:]])
    elif kind == "every value length below -1":
        bad = hand_batch(100, [record(i, None, value_length=-2) for i in range(100)])
    elif kind == "a record too short for its fields":  # among records of varied sizes, walked one by one
        varied = [record(i, b"x" * (i % 7)) for i in range(100)]
        bad = hand_batch(100, [*varied[:50], encode_varint(5) + b"\x00\x00\x64\x01\x01", *varied[51:]])
    elif kind == "bytes in a batch of no records":  # the next batch's offsets would fit them
        after = hand_batch(100, [record(i, b"n") for i in range(1, 51)], count=51)
        return [paper_batch(0, 100), hand_batch(100, [record(0, b"v")], count=0), after]
    elif kind == "every key length below -1":
        bad = hand_batch(100, [record(i, value_of(100 + i), key_length=-3) for i in range(100)])
    elif kind == "a record spills into the next batch":  # the offsets would fit a wrong split
        bad = hand_batch(100, [*good, record(0, b"spilt")], count=100)
        return [
            paper_batch(0, 100),
            bad,
            hand_batch(200, [record(i, b"n") for i in range(1, 100)], count=100),
        ]
    else:
        raise AssertionError(kind)
    return [paper_batch(0, 100), bad, paper_batch(200, 100)]


CORRUPTIONS = [
    "record length too long",
    "record length too short",
    "truncated record",
    "more records announced",
    "fewer records announced",
    "value overruns its record",
    "value length below -1",
    "key length below -1",
    "every key length below -1",
    "every value length below -1",
    "a record too short for its fields",
    "bytes in a batch of no records",
    "a record spills into the next batch",
]


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_corrupt_records_name_the_partition_and_the_batch_base_offset(kind: str) -> None:
    batches = as_fetched(*corrupt_batches(kind))  # the CRCs are right: only decoding can tell
    with pytest.raises(CorruptBatchError, match=r"^events-2: corrupt record batch at offset 100: ") as caught:
        decode_values(batches)
    assert (caught.value.topic, caught.value.partition, caught.value.offset) == ("events", 2, 100)
    with pytest.raises(CorruptBatchError, match=r"^events-2: corrupt record batch at offset 100: "):
        batches[1].values()  # the batch on its own (100 records: vectorised, then walked)
    with pytest.raises(CorruptBatchError, match=r"^events-2: corrupt record batch at offset 100: "):
        decode_values(batches[1:])
    assert pairs(decode_values(batches[:1])) == [(offset, value_of(offset)) for offset in range(100)]


@pytest.mark.parametrize("count", [50, 100])  # offset deltas of one byte each, and of up to two
def test_out_of_order_offsets_fall_back_to_the_walk(count: int) -> None:
    records = [record(i, b"v%d" % i) for i in range(count)]
    records[10], records[11] = record(11, b"v11"), record(10, b"v10")  # offsets 11 and 10 swapped
    batches = as_fetched(paper_batch(0, 50), hand_batch(50, records), paper_batch(50 + count, 50))
    chunks = decode_values(batches)
    expected_offsets = [*range(50, 60), 61, 60, *range(62, 50 + count)]
    assert list(chunks[1].offsets) == expected_offsets
    assert chunks[1].values == [b"v%d" % (offset - 50) for offset in expected_offsets]
    assert pairs([chunks[0], chunks[2]]) == [
        (offset, value_of(offset)) for offset in [*range(50), *range(50 + count, 100 + count)]
    ]


def test_a_crc_mismatch_is_caught_before_decoding_and_names_the_batch() -> None:
    from broker.client.consumer.partition_records import parse_partition_records  # noqa: PLC0415

    damaged = bytearray(paper_batch(100, 100))
    damaged[-30] ^= 0x01  # inside the last value: only the CRC can tell
    parsed = parse_partition_records(paper_batch(0, 100) + bytes(damaged), TP, 0, check_crcs=True)
    assert parsed.error is not None
    assert (parsed.error.topic, parsed.error.partition, parsed.error.offset) == ("events", 2, 100)
    kept = [FetchedBatch(TP, batch, 0) for batch in parsed.batches]
    assert pairs(decode_values(kept)) == [(offset, value_of(offset)) for offset in range(100)]


# ------------------------------------------------------------------ the vectorised decoder against the walk

BATCH_SHAPES = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=150),  # records
        st.sampled_from(["same", "varied", "nulls", "keyed"]),
        st.sampled_from([CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(BATCH_SHAPES, st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=2**40))
def test_decoding_many_batches_at_once_matches_the_record_walk_batch_by_batch(
    shapes: list[tuple[int, str, CompressionType]], skip: int, first_base: int
) -> None:
    batches: list[bytes] = []
    expected: list[tuple[int, bytes | None]] = []
    base = first_base
    for count, kind, codec in shapes:
        builder = RecordBatchBuilder(codec, base_offset=base)
        for i in range(count):
            offset = base + i
            value = {
                "same": value_of(offset),
                "varied": value_of(offset, 1 + offset * 37 % 300),
                "nulls": None if i % 4 == 1 else value_of(offset, 20),
                "keyed": value_of(offset, 60),
            }[kind]
            key = b"k" * (i % 5) if kind == "keyed" else None
            builder.append(1_000 + i * 50, key, value, HOST if i % 2 == 0 or kind != "keyed" else ())
            expected.append((offset, value))
        batches.append(builder.build())
        base += count
    from_offset = first_base + skip
    fetched = as_fetched(*batches, from_offset=from_offset)
    reference = [
        ([r.offset for r in walked], [r.value for r in walked]) for walked in (b.walk() for b in fetched)
    ]
    together = decode_values(fetched)
    assert [(list(c.offsets), c.values) for c in together] == reference
    assert pairs(together) == [(o, v) for o, v in expected if o >= from_offset]


def test_without_numpy_everything_is_walked_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = as_fetched(paper_batch(0, 50), paper_batch(50, 50, CompressionType.LZ4), paper_batch(100, 50))
    import_numpy.cache_clear()
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now raises ImportError
    try:
        assert load_decoder() is False
        assert decode_values_vectorised([b"\x00"], [1], [0], [0]) is None
        assert pairs(decode_values(batches)) == [(offset, value_of(offset)) for offset in range(150)]
    finally:
        import_numpy.cache_clear()
