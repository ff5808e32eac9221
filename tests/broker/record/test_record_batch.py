from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record.batch_header import HEADER_SIZE, TimestampType
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.errors import CorruptRecordError, UnsupportedCompressionError
from broker.record.record import Record
from broker.record.record_batch import RecordBatch, set_base_offset
from broker.record.record_batch_builder import RecordBatchBuilder

with warnings.catch_warnings():
    # kafka-python's protocol package calls importlib.resources.read_text, deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TIMESTAMPS = st.integers(min_value=0, max_value=2**45)
NULLABLE_BYTES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=12), NULLABLE_BYTES), max_size=3).map(tuple)
RECORDS = st.lists(st.tuples(TIMESTAMPS, NULLABLE_BYTES, NULLABLE_BYTES, HEADERS), min_size=1, max_size=25)
CODECS = list(CompressionType)
RecordSpec = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def build(codec: CompressionType, records: Sequence[RecordSpec], base: int = 0) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=base)
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(ts, key, value, headers) == i
    return builder.build()


# ------------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@settings(max_examples=40, deadline=None)
@given(records=RECORDS, base=st.integers(min_value=0, max_value=2**40))
def test_round_trip_every_codec(codec: CompressionType, records: list[RecordSpec], base: int) -> None:
    # A compressible record at the end makes every codec actually compress (build() falls back to no
    # compression when a codec does not shrink the records).
    records = [*records, (records[-1][0], b"k", b"abcdefgh" * 64, ())]
    data = build(codec, records, base)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.compression == codec
    assert batch.magic == 2
    assert batch.size_bytes == len(data)
    assert batch.base_offset == base
    assert batch.record_count == len(records)
    assert batch.last_offset == base + len(records) - 1
    assert batch.next_offset == base + len(records)
    assert batch.first_timestamp_ms == records[0][0]
    assert batch.max_timestamp_ms == max(r[0] for r in records)
    expected = [
        Record(base + i, ts, key, value, tuple((k, v) for k, v in headers))
        for i, (ts, key, value, headers) in enumerate(records)
    ]
    assert list(batch.records()) == expected


# ------------------------------------------------------------------------------------------ validation


def small_batch(count: int = 3, base: int = 0) -> bytearray:
    builder = RecordBatchBuilder(base_offset=base)
    for i in range(count):
        builder.append(1000 + i, None, b"value-%d" % i)
    return bytearray(builder.build())


def test_flipped_byte_fails_the_crc_with_expected_and_actual() -> None:
    data = small_batch()
    data[HEADER_SIZE + 5] ^= 0x01
    batch = RecordBatch(data, where="clicks-0", position=4096)
    with pytest.raises(CorruptRecordError) as info:
        batch.validate()
    stored = struct.unpack_from(">I", data, 17)[0]
    actual = crc32c.crc32c(bytes(data[21:]))
    assert info.value.reason == f"expected CRC 0x{stored:08x} got 0x{actual:08x}"
    assert info.value.where == "clicks-0"
    assert info.value.position == 4096
    assert info.value.offset == 0
    assert str(info.value).startswith(
        "clicks-0: corrupt record batch at position 4096, base offset 0: expected CRC"
    )


def test_bad_magic() -> None:
    data = small_batch()
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="expected magic 2 got 1"):
        RecordBatch(data).validate()


def test_bad_codec_is_unsupported_compression() -> None:
    data = small_batch()
    struct.pack_into(">h", data, 21, 5)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    with pytest.raises(UnsupportedCompressionError, match="unknown compression codec 5"):
        RecordBatch(data).validate()


@pytest.mark.parametrize(
    ("length", "message"),
    [(10, "batchLength 10 is below the minimum 49"), (10_000, "announces 10012 bytes but only")],
)
def test_impossible_lengths(length: int, message: str) -> None:
    data = small_batch()
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(CorruptRecordError, match=message):
        RecordBatch(data)


def test_too_short_for_a_header() -> None:
    with pytest.raises(CorruptRecordError, match="40 bytes cannot hold a batch header"):
        RecordBatch(bytes(40))


def test_records_that_do_not_match_their_lengths_are_corrupt() -> None:
    data = small_batch(count=2)
    # Claim 3 records while the batch holds 2 (and fix the CRC so only the records are wrong).
    struct.pack_into(">i", data, 57, 3)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    batch = RecordBatch(data)
    batch.validate()
    with pytest.raises(CorruptRecordError, match="record #2"):
        list(batch.records())


def test_trailing_bytes_after_the_records_are_corrupt() -> None:
    data = small_batch(count=2)
    struct.pack_into(">i", data, 57, 1)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError, match="bytes left after 1 records"):
        list(RecordBatch(data).records())


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    data = small_batch(count=3)
    struct.pack_into(">h", data, 21, 0x08)
    struct.pack_into(">q", data, 35, 99_999)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    batch = RecordBatch(data)
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in batch.records()] == [99_999] * 3


# ------------------------------------------------------------------------------------------ buffers


def test_set_base_offset_keeps_the_crc_valid() -> None:
    data = small_batch(count=4)
    crc_before = bytes(data[17:21])
    set_base_offset(data, 123_456)
    batch = RecordBatch(data)
    batch.validate()
    assert bytes(data[17:21]) == crc_before
    assert batch.base_offset == 123_456
    assert [r.offset for r in batch.records()] == [123_456, 123_457, 123_458, 123_459]


def test_set_base_offset_in_a_memoryview_at_a_position() -> None:
    data = bytearray(small_batch(count=1) + small_batch(count=2))
    first_size = RecordBatch(data).size_bytes
    set_base_offset(memoryview(data), 50, first_size)
    scan = scan_batches(data)
    assert [b.base_offset for b in scan.batches] == [0, 50]
    for batch in scan.batches:
        batch.validate()


# ------------------------------------------------------------------------------------------ interop


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_kafka_python_reads_our_batches(codec: CompressionType) -> None:
    records = [
        (
            1_700_000_000_000 + i,
            None if i % 4 == 0 else b"key-%d" % i,
            b"value %d " % i * 20,
            (("host", b"h1"), ("n", None)),
        )
        for i in range(60)
    ]
    data = build(codec, records, base=500)
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert theirs.base_offset == 500
    assert theirs.last_offset_delta == 59
    decoded = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    assert decoded == [
        (500 + i, ts, k, v, [tuple(h) for h in hs]) for i, (ts, k, v, hs) in enumerate(records)
    ]


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_we_read_kafka_python_batches(codec: CompressionType) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(60):
        builder.append(
            i, 1_700_000_000_000 + 2 * i, b"k%d" % i, b"payload %d " % i * 20, [("host", b"h%d" % i)]
        )
    data = bytes(builder.build())
    batch = RecordBatch(data)
    batch.validate()
    assert batch.compression == codec
    records = list(batch.records())
    assert records == [
        Record(i, 1_700_000_000_000 + 2 * i, b"k%d" % i, b"payload %d " % i * 20, (("host", b"h%d" % i),))
        for i in range(60)
    ]


@pytest.mark.interop
@settings(max_examples=25, deadline=None)
@given(records=RECORDS, codec=st.sampled_from(CODECS))
def test_kafka_python_agrees_on_random_batches(records: list[RecordSpec], codec: CompressionType) -> None:
    data = build(codec, records, base=10)
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in theirs] == [
        (r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in RecordBatch(data).records()
    ]


def one_record_batches(count: int, *, size_of_last: int = 5) -> list[RecordBatch]:
    """``count`` uncompressed batches of one record (a pipelining producer's), at offsets 0, 1, ..."""
    out = []
    for i in range(count):
        builder = RecordBatchBuilder(base_offset=i)
        builder.append(1_700_000_000_000, b"k%03d" % i, b"v" * (size_of_last if i == count - 1 else 5))
        out.append(RecordBatch(builder.build()))
    return out


def test_the_batches_choose_the_check_of_their_records() -> None:
    run = one_record_batches(4)
    check = RecordBatch.records_validator(run)
    assert check is not RecordBatch.validate_records  # proved together: nothing more per batch
    for batch in run:
        check(batch)
    # a run the joint proof declines (one batch of another size), a single batch: each batch walked
    assert (
        RecordBatch.records_validator(one_record_batches(4, size_of_last=6)) is RecordBatch.validate_records
    )
    assert RecordBatch.records_validator(run[:1]) is RecordBatch.validate_records
    # the walk names a damaged record that the joint proof declines
    damaged = bytearray(build(CompressionType.NONE, [(0, b"k", b"v", ())]))
    damaged[HEADER_SIZE] = 0x7E  # the record's length varint: 63, more than the body holds
    mixed = [*run[:3], RecordBatch(damaged)]
    check = RecordBatch.records_validator(mixed)
    assert check is RecordBatch.validate_records
    with pytest.raises(CorruptRecordError):
        check(mixed[3])


@pytest.mark.parametrize("compiled_loaded", [False, True], ids=["walked", "by-columns"])
def test_the_first_keyless_record_is_found_by_the_reader_that_fits(
    compiled_loaded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both routes give the same answer; ``load_columns`` is asked for only from 64 records, while the
    compiled columns are not loaded."""
    monkeypatch.setattr("broker.compiled.loaded", lambda: compiled_loaded)
    asked: list[int] = []

    def load_columns() -> None:
        asked.append(1)

    keyed = [RecordBatch(build(CompressionType.NONE, [(0, b"k%d" % i, b"v", ()) for i in range(40)]))]
    keyed.append(RecordBatch(build(CompressionType.GZIP, [(0, b"k", b"v", ())] * 24, base=40)))
    assert RecordBatch.first_keyless_record(keyed, load_columns=load_columns) is None
    assert asked == ([] if compiled_loaded else [1])
    assert RecordBatch.first_keyless_record(keyed[:1], load_columns=load_columns) is None  # 40: walked
    assert asked == ([] if compiled_loaded else [1])

    records: list[RecordSpec] = [(0, b"k", b"v", ())] * 30
    records[17] = (0, None, b"v", ())
    keyless = [*keyed, RecordBatch(build(CompressionType.NONE, records, base=64))]
    found = RecordBatch.first_keyless_record(keyless, load_columns=load_columns)
    assert found is not None
    batch, index, record = found
    assert (batch is keyless[2], index, record.offset, record.key) == (True, 17, 64 + 17, None)
