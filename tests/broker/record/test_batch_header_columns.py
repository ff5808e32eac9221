"""The batch headers as columns (broker/record/batch_header_columns.py) against the batch views
(``scan_batches``), field for field, and where they stop: before a header that cannot be right (what it is,
and the message, is the segment framer's: tests/broker/log/test_segment_framer.py)."""

from __future__ import annotations

import pytest

from broker.record.batch_header_columns import batch_header_columns
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.record_batch import RecordBatch, set_base_offset
from broker.record.record_batch_builder import RecordBatchBuilder, retained_batch


def batches() -> bytes:
    out = bytearray()
    for i, (count, codec, producer) in enumerate(
        [(3, CompressionType.NONE, -1), (70, CompressionType.GZIP, 12), (1, CompressionType.NONE, 13)]
    ):
        builder = RecordBatchBuilder(
            codec, producer_id=producer, producer_epoch=0 if producer >= 0 else -1, base_sequence=5 * i
        )
        for j in range(count):
            builder.append(1_700_000_000_000 + j, b"k%d" % j, b"v" * j)
        batch = bytearray(builder.build())
        set_base_offset(batch, 100 * i)
        out += batch
    out += retained_batch(RecordBatch(bytes(out[: len(out)])), [])  # an empty batch
    return bytes(out)


def test_the_columns_of_concatenated_batches_match_the_batch_views() -> None:
    data = batches()
    cut = data + data[:30]  # a batch cut short at the end is left out
    columns = batch_header_columns(cut)
    views = scan_batches(data).batches
    assert columns.count == len(views) == 4
    assert columns.complete_bytes == len(data)
    assert columns.positions.tolist() == [v.position or 0 for v in views]
    assert columns.sizes.tolist() == [v.size_bytes for v in views]
    assert columns.base_offsets.tolist() == [v.base_offset for v in views]
    assert columns.attributes.tolist() == [v.attributes for v in views]
    assert columns.last_offsets.tolist() == [v.last_offset for v in views]
    assert columns.first_timestamps.tolist() == [v.first_timestamp_ms for v in views]
    assert columns.max_timestamps.tolist() == [v.max_timestamp_ms for v in views]
    assert columns.producer_ids.tolist() == [v.producer_id for v in views]
    assert columns.record_counts.tolist() == [v.record_count for v in views]
    assert columns.select(1, 3).base_offsets.tolist() == [100, 200]


@pytest.mark.parametrize(
    ("field", "value"),
    [(16, b"\x01"), (8, (10).to_bytes(4, "big")), (8, (48).to_bytes(4, "big"))],
    ids=["magic", "length-10", "length-48"],
)
def test_the_columns_stop_before_a_header_that_cannot_be_right(field: int, value: bytes) -> None:
    data = bytearray(batches())
    views = scan_batches(bytes(data)).batches
    second = views[1].position or 0
    data[second + field : second + field + len(value)] = value
    columns = batch_header_columns(bytes(data))
    assert (columns.count, columns.complete_bytes) == (1, second)
    assert columns.base_offsets.tolist() == [0]
