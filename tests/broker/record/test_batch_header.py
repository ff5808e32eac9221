"""The batch header's framing checks (``header_fault``): what splitting a buffer of batches
(``batch_scan``) and the segment framer (``broker/log/segment_framer.py``) say of a header that cannot be
right, with one message each."""

from __future__ import annotations

import pytest

from broker.record.batch_header import HeaderFault, header_fault
from broker.record.batch_scan import scan_batches
from broker.record.errors import CorruptRecordError
from broker.record.record_batch_builder import RecordBatchBuilder


def batch(base_offset: int = 7) -> bytearray:
    builder = RecordBatchBuilder(base_offset=base_offset)
    builder.append(1_000, b"k", b"v")
    return bytearray(builder.build())


def test_a_whole_batch_has_no_fault_nor_does_a_start_too_short_to_tell() -> None:
    data = batch()
    assert header_fault(data, 0, len(data)) is None
    assert header_fault(data, 0, 11) is None  # no batchLength yet
    data[16] = 5
    assert header_fault(data, 0, 16) is None  # no magic yet
    assert header_fault(data, 0, 17) == HeaderFault(7, "expected magic 2 got 5")
    assert header_fault(data, 0, 17, magic=False) is None


@pytest.mark.parametrize(("length", "magic"), [(48, 2), (-1, 2), (0, 0), (100, -1)])
def test_the_first_fault_is_named_with_the_base_offset(length: int, magic: int) -> None:
    data = (7).to_bytes(8, "big") + length.to_bytes(4, "big", signed=True) + bytes(4)
    data += magic.to_bytes(1, "big", signed=True) + bytes(44)
    expected = (
        f"batchLength {length} is below the minimum 49: nothing after it can be framed"
        if length < 49
        else f"expected magic 2 got {magic}"
    )
    assert header_fault(data, 0, len(data)) == HeaderFault(7, expected)


def test_splitting_a_buffer_raises_the_fault_at_its_position() -> None:
    first = bytes(batch(0))
    second = batch(1)
    second[16] = 0xFF  # magic -1 (an int8)
    with pytest.raises(CorruptRecordError) as raised:
        scan_batches(first + bytes(second[:20]), where="fetch t-0", base_position=100)
    error = raised.value
    assert (error.where, error.position, error.offset) == ("fetch t-0", 100 + len(first), 1)
    assert error.reason == "expected magic 2 got -1"
