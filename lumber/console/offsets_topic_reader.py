"""A kafka group's lag history, read from its commits still in ``__consumer_offsets`` (as Burrow reads them).

The group coordinator writes every OffsetCommit as records of the group's partition of
``__consumer_offsets`` (:func:`~broker.server.group.offsets_topic_records.partition_for`), one per
topic-partition, each value carrying its commit time. Compaction keeps only each partition's last commit,
but it never touches the active segment, so the recent commits are in the log. :func:`read_kafka_history`
reads them with a consumer of its own (closed once they are read: a fetch it holds at the log end would
delay the ListOffsets requests of step 4 on the same connection), in numbered steps:

1. **The range.** The group's partition of the offsets topic is read over ``[start, log end)``, ``start``
   the latest of: its log start, the first offset stamped at or after ``now - window`` (ListOffsets by
   timestamp), and ``log end - MAX_RECORDS`` (the partition holds every group that hashes to it: the
   budget bounds a page's work whatever they commit).
2. **The commits.** Each record is decoded with the coordinator's own layouts
   (:mod:`broker.server.group.offsets_topic_records`; other groups' keys are told by their first bytes,
   undecoded); the offset commits of this group are kept as
   ``(commit time, topic-partition, offset)``, a tombstone (the offset deleted) as the partition's end.
   Other groups' records and group metadata are skipped; a record that does not decode is skipped and
   counted in the history's note.
3. **The moments.** The distinct commit times, the last ``MAX_POINTS`` of them.
4. **The log ends.** At each moment ``t``, one ListOffsets by timestamp for every committed partition asks
   for the first offset stamped after ``t`` (``t + 1``): the records stamped at or before the commit count
   as in the log then (Kafka's ``offsetsForTimes``). A partition with no record after ``t`` had its whole
   present log: its log end now. A log end below the committed offset (records stamped later than they
   were appended) is raised to it: the commit proves the log held that much.
5. **The points.** At each moment, each partition with a commit at or before it (and not deleted since)
   gets a point: its latest commit then, its log end then.

Where Lumber differs from Burrow: Burrow consumes ``__consumer_offsets`` continuously and keeps the
commits in memory; the console keeps nothing, so it reads them again for each page, from the log, bounded
as step 1 says. With producers' timestamps (CreateTime), step 4 counts the records by their stamps: a
producer whose clock runs ahead makes the log end at a moment look shorter.

Not thread-safe: it uses the request's :class:`~lumber.console.sources.Sources`.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass

from broker.client.consumer import Consumer
from broker.client.errors import ClientError
from broker.record.topic_partition import TopicPartition
from broker.server.group.offsets_topic_records import (
    OFFSETS_TOPIC,
    OffsetCommitKey,
    OffsetsRecordError,
    decode_key,
    decode_offset_commit_value,
    group_key_prefix,
    partition_for,
)
from lumber.console.errors import SourceUnavailableError
from lumber.console.lag_history import LagHistory, LagPoint
from lumber.console.params import utc_iso
from lumber.console.sources import Sources

#: Step 1: records of the group's offsets partition read at most, per page.
MAX_RECORDS = 50_000
#: Step 3: moments drawn at most (one ListOffsets request each).
MAX_POINTS = 60
_POLL_MS = 100
#: The reading consumer's fetch wait: it stops at the log end it saw, so a fetch held there only delays it.
_READER_FETCH_MAX_WAIT_MS = 20


@dataclass(frozen=True, slots=True)
class _Commit:
    time_ms: int
    offset: int | None  # None: the offset was deleted (a tombstone)


def read_kafka_history(sources: Sources, group: str, window_ms: int) -> LagHistory:
    """``group``'s lag per partition over the last ``window_ms`` (see the module docstring); when the
    offsets topic cannot be read (its leader down, the read too slow), no points and a note saying so:
    the rest of the page does not depend on them."""
    try:
        return _read(sources, group, window_ms)
    except (ClientError, SourceUnavailableError) as exc:
        return LagHistory(OFFSETS_TOPIC, note=f"the commits in {OFFSETS_TOPIC} could not be read: {exc}")


def _read(sources: Sources, group: str, window_ms: int) -> LagHistory:
    consumer = sources.consumer
    count = len(consumer.partitions_for(OFFSETS_TOPIC, timeout_ms=sources.timeout_ms))
    tp = TopicPartition(OFFSETS_TOPIC, partition_for(group, count))
    now_ms = time.time_ns() // 1_000_000
    since_ms = max(now_ms - window_ms, 0)
    # 1. the range
    log_start = consumer.beginning_offsets([tp])[tp]
    log_end = consumer.end_offsets([tp])[tp]
    in_window = consumer.offsets_for_times({tp: since_ms})[tp]
    first = log_end if in_window is None else in_window
    start = max(log_start, first, log_end - MAX_RECORDS)
    source = f"{tp} [{start}, {log_end})"
    # 2. the commits
    commits, undecodable = _commits(sources, tp, start, log_end, group)
    notes = []
    if first < log_end - MAX_RECORDS:
        notes.append(f"only the last {MAX_RECORDS} records of {tp} were read")
    if undecodable:
        notes.append(f"{undecodable} records of {tp} did not decode and were skipped")
    if not commits:
        notes.append(f"no commit of group {group!r} in {tp} since {utc_iso(since_ms)}")
        return LagHistory(source, note="; ".join(notes))
    # 3. the moments
    every_moment = sorted({c.time_ms for found in commits.values() for c in found})
    moments = every_moment[-MAX_POINTS:]
    if len(every_moment) > MAX_POINTS:
        notes.append(f"the last {MAX_POINTS} of {len(every_moment)} commit times")
    # 4. the log ends, 5. the points
    points: dict[TopicPartition, list[LagPoint]] = {}
    partitions = sorted(commits)
    ends_now = consumer.end_offsets(partitions)
    for moment in moments:
        ends = consumer.offsets_for_times(dict.fromkeys(partitions, moment + 1))
        for partition in partitions:
            found = commits[partition]
            index = bisect.bisect_right([c.time_ms for c in found], moment) - 1
            committed = found[index].offset if index >= 0 else None
            if committed is None:
                continue
            end = ends[partition]
            end = max(ends_now[partition] if end is None else end, committed)
            points.setdefault(partition, []).append(LagPoint(moment, committed, end))
    return LagHistory(
        source,
        {partition: tuple(found) for partition, found in points.items()},
        note="; ".join(notes) or None,
    )


def _commits(
    sources: Sources, tp: TopicPartition, start: int, until: int, group: str
) -> tuple[dict[TopicPartition, list[_Commit]], int]:
    """Steps 1 and 2: ``group``'s commits in ``tp``'s ``[start, until)`` per topic-partition, by commit
    time, and the count of records that did not decode."""
    if start >= until:
        return {}, 0
    settings = sources.consumer_settings().replace(fetch_max_wait_ms=_READER_FETCH_MAX_WAIT_MS)
    with Consumer(settings, partitions=[tp]) as consumer:
        consumer.seek(tp, start)
        return _read_commits(sources, consumer, tp, start, until, group)


def _read_commits(
    sources: Sources, consumer: Consumer, tp: TopicPartition, start: int, until: int, group: str
) -> tuple[dict[TopicPartition, list[_Commit]], int]:
    commits: dict[TopicPartition, list[_Commit]] = {}
    undecodable = 0
    prefix = group_key_prefix(group)
    deadline = time.monotonic() + sources.timeout_ms / 1000
    next_offset = start
    while next_offset < until:
        if time.monotonic() > deadline:
            raise SourceUnavailableError(
                f"{tp}: read up to offset {next_offset} of [{start}, {until}) within {sources.timeout_ms} ms"
            )
        for record in consumer.poll(timeout_ms=_POLL_MS):
            if not start <= record.offset < until:
                continue
            next_offset = record.offset + 1
            if record.key is None:
                undecodable += 1
                continue
            if not record.key.startswith(prefix, 2):
                continue  # another group's
            where = f"{tp}@{record.offset}"
            try:
                key = decode_key(record.key, where)
                if not isinstance(key, OffsetCommitKey) or key.group != group:
                    continue
                value = None if record.value is None else decode_offset_commit_value(record.value, where)
            except OffsetsRecordError:
                undecodable += 1
                continue
            commit = (
                _Commit(record.timestamp_ms, None)
                if value is None
                else _Commit(value.commit_timestamp, value.offset)
            )
            commits.setdefault(TopicPartition(key.topic, key.partition), []).append(commit)
        next_offset = max(next_offset, consumer.position(tp, timeout_ms=0))
    for found in commits.values():
        found.sort(key=lambda c: c.time_ms)  # stable: commits of one millisecond stay in log order
    return commits, undecodable
