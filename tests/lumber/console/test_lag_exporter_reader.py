"""The console's reading of the lag exporter's window (lumber/console/lag_exporter_reader.py)."""

from __future__ import annotations

from broker.record.topic_partition import TopicPartition
from lumber.console.lag_exporter_reader import _points
from lumber.console.lag_history import LagPoint


def sample(at: int, committed: int, end: int, *, no_commit: bool = False) -> dict[str, object]:
    return {
        "observed_at_ms": at,
        "committed_offset": committed,
        "committed_at_ms": at,
        "log_end_offset": end,
        "lag": end - committed,
        "no_commit": no_commit,
    }


def test_samples_before_the_first_commit_are_no_points_of_the_history() -> None:
    # the exporter saw the member own the partition before it committed: lag from the reset position (the
    # log end), which the history must not show as a commit at 10 (it did, in CI: (10, 10, 0) first)
    partitions = [
        {
            "topic": "t",
            "partition": 0,
            "samples": [sample(100, 10, 10, no_commit=True), sample(200, 3, 10), sample(300, 3, 14)],
        }
    ]
    assert _points(partitions) == {
        TopicPartition("t", 0): (LagPoint(200, 3, 10), LagPoint(300, 3, 14)),
    }
