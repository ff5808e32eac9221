"""Burrow's rules (broker/client/groups/lag_evaluation.py), each on a window built for it, and the window
itself."""

from __future__ import annotations

import pytest

from broker.client.groups.lag_evaluation import (
    LagSample,
    LagStatus,
    LagWindow,
    evaluate,
    group_status,
    reset_position,
)
from broker.record.topic_partition import TopicPartition

TP0 = TopicPartition("events", 0)
TP1 = TopicPartition("events", 1)


def window(*rows: tuple[int, int, int, int]) -> list[LagSample]:
    """(observed at, committed offset, committed at, log end) per sample."""
    return [LagSample(*row) for row in rows]


@pytest.mark.parametrize(
    ("samples", "now_ms", "status"),
    [
        # any zero lag in the window: OK, whatever else happened
        (window((0, 10, 0, 10), (10, 10, 0, 50), (20, 10, 0, 90)), 1000, LagStatus.OK),
        # one sample: nothing to judge
        (window((0, 10, 0, 50)), 1000, LagStatus.OK),
        # a rewind (offset went back): OK
        (window((0, 40, 0, 50), (10, 5, 10, 50), (20, 6, 20, 50)), 21, LagStatus.OK),
        # commits stopped: now - last commit (100 - 20) > last - first commit (20 - 0)
        (window((0, 10, 0, 50), (10, 20, 10, 60), (20, 30, 20, 70)), 100, LagStatus.STOPPED),
        # ... and the same window judged just after its last commit is not stopped (lag falls: OK)
        (window((0, 10, 0, 50), (10, 30, 10, 60), (20, 60, 20, 70)), 25, LagStatus.OK),
        # commits keep coming, the offset never moves: STALLED
        (window((0, 10, 0, 50), (10, 10, 10, 50), (20, 10, 20, 55)), 25, LagStatus.STALLED),
        # consuming, but lag never decreases: WARNING
        (window((0, 10, 0, 50), (10, 20, 10, 60), (20, 30, 20, 70), (30, 40, 30, 85)), 35, LagStatus.WARNING),
        # consuming and the lag fell at least once: OK
        (window((0, 10, 0, 50), (10, 20, 10, 60), (20, 40, 20, 70), (30, 50, 30, 85)), 35, LagStatus.OK),
    ],
)
def test_burrow_rules(samples: list[LagSample], now_ms: int, status: LagStatus) -> None:
    assert evaluate(samples, now_ms) == status


def test_window_keeps_the_last_samples_and_judges_each_partition() -> None:
    lag_window = LagWindow(window=3)
    for t in range(5):  # partition 0 consumes and catches up at t=4; partition 1 never commits again
        lag_window.observe(
            t * 10,
            {TP0: (10 * t + 10, t * 10), TP1: (7, 0)},
            {TP0: 50, TP1: 20 + t},
        )
    partitions = lag_window.evaluate(45)
    assert [(p.partition, p.status, p.lag, p.samples, p.complete) for p in partitions] == [
        (TP0, LagStatus.OK, 0, 3, True),
        (TP1, LagStatus.STOPPED, 17, 3, True),
    ]
    assert group_status(partitions) == LagStatus.STOPPED
    # the window's samples, oldest first: what the lag exporter serves as history
    assert lag_window.samples() == {
        TP0: (LagSample(20, 30, 20, 50), LagSample(30, 40, 30, 50), LagSample(40, 50, 40, 50)),
        TP1: (LagSample(20, 7, 0, 22), LagSample(30, 7, 0, 23), LagSample(40, 7, 0, 24)),
    }
    assert LagSample(40, 7, 0, 24).to_json() == {
        "observed_at_ms": 40,
        "committed_offset": 7,
        "committed_at_ms": 0,
        "log_end_offset": 24,
        "lag": 17,
        "no_commit": False,
    }
    lag_window.observe(50, {TP0: (50, 50)}, {TP0: 50})  # partition 1's offset was deleted: forgotten
    assert [p.partition for p in lag_window.evaluate(55)] == [TP0]


def test_a_partition_without_a_commit_counts_from_its_reset_position() -> None:
    """Consumed but never committed: lag from the auto.offset.reset position, marked, not judged."""
    assert (reset_position("earliest", 4, 30), reset_position("latest", 4, 30)) == (4, 30)
    lag_window = LagWindow(3)
    for at in (10, 20, 30):
        lag_window.observe(
            at, {TP0: (30, at)}, {TP0: 30 + at, TP1: 12}, {TP1: reset_position("earliest", 2, 12)}
        )
    partitions = lag_window.evaluate(35)
    assert [(p.partition, p.lag, p.no_commit, p.status) for p in partitions] == [
        (TP0, 30, False, LagStatus.STALLED),  # its commits stand still
        (TP1, 10, True, LagStatus.OK),  # the same lag every time, but no commit to judge
    ]
    assert sum(p.lag for p in partitions) == 40  # in the group's total
    assert lag_window.samples()[TP1][-1].to_json() == {
        "observed_at_ms": 30,
        "committed_offset": 2,
        "committed_at_ms": 30,
        "log_end_offset": 12,
        "lag": 10,
        "no_commit": True,
    }
    # once committed, it is an ordinary partition
    lag_window.observe(40, {TP0: (70, 40), TP1: (12, 40)}, {TP0: 70, TP1: 12}, {TP1: 2})
    assert [(p.lag, p.no_commit) for p in lag_window.evaluate(45)] == [(0, False), (0, False)]


def test_window_needs_two_samples() -> None:
    with pytest.raises(ValueError, match="at least 2 samples, got 1"):
        LagWindow(window=1)


def test_commit_times_by_observation_for_offsets_without_a_commit_time() -> None:
    lag_window = LagWindow(window=3)
    # partition 0 moves at every observation, partition 1 stays at 7 from the first: t=0, 10, 20
    for t, offset in ((0, 10), (10, 20), (20, 30)):
        timed = lag_window.commit_times(t, {TP0: offset, TP1: 7})
        assert timed == {TP0: (offset, t), TP1: (7, 0)}
        lag_window.observe(t, timed, {TP0: 40 + t, TP1: 20})
    assert [(p.partition, p.status, p.lag) for p in lag_window.evaluate(25)] == [
        (TP0, LagStatus.WARNING, 30),  # moving, lag 30, 30, 30 never fell
        (TP1, LagStatus.STOPPED, 13),  # first seen at 0: 25 - 0 > 0 - 0
    ]
    # a rewind of partition 1 is a new offset: timed now
    assert lag_window.commit_times(30, {TP1: 3}) == {TP1: (3, 30)}
