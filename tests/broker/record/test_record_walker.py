"""The record walker's strategies agree with each other, field for field, on the same batches.

Each batch below is written out byte for byte (so the expected records are known, not computed by the code
under test), then read by every strategy that applies: the full walk (decoding and validating), the values
walk, the numpy pass over one batch and over several, the validator's one-layout and one-record-batch
proofs, and :meth:`RecordBatch.records`. Batches: uncompressed and in every codec, with and without headers,
null keys and values, empty values, a LogAppendTime batch and a control batch.
"""

from __future__ import annotations

import struct

import crc32c
import pytest

from broker.record.batch_header import HEADER_SIZE
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType, compress
from broker.record.errors import CorruptRecordError, InvalidRecordError
from broker.record.layout_check import one_record_batches_valid, records_of_one_layout
from broker.record.record import Record
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder, pack_batch
from broker.record.record_walker import walk_records, walk_values
from broker.record.value_columns import decode_values_vectorised

FIRST_TS = 1_700_000_000_000

# Two records, by hand (varints are zigzag: n is written as 2n, -1 as 0x01):
#   #0: attrs 0, ts delta 0, offset delta 0, key null, value "v0", 1 header host="h"
#   #1: attrs 0, ts delta 5, offset delta 1, key "k", value null, no headers
RECORD_0 = bytes.fromhex("1e0000000104") + b"v0" + bytes.fromhex("0208") + b"host" + b"\x02h"
RECORD_1 = bytes.fromhex("0e000a0202") + b"k" + bytes.fromhex("0100")
MIXED_BODY = RECORD_0 + RECORD_1
MIXED_RECORDS = [
    Record(100, FIRST_TS, None, b"v0", (("host", b"h"),)),
    Record(101, FIRST_TS + 5, b"k", None, ()),
]

# Three records of one layout: null key, 3-byte values, a header "n" with a null value; ts deltas 0, 1, 2.
ONE_LAYOUT_BODY = b"".join(
    bytes.fromhex("1800") + bytes([2 * i, 2 * i]) + b"\x01\x06" + b"a%02d" % i + b"\x02\x02n\x01"
    for i in range(3)
)
ONE_LAYOUT_RECORDS = [Record(7 + i, FIRST_TS + i, None, b"a%02d" % i, (("n", None),)) for i in range(3)]

# An empty value and a value of 64 bytes (its length takes two varint bytes), no headers.
WIDE_BODY = (
    bytes.fromhex("0e00000002")
    + b"e"
    + b"\x00\x00"
    + (bytes.fromhex("900100020202") + b"f" + b"\x80\x01" + b"x" * 64 + b"\x00")
)
WIDE_RECORDS = [Record(0, FIRST_TS, b"e", b"", ()), Record(1, FIRST_TS + 1, b"f", b"x" * 64, ())]


def test_the_hand_written_bodies_are_what_the_builder_writes() -> None:
    builder = RecordBatchBuilder(base_offset=100)
    builder.append(FIRST_TS, None, b"v0", [("host", b"h")])
    builder.append(FIRST_TS + 5, b"k", None)
    assert builder.build()[HEADER_SIZE:] == MIXED_BODY
    builder = RecordBatchBuilder(base_offset=7)
    for i in range(3):
        builder.append(FIRST_TS + i, None, b"a%02d" % i, [("n", None)])
    assert builder.build()[HEADER_SIZE:] == ONE_LAYOUT_BODY
    builder = RecordBatchBuilder()
    builder.append(FIRST_TS, b"e", b"")
    builder.append(FIRST_TS + 1, b"f", b"x" * 64)
    assert builder.build()[HEADER_SIZE:] == WIDE_BODY


def batch_of(body: bytes, count: int, base: int, *, attributes: int = 0, max_ts: int | None = None) -> bytes:
    """A batch around ``body`` (already compressed when ``attributes`` names a codec), CRC included."""
    last_ts = FIRST_TS + 5 if max_ts is None else max_ts
    tail = struct.pack(">hiqqqhii", attributes, count - 1, FIRST_TS, last_ts, -1, -1, -1, count)
    crc = crc32c.crc32c(body, crc32c.crc32c(tail))
    return struct.pack(">qiibI", base, HEADER_SIZE - 12 + len(body), -1, 2, crc) + tail + body


CASES = [
    ("mixed", MIXED_BODY, 100, MIXED_RECORDS),
    ("one layout", ONE_LAYOUT_BODY, 7, ONE_LAYOUT_RECORDS),
    ("empty and wide values", WIDE_BODY, 0, WIDE_RECORDS),
]


@pytest.mark.parametrize(("name", "body", "base", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_strategy_reads_the_same_records(
    name: str, body: bytes, base: int, expected: list[Record]
) -> None:
    count = len(expected)
    assert walk_records(body, count, base, FIRST_TS, None, name, 0) == expected
    assert walk_records(body, count, base, FIRST_TS, None, name, 0, decode=False) == []
    offsets, values = walk_values(body, count, base, 0, name)
    assert (list(offsets), values) == ([r.offset for r in expected], [r.value for r in expected])
    vectorised = decode_values_vectorised([body], [count], [base], [0])
    assert vectorised is not None
    assert (list(vectorised[0][0]), vectorised[0][1]) == (list(offsets), values)
    assert records_of_one_layout(body, count, name, 0) is (name == "one layout")
    batch = RecordBatch(batch_of(body, count, base))
    batch.validate()
    batch.validate_records()
    assert batch.records() == expected


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
@pytest.mark.parametrize(("name", "body", "base", "expected"), CASES, ids=[c[0] for c in CASES])
def test_compressed_batches_read_the_same_records(
    codec: CompressionType, name: str, body: bytes, base: int, expected: list[Record]
) -> None:
    data = batch_of(compress(codec, body), len(expected), base, attributes=int(codec))
    batch = RecordBatch(data)
    batch.validate()
    batch.validate_records()
    assert batch.records_data() == body
    assert batch.records() == expected
    assert batch.records(from_offset=base + 1) == expected[1:]
    assert batch.records(until_offset=base + 1) == expected[:1]


def test_from_offset_is_honoured_alike() -> None:
    expected = ONE_LAYOUT_RECORDS[1:]
    assert walk_records(ONE_LAYOUT_BODY, 3, 7, FIRST_TS, None, "t", 0, from_offset=8) == expected
    offsets, values = walk_values(ONE_LAYOUT_BODY, 3, 7, 8)
    assert (offsets, values) == (range(8, 10), [b"a01", b"a02"])
    assert decode_values_vectorised([ONE_LAYOUT_BODY], [3], [7], [8]) == [(range(8, 10), [b"a01", b"a02"])]


def test_several_batches_in_one_numpy_pass_match_the_walk_batch_by_batch() -> None:
    bodies = [MIXED_BODY, ONE_LAYOUT_BODY, WIDE_BODY]
    found = decode_values_vectorised(bodies, [2, 3, 2], [100, 7, 0], [101, 0, 0])
    assert found == [
        (range(101, 102), [None]),
        (range(7, 10), [b"a00", b"a01", b"a02"]),
        (range(2), [b"", b"x" * 64]),
    ]


def test_log_append_time_gives_every_record_the_batch_max_timestamp() -> None:
    data = batch_of(MIXED_BODY, 2, 100, attributes=0x08, max_ts=FIRST_TS + 999)
    assert RecordBatch(data).records() == [r._replace(timestamp_ms=FIRST_TS + 999) for r in MIXED_RECORDS]


def test_a_control_batch_walks_like_any_other() -> None:
    # A transaction COMMIT marker: key = version 0, type 1; value = version 0, coordinator epoch 5.
    key = b"\x00\x00\x00\x01"
    value = b"\x00\x00\x00\x00\x00\x05"
    body = bytes.fromhex("2000000008") + key + b"\x0c" + value + b"\x00"
    data = batch_of(body, 1, 40, attributes=0x20 | 0x10)
    batch = RecordBatch(data)
    assert batch.is_control_batch
    assert batch.is_transactional
    batch.validate()
    batch.validate_records()
    assert batch.records() == [Record(40, FIRST_TS, key, value, ())]
    assert walk_values(body, 1, 40, 0) == (range(40, 41), [value])


def test_one_record_batches_are_proved_together_and_read_alike() -> None:
    parts = [
        pack_batch(bytes.fromhex("180000000106") + b"r%02d" % i + b"\x02\x02n\x01", 1, FIRST_TS, FIRST_TS)
        for i in range(4)
    ]
    batches = scan_batches(b"".join(parts)).batches
    assert one_record_batches_valid(batches) is True
    assert [batch.records() for batch in batches] == [
        [Record(0, FIRST_TS, None, b"r%02d" % i, (("n", None),))] for i in range(4)
    ]
    bodies = [batch.buffer[HEADER_SIZE:] for batch in batches]
    assert decode_values_vectorised(bodies, [1] * 4, [0] * 4, [0] * 4) == [
        (range(1), [b"r%02d" % i]) for i in range(4)
    ]


@pytest.mark.parametrize(
    ("body", "count", "walk_error", "values_error"),
    [
        (
            MIXED_BODY[:-1],
            2,
            "record #1: record length 7 with 6 bytes left",
            "record #1 has length 7 with 6 bytes left",
        ),
        (MIXED_BODY + b"\x00", 2, "1 bytes left after 2 records", "1 bytes left after 2 records"),
        (MIXED_BODY, 3, "record #2: record cut short", "record #2 is cut short"),
    ],
)
def test_every_strategy_refuses_a_malformed_body(
    body: bytes, count: int, walk_error: str, values_error: str
) -> None:
    with pytest.raises(CorruptRecordError, match=walk_error):
        walk_records(body, count, 0, FIRST_TS, None, "t-0", 0)
    with pytest.raises(CorruptRecordError, match=values_error):
        walk_values(body, count, 0, 0, "t-0")
    assert decode_values_vectorised([body], [count], [0], [0]) is None
    assert records_of_one_layout(body, count, "t-0", 0) is False
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        walk_records(body, count, 0, FIRST_TS, None, "t-0", 0, decode=False)


def test_the_values_walk_rejects_lengths_below_minus_one() -> None:
    # RECORD_1 with its value length -2 (0x03) instead of -1, then with its key length -3 (0x05)
    with pytest.raises(CorruptRecordError, match=r"record #0: value length -2"):
        walk_values(bytes.fromhex("0e000a0202") + b"k" + bytes.fromhex("0300"), 1, 0, 0)
    with pytest.raises(CorruptRecordError, match=r"record #0: key length -3"):
        walk_values(bytes.fromhex("0e000a0205") + b"k" + bytes.fromhex("0100"), 1, 0, 0)
    with pytest.raises(CorruptRecordError, match=r"record #0: key length -3"):
        walk_records(bytes.fromhex("0e000a0205") + b"k" + bytes.fromhex("0100"), 1, 0, 0, None, "t", 0)
