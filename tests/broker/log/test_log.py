from __future__ import annotations

import resource
import signal
import socket
import struct
import threading
import time
import warnings
from pathlib import Path

import crc32c
import pytest

from broker.log.append_info import AppendInfo
from broker.log.errors import LogClosedError, LogStorageError, OffsetOutOfRangeError, RecordTooLargeError
from broker.log.log import Log
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.errors import CorruptRecordError, InvalidRecordError, InvalidTopicError
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from tests.broker.log.helpers import BASE_TS, assert_records_match, config, make_batch, read_all

DAY_MS = 24 * 3600 * 1000


class FakeClock:
    def __init__(self, now_ms: int = BASE_TS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def open_log(tmp_path: Path, clock: FakeClock | None = None, **overrides: object) -> Log:
    directory = tmp_path / "clicks-0"
    directory.mkdir(exist_ok=True)
    return Log(directory, config(tmp_path, **overrides), clock=clock or FakeClock())


def append_batches(log: Log, count: int, records: int = 5, **kwargs: object) -> list[AppendInfo]:
    # one at a time, in order: each batch is built for the offsets the previous append left
    return [log.append(make_batch(log.log_end_offset, records, **kwargs)) for _ in range(count)]  # type: ignore[arg-type]


def test_append_assigns_consecutive_offsets_by_rewriting_base_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    first = make_batch(0, 3, timestamp_ms=5000)
    second = make_batch(3, 4, timestamp_ms=7000)
    info = log.append(first + second)
    assert info == AppendInfo(
        first_offset=0,
        last_offset=6,
        max_timestamp_ms=7003,
        record_count=7,
        batch_count=2,
        size_bytes=len(first) + len(second),
    )
    info = log.append(make_batch(7, 2, timestamp_ms=8000))
    assert (info.first_offset, info.last_offset) == (7, 8)
    on_disk = (tmp_path / "clicks-0" / "00000000000000000000.log").read_bytes()
    scan = scan_batches(on_disk)
    assert [b.base_offset for b in scan.batches] == [0, 3, 7]
    # the records themselves are never re-encoded: only bytes [0, 8) of each batch changed
    assert on_disk[8 : len(first)] == first[8:]
    assert on_disk[len(first) + 8 : len(first) + len(second)] == second[8:]
    assert_records_match(read_all(log), 0, 9)
    log.close()


def test_flushed_mode_exposes_only_flushed_data(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed")
    append_batches(log, 3)
    assert (log.log_end_offset, log.high_watermark, log.flushed_offset) == (15, 0, 0)
    assert log.read(0, 10_000) is None
    region = log.read(0, 10_000, max_offset=log.log_end_offset)  # "unless told to"
    assert region is not None
    assert region.next_offset == 15
    assert log.flush() == 15
    assert (log.high_watermark, log.flushed_offset, log.unflushed_messages) == (15, 15, 0)
    assert_records_match(read_all(log), 0, 15)
    append_batches(log, 1)
    assert [r.offset for r in read_all(log)] == list(range(15))
    log.close()


def test_appended_mode_exposes_at_once(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="appended")
    append_batches(log, 2)
    assert (log.high_watermark, log.flushed_offset) == (10, 0)
    assert_records_match(read_all(log), 0, 10)
    log.close()


def test_read_returns_whole_batches_at_least_one(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_batches(log, 6, records=5)
    data = (tmp_path / "clicks-0" / "00000000000000000000.log").read_bytes()
    sizes = [b.size_bytes for b in scan_batches(data).batches]
    positions = [sum(sizes[:i]) for i in range(7)]
    region = log.read(12, 1)
    assert region is not None
    assert (region.base_offset, region.position, region.size_bytes, region.next_offset) == (
        10,
        positions[2],
        sizes[2],
        15,
    )
    region = log.read(12, sizes[2] + sizes[3] + sizes[4] - 1)
    assert region is not None
    assert (region.base_offset, region.size_bytes, region.next_offset) == (10, sizes[2] + sizes[3], 20)
    assert region.read_bytes() == data[positions[2] : positions[4]]
    region = log.read(0, 10**9)
    assert region is not None
    assert (region.position, region.size_bytes, region.next_offset) == (0, len(data), 30)
    # stop before the batch holding max_offset
    region = log.read(0, 10**9, max_offset=17)
    assert region is not None
    assert region.next_offset == 15
    assert log.read(15, 10**9, max_offset=17) is None
    assert log.read(30, 100) is None
    log.close()


@pytest.mark.parametrize("offset", [-1, 31, 10**12])
def test_out_of_range_names_the_log_range(tmp_path: Path, offset: int) -> None:
    log = open_log(tmp_path)
    append_batches(log, 6)
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(offset, 100)
    assert (info.value.offset, info.value.log_start_offset, info.value.log_end_offset) == (offset, 0, 30)
    assert str(info.value) == f"clicks-0: offset {offset} is out of range: the log holds [0, 30)"
    log.close()


def corrupt_crc(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[-1] ^= 0x40
    return bytes(data)


def control_batch() -> bytes:
    data = bytearray(make_batch(0, 1))
    struct.pack_into(">h", data, 21, 0x20)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def count_mismatch_batch() -> bytes:
    data = bytearray(make_batch(0, 3))
    struct.pack_into(">i", data, 23, 5)  # lastOffsetDelta 5 for 3 records
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


@pytest.mark.parametrize(
    ("request_bytes", "error", "message"),
    [
        (make_batch(5, 2) + corrupt_crc(make_batch(7, 2)), CorruptRecordError, "expected CRC 0x"),
        (
            make_batch(5, 2) + make_batch(7, 2)[:30],
            CorruptRecordError,
            "ends with 30 bytes of a partial batch",
        ),
        (b"", InvalidRecordError, "holds no record batch"),
        (bytes(64), CorruptRecordError, "batchLength 0 is below the minimum"),
        (control_batch(), InvalidRecordError, "control batches"),
        (count_mismatch_batch(), InvalidRecordError, "lastOffsetDelta 5 does not match the record count 3"),
        (make_batch(0, 1, value_size=3000), RecordTooLargeError, "larger than max_message_bytes 2000"),
    ],
)
def test_invalid_requests_are_rejected_whole(
    tmp_path: Path, request_bytes: bytes, error: type[Exception], message: str
) -> None:
    log = open_log(tmp_path, max_message_bytes=2000)
    append_batches(log, 1)
    size_before = log.size_bytes
    with pytest.raises(error, match=message) as info:
        log.append(request_bytes)
    assert "clicks-0 append" in str(info.value)
    assert (log.log_end_offset, log.size_bytes) == (5, size_before)
    assert (tmp_path / "clicks-0" / "00000000000000000000.log").stat().st_size == size_before
    append_batches(log, 1)
    assert_records_match(read_all(log), 0, 10)
    log.close()


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_compressed_batches_round_trip_through_the_log(tmp_path: Path, codec: CompressionType) -> None:
    log = open_log(tmp_path)
    for _ in range(4):
        batch = make_batch(log.log_end_offset, 20, codec=codec)
        assert RecordBatch(batch).compression == codec
        log.append(batch)
    assert_records_match(read_all(log, max_bytes=1), 0, 80)
    log.close()


def test_flush_by_message_count_without_a_manager_flushes_inline(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed", flush_messages=12)
    append_batches(log, 2)  # 10 messages
    assert (log.flushed_offset, log.high_watermark) == (0, 0)
    append_batches(log, 1)  # 15 >= 12
    assert (log.flushed_offset, log.high_watermark, log.unflushed_messages) == (15, 15, 0)
    log.close()


def test_flush_due_by_time_with_an_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, flush_ms=1000, flush_messages=1000)
    assert not log.flush_due(clock())
    assert log.next_flush_deadline_ms() is None
    clock.now_ms += 5
    append_batches(log, 1)
    assert log.next_flush_deadline_ms() == BASE_TS + 5 + 1000
    assert not log.flush_due(BASE_TS + 5 + 999)
    assert log.flush_due(BASE_TS + 5 + 1000)
    log.flush()
    assert not log.flush_due(BASE_TS + 10**6)
    log.close()


def test_wait_for_flushed_and_listeners(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed")
    seen: list[tuple[TopicPartition, int]] = []
    log.add_listener(lambda tp, hw: seen.append((tp, hw)))
    info = append_batches(log, 2)[-1]
    assert seen == []
    assert not log.wait_for_flushed(info.last_offset + 1, 0.05)
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(log.wait_for_flushed(info.last_offset + 1, 10)))
    hw_waiter = threading.Thread(target=lambda: results.append(log.wait_for_high_watermark(10, 10)))
    waiter.start()
    hw_waiter.start()
    time.sleep(0.05)
    log.flush()
    waiter.join(5)
    hw_waiter.join(5)
    assert results == [True, True]
    assert seen == [(TopicPartition("clicks", 0), 10)]
    log.close()
    assert not log.wait_for_flushed(11, 5)  # closed: returns at once


def test_a_failing_listener_does_not_break_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="appended")

    def broken(tp: TopicPartition, hw: int) -> None:
        raise RuntimeError("listener bug")

    seen: list[int] = []
    log.add_listener(broken)
    log.add_listener(lambda tp, hw: seen.append(hw))
    append_batches(log, 2)
    assert seen == [5, 10]
    log.remove_listener(broken)
    log.close()


def test_rolls_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000)
    append_batches(log, 7, records=5)  # ~626-byte batches: 3 fit in 2000 bytes
    assert [s.base_offset for s in log.segments] == [0, 15, 30]
    assert sorted(p.name for p in (tmp_path / "clicks-0").glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000015.log",
        "00000000000000000030.log",
    ]
    assert all(s.size_bytes <= 2000 for s in log.segments)
    assert_records_match(read_all(log, max_bytes=10**6), 0, 35)
    # one read never spans two segments
    region = log.read(0, 10**9)
    assert region is not None
    assert region.next_offset == 15
    log.close()


def test_one_append_of_many_batches_rolls_where_the_segment_is_full(tmp_path: Path) -> None:
    # seven ~626-byte batches in one request: the roll counts the request's own batches not yet written
    log = open_log(tmp_path, segment_bytes=2000)
    batches = [make_batch(5 * i, 5) for i in range(7)]
    info = log.append(b"".join(batches))
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 34, 7)
    assert [s.base_offset for s in log.segments] == [0, 15, 30]
    sizes = [len(b) for b in batches]
    assert [s.size_bytes for s in log.segments] == [sum(sizes[0:3]), sum(sizes[3:6]), sizes[6]]
    assert_records_match(read_all(log, max_bytes=10**6), 0, 35)
    log.close()


def test_a_batch_larger_than_a_segment_gets_its_own(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000)
    append_batches(log, 1, records=2)
    log.append(make_batch(2, 3, value_size=900))
    append_batches(log, 1, records=2)
    assert [s.base_offset for s in log.segments] == [0, 2, 5]
    log.close()


def test_rolls_by_time_with_an_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, segment_ms=DAY_MS)
    log.append(make_batch(0, 2, timestamp_ms=clock()))
    clock.now_ms += DAY_MS - 10
    log.append(make_batch(2, 2, timestamp_ms=clock()))
    assert [s.base_offset for s in log.segments] == [0]
    clock.now_ms += 10
    log.append(make_batch(4, 2, timestamp_ms=clock()))
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert_records_match(read_all(log), 0, 6)
    log.close()


def test_retention_by_time_deletes_whole_old_segments_never_the_active_one(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, segment_bytes=1300, retention_ms=7 * DAY_MS)
    for day in range(4):  # two ~626-byte batches per segment, one segment per day
        for _ in range(2):
            log.append(make_batch(log.log_end_offset, 5, timestamp_ms=BASE_TS + day * DAY_MS))
    assert [s.base_offset for s in log.segments] == [0, 10, 20, 30]
    assert (
        log.apply_retention(BASE_TS + 7 * DAY_MS + 4) == ()
    )  # the newest record of day 0 is exactly 7 days old
    assert log.apply_retention(BASE_TS + 8 * DAY_MS + 5) == (0, 10)
    assert log.log_start_offset == 20
    assert not (tmp_path / "clicks-0" / "00000000000000000000.log").exists()
    assert not (tmp_path / "clicks-0" / "00000000000000000010.index").exists()
    with pytest.raises(OffsetOutOfRangeError, match=r"the log holds \[20, 40\)"):
        log.read(5, 100)
    assert_records_match(read_all(log), 20, 40)
    assert log.apply_retention(BASE_TS + 100 * DAY_MS) == (20,)  # never the active segment
    assert [s.base_offset for s in log.segments] == [30]
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1300, retention_ms=-1, retention_bytes=2400)
    append_batches(log, 8)
    sizes = [s.size_bytes for s in log.segments]
    assert sizes == [1232, 1242, 1242, 1242]
    # Kafka's rule: delete the oldest segment while what remains is still >= retention_bytes
    assert log.apply_retention() == (0, 10)
    assert log.size_bytes == 2484
    assert log.apply_retention() == ()
    log.close()


def test_retention_never_deletes_unexposed_data(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed", segment_bytes=1300, retention_ms=0, flush_messages=10**6)
    append_batches(log, 6)
    assert len(log.segments) == 3
    assert log.apply_retention(BASE_TS + DAY_MS) == ()  # nothing flushed, nothing exposed
    log.flush()
    assert log.apply_retention(BASE_TS + DAY_MS) == (0, 10)
    log.close()


def test_a_reader_holding_a_region_finishes_after_retention_deletes_its_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1300, retention_ms=0)
    append_batches(log, 6)
    region = log.read(0, 10**6)
    assert region is not None
    expected = (tmp_path / "clicks-0" / "00000000000000000000.log").read_bytes()
    assert log.apply_retention(BASE_TS + DAY_MS) == (0, 10)
    assert not (tmp_path / "clicks-0" / "00000000000000000000.log").exists()
    assert region.read_bytes() == expected
    left, right = socket.socketpair()
    with left, right:
        assert region.send_to(left) == len(expected)
        received = b""
        while len(received) < len(expected):
            received += right.recv(65536)
    assert received == expected
    log.close()


def test_concurrent_reads_during_retention_see_only_valid_batches(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock, segment_bytes=1300, retention_ms=DAY_MS)
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            time.sleep(0.0005)  # let the appending thread have the GIL
            start = log.log_start_offset
            try:
                region = log.read(start, 10**6)
            except OffsetOutOfRangeError:
                continue  # retention moved the start meanwhile: a consumer resets and goes on
            if region is None:
                continue
            scan = scan_batches(region.read_bytes())
            if scan.partial_tail_bytes or scan.complete_bytes != region.size_bytes:
                problems.append(f"partial data at {start}")
            for batch in scan.batches:
                try:
                    batch.validate()
                except CorruptRecordError as exc:
                    problems.append(str(exc))
                problems.extend(
                    f"wrong record at {record.offset}"
                    for record in batch.records()
                    if not (record.value or b"").startswith(f"offset={record.offset};".encode())
                )
            reads[0] += 1

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    deleted = 0
    for day in range(40):
        clock.now_ms = BASE_TS + day * DAY_MS
        log.append(make_batch(log.log_end_offset, 5, timestamp_ms=clock.now_ms))
        log.append(make_batch(log.log_end_offset, 5, timestamp_ms=clock.now_ms))
        deleted += len(log.apply_retention())
        time.sleep(0.002)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert problems == []
    assert deleted >= 35
    assert reads[0] > 0
    assert len(log.segments) <= 3
    log.close()


def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1300)
    stamps = [1000, 3000, 2000, 6000, 5000, 9000]
    for ts in stamps:
        log.append(make_batch(log.log_end_offset, 5, timestamp_ms=ts))
    assert len(log.segments) == 3

    def brute(ts: int) -> tuple[int, int] | None:
        for i, base in enumerate(stamps):
            for j in range(5):
                if base + j >= ts:
                    return 5 * i + j, base + j
        return None

    for ts in [0, 1000, 1004, 1005, 2003, 2005, 3004, 4000, 5004, 6003, 9004, 9005]:
        assert log.offset_for_timestamp(ts) == brute(ts), ts
    log.close()


def test_offset_for_timestamp_ignores_unexposed_data(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed", flush_messages=10**6)
    log.append(make_batch(0, 5, timestamp_ms=1000))
    log.flush()
    log.append(make_batch(5, 5, timestamp_ms=5000))
    assert log.offset_for_timestamp(1002) == (2, 1002)
    assert log.offset_for_timestamp(5000) is None
    log.close()


def test_concurrent_appends_get_unique_consecutive_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=20_000)
    infos: list[AppendInfo] = []
    lock = threading.Lock()

    def producer(thread_id: int) -> None:
        for i in range(50):
            builder = RecordBatchBuilder()
            for j in range(3):
                builder.append(BASE_TS, None, f"t{thread_id}-{i}-{j}".encode())
            info = log.append(builder.build())
            with lock:
                infos.append(info)

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted((i.first_offset, i.last_offset) for i in infos) == [(3 * n, 3 * n + 2) for n in range(200)]
    records = read_all(log)
    assert [r.offset for r in records] == list(range(600))
    values = sorted((r.value or b"").decode() for r in records)
    assert values == sorted(f"t{t}-{i}-{j}" for t in range(4) for i in range(50) for j in range(3))
    log.close()


def test_close_and_reopen_keeps_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1300)
    append_batches(log, 5)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        log.read(0, 100)
    with pytest.raises(LogClosedError):
        log.append(make_batch(25, 1))
    reopened = Log(tmp_path / "clicks-0", config(tmp_path, segment_bytes=1300), clean_shutdown=True)
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.high_watermark) == (0, 25, 25)
    assert reopened.recovery_result.validated_segments == ()
    append_batches(reopened, 1)
    assert_records_match(read_all(reopened), 0, 30)
    reopened.close()


def test_delete_removes_the_folder_but_regions_stay_readable(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_batches(log, 3)
    region = log.read(0, 10**6)
    assert region is not None
    log.delete()
    assert list(tmp_path.iterdir()) == []
    assert len(scan_batches(region.read_bytes()).batches) == 3
    with pytest.raises(LogClosedError):
        log.read(0, 10)


def test_folder_name_must_be_a_partition(tmp_path: Path) -> None:
    bad = tmp_path / "not a partition"
    bad.mkdir()
    with pytest.raises(InvalidTopicError, match="named <topic>-<partition>"):
        Log(bad, config(tmp_path))


def test_an_io_error_takes_the_log_offline_and_cuts_the_partial_write(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_batches(log, 2)
    size = log.size_bytes
    segment_file = tmp_path / "clicks-0" / "00000000000000000000.log"
    # A real EFBIG from the kernel: the file may not grow past 100 more bytes, less than one batch.
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
    try:
        with pytest.raises(LogStorageError, match=f"{segment_file}: cannot append"):
            log.append(make_batch(10, 5))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert segment_file.stat().st_size == size  # the partial batch was cut off again
    assert log.log_end_offset == 10
    with pytest.raises(LogStorageError, match="offline after an I/O error"):
        log.append(make_batch(10, 5))
    assert_records_match(read_all(log), 0, 10)  # what was appended before stays readable
    with pytest.raises(LogStorageError, match="closed while offline"):
        log.close()


@pytest.mark.interop
@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_kafka_python_batches_through_the_log_and_back(tmp_path: Path, codec: CompressionType) -> None:
    """What a kafka-python producer sends is appended, and what a fetch returns decodes with kafka-python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's protocol package on 3.11
        from kafka.record.default_records import (  # noqa: PLC0415
            DefaultRecordBatch,
            DefaultRecordBatchBuilder,
        )
    log = open_log(tmp_path)
    for n in range(3):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=int(codec), is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
        )  # fmt: skip
        for i in range(40):
            builder.append(i, BASE_TS + i, None, b"batch %d record %d " % (n, i) * 10, [("host", b"h")])
        log.append(bytes(builder.build()))
    region = log.read(45, 10**6)
    assert region is not None
    data = region.read_bytes()
    decoded: list[tuple[int, bytes | None]] = []
    position = 0
    while position < len(data):
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        theirs = DefaultRecordBatch(data[position : position + size])
        assert theirs.validate_crc()
        decoded.extend((r.offset, r.value) for r in theirs)
        position += size
    assert [offset for offset, _ in decoded] == list(range(40, 120))
    assert decoded[5] == (45, b"batch 1 record 5 " * 10)
    log.close()


def test_roll_on_demand(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed")
    log.roll()  # an empty active segment is kept
    append_batches(log, 2)
    log.flush()
    log.roll()
    log.roll()
    append_batches(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert [r.offset for r in read_all(log)] == list(range(10))  # offsets 10..14 are not flushed yet
    log.flush()
    assert_records_match(read_all(log), 0, 15)
    log.close()
