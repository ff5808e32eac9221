"""The group total of a lag history (lumber/console/lag_history.py), over partitions observed at different
moments, and the points' JSON."""

from __future__ import annotations

from broker.record.topic_partition import TopicPartition
from lumber.console.lag_history import LagHistory, LagPoint

TP0 = TopicPartition("events", 0)
TP1 = TopicPartition("events", 1)


def test_total_counts_each_partition_at_its_latest_point() -> None:
    history = LagHistory(
        "test",
        {
            TP0: (LagPoint(10, 5, 8), LagPoint(30, 8, 12)),
            TP1: (LagPoint(20, 1, 4), LagPoint(30, 4, 6)),
        },
    )
    assert [(p.time_ms, p.committed, p.log_end, p.lag) for p in history.total] == [
        (10, 5, 8, 3),  # partition 1 has no point yet
        (20, 6, 12, 6),  # partition 0 still at its point of 10
        (30, 12, 18, 6),
    ]
    assert LagPoint(40, 9, 7).lag == 0  # a log end below the committed offset is no negative lag
    assert history.points(TopicPartition("events", 2)) == ()
    assert history.to_json() == {
        "source": "test",
        "note": None,
        "total": [
            {"time_ms": 10, "time": "1970-01-01T00:00:00.010Z", "committed": 5, "log_end": 8, "lag": 3},
            {"time_ms": 20, "time": "1970-01-01T00:00:00.020Z", "committed": 6, "log_end": 12, "lag": 6},
            {"time_ms": 30, "time": "1970-01-01T00:00:00.030Z", "committed": 12, "log_end": 18, "lag": 6},
        ],
    }


def test_no_points_no_total() -> None:
    history = LagHistory("none", note="why")
    assert (history.total, history.to_json()) == ((), {"source": "none", "note": "why", "total": []})
