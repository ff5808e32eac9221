"""The validation walk's fast strategies never vouch for what the walk refuses."""

from __future__ import annotations

import pytest

from broker.record.batch_header import HEADER_SIZE
from broker.record.batch_scan import scan_batches
from broker.record.errors import CorruptRecordError, InvalidRecordError
from broker.record.layout_check import one_record_batches_valid, records_of_one_layout
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_walker import walk_records


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
