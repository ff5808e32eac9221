"""broker/log/log_replication.py and log_truncation.py (issue 19), through the Log they are mixed into:
epoch stamping, follower append, truncation, the replicated high watermark, end listeners, and their
checkpoints through the LogManager."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from broker.log.errors import UnexpectedAppendOffsetError
from broker.log.log import Log
from broker.log.log_manager import LogManager
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from tests.broker.log.helpers import BASE_TS, assert_records_match, config, make_batch, read_all

EPOCH_FILE = "leader-epoch-checkpoint"
LOG0 = "00000000000000000000.log"
TP = TopicPartition("clicks", 0)


class FakeClock:
    def __init__(self, now_ms: int = BASE_TS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def open_log(tmp_path: Path, name: str = "clicks-0", **overrides: object) -> Log:
    directory = tmp_path / name
    directory.mkdir(parents=True, exist_ok=True)
    return Log(directory, config(tmp_path, **overrides), clock=FakeClock())


def append_n(log: Log, count: int, records: int = 5, *, leader_epoch: int = -1) -> None:
    for _ in range(count):
        log.append(make_batch(log.log_end_offset, records), leader_epoch=leader_epoch)


def idempotent_batch(sequence: int, count: int, *, producer_id: int = 42, epoch: int = 0) -> bytes:
    builder = RecordBatchBuilder(
        CompressionType.NONE, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    for i in range(count):
        builder.append(BASE_TS + i, None, b"s%d" % (sequence + i))
    return builder.build()


def stored_batches(log: Log) -> list[RecordBatch]:
    batches: list[RecordBatch] = []
    for segment in log.segments:
        batches.extend(scan_batches(segment.path.read_bytes()).batches)
    return batches


def leader_bytes(log: Log, offset: int = 0) -> bytes:
    """Every batch of the log from ``offset`` to its end, as a leader would serve a follower."""
    data = b""
    while offset < log.log_end_offset:
        region = log.read(offset, 10**9, max_offset=log.log_end_offset)
        assert region is not None
        data += region.read_bytes()
        offset = region.next_offset
    return data


# ---------------------------------------------------------------------------------------- stamping


def test_a_leader_append_stamps_its_epoch_into_bytes_12_to_16_only(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sent = [make_batch(0, 3), make_batch(3, 4)]
    assert struct.unpack_from(">i", sent[0], 12) == (-1,)
    log.append(sent[0] + sent[1], leader_epoch=7)
    log.append(make_batch(7, 2), leader_epoch=7)
    log.append(make_batch(9, 1), leader_epoch=9)
    stored = stored_batches(log)
    assert [(b.base_offset, b.partition_leader_epoch) for b in stored] == [(0, 7), (3, 7), (7, 7), (9, 9)]
    data = (tmp_path / "clicks-0" / LOG0).read_bytes()
    first = len(sent[0])
    assert data[12:16] == b"\x00\x00\x00\x07"
    # everything but the base offset and the epoch is the producer's bytes, CRC included, still valid
    assert data[8:12] + data[16:first] == sent[0][8:12] + sent[0][16:]
    assert data[first + 16 : first + len(sent[1])] == sent[1][16:]
    for batch in stored:
        batch.validate()
    assert log.leader_epoch_cache.entries() == [(7, 0), (9, 9)]
    assert (log.latest_epoch, log.end_offset_for_epoch(7), log.end_offset_for_epoch(9)) == (
        9,
        (7, 9),
        (9, 10),
    )
    assert log.end_offset_for_epoch(10) == (-1, -1)
    assert (tmp_path / "clicks-0" / EPOCH_FILE).read_text() == "0\n2\n7 0\n9 9\n"
    assert_records_match(read_all(log), 0, 10)
    log.close()


def test_the_minus_one_path_writes_exactly_the_bytes_the_batch_carried(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    carried = bytearray(make_batch(0, 3))
    carried[12:16] = struct.pack(">i", 4)  # a batch that already carries an epoch keeps it
    plain = make_batch(3, 2)
    log.append(bytes(carried))
    log.append(plain)
    data = (tmp_path / "clicks-0" / LOG0).read_bytes()
    assert data[8 : len(carried)] == bytes(carried[8:])
    assert data[len(carried) + 8 :] == plain[8:]
    assert [b.partition_leader_epoch for b in stored_batches(log)] == [4, -1]
    assert log.leader_epoch_cache.entries() == []
    assert not (tmp_path / "clicks-0" / EPOCH_FILE).exists()
    log.close()


# ---------------------------------------------------------------------------------------- follower


def test_a_follower_stores_the_leaders_batches_byte_for_byte(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "clicks-0", segment_bytes=1500)
    follower = open_log(tmp_path / "f", "clicks-0", segment_bytes=1500)
    append_n(leader, 3, leader_epoch=0)
    append_n(leader, 4, leader_epoch=2)
    half = leader_bytes(leader)[: len(leader_bytes(leader)) // 2]
    first = scan_batches(half)
    info = follower.append_as_follower(half[: first.complete_bytes])
    assert (info.first_offset, info.last_offset, info.batch_count) == (
        0,
        len(first.batches) * 5 - 1,
        len(first.batches),
    )
    follower.append_as_follower(leader_bytes(leader, follower.log_end_offset))
    assert follower.log_end_offset == leader.log_end_offset == 35
    # same batches, same bytes (segments roll by each log's own sizes: Lumber checks a roll before each
    # batch of an append, against the bytes the segment holds before that append)
    assert b"".join(s.path.read_bytes() for s in follower.segments) == b"".join(
        s.path.read_bytes() for s in leader.segments
    )
    assert len(follower.segments) > 1
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries() == [(0, 0), (2, 15)]
    assert_records_match(read_all(follower), 0, 35)
    leader.close()
    follower.close()


def test_a_follower_refuses_batches_below_its_log_end_naming_expected_and_found(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "clicks-0")
    follower = open_log(tmp_path / "f", "clicks-0")
    append_n(leader, 3, leader_epoch=1)
    data = leader_bytes(leader)
    batches = scan_batches(data).batches
    backwards = bytes(batches[1].buffer) + bytes(batches[0].buffer)
    with pytest.raises(UnexpectedAppendOffsetError, match=r"batch 1 has base offset 0, expected at least 10"):
        follower.append_as_follower(backwards)
    assert follower.log_end_offset == 0
    assert (tmp_path / "f" / "clicks-0" / LOG0).stat().st_size == 0
    assert follower.leader_epoch_cache.entries() == []
    follower.append_as_follower(data)
    assert follower.log_end_offset == 15
    with pytest.raises(
        UnexpectedAppendOffsetError, match=r"batch 0 has base offset 5, expected at least 15"
    ) as caught:
        follower.append_as_follower(leader_bytes(leader, 5))
    assert (caught.value.expected_offset, caught.value.found_offset) == (15, 5)
    assert "clicks-0" in str(caught.value)
    assert follower.log_end_offset == 15
    leader.close()
    follower.close()


def test_a_follower_takes_a_cleaned_leaders_offset_gaps(tmp_path: Path) -> None:
    """A leader's log cleaner leaves gaps; the follower keeps the leader's offsets (Kafka's follower)."""
    leader = open_log(tmp_path, "clicks-0")
    follower = open_log(tmp_path / "f", "clicks-0")
    append_n(leader, 3, leader_epoch=1)
    batches = scan_batches(leader_bytes(leader)).batches
    follower.append_as_follower(bytes(batches[0].buffer) + bytes(batches[2].buffer))
    assert follower.log_end_offset == 15
    assert [r.offset for r in read_all(follower)] == [*range(5), *range(10, 15)]
    leader.close()
    follower.close()


def test_a_follower_rebuilds_producer_state_and_deduplicates_after_becoming_leader(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "clicks-0")
    follower = open_log(tmp_path / "f", "clicks-0")
    leader.append(make_batch(0, 2), leader_epoch=0)
    for sequence in (0, 3, 6):
        leader.append(idempotent_batch(sequence, 3), leader_epoch=0)
    follower.append_as_follower(leader_bytes(leader))
    entry = follower.producer_state.entry(42)
    assert entry is not None
    assert [(b.first_sequence, b.last_offset) for b in entry.batches] == [(0, 4), (3, 7), (6, 10)]
    # the follower becomes leader (epoch 1); the producer retries its last batch, then goes on
    retry = follower.append(idempotent_batch(6, 3), leader_epoch=1)
    assert (retry.duplicate, retry.first_offset, retry.last_offset) == (True, 8, 10)
    assert follower.log_end_offset == 11
    after = follower.append(idempotent_batch(9, 2), leader_epoch=1)
    assert (after.duplicate, after.first_offset, after.last_offset) == (False, 11, 12)
    assert follower.leader_epoch_cache.entries() == [(0, 0), (1, 11)]
    leader.close()
    follower.close()


# ---------------------------------------------------------------------------------------- truncation


def test_truncate_at_a_batch_boundary_mid_segment_then_append_again(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_n(log, 4, leader_epoch=0)  # offsets 0-19, batches at 0, 5, 10, 15
    append_n(log, 2, leader_epoch=3)  # 20-29
    sizes = [b.size_bytes for b in stored_batches(log)]
    log.flush()
    assert log.truncate_to(10) == 10
    assert (log.log_end_offset, log.high_watermark, log.flushed_offset) == (10, 10, 10)
    assert (tmp_path / "clicks-0" / LOG0).stat().st_size == sizes[0] + sizes[1]
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.leader_epoch_cache.entries() == [(0, 0)]
    assert_records_match(read_all(log), 0, 10)
    append_n(log, 2, leader_epoch=4)
    assert log.leader_epoch_cache.entries() == [(0, 0), (4, 10)]
    assert_records_match(read_all(log), 0, 20)
    assert log.truncate_to(50) == 20  # at or past the end: nothing
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 20
    assert reopened.leader_epoch_cache.entries() == [(0, 0), (4, 10)]
    assert_records_match(read_all(reopened), 0, 20)
    reopened.close()


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_n(log, 4)  # batches at 0, 5, 10, 15
    assert log.truncate_to(12) == 10
    assert log.log_end_offset == 10
    assert [b.base_offset for b in stored_batches(log)] == [0, 5]
    append_n(log, 1)
    assert_records_match(read_all(log), 0, 15)
    log.close()


def test_truncate_across_segments_deletes_the_later_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1500, index_interval_bytes=100)
    append_n(log, 12)  # about 2 batches a segment
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 5
    target = bases[2] + 5  # the second batch of the third segment
    assert log.truncate_to(target) == target
    names = sorted(p.name for p in (tmp_path / "clicks-0").iterdir() if p.suffix == ".log")
    assert names == [f"{b:020d}.log" for b in [*bases[:3], target]]
    cut = log.segments[2]
    assert (cut.base_offset, cut.next_offset) == (bases[2], target)
    assert [b.base_offset for b in scan_batches(cut.path.read_bytes()).batches] == [bases[2]]
    assert all(
        offset < target and position < cut.size_bytes for offset, position in cut.offset_index.entries()
    )
    assert_records_match(read_all(log), 0, target)
    # a cut at a segment's first batch deletes that segment whole
    assert log.truncate_to(bases[1]) == bases[1]
    assert [s.base_offset for s in log.segments] == [0, bases[1]]
    assert log.segments[-1].size_bytes == 0
    append_n(log, 3)
    assert_records_match(read_all(log), 0, bases[1] + 15)
    log.close()
    reopened = open_log(tmp_path, segment_bytes=1500, index_interval_bytes=100)
    assert_records_match(read_all(reopened), 0, bases[1] + 15)
    reopened.close()


def test_truncation_rebuilds_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(idempotent_batch(0, 3))
    log.append(idempotent_batch(3, 3))  # offsets 3-5
    assert log.truncate_to(3) == 3
    entry = log.producer_state.entry(42)
    assert entry is not None
    assert entry.last_sequence == 2
    # the truncated batch is not a duplicate any more: appended again at offset 3
    again = log.append(idempotent_batch(3, 3))
    assert (again.duplicate, again.first_offset) == (False, 3)
    log.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_n(log, 3, leader_epoch=2)
    log.append(idempotent_batch(0, 2))
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.flushed_offset) == (
        100,
        100,
        100,
        100,
    )
    assert sorted(p.name for p in (tmp_path / "clicks-0").iterdir()) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
        EPOCH_FILE,
    ]
    assert log.leader_epoch_cache.entries() == []
    assert log.producer_state.producers == {}
    log.append(make_batch(100, 5), leader_epoch=3)
    assert_records_match(read_all(log), 100, 105)
    assert log.truncate_to(50) == 50  # below the log start: truncated fully
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    log.close()


def test_a_reader_holding_an_old_view_never_gets_other_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_n(log, 4)
    old = log.read(10, 10**6)  # a region over offsets 10-19, taken before the truncation
    assert old is not None
    assert old.next_offset == 20
    kept = log.read(0, 1)
    assert kept is not None
    log.truncate_to(10)
    append_n(log, 2)  # new batches at offsets 10-19 go to a new segment, not over the old bytes
    assert log.segments[-1].base_offset == 10
    assert scan_batches(kept.read_bytes()).batches[0].base_offset == 0
    with pytest.raises(Exception, match="ends past the end of the file"):
        old.read_bytes()
    log.close()


def test_recovery_after_a_kill_following_truncation(tmp_path: Path) -> None:
    script = f"""
import os, signal, sys
sys.path.insert(0, {str(Path.cwd())!r})
from broker.config import LogConfig
from broker.log.log_manager import LogManager
from tests.broker.log.helpers import make_batch
manager = LogManager(LogConfig(log_dirs=[{str(tmp_path)!r}], segment_bytes=2000, expose="appended"))
log = manager.get_or_create_log("clicks", 0)
log.set_replicated(True)
for epoch in (0, 0, 0, 1, 1, 1, 1, 1):
    log.append(make_batch(log.log_end_offset, 5), leader_epoch=epoch)
log.flush()
log.update_replicated_high_watermark(15)
manager.checkpoint_recovery_points()
log.truncate_to(22)
for _ in range(3):
    log.append(make_batch(log.log_end_offset, 5), leader_epoch=2)
print(log.log_end_offset, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert child.returncode == -9, child.stderr
    assert child.stdout.split() == ["35"]
    manager = LogManager(config(tmp_path, segment_bytes=2000))
    log = manager.get_log("clicks", 0)
    assert log is not None
    assert log.log_end_offset == 35
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 15), (2, 20)]
    assert log.replicated_high_watermark == 15
    assert_records_match(read_all(log, max_offset=35), 0, 35)
    assert not log.recovery_result.truncated
    manager.close()


# ---------------------------------------------------------------------------------------- replicated hw


def test_reads_stop_at_the_replicated_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    heard: list[int] = []
    log.add_listener(lambda tp, hw: heard.append(hw))
    log.set_replicated(True)
    assert (log.replicated, log.replicated_high_watermark) == (True, 0)
    append_n(log, 3)
    assert (log.log_end_offset, log.high_watermark) == (15, 0)
    assert log.read(0, 10**6) is None
    assert heard == []
    assert log.update_replicated_high_watermark(10) is True
    assert (log.high_watermark, heard) == (10, [10])
    assert_records_match(read_all(log), 0, 10)
    region = log.read(0, 10**6)
    assert region is not None
    assert region.next_offset == 10
    assert log.update_replicated_high_watermark(7) is False  # only up
    assert log.update_replicated_high_watermark(13) is False  # inside the batch 10-14: rounded down to 10
    assert log.update_replicated_high_watermark(99) is True  # capped at the log end
    assert (log.high_watermark, log.replicated_high_watermark, heard) == (15, 15, [10, 15])
    log.reset_replicated_high_watermark(5)
    assert log.high_watermark == 5
    log.set_replicated(False)
    assert (log.high_watermark, log.replicated_high_watermark, heard[-1]) == (15, None, 15)
    log.close()


def test_expose_flushed_still_caps_the_replicated_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, expose="flushed")
    log.set_replicated(True)
    append_n(log, 4)
    assert log.update_replicated_high_watermark(20) is False  # replicated, but nothing is flushed
    assert log.high_watermark == 0
    assert log.flush() == 20
    assert log.high_watermark == 20
    append_n(log, 2)
    log.update_replicated_high_watermark(25)
    assert log.high_watermark == 20
    log.flush()  # flushed 30, replicated 25
    assert log.high_watermark == 25
    assert_records_match(read_all(log), 0, 25)
    log.close()


def test_listeners_hear_a_replicated_advance_that_the_flush_does_not_expose_yet(tmp_path: Path) -> None:
    """acks=all waits for the in-sync replicas, never for the flush: the purgatory must hear of every
    advance of the replicated high watermark, exposed or not."""
    log = open_log(tmp_path, expose="flushed")
    log.set_replicated(True)
    append_n(log, 4)
    heard: list[tuple[int, int]] = []
    log.add_listener(lambda _tp, hw: heard.append((hw, log.replicated_high_watermark or -1)))
    assert log.update_replicated_high_watermark(10) is False
    assert log.update_replicated_high_watermark(10) is False  # no advance: nobody hears
    assert log.update_replicated_high_watermark(20) is False
    assert heard == [(0, 10), (0, 20)]
    assert log.high_watermark == 0
    log.close()


def test_end_listeners_hear_every_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    ends: list[tuple[TopicPartition, int]] = []

    def listener(tp: TopicPartition, end: int) -> None:
        ends.append((tp, end))

    log.add_end_listener(listener)
    append_n(log, 2)
    log.append_as_follower(b"".join(bytes(b.buffer) for b in _relabelled(log, 10, 3)))
    log.remove_end_listener(listener)
    append_n(log, 1)
    assert ends == [(TP, 5), (TP, 10), (TP, 13)]
    log.close()


def _relabelled(log: Log, base_offset: int, count: int) -> list[RecordBatch]:
    builder = RecordBatchBuilder(CompressionType.NONE, base_offset, partition_leader_epoch=0)
    for i in range(count):
        builder.append(BASE_TS + i, f"k{base_offset + i}".encode(), b"x")
    return list(scan_batches(builder.build()).batches)


def test_the_log_manager_checkpoints_replicated_high_watermarks(tmp_path: Path) -> None:
    manager = LogManager(config(tmp_path))
    replicated = manager.get_or_create_log("clicks", 0)
    plain = manager.get_or_create_log("clicks", 1)
    append_n(replicated, 4)
    append_n(plain, 1)
    manager.checkpoint_recovery_points()
    assert not (tmp_path / "replication-offset-checkpoint").exists()
    replicated.set_replicated(True)  # starts from the high watermark exposed so far
    assert (replicated.high_watermark, replicated.replicated_high_watermark) == (20, 20)
    replicated.reset_replicated_high_watermark(15)
    assert replicated.high_watermark == 15
    manager.checkpoint_recovery_points()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nclicks 0 15\n"
    manager.close()
    # a kill -9 cut the log back below the checkpointed high watermark: the load caps it
    (tmp_path / "replication-offset-checkpoint").write_text("0\n2\nclicks 0 15\nclicks 1 999\n")
    manager = LogManager(config(tmp_path))
    reopened, other = manager.get_log("clicks", 0), manager.get_log("clicks", 1)
    assert reopened is not None
    assert other is not None
    assert (reopened.replicated, reopened.replicated_high_watermark, reopened.high_watermark) == (
        False,
        15,
        20,
    )
    assert other.replicated_high_watermark == 5
    reopened.set_replicated(True)
    assert reopened.high_watermark == 15
    manager.close()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\nclicks 0 15\nclicks 1 5\n"


def test_a_torn_epoch_checkpoint_is_rebuilt_at_load(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_n(log, 2, leader_epoch=0)
    append_n(log, 2, leader_epoch=3)
    append_n(log, 1, leader_epoch=5)
    log.close()
    path = tmp_path / "clicks-0" / EPOCH_FILE
    assert path.read_text() == "0\n3\n0 0\n3 10\n5 20\n"
    path.write_text("0\n3\n0 0\n3 1")
    reopened = open_log(tmp_path)
    assert reopened.leader_epoch_cache.entries() == [(0, 0), (3, 10), (5, 20)]
    assert path.read_text() == "0\n3\n0 0\n3 10\n5 20\n"
    reopened.close()
    # entries past the recovered end (written before a batch that never reached the disk) are trimmed
    path.write_text("0\n4\n0 0\n3 10\n5 20\n6 25\n")
    reopened = open_log(tmp_path)
    assert reopened.leader_epoch_cache.entries() == [(0, 0), (3, 10), (5, 20)]
    reopened.close()


def test_retention_moves_the_first_epoch_to_the_new_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1500, retention_bytes=2000)
    append_n(log, 3, leader_epoch=0)
    append_n(log, 5, leader_epoch=1)  # epoch 1 starts at 15
    deleted = log.apply_retention()
    assert deleted
    start = log.log_start_offset
    assert start > 15
    assert log.leader_epoch_cache.entries() == [(1, start)]
    assert (tmp_path / "clicks-0" / EPOCH_FILE).read_text() == f"0\n1\n1 {start}\n"
    log.close()
