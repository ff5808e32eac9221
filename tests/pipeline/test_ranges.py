from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record.topic_partition import TopicPartition
from pipeline.load_errors import OffsetOutOfRangeError, PlanError
from pipeline.ranges import LossRange, OffsetRange, PartitionOffsets, plan_ranges, split_ranges

TP0 = TopicPartition("page_view", 0)
TP1 = TopicPartition("page_view", 1)
CLICK = TopicPartition("click", 0)


def test_new_partitions_start_earliest_and_load_to_the_log_end() -> None:
    plan = plan_ranges([PartitionOffsets(TP0, 5, 120), PartitionOffsets(TP1, 0, 0)], {})
    assert plan.ranges == (OffsetRange("page_view", 0, 5, 120),)
    assert plan.losses == ()
    assert plan.next_offsets == {TP0: 120, TP1: 0}


def test_start_latest_loads_nothing_but_records_the_log_end() -> None:
    plan = plan_ranges([PartitionOffsets(TP0, 5, 120)], {}, start="latest")
    assert plan.ranges == ()
    assert plan.next_offsets == {TP0: 120}


def test_committed_offsets_are_the_start_and_other_partitions_are_kept() -> None:
    committed = {TP0: 100, CLICK: 7}
    plan = plan_ranges([PartitionOffsets(TP0, 0, 150)], committed)
    assert plan.ranges == (OffsetRange("page_view", 0, 100, 150),)
    assert plan.next_offsets == {TP0: 150, CLICK: 7}


def test_cutoff_offset_bounds_the_range_and_never_goes_backwards() -> None:
    plan = plan_ranges(
        [PartitionOffsets(TP0, 0, 150, cutoff_offset=130), PartitionOffsets(TP1, 0, 90, cutoff_offset=40)],
        {TP0: 100, TP1: 60},
    )
    assert plan.ranges == (OffsetRange("page_view", 0, 100, 130),)
    assert plan.next_offsets == {TP0: 130, TP1: 60}


def test_cap_per_partition() -> None:
    plan = plan_ranges([PartitionOffsets(TP0, 0, 150)], {TP0: 100}, max_records_per_partition=20)
    assert plan.ranges == (OffsetRange("page_view", 0, 100, 120),)
    assert plan.next_offsets[TP0] == 120


def test_out_of_range_fails_by_default_naming_the_gap() -> None:
    with pytest.raises(OffsetOutOfRangeError) as caught:
        plan_ranges([PartitionOffsets(TP0, 500, 900)], {TP0: 300})
    message = str(caught.value)
    assert "page_view-0" in message
    assert "[300, 500)" in message


def test_out_of_range_earliest_skips_and_records_the_loss() -> None:
    plan = plan_ranges([PartitionOffsets(TP0, 500, 900)], {TP0: 300}, on_out_of_range="earliest")
    assert plan.ranges == (OffsetRange("page_view", 0, 500, 900),)
    assert plan.losses == (LossRange("page_view", 0, 300, 500, "out_of_range"),)
    assert plan.losses[0].record_count == 200


def test_committed_beyond_the_log_end_always_fails() -> None:
    with pytest.raises(PlanError, match="beyond the log end 50"):
        plan_ranges([PartitionOffsets(TP0, 0, 50)], {TP0: 80}, on_out_of_range="earliest")


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="not a range"):
        OffsetRange("t", 0, 10, 5)
    with pytest.raises(ValueError, match="do not make a log"):
        PartitionOffsets(TP0, 10, 5)
    with pytest.raises(ValueError, match="listed twice"):
        plan_ranges([PartitionOffsets(TP0, 0, 5), PartitionOffsets(TP0, 0, 5)], {})
    with pytest.raises(ValueError, match="min_partitions"):
        split_ranges([], min_partitions=0)


def test_split_by_size_and_by_min_partitions() -> None:
    ranges = [OffsetRange("a", 0, 0, 10), OffsetRange("b", 0, 100, 103)]
    assert split_ranges(ranges, max_records_per_task=4) == [
        OffsetRange("a", 0, 0, 4),
        OffsetRange("a", 0, 4, 7),
        OffsetRange("a", 0, 7, 10),
        OffsetRange("b", 0, 100, 103),
    ]
    assert split_ranges(ranges, min_partitions=4) == [
        OffsetRange("a", 0, 0, 3),
        OffsetRange("a", 0, 3, 5),
        OffsetRange("a", 0, 5, 10),
        OffsetRange("b", 0, 100, 103),
    ]
    # a single record cannot be split further: fewer tasks than asked for
    assert split_ranges([OffsetRange("a", 0, 7, 8)], min_partitions=3) == [OffsetRange("a", 0, 7, 8)]


def test_ranges_round_trip_through_json() -> None:
    value = OffsetRange("page_view", 3, 10, 20)
    assert OffsetRange.from_json(value.to_json()) == value
    loss = LossRange("page_view", 3, 1, 10)
    assert LossRange.from_json(loss.to_json()) == loss


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 50), min_size=0, max_size=6),
    min_partitions=st.integers(1, 12),
    max_per_task=st.integers(0, 17),
)
def test_splitting_covers_exactly_the_same_offsets(
    sizes: list[int], min_partitions: int, max_per_task: int
) -> None:
    ranges = [OffsetRange("t", p, 1000 * p, 1000 * p + size) for p, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions=min_partitions, max_records_per_task=max_per_task)
    covered = sorted((p.partition, o) for p in pieces for o in range(p.from_offset, p.until_offset))
    wanted = sorted((r.partition, o) for r in ranges for o in range(r.from_offset, r.until_offset))
    assert covered == wanted
    assert all(p.record_count > 0 for p in pieces)
    if max_per_task:
        assert all(p.record_count <= max_per_task for p in pieces)
    total = sum(sizes)
    assert len(pieces) >= min(min_partitions, total)
