from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.errors import CorruptBatchError
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from pipeline.record_columns import RecordColumns, batch_columns

TP = TopicPartition("t", 2)

record = st.tuples(
    st.integers(0, 10**6),
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(
        st.tuples(st.sampled_from(["host", "trace", "h"]), st.one_of(st.none(), st.binary(max_size=10))),
        max_size=3,
    ),
)


def build(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: CompressionType,
    base: int,
) -> RecordBatch:
    builder = RecordBatchBuilder(codec, base)
    for ts, key, value, headers in records:
        builder.append(1_795_338_000_000 + ts, key, value, headers)
    return RecordBatch(builder.build())


@settings(max_examples=40, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=30),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.ZSTD, CompressionType.GZIP]),
    cut=st.tuples(st.integers(0, 35), st.integers(0, 35)),
)
def test_columns_equal_the_clients_records(records, codec, cut) -> None:
    base = 1000
    batch = build(records, codec, base)
    from_offset, until_offset = base + min(cut), base + max(cut)
    fetched = FetchedBatch(TP, batch, from_offset)
    expected = [r for r in fetched.records() if r.offset < until_offset]
    assert batch_columns(fetched, until_offset) == RecordColumns.from_records(expected)


def test_host_is_the_first_host_header() -> None:
    batch = build(
        [(5, None, b"v", [("trace", b"x"), ("host", b"web1"), ("host", b"web2")])], CompressionType.NONE, 0
    )
    columns = batch_columns(FetchedBatch(TP, batch, 0), 10)
    assert (columns.offsets, columns.hosts, columns.values, columns.keys) == ([0], [b"web1"], [b"v"], [None])


def test_a_malformed_batch_names_the_partition_and_offset() -> None:
    good = build([(1, b"k", b"value", [])], CompressionType.NONE, 77)
    raw = bytearray(good.buffer)
    raw[HEADER_SIZE] = 0x7E  # the record length now overruns the batch
    with pytest.raises(
        CorruptBatchError, match="t-2: corrupt record batch at offset 77: records do not decode"
    ):
        batch_columns(FetchedBatch(TP, RecordBatch(bytes(raw)), 0), 100)
