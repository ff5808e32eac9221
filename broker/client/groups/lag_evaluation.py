"""Burrow's evaluation of a consumer group: OK, WARNING, STALLED or STOPPED from the movement of its offsets.

LinkedIn's Burrow judges a group not by one lag figure (a threshold on lag says nothing: a busy topic is
always some messages behind) but by how the committed offsets and the lag moved over a window of
observations. :class:`LagWindow` keeps the last ``window`` :class:`LagSample` of every partition (one per
call of :meth:`LagWindow.observe`: the committed offset, when it was committed, and the log end offset at
that moment); :func:`evaluate` applies Burrow's rules, in Burrow's order, to one partition's window:

1. any sample with lag 0: **OK** (the consumer caught up at some point of the window);
2. fewer than 2 samples: **OK** (nothing to judge yet; :attr:`PartitionLag.complete` is false);
3. the committed offset went backwards between two samples: **OK** (a rewind: someone reset the offsets);
4. ``now - last commit > last commit - first commit`` (commit times of the window's samples): **STOPPED**,
   the consumer stopped committing (for ZooKeeper groups: no member commits, the group is dead or stuck);
5. the committed offset never changed over the window (while commits kept coming): **STALLED**;
6. the lag never decreased from one sample to the next: **WARNING** (consuming, but not keeping up);
7. otherwise **OK**.

The group's status is its worst partition's (STOPPED > STALLED > WARNING > OK). Observations should be
spaced so that the window spans several commit intervals (``[group] auto_commit_interval_ms``), as
Burrow's window spans several commits: a window shorter than one commit interval sees one commit and
calls a lagging group STOPPED. Lumber's ZooKeeper groups only rewrite an offset that moved, so a consumer
that is alive but stuck shows as STOPPED rather than STALLED.

Kafka-protocol groups: OffsetFetch answers offsets without their commit time (Burrow reads the commit
times off ``__consumer_offsets`` itself). Lumber times their commits by observation instead
(:meth:`LagWindow.commit_times`): an offset is taken as committed when an observation first saw it, so, as
for ZooKeeper groups, a consumer that keeps committing the same offset shows as STOPPED, not STALLED.

A partition the group consumes but has never committed is not left out (its lag would be missing from the
group's total, as Burrow and kafka-lag-exporter would not miss it): its lag is measured from where the
group's consumers would start, the ``auto.offset.reset`` position (:func:`reset_position`: the log start
for ``earliest``, the log end for ``latest``), and its samples say ``no_commit``. Such a partition is not
judged (there are no commits to judge): OK, with its lag in the total.

Pure computation over samples, plus :class:`LagWindow`'s deques; not thread-safe (one watcher thread).
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.record.topic_partition import TopicPartition


class LagStatus(enum.IntEnum):
    """Burrow's partition statuses, ordered by severity (the group takes the worst)."""

    OK = 0
    WARNING = 1
    STALLED = 2
    STOPPED = 3


@dataclass(frozen=True, slots=True)
class LagSample:
    """One observation of a partition: the group's committed offset and the log end offset."""

    observed_at_ms: int
    #: the committed offset, or with ``no_commit`` the ``auto.offset.reset`` position lag is measured from
    committed_offset: int
    committed_at_ms: int
    log_end_offset: int
    #: the group has no committed offset for the partition
    no_commit: bool = False

    @property
    def lag(self) -> int:
        return max(self.log_end_offset - self.committed_offset, 0)

    def to_json(self) -> dict[str, int | bool]:
        return {
            "observed_at_ms": self.observed_at_ms,
            "committed_offset": self.committed_offset,
            "committed_at_ms": self.committed_at_ms,
            "log_end_offset": self.log_end_offset,
            "lag": self.lag,
            "no_commit": self.no_commit,
        }


def reset_position(policy: str, log_start_offset: int, log_end_offset: int) -> int:
    """Where a consumer of a partition without a committed offset starts (``auto.offset.reset``): the log
    start for ``earliest``, the log end otherwise (``latest``; ``none`` would fail: nothing is consumed)."""
    return log_start_offset if policy == "earliest" else log_end_offset


@dataclass(frozen=True)
class PartitionLag:
    """A partition's evaluation: its status, its latest sample, and whether the window was full."""

    partition: TopicPartition
    status: LagStatus
    latest: LagSample
    samples: int
    complete: bool

    @property
    def lag(self) -> int:
        return self.latest.lag

    @property
    def no_commit(self) -> bool:
        return self.latest.no_commit


def evaluate(samples: Sequence[LagSample], now_ms: int) -> LagStatus:
    """Burrow's rules over one partition's window, oldest sample first (see the module docstring)."""
    if not samples or samples[-1].no_commit or any(s.lag == 0 for s in samples):
        return LagStatus.OK
    if len(samples) < 2:
        return LagStatus.OK
    pairs = list(itertools.pairwise(samples))
    if any(b.committed_offset < a.committed_offset for a, b in pairs):
        return LagStatus.OK
    first, last = samples[0].committed_at_ms, samples[-1].committed_at_ms
    if now_ms - last > last - first:
        return LagStatus.STOPPED
    if all(b.committed_offset == a.committed_offset for a, b in pairs):
        return LagStatus.STALLED
    if all(b.lag >= a.lag for a, b in pairs):
        return LagStatus.WARNING
    return LagStatus.OK


class LagWindow:
    """The last ``window`` samples of each partition of one group (see the module docstring)."""

    def __init__(self, window: int = 10) -> None:
        if window < 2:
            raise ValueError(f"a lag window needs at least 2 samples, got {window}")
        self.window = window
        self._samples: dict[TopicPartition, deque[LagSample]] = {}

    def observe(
        self,
        observed_at_ms: int,
        committed: Mapping[TopicPartition, tuple[int, int]],
        log_ends: Mapping[TopicPartition, int],
        uncommitted: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Add one sample per partition that has both a committed offset (``(offset, committed_at_ms)``)
        and a log end, and one per partition of ``uncommitted`` (the group consumes it, has no commit:
        its :func:`reset_position`) that has a log end; partitions in neither are forgotten."""
        without = {tp: at for tp, at in (uncommitted or {}).items() if tp not in committed}
        for tp in [tp for tp in self._samples if tp not in committed and tp not in without]:
            del self._samples[tp]
        for tp, (offset, committed_at_ms) in committed.items():
            end = log_ends.get(tp)
            if end is None:
                continue
            found = self._samples.setdefault(tp, deque(maxlen=self.window))
            found.append(LagSample(observed_at_ms, offset, committed_at_ms, end))
        for tp, position in without.items():
            end = log_ends.get(tp)
            if end is None:
                continue
            found = self._samples.setdefault(tp, deque(maxlen=self.window))
            found.append(LagSample(observed_at_ms, position, observed_at_ms, end, no_commit=True))

    def commit_times(
        self, observed_at_ms: int, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """``offsets`` with the time each was committed, for a group whose offsets come without one (a
        kafka group): the commit time of the partition's latest sample if it had the same offset, else
        ``observed_at_ms`` (the offset is new or moved since the last observation)."""
        timed = {}
        for tp, offset in offsets.items():
            found = self._samples.get(tp)
            latest = found[-1] if found else None
            same = latest is not None and latest.committed_offset == offset
            timed[tp] = (offset, latest.committed_at_ms if latest is not None and same else observed_at_ms)
        return timed

    def samples(self) -> dict[TopicPartition, tuple[LagSample, ...]]:
        """Every partition's window, oldest sample first, sorted by partition (a copy)."""
        return {tp: tuple(found) for tp, found in sorted(self._samples.items())}

    def evaluate(self, now_ms: int) -> list[PartitionLag]:
        """Every partition's status, sorted by partition."""
        return [
            PartitionLag(tp, evaluate(list(found), now_ms), found[-1], len(found), len(found) == self.window)
            for tp, found in sorted(self._samples.items())
        ]


def group_status(partitions: Sequence[PartitionLag]) -> LagStatus:
    """The worst partition status (OK for a group with no committed partition)."""
    return max((p.status for p in partitions), default=LagStatus.OK)
