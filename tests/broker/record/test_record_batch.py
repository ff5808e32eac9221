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
from broker.record.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from broker.record.layout_check import one_record_batches_valid, records_of_one_layout
from broker.record.record import Record
from broker.record.record_batch import RecordBatch, set_base_offset
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_walker import walk_records
from broker.record.varint import decode_varint, encode_varint, size_of_varint

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


# ------------------------------------------------------------------------------------------ varints


@given(INT64)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value)
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))


def test_varint_known_encodings() -> None:
    # zigzag: 0 -> 0, -1 -> 1, 1 -> 2, 63 -> 126, -64 -> 127, 64 -> 128 (two bytes)
    assert encode_varint(0) == b"\x00"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(-64) == b"\x7f"
    assert encode_varint(64) == b"\x80\x01"
    assert encode_varint(2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"


def test_varint_cut_short_and_too_long() -> None:
    with pytest.raises(IndexError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        decode_varint(b"\xff" * 11, 0)


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


@settings(max_examples=60, deadline=None)
@given(records=RECORDS, codec=st.sampled_from(CODECS))
def test_size_in_bytes_is_an_upper_bound(records: list[RecordSpec], codec: CompressionType) -> None:
    builder = RecordBatchBuilder(codec)
    estimate = builder.size_in_bytes()
    for ts, key, value, headers in records:
        per_record = RecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        before = builder.size_in_bytes()
        builder.append(ts, key, value, headers)
        assert builder.size_in_bytes() - before <= per_record
        estimate = builder.size_in_bytes()
    assert len(builder.build()) <= estimate


def test_uncompressed_size_is_exact_and_incompressible_data_falls_back() -> None:
    builder = RecordBatchBuilder(CompressionType.GZIP)
    builder.append(1, None, bytes(range(256)))
    data = builder.build()
    assert len(data) == builder.size_in_bytes()
    assert RecordBatch(data).compression == CompressionType.NONE


def test_builder_defaults_match_kafka() -> None:
    builder = RecordBatchBuilder()
    builder.append(5, None, b"v")
    batch = RecordBatch(builder.build())
    assert batch.partition_leader_epoch == -1
    assert batch.producer_id == -1
    assert batch.producer_epoch == -1
    assert batch.base_sequence == -1
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert not batch.is_transactional
    assert not batch.is_control_batch


def test_builder_refuses_empty_and_reuse() -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(ValueError, match="without records"):
        builder.build()
    builder.append(1, None, b"x")
    builder.build()
    with pytest.raises(ValueError, match="already built"):
        builder.append(2, None, b"y")


def test_exact_bytes_of_a_small_batch() -> None:
    builder = RecordBatchBuilder(base_offset=7, producer_id=3, producer_epoch=1, base_sequence=9)
    builder.append(1000, b"k", b"vv", (("h", b"x"),))
    data = builder.build()
    # record: length | attrs 0 | ts delta 0 | offset delta 0 | key len 1, "k" | value len 2, "vv"
    #         | 1 header: key len 1, "h", value len 1, "x"
    record = b"\x00\x00\x00" + b"\x02k" + b"\x04vv" + b"\x02" + b"\x02h" + b"\x02x"
    record = encode_varint(len(record)) + record
    assert data[HEADER_SIZE:] == record
    header = struct.unpack(">qiibIhiqqqhii", data[:HEADER_SIZE])
    assert header == (7, len(data) - 12, -1, 2, crc32c.crc32c(data[21:]), 0, 0, 1000, 1000, 3, 1, 9, 1)


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


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 60, 61, 70])
def test_scan_reports_a_partial_tail(cut: int) -> None:
    first = bytes(small_batch(count=2))
    second = bytes(small_batch(count=3, base=2))
    data = first + second[:cut]
    scan = scan_batches(data)
    assert [b.base_offset for b in scan.batches] == [0]
    assert scan.complete_bytes == len(first)
    assert scan.partial_tail_bytes == cut


def test_scan_of_whole_batches_is_zero_copy_and_complete() -> None:
    batches = [bytes(small_batch(count=c, base=b)) for b, c in ((0, 1), (1, 5), (6, 2))]
    data = b"".join(batches)
    scan = scan_batches(data, where="fetch clicks-0", base_position=1000)
    assert scan.partial_tail_bytes == 0
    assert scan.complete_bytes == len(data)
    assert [b.buffer.obj is data for b in scan.batches] == [True, True, True]
    assert [b.position for b in scan.batches] == [
        1000,
        1000 + len(batches[0]),
        1000 + len(batches[0]) + len(batches[1]),
    ]
    assert [r.offset for b in scan.batches for r in b.records()] == list(range(8))


def test_scan_rejects_garbage_that_cannot_be_a_batch() -> None:
    with pytest.raises(CorruptRecordError, match="at position 12, base offset 0: batchLength 0 is below"):
        scan_batches(bytes(24), base_position=12)
    data = bytearray(small_batch())
    data[16] = 0
    with pytest.raises(CorruptRecordError, match="expected magic 2 got 0"):
        scan_batches(data)


def test_empty_buffer_scans_to_nothing() -> None:
    scan = scan_batches(b"")
    assert scan == type(scan)((), 0, 0)


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


# ------------------------------------------------------------------------- the validation walk's strategy


def _one_layout_records(count: int, *, headers: bool = True) -> bytes:
    """The records of a producer's batch: 20-byte values, a ``host`` header, timestamps 1 ms apart."""
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(
            1_700_000_000_000 + i % 50, None, b"v%019d" % i, [("host", b"lumber-1")] if headers else ()
        )
    return builder.build()[HEADER_SIZE:]


_BYTE_CHANGES = (lambda b: b ^ 0x01, lambda b: b ^ 0x80, lambda b: b ^ 0x40, lambda _: 0, lambda _: 0xFF)


def _walk_accepts(data: bytes, count: int) -> bool:
    try:
        for _ in walk_records(data, count, 0, 0, None, "t-0", 0, decode=False):
            pass
    except (CorruptRecordError, InvalidRecordError):
        return False
    return True


@pytest.mark.parametrize(
    ("count", "headers"), [(2, True), (50, True), (50, False), (64, True), (9000, False)]
)
def test_one_layout_strategy_vouches_for_a_producers_records(count: int, headers: bool) -> None:
    data = _one_layout_records(count, headers=headers)
    assert records_of_one_layout(data, count, "t-0", 0) is True  # across the 64 and 8192 width changes too
    assert _walk_accepts(data, count)
    assert records_of_one_layout(data, count + 1, "t-0", 0) is False
    assert records_of_one_layout(data, count - 1, "t-0", 0) is False
    assert records_of_one_layout(data + b"\x00", count, "t-0", 0) is False


def test_one_layout_strategy_never_vouches_for_what_the_walk_refuses() -> None:
    """Every byte of 70 records (crossing the offset deltas' width change at 64) changed 5 ways: whenever
    the strategy says valid, the walk agrees; and it refuses at least every change the walk refuses."""
    count = 70
    data = _one_layout_records(count)
    vouched = refused = 0
    for at in range(len(data)):
        for change in _BYTE_CHANGES:
            mutated = bytearray(data)
            mutated[at] = change(data[at])
            if mutated == data:
                continue
            fast = records_of_one_layout(bytes(mutated), count, "t-0", 0)
            walk = _walk_accepts(bytes(mutated), count)
            assert walk or not fast, (
                f"byte {at} changed to {mutated[at]:#x}: the strategy vouched, the walk refused"
            )
            vouched += fast
            refused += not walk
    # values and timestamps are not framing: most changes there stay valid, and the strategy sees that
    assert vouched > len(data) * 2
    assert refused > 500


def _one_record_batches(count: int) -> bytes:
    batches = []
    for i in range(count):
        builder = RecordBatchBuilder()
        builder.append(1_700_000_000_000 + i, None, b"v%019d" % i, [("host", b"lumber-1")])
        batches.append(builder.build())
    return b"".join(batches)


def _each_accepted(data: bytes) -> bool:
    try:
        for batch in scan_batches(data).batches:
            batch.validate_records()
    except (CorruptRecordError, InvalidRecordError):
        return False
    return True


def test_one_record_batches_are_vouched_for_together() -> None:
    data = _one_record_batches(5)
    assert one_record_batches_valid(scan_batches(data).batches) is True
    assert one_record_batches_valid(scan_batches(data).batches[:1]) is False  # one batch: walked
    two = RecordBatchBuilder()
    two.append(1, None, b"a")
    two.append(2, None, b"b")
    assert one_record_batches_valid(scan_batches(data + two.build()).batches) is False


def test_one_record_batches_strategy_never_vouches_for_what_the_walk_refuses() -> None:
    """Every byte of the records of 3 one-record batches changed 5 ways (their headers kept): whenever the
    strategy vouches, each batch's own walk agrees."""
    data = _one_record_batches(3)
    size = len(data) // 3
    vouched = refused = 0
    for at in range(len(data)):
        if at % size < HEADER_SIZE:
            continue
        for change in _BYTE_CHANGES:
            mutated = bytearray(data)
            mutated[at] = change(data[at])
            if mutated == data:
                continue
            fast = one_record_batches_valid(scan_batches(bytes(mutated)).batches)
            walk = _each_accepted(bytes(mutated))
            assert walk or not fast, f"byte {at} changed to {mutated[at]:#x}: vouched for, the walk refused"
            vouched += fast
            refused += not walk
    assert vouched > 3 * 20
    assert refused > 100
