"""One cleaning pass (broker/log/cleaner.py) over a log whose oldest segments a later one supersedes
entirely: the group they make cleans to an empty segment (Kafka's ``cleanSegments`` swaps one in too),
emptied batches are dropped, and reads step over the gap to the next offset that holds a record."""

from __future__ import annotations

from pathlib import Path

from broker.clock import system_clock_ms
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import LogCleanerManager
from broker.log.log_verifier import verify_partition
from broker.record.batch_scan import scan_batches
from tests.broker.log.helpers import config
from tests.broker.log.swap_killer import KEYS, ROUNDS, superseded_log, value


def clean_once(root: Path, log: Log) -> int:
    manager = LogCleanerManager([root], lambda: {root: [log]}, system_clock_ms)
    log_cleaner = LogCleaner(config(root, cleaner_dedupe_buffer_bytes=1024 * 1024), manager)
    cleaner = log_cleaner.new_cleaner()
    try:
        stats = log_cleaner.clean_once(cleaner)
    finally:
        cleaner.close()
        log_cleaner.shutdown()  # the replaced segments' descriptors go now, not 60 s later
    assert stats is not None
    assert log_cleaner.totals.failed == 0
    return stats.end_offset


def first_batch_at(log: Log, offset: int) -> tuple[int, int]:
    """The base and next offset of the first batch a fetch at ``offset`` gets."""
    region = log.read(offset, 64 * 1024, max_offset=log.log_end_offset)
    assert region is not None
    batch = scan_batches(region.read_bytes()).batches[0]
    return batch.base_offset, batch.next_offset


def layout(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, next offset, bytes) of each segment."""
    return [(s.base_offset, s.next_offset, s.size_bytes) for s in log.segments]


def check_cleaned(log: Log) -> None:
    """The log after its first pass: the group [0, 40) is one empty segment, [40, 60) kept whole."""
    segments = layout(log)
    assert [(base, end) for base, end, _ in segments] == [(0, 0), (40, 60), (60, 61)]
    assert segments[0][2] == 0
    assert (log.log_start_offset, log.log_end_offset) == (0, 61)
    # a consumer at any offset of the gap gets the first batch after it, then the next ones in order
    for offset in (0, 1, 19, 20, 39, 40):
        assert first_batch_at(log, offset) == (40, 50)
    assert first_batch_at(log, 50) == (50, 60)
    assert first_batch_at(log, 60) == (60, 61)
    records = []
    offset = 0
    while offset < log.log_end_offset:
        base, offset = first_batch_at(log, offset)
        region = log.read(base, 64 * 1024, max_offset=log.log_end_offset)
        assert region is not None
        records += scan_batches(region.read_bytes()).batches[0].records()
    assert [r.offset for r in records] == list(range(40, 61))
    assert [(r.key, r.value) for r in records[:KEYS]] == [
        (f"k{key:02d}".encode(), value(ROUNDS - 1, key)) for key in range(KEYS)
    ]
    report = verify_partition(log.dir)
    assert (report.damage, report.empty_segments) == ((), ())
    assert (report.segments, report.batches, report.records, report.next_offset) == (3, 3, 21, 61)


def test_a_group_whose_every_key_is_superseded_cleans_to_an_empty_segment(tmp_path: Path) -> None:
    log = superseded_log(tmp_path)
    assert [(base, end) for base, end, _ in layout(log)] == [(0, 20), (20, 40), (40, 60), (60, 61)]
    before = [size for _, _, size in layout(log)]
    assert before[0] + before[1] <= log.config.segment_bytes < before[0] + before[1] + before[2]
    assert clean_once(tmp_path, log) == 60
    check_cleaned(log)
    assert [size for _, _, size in layout(log)][1:] == before[2:]  # the last group kept byte for byte
    log.close()
    reopened = superseded_log(tmp_path)  # a clean restart loads the empty segment as it is
    check_cleaned(reopened)
    reopened.close()


def test_the_next_pass_merges_the_empty_segment_into_the_next_group(tmp_path: Path) -> None:
    log = superseded_log(tmp_path)
    clean_once(tmp_path, log)
    log.roll()  # the tail's segment below the active one: dirty, and its batch the last below the bound
    assert clean_once(tmp_path, log) == 61
    assert [(base, end) for base, end, _ in layout(log)] == [(0, 61), (61, 61)]
    assert first_batch_at(log, 0) == (40, 50)
    assert verify_partition(log.dir).damage == ()
    log.close()
