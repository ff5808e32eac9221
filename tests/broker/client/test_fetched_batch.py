from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.consumer_record import ConsumerRecord
from broker.client.errors import CorruptBatchError
from broker.client.fetched_batch import FetchedBatch, _decode_values_python, _decode_values_vectorised
from broker.log.record_batch import CompressionType, RecordBatch, RecordBatchBuilder
from broker.log.topic_partition import TopicPartition

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


VALUE_RUNS = st.lists(
    st.tuples(st.integers(min_value=1, max_value=200), st.none() | st.integers(min_value=0, max_value=400)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(VALUE_RUNS, st.integers(min_value=0, max_value=3000), st.booleans())
def test_vectorised_and_python_value_decoders_agree(
    runs: list[tuple[int, int | None]], skip: int, keyed: bool
) -> None:
    # runs of equal-size values (the vectorised path checks them at once) mixed with odd ones and nulls
    builder = RecordBatchBuilder(CompressionType.NONE, base_offset=1_000)
    expected: list[bytes | None] = []
    for run, size in runs:
        for i in range(run):
            value = None if size is None else bytes([i % 256]) * size
            builder.append(5 + i, b"key" if keyed else None, value, (("host", b"h"),))
            expected.append(value)
    data = RecordBatch(builder.build()).buffer[61:].tobytes()
    count = len(expected)
    from_offset = 1_000 + min(skip, count)
    python = _decode_values_python(data, count, 1_000, from_offset)
    vectorised = _decode_values_vectorised(data, count, 1_000, from_offset)
    assert list(python[0]) == list(range(from_offset, 1_000 + count))
    assert python[1] == expected[from_offset - 1_000 :]
    assert vectorised is not None
    assert list(vectorised[0]) == list(python[0])
    assert vectorised[1] == python[1]


def test_vectorised_decoder_declines_malformed_records() -> None:
    data = bytearray(RecordBatch(builder_batch(CompressionType.NONE, 0, 100)).buffer[61:].tobytes())
    assert _decode_values_vectorised(bytes(data), 101, 0, 0) is None  # more records announced than there are
    assert _decode_values_vectorised(bytes(data[:-1]), 100, 0, 0) is None  # the last one cut short
    assert _decode_values_vectorised(bytes(data), 100, 0, 0) is not None
