"""Followers of a cleaned leader (broker/log/log_cleaner.py, log.py): a follower copies the cleaned log's
offset gaps and leader epochs, and rolls at its own log end so that its segments stay contiguous across the
gaps."""

from __future__ import annotations

import random
from pathlib import Path

from broker.log.log_verifier import verify_partition
from broker.record.batch_scan import scan_batches
from tests.broker.log.compacted_logs import (
    append_ops,
    clean_all,
    log_map,
    new_cleaner,
    open_log,
    random_ops,
    read_bytes,
    read_records,
    replay,
)


def test_a_follower_fetching_a_cleaned_leader_copies_its_gaps_and_epochs(tmp_path: Path) -> None:
    rng = random.Random(23)
    ops = random_ops(rng, 5_000, 300)
    leader = open_log(tmp_path / "leader")
    append_ops(leader, ops)
    leader.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path / "leader", [leader])
    clean_all(log_cleaner, cleaner)
    append_ops(leader, ops[:100])  # the active segment, uncleaned
    follower = open_log(tmp_path / "follower", cleanup_policy="delete")
    fetches = 0
    while follower.log_end_offset < leader.log_end_offset:
        region = leader.read(follower.log_end_offset, 2 * 1024, max_offset=leader.log_end_offset)
        assert region is not None
        follower.append_as_follower(region.read_bytes())
        fetches += 1
    assert fetches >= 5
    assert read_records(follower) == read_records(leader)
    assert follower.log_end_offset == leader.log_end_offset
    # the follower's epoch starts at the first batch it got (the leader's first surviving one)
    assert leader.leader_epoch_cache.entries() == [(3, 0)]
    assert follower.leader_epoch_cache.entries() == [
        (3, scan_batches(read_bytes(leader)).batches[0].base_offset)
    ]
    assert follower.end_offset_for_epoch(3) == leader.end_offset_for_epoch(3) == (3, leader.log_end_offset)
    leader.close()
    follower.close()
    reopened = open_log(tmp_path / "follower", cleanup_policy="delete")
    assert log_map(reopened) == replay(ops + ops[:100])
    reopened.close()


def test_a_follower_rolls_at_its_own_log_end_so_its_segments_stay_contiguous_across_gaps(
    tmp_path: Path,
) -> None:
    leader = open_log(tmp_path / "leader")
    append_ops(leader, [(f"k{i % 7}".encode(), b"v" * 200) for i in range(3_000)])
    append_ops(leader, [(f"u{i}".encode(), b"u" * 200) for i in range(150)])  # three batches that all stay
    leader.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path / "leader", [leader])
    clean_all(log_cleaner, cleaner)
    append_ops(leader, [(b"tail", b"t")])
    follower = open_log(tmp_path / "follower", cleanup_policy="delete", segment_bytes=128)  # a roll per batch
    while follower.log_end_offset < leader.log_end_offset:
        region = leader.read(follower.log_end_offset, 1, max_offset=leader.log_end_offset)
        assert region is not None
        follower.append_as_follower(region.read_bytes())
    segments = follower.segments
    assert len(segments) > 2
    assert [s.base_offset for s in segments[1:]] == [s.next_offset for s in segments[:-1]]
    assert verify_partition(follower.dir).damage == ()
    assert verify_partition(leader.dir).damage == ()
    leader.close()
    follower.close()
