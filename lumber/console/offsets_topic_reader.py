"""A kafka group's lag history, read from its commits still in ``__consumer_offsets`` (as Burrow reads them).

The group coordinator writes every OffsetCommit as records of the group's partition of
``__consumer_offsets`` (:func:`~broker.server.group.offsets_topic_records.partition_for`), one per
topic-partition, each value carrying its commit time. Compaction keeps only each partition's last commit,
but it never touches the active segment, so the recent commits are in the log. :func:`read_kafka_history`
reads them with a consumer of its own (closed once they are read: a fetch it holds at the log end would
delay the ListOffsets requests of step 4 on the same connection), in numbered steps:

1. **The range.** The group's partition of the offsets topic holds every group that hashes to it. It is
   read no further back than its log start and the first offset stamped at or after ``now - window``
   (ListOffsets by timestamp), and at most its last ``MAX_RECORDS`` records, whatever the other groups
   commit: the budget bounds a page's work.
2. **The commits.** It is read backwards from the log end in chunks, each read forwards, the first of
   ``FIRST_CHUNK_RECORDS`` and each next one twice as large (up to ``MAX_CHUNK_RECORDS``), until step 3
   has its moments or the range is read: an active group's page reads only its last commits. Each record
   is decoded with the coordinator's own layouts (:mod:`broker.server.group.offsets_topic_records`; other
   groups' keys are told by their first bytes, undecoded); the offset commits of this group are kept as
   ``(commit time, topic-partition, offset)``, a tombstone (the offset deleted) as the partition's end.
   Group metadata is skipped; a record that does not decode is skipped and counted in the history's
   note.
3. **The moments.** The distinct commit times in the window (commits of one millisecond are one moment),
   the last ``MAX_POINTS`` of them.
4. **The log ends.** At each moment ``t``, one ListOffsets by timestamp for every committed partition asks
   for the first offset stamped after ``t`` (``t + 1``): the records stamped at or before the commit count
   as in the log then (Kafka's ``offsetsForTimes``). A partition with no record after ``t`` had its whole
   present log: its log end now. A log end below the committed offset (records stamped later than they
   were appended) is raised to it: the commit proves the log held that much.
5. **The points.** At each moment, each partition with a commit at or before it (and not deleted since)
   gets a point: its latest commit then, its log end then. A partition whose last commit is older than
   the chunks read has no points (its total is left out of the group's).

Where Lumber differs from Burrow: Burrow consumes ``__consumer_offsets`` continuously and keeps the
commits in memory; the console keeps nothing, so it reads them again for each page, from the log, bounded
as step 1 says (a quiet group whose partition of the offsets topic is flooded by other groups' commits
past the budget shows no history, and the note says why). With producers' timestamps (CreateTime), step
4 counts the records by their stamps: a producer whose clock runs ahead makes the log end at a moment look
shorter.

Not thread-safe: it uses the request's :class:`~lumber.console.sources.Sources`.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_record import ConsumerRecord
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

#: Step 2: records of the group's offsets partition read at most per page; the first chunk's records,
#: doubled for each next chunk up to the last.
MAX_RECORDS = 50_000
FIRST_CHUNK_RECORDS = 1_000
MAX_CHUNK_RECORDS = 16_000
#: Step 3: moments drawn at most (one ListOffsets request each).
MAX_POINTS = 60
_POLL_MS = 100
#: The reading consumer's fetch wait: it stops at the log end it saw, so a fetch held there only delays it.
_READER_FETCH_MAX_WAIT_MS = 20
#: ... and its fetch size and prefetch: small, since a chunk's read must not run on through the chunks
#: after it, which were read already.
_READER_FETCH_BYTES = 128 * 1024


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
    first = max(log_start, log_end if in_window is None else in_window)
    # 2. the commits, 3. the moments
    scan = _scan(sources, tp, first, log_end, group, since_ms)
    source = f"{tp} [{scan.start}, {log_end})"
    notes = []
    if scan.start > first and len(scan.moments) < MAX_POINTS:
        notes.append(f"only the last {MAX_RECORDS} records of {tp} were read")
    if scan.undecodable:
        notes.append(f"{scan.undecodable} records of {tp} did not decode and were skipped")
    if not scan.commits:
        notes.append(f"no commit of group {group!r} in {tp} since {utc_iso(since_ms)}")
        return LagHistory(source, note="; ".join(notes))
    # 4. the log ends, 5. the points
    points: dict[TopicPartition, list[LagPoint]] = {}
    partitions = sorted(scan.commits)
    ends_now = consumer.end_offsets(partitions)
    times = {partition: [c.time_ms for c in found] for partition, found in scan.commits.items()}
    for moment in scan.moments:
        ends = consumer.offsets_for_times(dict.fromkeys(partitions, moment + 1))
        for partition in partitions:
            found = scan.commits[partition]
            index = bisect.bisect_right(times[partition], moment) - 1
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


@dataclass
class _Scan:
    """What steps 2 and 3 found: each topic-partition's commits by time, the moments, where the read
    started, and how many records did not decode."""

    start: int
    commits: dict[TopicPartition, list[_Commit]] = field(default_factory=dict)
    moments: list[int] = field(default_factory=list)
    undecodable: int = 0


def _scan(sources: Sources, tp: TopicPartition, first: int, until: int, group: str, since_ms: int) -> _Scan:
    """Steps 2 and 3: read ``tp`` backwards from ``until`` in growing chunks, down to
    ``first`` at most, until ``MAX_POINTS`` commit times of ``group`` at or after ``since_ms`` are found
    or ``MAX_RECORDS`` were read."""
    scan = _Scan(until)
    if first >= until:
        return scan
    chunks: list[list[tuple[TopicPartition, _Commit]]] = []
    times: set[int] = set()
    settings = sources.consumer_settings().replace(
        fetch_max_wait_ms=_READER_FETCH_MAX_WAIT_MS,
        max_partition_fetch_bytes=_READER_FETCH_BYTES,
        max_prefetch_bytes=_READER_FETCH_BYTES,
    )
    with Consumer(settings, partitions=[tp]) as consumer:
        reader = _ChunkReader(sources, consumer, tp, group)
        chunk = FIRST_CHUNK_RECORDS
        while scan.start > first and len(times) < MAX_POINTS and until - scan.start < MAX_RECORDS:
            chunk_start = max(first, scan.start - chunk, until - MAX_RECORDS)
            chunk = min(2 * chunk, MAX_CHUNK_RECORDS)
            found = reader.read(chunk_start, scan.start)
            chunks.append(found)
            times.update(c.time_ms for _, c in found if c.time_ms >= since_ms)
            scan.start = chunk_start
        scan.undecodable = reader.undecodable
    for found in reversed(chunks):  # oldest chunk first: log order, which is commit order
        for partition, commit in found:
            scan.commits.setdefault(partition, []).append(commit)
    for commits in scan.commits.values():
        commits.sort(key=lambda c: c.time_ms)  # stable: commits of one millisecond stay in log order
    scan.moments = sorted(times)[-MAX_POINTS:]
    return scan


class _ChunkReader:
    """Reads ``group``'s commits from ranges of ``tp`` with one consumer, counting undecodable records."""

    def __init__(self, sources: Sources, consumer: Consumer, tp: TopicPartition, group: str) -> None:
        self.sources = sources
        self.consumer = consumer
        self.tp = tp
        self.group = group
        self.prefix = group_key_prefix(group)
        self.undecodable = 0

    def read(self, start: int, until: int) -> list[tuple[TopicPartition, _Commit]]:
        """The group's commits in ``[start, until)``, in log order."""
        consumer, tp = self.consumer, self.tp
        consumer.seek(tp, start)
        out: list[tuple[TopicPartition, _Commit]] = []
        deadline = time.monotonic() + self.sources.timeout_ms / 1000
        next_offset = start
        while next_offset < until:
            if time.monotonic() > deadline:
                raise SourceUnavailableError(
                    f"{tp}: read up to offset {next_offset} of [{start}, {until}) within "
                    f"{self.sources.timeout_ms} ms"
                )
            for record in consumer.poll(timeout_ms=_POLL_MS):
                if not start <= record.offset < until:
                    continue
                next_offset = record.offset + 1
                found = self._commit(record)
                if found is not None:
                    out.append(found)
            next_offset = max(next_offset, consumer.position(tp, timeout_ms=0))
        return out

    def _commit(self, record: ConsumerRecord) -> tuple[TopicPartition, _Commit] | None:
        if record.key is None:
            self.undecodable += 1
            return None
        if not record.key.startswith(self.prefix, 2):
            return None  # another group's
        where = f"{self.tp}@{record.offset}"
        try:
            key = decode_key(record.key, where)
            if not isinstance(key, OffsetCommitKey) or key.group != self.group:
                return None
            value = None if record.value is None else decode_offset_commit_value(record.value, where)
        except OffsetsRecordError:
            self.undecodable += 1
            return None
        commit = (
            _Commit(record.timestamp_ms, None)
            if value is None
            else _Commit(value.commit_timestamp, value.offset)
        )
        return TopicPartition(key.topic, key.partition), commit
