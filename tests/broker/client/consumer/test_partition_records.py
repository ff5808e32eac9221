"""The parsing half of the fetcher: a fetch response's records for one partition, as real batch bytes."""

from __future__ import annotations

from broker.client.consumer.partition_records import parse_partition_records
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def batch(base: int, count: int, value_bytes: int = 100) -> bytes:
    builder = RecordBatchBuilder(CompressionType.NONE, base_offset=base)
    for i in range(count):
        builder.append(1_000 + i, None, bytes([i % 256]) * value_bytes)
    return builder.build()


def test_whole_batches_then_a_partial_tail_cut_by_the_byte_limit() -> None:
    first, second, third = batch(0, 3), batch(3, 4), batch(7, 5)
    records = first + second + third[: len(third) - 10]
    parsed = parse_partition_records(records, TP, 0, check_crcs=True)
    assert [(b.base_offset, b.last_offset) for b in parsed.batches] == [(0, 2), (3, 6)]
    assert parsed.size_bytes == len(first) + len(second)
    assert parsed.next_offset == 7
    assert (parsed.error, parsed.needed_bytes) == (None, 0)


def test_only_a_partial_batch_says_how_many_bytes_it_needs() -> None:
    big = batch(40, 20, value_bytes=500)
    parsed = parse_partition_records(big[:1000], TP, 40, check_crcs=True)
    assert (parsed.batches, parsed.next_offset, parsed.error) == ([], 40, None)
    assert parsed.needed_bytes == len(big)
    tiny = parse_partition_records(big[:7], TP, 40, check_crcs=True)  # not even a length yet
    assert tiny.needed_bytes > 7


def test_batches_before_the_fetch_offset_are_skipped_but_a_straddling_one_is_kept() -> None:
    records = batch(0, 5) + batch(5, 5) + batch(10, 5)
    parsed = parse_partition_records(records, TP, 7, check_crcs=True)
    assert [b.base_offset for b in parsed.batches] == [5, 10]
    assert parsed.next_offset == 15


def test_a_crc_failure_keeps_the_batches_before_it_and_names_the_offset() -> None:
    good, bad, after = batch(0, 2), bytearray(batch(2, 3)), batch(5, 1)
    bad[-5] ^= 0xFF  # a byte inside the last record's value
    parsed = parse_partition_records(good + bytes(bad) + after, TP, 0, check_crcs=True)
    assert [b.base_offset for b in parsed.batches] == [0]
    assert parsed.next_offset == 2
    assert parsed.error is not None
    assert (parsed.error.topic, parsed.error.partition, parsed.error.offset) == ("t", 0, 2)
    assert str(parsed.error).startswith("t-0: corrupt record batch at offset 2: expected CRC 0x")
    unchecked = parse_partition_records(good + bytes(bad) + after, TP, 0, check_crcs=False)
    assert ([b.base_offset for b in unchecked.batches], unchecked.error) == ([0, 2, 5], None)


def test_a_broken_batch_header_is_an_error_at_that_offset() -> None:
    bad = bytearray(batch(9, 2))
    bad[16] = 1  # magic
    parsed = parse_partition_records(bytes(bad), TP, 9, check_crcs=True)
    assert parsed.batches == []
    assert parsed.error is not None
    assert parsed.error.offset == 9
    assert "expected magic 2 got 1" in str(parsed.error)
