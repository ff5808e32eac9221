"""The builder: size bounds, Kafka's defaults, exact bytes."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record.batch_header import HEADER_SIZE, TimestampType
from broker.record.compression import CompressionType, compress
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder, recompressed_batch
from broker.record.varint import encode_varint

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


@pytest.mark.parametrize("codec", CODECS)
def test_recompressed_batch_keeps_the_producer_fields_and_the_records(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(CompressionType.LZ4, producer_id=7, producer_epoch=3, base_sequence=41)
    for i in range(20):
        builder.append(1_000 + i, f"k{i}".encode(), b"log line " * 20, (("host", b"h1"),))
    produced = RecordBatch(builder.build())
    stored = RecordBatch(recompressed_batch(produced, codec))
    stored.validate()  # the CRC covers the new attributes
    stored.validate_records()
    assert (stored.compression, stored.timestamp_type, stored.is_transactional) == (
        codec,
        TimestampType.CREATE_TIME,
        False,
    )
    assert (stored.producer_id, stored.producer_epoch, stored.base_sequence) == (7, 3, 41)
    assert (stored.record_count, stored.last_offset_delta, stored.first_timestamp_ms) == (20, 19, 1_000)
    assert stored.max_timestamp_ms == 1_019
    assert stored.records_data() == produced.records_data()  # the producer's record bytes, recompressed
    assert stored.records() == produced.records()
    if codec == CompressionType.NONE:
        assert (
            stored.size_bytes == HEADER_SIZE + len(produced.records_data()) == 4_051
        )  # 10 records of 199 bytes, 10 of 200
    else:
        assert stored.buffer[HEADER_SIZE:] == compress(codec, produced.records_data())


def test_recompressed_batch_compresses_even_when_larger_and_keeps_the_transactional_bit() -> None:
    builder = RecordBatchBuilder(is_transactional=True, producer_id=9, producer_epoch=0, base_sequence=0)
    builder.append(5, None, b"\x8f")
    produced = RecordBatch(builder.build())
    assert produced.size_bytes == 69
    stored = RecordBatch(recompressed_batch(produced, CompressionType.GZIP))
    stored.validate()
    # Kafka's builder compresses whatever the size: 8 bytes of records take 28 as gzip
    assert (stored.size_bytes, stored.compression, stored.is_transactional) == (
        89,
        CompressionType.GZIP,
        True,
    )
    assert [(r.offset, r.timestamp_ms, r.key, r.value) for r in stored.records()] == [(0, 5, None, b"\x8f")]
