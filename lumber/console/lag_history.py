"""A consumer group's lag over time: the points the group page draws as sparklines.

A :class:`LagPoint` is one moment of one partition: the group's committed offset then, the partition's log
end offset then, and the lag between them (never below 0). A :class:`LagHistory` holds each partition's
points, oldest first, and gives the group's total at every moment some partition has a point, each
partition counted at its latest point at or before that moment (partitions with no point yet count
nothing). It also says where the points came from and, when there are none, why.

The console keeps no state, so the history must already exist somewhere when a page is asked for:

* **kafka groups**: the coordinator's commits are records of ``__consumer_offsets``, each with its commit
  time; the ones still in the log give the committed offsets over time, and ListOffsets by timestamp the
  log ends at those times (:mod:`lumber.console.offsets_topic_reader`), as Burrow reads them;
* **zookeeper groups**: ZooKeeper keeps only each partition's last commit, so the history is the lag
  exporter's window of observations (``lumber groups lag --watch --metrics-port N``, served as JSON beside
  its metrics), read when ``[console] lag_exporter_url`` names it (:mod:`lumber.console.lag_exporter_reader`).

Value objects: immutable, thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.record.topic_partition import TopicPartition
from lumber.console.params import utc_iso


@dataclass(frozen=True, slots=True)
class LagPoint:
    """One partition (or the group's total) at ``time_ms``: committed offset, log end offset and lag."""

    time_ms: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "time_ms": self.time_ms,
            "time": utc_iso(self.time_ms),
            "committed": self.committed,
            "log_end": self.log_end,
            "lag": self.lag,
        }


@dataclass(frozen=True)
class LagHistory:
    """Each partition's points, oldest first; ``source`` says where they came from, ``note`` why there
    are none (or what limited them)."""

    source: str
    partitions: Mapping[TopicPartition, tuple[LagPoint, ...]] = field(default_factory=dict)
    note: str | None = None

    def points(self, tp: TopicPartition) -> tuple[LagPoint, ...]:
        return self.partitions.get(tp, ())

    @property
    def total(self) -> tuple[LagPoint, ...]:
        """The group's total at every moment of any partition's points: the sums of the committed and log
        end offsets of each partition's latest point at or before it."""
        moments = sorted({p.time_ms for points in self.partitions.values() for p in points})
        out = []
        for moment in moments:
            latest = [
                before[-1]
                for points in self.partitions.values()
                if (before := [p for p in points if p.time_ms <= moment])
            ]
            out.append(LagPoint(moment, sum(p.committed for p in latest), sum(p.log_end for p in latest)))
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        """The source, the note and the total (each partition's points go with its row of the page)."""
        return {
            "source": self.source,
            "note": self.note,
            "total": [p.to_json() for p in self.total],
        }
