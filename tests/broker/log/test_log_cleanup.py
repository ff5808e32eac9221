"""DeleteRecords on a log (broker/log/log_cleanup.py, ``delete_records_before``): the log start offset raised
inside a segment and across segments, reads below it out of range, whole segments below it deleted, the
start kept across a restart by the log manager's ``log-start-offset-checkpoint``; the cleaner's swap is
tested in test_log_cleaner.py and test_segment_swap.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.errors import OffsetOutOfRangeError
from broker.log.log_manager import LogManager
from broker.record.batch_scan import scan_batches
from tests.broker.log.helpers import BASE_TS, assert_records_match, make_batch, read_all
from tests.broker.log.test_log_manager import manager_config


def test_delete_records_raises_the_start_and_deletes_the_segments_below_it(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path, segment_bytes=4000)) as manager:
        log = manager.get_or_create_log("clicks", 0)
        for first in range(0, 100, 10):
            log.append(make_batch(first, 10))
        bases = [s.base_offset for s in log.segments]
        assert len(bases) >= 4
        assert bases[0] == 0
        # inside the first segment: nothing deleted yet, offsets below 5 out of range
        assert log.delete_records_before(5) == 5
        assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (5, bases)
        with pytest.raises(OffsetOutOfRangeError, match=r"offset 4 is out of range: .* \[5, 100\)"):
            log.read(4, 1024)
        region = log.read(5, 1024)  # the batch holding 5 comes whole, as Kafka's fetch gives it
        assert region is not None
        assert scan_batches(region.read_bytes()).batches[0].base_offset == 0
        # a lower offset changes nothing
        assert log.delete_records_before(3) == 5
        # past the second segment's base: the first segment's files are gone
        second = bases[2]
        assert log.delete_records_before(second + 1) == second + 1
        assert [s.base_offset for s in log.segments] == bases[2:]
        assert not (log.dir / f"{0:020d}.log").exists()
        with pytest.raises(OffsetOutOfRangeError, match=rf"offset 101 .*\[{second + 1}, 100"):
            log.delete_records_before(101)
        kept = [r for r in read_all(log) if r.offset > second]  # the first read's batch holds ``second``
        assert_records_match(kept, second + 1, 100)
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == f"0\n1\nclicks 0 {second + 1}\n"
    with LogManager(manager_config(tmp_path, segment_bytes=4000)) as manager:
        reloaded = manager.get_log("clicks", 0)
        assert reloaded is not None
        assert reloaded.log_start_offset == second + 1
        with pytest.raises(OffsetOutOfRangeError):
            reloaded.read(second, 1024)
        # up to the log end: every segment but the active one goes; the start is the log end
        assert reloaded.delete_records_before(100) == 100
        assert (reloaded.log_start_offset, reloaded.log_end_offset) == (100, 100)
        assert reloaded.read(100, 1024) is None
        reloaded.append(make_batch(100, 1))
        assert_records_match(read_all(reloaded), 100, 101)


def test_an_offset_by_timestamp_never_lies_below_the_raised_start(tmp_path: Path) -> None:
    with LogManager(manager_config(tmp_path)) as manager:
        log = manager.get_or_create_log("clicks", 0)
        log.append(make_batch(0, 10, timestamp_ms=BASE_TS))  # timestamps BASE_TS + 0 .. 9
        log.append(make_batch(10, 10, timestamp_ms=BASE_TS))  # BASE_TS + 0 .. 9 again
        assert log.offset_for_timestamp(BASE_TS + 2) == (2, BASE_TS + 2)
        log.delete_records_before(5)
        # the first record at or after the start with a timestamp at least the one asked for
        assert log.offset_for_timestamp(BASE_TS + 2) == (5, BASE_TS + 5)
        assert log.offset_for_timestamp(BASE_TS + 7) == (7, BASE_TS + 7)
        log.delete_records_before(12)
        assert log.offset_for_timestamp(BASE_TS + 1) == (12, BASE_TS + 2)
        assert log.offset_for_timestamp(BASE_TS + 10) is None
