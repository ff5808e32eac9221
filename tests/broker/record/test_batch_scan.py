"""Splitting concatenated batches: partial tails, zero copies, garbage."""

from __future__ import annotations

import pytest

from broker.record.batch_scan import scan_batches
from broker.record.errors import CorruptRecordError
from broker.record.record_batch_builder import RecordBatchBuilder


def small_batch(count: int = 3, base: int = 0) -> bytearray:
    builder = RecordBatchBuilder(base_offset=base)
    for i in range(count):
        builder.append(1000 + i, None, b"value-%d" % i)
    return bytearray(builder.build())


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
