from __future__ import annotations

import threading
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.errors import IllegalBatchStateError
from broker.client.producer.producer_batch import (
    BatchState,
    BulkDelivery,
    ProducerBatch,
    RecordFuture,
    RecordMetadata,
)
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.record import Record
from broker.record.record_batch import RecordBatch
from broker.record.record_encoder import record_bound
from broker.record.record_header import encode_headers

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch

HOST = encode_headers([("host", b"producer-1")])
NO_LIMIT = 1 << 30


def decode(data: bytes) -> list[Record]:
    batch = RecordBatch(data)
    batch.validate()
    return list(batch.records())


@pytest.mark.parametrize("codec", list(CompressionType))
def test_built_batch_is_record_batch_v2_with_exact_content(codec: CompressionType) -> None:
    batch = ProducerBatch("t", 0, codec, 0.0)
    assert batch.append(1_000, None, b"v" * 300, HOST, NO_LIMIT) == 0
    assert batch.append(1_005, b"k", None, HOST, NO_LIMIT) == 1
    assert batch.append(990, b"key", b"", encode_headers([("host", b"x"), ("n", None)]), NO_LIMIT) == 2
    data = batch.build()
    assert batch.build() is data  # built once, reused by retries
    view = RecordBatch(data)
    assert (view.base_offset, view.record_count, view.last_offset_delta) == (0, 3, 2)
    assert (view.first_timestamp_ms, view.max_timestamp_ms) == (1_000, 1_005)
    assert (view.producer_id, view.producer_epoch, view.base_sequence) == (-1, -1, -1)
    assert view.compression == (codec if codec != CompressionType.NONE else CompressionType.NONE)
    assert decode(data) == [
        Record(0, 1_000, None, b"v" * 300, (("host", b"producer-1"),)),
        Record(1, 1_005, b"k", None, (("host", b"producer-1"),)),
        Record(2, 990, b"key", b"", (("host", b"x"), ("n", None))),
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kafka_python_reads_our_batches(codec: CompressionType) -> None:
    batch = ProducerBatch("t", 0, codec, 0.0)
    values = [bytes([i]) * (i * 37 % 500) for i in range(120)]
    assert batch.append_values(5_000, b"key", tuple(values), 0, HOST, NO_LIMIT) == 120
    theirs = DefaultRecordBatch(batch.build())
    assert theirs.validate_crc()
    records = list(theirs)
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(120))
    assert {r.key for r in records} == {b"key"}
    assert {r.timestamp for r in records} == {5_000}
    assert {tuple(r.headers) for r in records} == {(("host", b"producer-1"),)}


def test_a_batch_is_compressed_at_its_producers_level() -> None:
    """[producer] compression_zstd_level: the same records, smaller at zstd 19 than at 1, read back alike."""
    values = tuple(f"GET /items/{i} 200 user={i % 97} agent=lumber\n".encode() * 4 for i in range(300))
    built = {}
    for level in (1, 19):
        batch = ProducerBatch("t", 0, CompressionType.ZSTD, 0.0, level=level)
        assert batch.append_values(5_000, b"key", values, 0, HOST, NO_LIMIT) == 300
        built[level] = batch.build()
        assert [r.value for r in decode(built[level])] == list(values)
    assert {level: len(data) for level, data in built.items()} == {1: 2_471, 19: 1_932}


def test_append_respects_the_byte_bound_but_always_takes_a_first_record() -> None:
    bound = record_bound(100, 1, len(HOST))
    batch = ProducerBatch("t", 0, CompressionType.NONE, 0.0)
    assert batch.append(0, None, b"x" * 100, HOST, 10) == 0  # the first record goes in anyway
    assert (batch.count, batch.size_bytes) == (1, bound)
    assert batch.append(0, None, b"y" * 100, HOST, 2 * bound - 1) == -1
    assert (batch.count, batch.size_bytes) == (1, bound)
    assert batch.append(0, None, b"y" * 100, HOST, 2 * bound) == 1
    encoded = batch.build()
    assert len(encoded) - HEADER_SIZE <= batch.size_bytes  # the bound never undercounts
    assert [r.value for r in decode(encoded)] == [b"x" * 100, b"y" * 100]


def test_append_values_stops_exactly_at_the_bound() -> None:
    bound = record_bound(50, 1, len(HOST))
    batch = ProducerBatch("t", 0, CompressionType.NONE, 0.0)
    values = (b"a" * 50,) * 10
    assert batch.append_values(7, None, values, 0, HOST, 3 * bound + bound - 1) == 3
    assert batch.size_bytes == 3 * bound
    assert batch.append_values(7, None, values, 3, HOST, 3 * bound) == 3  # full: no progress
    assert batch.append_values(7, None, values, 3, HOST, NO_LIMIT) == 10
    assert [r.value for r in decode(batch.build())] == list(values)
    empty = ProducerBatch("t", 0, CompressionType.NONE, 0.0)
    assert empty.append_values(7, b"k", values, 4, HOST, 1) == 5  # an empty batch takes one anyway


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2**41),
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=20_000),
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(list(CompressionType)),
)
def test_random_records_round_trip(
    records: list[tuple[int, bytes | None, bytes | None]], codec: CompressionType
) -> None:
    batch = ProducerBatch("t", 0, codec, 0.0)
    for ts, key, value in records:
        batch.append(ts, key, value, HOST, NO_LIMIT)
    assert [(r.timestamp_ms, r.key, r.value) for r in decode(batch.build())] == records


def test_futures_and_callbacks_report_success_and_failure() -> None:
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    batch = ProducerBatch("t", 3, CompressionType.NONE, 0.0)
    batch.append(11, None, b"a", HOST, NO_LIMIT)
    batch.append(12, None, b"b", HOST, NO_LIMIT)
    batch.add_callback(1, 12, lambda md, err: seen.append((md, err)))
    future = RecordFuture(batch, 1, 12)
    assert not future.done()
    with pytest.raises(TimeoutError):
        future.result(0.01)
    batch.mark_drained()
    threading.Timer(0.05, batch.complete, (40, None)).start()
    assert future.result(5) == RecordMetadata("t", 3, 41, 12)
    assert seen == [(RecordMetadata("t", 3, 41, 12), None)]

    failed = ProducerBatch("t", 0, CompressionType.NONE, 0.0)
    failed.append(1, None, b"a", HOST, NO_LIMIT)
    failed.add_callback(0, 1, lambda md, err: seen.append((md, err)))
    error = RuntimeError("boom")
    failed.complete(-1, error)
    with pytest.raises(IllegalBatchStateError, match="a failed batch cannot become succeeded"):
        failed.complete(5, None)  # one outcome: the first
    with pytest.raises(RuntimeError, match="boom"):
        RecordFuture(failed, 0, 1).result(0)
    assert RecordFuture(failed, 0, 1).exception(0) is error
    assert seen[-1] == (None, error)


def test_bulk_delivery_lists_ranges_in_order() -> None:
    first = ProducerBatch("t", 0, CompressionType.NONE, 0.0)
    second = ProducerBatch("t", 1, CompressionType.NONE, 0.0)
    delivery = BulkDelivery()
    delivery._add(first, 2, 3)
    delivery._add(second, 0, 4)
    assert delivery.accepted == 7
    assert not delivery.wait(0.01)
    first.mark_drained()
    second.mark_drained()
    first.complete(100, None)
    second.complete(-1, None)  # acks=0: offsets unknown
    ranges = delivery.result(1)
    assert [(r.partition, r.base_offset, r.record_count, r.next_offset) for r in ranges] == [
        (0, 102, 3, 105),
        (1, -1, 4, -1),
    ]


def test_a_batch_changes_state_only_through_its_methods_and_a_retry_sends_the_same_stamped_bytes() -> None:
    batch = ProducerBatch("t", 2, CompressionType.NONE, 100.0)
    assert batch.append(1_000, None, b"abc", HOST, NO_LIMIT) == 0
    assert batch.append_values(1_001, None, (b"de", None), 0, HOST, NO_LIMIT) == 2
    assert batch.buffer_bytes == batch.size_bytes  # what the accumulator added as records came
    batch.mark_drained()
    assert batch.stamp(7, 1, 40)
    assert not batch.stamp(8, 0, 0)  # a retry keeps its stamp
    first = batch.start_attempt()
    view = RecordBatch(first)
    assert (view.producer_id, view.producer_epoch, view.base_sequence, view.record_count) == (7, 1, 40, 3)
    batch.note_error(TimeoutError("request timed out"))
    batch.requeue(retry_at=100.5)
    assert (batch.drained, batch.retry_at, batch.attempts) == (False, 100.5, 1)
    batch.mark_drained()
    assert batch.start_attempt() is first  # the same bytes: the broker recognises the retry
    assert batch.attempts == 2
    expired = batch.expiry_error(130.0, 30_000)
    assert str(expired).startswith(
        "3 records for t-2 not delivered within delivery_timeout_ms=30000 (30.0 s, 2 attempts); "
        "last error: request timed out"
    )
    assert list(batch.record_runs()) == []  # no listener: dropped once built
    batch.complete(17, None)
    assert (batch.done, batch.base_offset, batch.error) == (True, 17, None)


def test_a_batch_kept_for_a_listener_reads_its_records_until_done() -> None:
    batch = ProducerBatch("t", 0, CompressionType.ZSTD, 0.0, keep_records=True)
    batch.append(1_000, None, b"abc", HOST, NO_LIMIT)
    batch.append(1_000, b"k", None, HOST, NO_LIMIT)
    batch.append_values(-1, None, (b"x" * 10, None, b"yy"), 0, HOST, NO_LIMIT)
    batch.start_attempt()
    assert [tuple(run) for run in batch.record_runs()] == [(1_000, 1, 3), (1_000, 1, 0), (-1, 3, 12)]
    assert not batch.is_raw
    batch.mark_drained()
    batch.complete(0, None)
    assert list(batch.record_runs()) == []  # done: the values live on in the bytes only
    raw = ProducerBatch.raw("t", 0, 0.0)
    assert raw.is_raw
    assert raw.append_raw(batch.build(), 5, NO_LIMIT) == 0
    assert raw.buffer_bytes == len(batch.build())  # a raw batch holds its bytes as appended
    assert list(raw.record_runs()) == []


def test_the_state_moves_only_along_its_table_and_a_second_outcome_raises() -> None:
    batch = ProducerBatch("t", 4, CompressionType.NONE, 0.0)
    batch.append(1, None, b"a", HOST, NO_LIMIT)
    assert (batch.state, batch.drained, batch.done) == (BatchState.OPEN, False, False)
    with pytest.raises(IllegalBatchStateError, match=r"t-4.*an? open batch cannot become open"):
        batch.requeue(retry_at=1.0)  # never drained: nothing to put back
    with pytest.raises(IllegalBatchStateError, match="open batch cannot become succeeded"):
        batch.complete(0, None)  # never sent: no success
    batch.mark_drained()
    with pytest.raises(IllegalBatchStateError, match="drained batch cannot become drained"):
        batch.mark_drained()
    batch.requeue(retry_at=1.0)
    batch.mark_drained()
    assert (batch.state, batch.drained, batch.done) == (BatchState.DRAINED, True, False)
    batch.complete(7, None)
    assert (batch.state, batch.drained, batch.done, batch.base_offset) == (
        BatchState.SUCCEEDED,
        False,
        True,
        7,
    )
    for second in ((8, None), (-1, RuntimeError("late failure"))):
        with pytest.raises(
            IllegalBatchStateError, match=r"succeeded batch cannot become .* already has its outcome"
        ):
            batch.complete(*second)
    assert (batch.base_offset, batch.error) == (7, None)  # the first outcome stands
    with pytest.raises(IllegalBatchStateError):
        batch.requeue(retry_at=2.0)

    expired = ProducerBatch("t", 4, CompressionType.NONE, 0.0)  # failed while queued: expiry, abort
    expired.append(1, None, b"a", HOST, NO_LIMIT)
    error = expired.expiry_error(40.0, 30_000)
    expired.complete(-1, error)
    assert (expired.state, expired.error) == (BatchState.FAILED, error)
    with pytest.raises(IllegalBatchStateError, match="failed batch cannot become failed"):
        expired.complete(-1, error)
