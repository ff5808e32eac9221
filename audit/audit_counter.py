"""The producer tier of the audit: count what the brokers confirmed, per (topic, window of creation time).

The paper's producers "periodically generate a monitoring event, which records the number of messages
published by that producer for each topic within a fixed time window" (section 4). An :class:`AuditCounter`
does the counting for one producer object (or, of tier ``mirror``, for one mirror, which feeds it with
:meth:`AuditCounter.count_runs`); :mod:`audit.audit_emitter` publishes what it counted.

How a record is counted: the producer's delivery path tells the producer's delivery listener (the
:class:`~audit.audit_emitter.AuditEmitter`) of every batch once it is done, and the listener hands it to
:meth:`AuditCounter.count_batch`:

1. a batch that succeeded: its records
   (:meth:`~broker.client.producer.producer_batch.ProducerBatch.record_runs`, runs sharing a timestamp) are
   added per window of their timestamp (count and value bytes). With ``acks`` 1 or ``all`` completion is the
   broker's confirmation, so only confirmed records count; with ``acks`` 0 a batch succeeds when it is written
   to the socket (nothing better is known);
2. a batch that failed (refused, expired, closed): its records are counted as failed, not in the windows;
3. a raw batch (``send_batch``: records produced and counted elsewhere) is not counted;
4. :meth:`AuditCounter.take`: the counts since the previous take become :class:`AuditEvent` deltas, one per
   (topic, window), all numbered with the next ``sequence`` (1, 2, ...). The event id is derived from
   (host, this counter's instance id, topic, window, sequence), so a re-sent event repeats its id.

Records of the audit topic itself are not counted. A record whose timestamp is negative (no creation time)
is counted as ``missing_timestamp_count`` in the window of the moment it was confirmed, not in ``count``.
The counts are per producer object (``counter``: client id plus a random suffix): two producers on one host
emit distinct events, and a restarted producer never reuses an id (with a journal, below, it goes on with
its predecessor's counter id and next sequence, so neither does it).

**The journal** (``[audit] state_dir``: :mod:`audit.audit_journal`). A counter given an
:class:`~audit.audit_journal.AuditJournal` writes every count to it under its lock before
:meth:`count_runs` returns (so before the producer's callbacks, which run after the delivery listener, and
before the mirror commits), every take with its events, and every sequence confirmed
(:meth:`AuditCounter.published`). Built on a journal a previous process left, it takes that journal's
counter id (the event ids go on from where it stopped), its last sequence, its events taken and not
confirmed (:meth:`AuditCounter.recovered`, which the emitter publishes again with their ids) and its counts
not taken yet, which it takes at once as the next sequence, in the window they were counted in. Without a
journal the counts live in memory only: a process killed before its next emission loses them.

**Counting by source offset** (the mirror: :meth:`count_offsets`). The records are given with their
source (topic, partition, offset); an offset already counted (it is in the counted ranges, journaled with
the counts) is not counted again but tallied as :attr:`recopied`: a copy made again after a restart from
the last committed offset counts once.

Thread-safe: one lock guards the counts; ``count_batch`` runs in whichever thread completes a batch (it
tallies the batch outside the lock), ``take`` in the emitter's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from audit.audit_event import AuditEvent, AuditTier, mirror_event_id, producer_event_id
from audit.audit_journal import (
    AuditJournal,
    Cells,
    Ranges,
    add_cell,
    add_range,
    count_entry,
    covered,
    open_entry,
    take_entry,
)
from broker.clock import Clock, system_clock_ms

if TYPE_CHECKING:
    from broker.client.producer.producer_batch import ProducerBatch


@dataclass(slots=True)
class WindowCounts:
    """Messages and value bytes in one window, and messages without a timestamp counted there."""

    count: int = 0
    bytes: int = 0
    missing_timestamp_count: int = 0

    def add(self, other: WindowCounts) -> None:
        self.count += other.count
        self.bytes += other.bytes
        self.missing_timestamp_count += other.missing_timestamp_count


class AuditCounter:
    """Counts one producer's confirmed records per (topic, window); see the module docstring."""

    def __init__(
        self,
        *,
        host: str,
        counter: str,
        window_ms: int,
        audit_topic: str,
        clock_ms: Clock = system_clock_ms,
        tier: AuditTier = "producer",
        journal: AuditJournal | None = None,
    ) -> None:
        """``counter`` names this instance in the event ids, unless ``journal`` already has a counter id
        (see the module docstring)."""
        if window_ms <= 0:
            raise ValueError(f"audit window_ms must be positive, got {window_ms}")
        self.host = host
        self.counter = counter
        self.window_ms = window_ms
        self.audit_topic = audit_topic
        if tier == "load":
            raise ValueError(
                "an AuditCounter counts the producer or the mirror tier; the load's counts are its"
            )
        self.tier = tier
        self._event_id = producer_event_id if tier == "producer" else mirror_event_id
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        #: confirmed since the last take, per (topic, window start)
        self._unreported: dict[tuple[str, int], WindowCounts] = {}
        #: confirmed since the counter started, per (topic, window start)
        self._totals: dict[tuple[str, int], WindowCounts] = {}
        self._sequence = 0
        self.failed_records = 0
        #: records counted already (by source offset) and acknowledged again: see :meth:`count_offsets`
        self.recopied = 0
        self._ranges: Ranges = {}
        self._recovered: list[AuditEvent] = []
        self._journal = journal
        if journal is not None:
            self._recover(journal)

    def _recover(self, journal: AuditJournal) -> None:
        state = journal.state
        if state.counter:
            self.counter = state.counter
        self._sequence = state.sequence
        self._ranges = {key: [list(span) for span in spans] for key, spans in state.ranges.items()}
        self._recovered = [e for _, events in sorted(state.pending.items()) for e in events]
        if state.cells:  # counted by a process that stopped before taking them: the next sequence
            self._sequence += 1
            events = self._events(state.cells, state.window_ms or self.window_ms, self._sequence)
            journal.append(take_entry(self._sequence, events))
            self._recovered.extend(events)
            state.pending[self._sequence] = events
            state.cells = {}
        journal.append(open_entry(self.counter, self.tier, self.host, self.window_ms))

    @property
    def journal(self) -> AuditJournal | None:
        return self._journal

    def recovered(self) -> list[AuditEvent]:
        """The events a previous process took (or counted) and did not see confirmed: to publish again."""
        with self._lock:
            out, self._recovered = self._recovered, []
            return out

    # ---------------------------------------------------------------------------------- delivery path

    def count_batch(self, batch: ProducerBatch, error: BaseException | None) -> None:
        """``batch`` is done: count its records if it succeeded (see the module docstring)."""
        if batch.is_raw or batch.topic == self.audit_topic:
            return
        if error is not None:
            with self._lock:
                self.failed_records += batch.count
            return
        self.count_runs(batch.topic, batch.record_runs())

    def count_runs(self, topic: str, runs: Iterable[tuple[int, int, int]]) -> None:
        """Count records of ``topic`` confirmed by the brokers, given as runs of (timestamp, record count,
        value bytes) (the mirror passes one run per record). Records of the audit topic are not counted."""
        if topic == self.audit_topic:
            return
        window_ms = self.window_ms
        windows: dict[int | None, WindowCounts] = {}
        for timestamp_ms, record_count, value_bytes in runs:
            key = None if timestamp_ms < 0 else timestamp_ms - timestamp_ms % window_ms
            counts = windows.get(key)
            if counts is None:
                counts = windows[key] = WindowCounts()
            if key is None:
                counts.missing_timestamp_count += record_count
            else:
                counts.count += record_count
            counts.bytes += value_bytes
        if not windows:
            return
        with self._lock:
            self._add_locked(topic, windows, None)

    def _add_locked(self, topic: str, windows: dict[int | None, WindowCounts], ranges: Ranges | None) -> None:
        """Add ``windows`` of ``topic`` (and the source ranges they are of) and journal them; the lock is
        held."""
        window_ms = self.window_ms
        cells: Cells = {}
        for start, counts in windows.items():
            if start is None:
                now = self._clock_ms()
                at = (topic, now - now % window_ms)
            else:
                at = (topic, start)
            if self._journal is not None:
                add_cell(cells, at, counts.count, counts.bytes, counts.missing_timestamp_count)
            for table in (self._unreported, self._totals):
                found = table.get(at)
                if found is None:
                    found = table[at] = WindowCounts()
                found.add(counts)
        if self._journal is not None:
            self._journal.append(count_entry(cells, ranges))

    def count_offsets(self, topic: str, partition: int, records: Sequence[tuple[int, int, int]]) -> int:
        """Count records of ``topic`` partition ``partition`` of the source, given as (offset, timestamp,
        value bytes), unless their offset was counted before (then they add to :attr:`recopied`); returns
        how many were counted. Records of the audit topic are not counted."""
        if topic == self.audit_topic or not records:
            return 0
        window_ms = self.window_ms
        key = (topic, partition)
        with self._lock:
            windows: dict[int | None, WindowCounts] = {}
            spans: list[list[int]] = []  # the offsets counted now, as [from, to) runs
            counted = 0
            for offset, timestamp_ms, value_bytes in records:
                if covered(self._ranges, key, offset):
                    self.recopied += 1
                    continue
                counted += 1
                if spans and spans[-1][1] == offset:
                    spans[-1][1] = offset + 1
                else:
                    spans.append([offset, offset + 1])
                start = None if timestamp_ms < 0 else timestamp_ms - timestamp_ms % window_ms
                counts = windows.get(start)
                if counts is None:
                    counts = windows[start] = WindowCounts()
                if start is None:
                    counts.missing_timestamp_count += 1
                else:
                    counts.count += 1
                counts.bytes += value_bytes
            if not counted:
                return 0
            fresh: Ranges = {}
            for a, b in spans:
                add_range(fresh, key, a, b)
                add_range(self._ranges, key, a, b)
            self._add_locked(topic, windows, fresh)
            return counted

    # ---------------------------------------------------------------------------------- reporting

    def take(self) -> list[AuditEvent]:
        """The counts confirmed since the last take, as events of the next sequence ([] when none)."""
        with self._lock:
            if not self._unreported:
                return []
            self._sequence += 1
            sequence = self._sequence
            unreported, self._unreported = self._unreported, {}
            cells: Cells = {
                key: [c.count, c.bytes, c.missing_timestamp_count] for key, c in unreported.items()
            }
            events = self._events(cells, self.window_ms, sequence)
            if self._journal is not None:
                self._journal.append(take_entry(sequence, events))
                self._journal.state.pending[sequence] = events
        return events

    def published(self, sequence: int) -> None:
        """Every event of ``sequence`` is confirmed: journal it (and compact a large journal)."""
        journal = self._journal
        if journal is None:
            return
        with self._lock:
            journal.append({"k": "done", "s": sequence})
            state = journal.state
            state.pending.pop(sequence, None)
            if journal.size > journal.compact_bytes:
                state.counter, state.tier, state.host = self.counter, self.tier, self.host
                state.window_ms, state.sequence = self.window_ms, self._sequence
                state.cells = {
                    key: [c.count, c.bytes, c.missing_timestamp_count] for key, c in self._unreported.items()
                }
                state.ranges = self._ranges
                journal.compact(state)

    def _events(self, cells: Cells, window_ms: int, sequence: int) -> list[AuditEvent]:
        """``cells`` as the events of ``sequence`` (counted in windows of ``window_ms``)."""
        emitted_at_ms = self._clock_ms()
        return [
            AuditEvent(
                topic=topic,
                tier=self.tier,
                host=self.host,
                window_start_ms=window_start_ms,
                window_ms=window_ms,
                count=count,
                bytes=size,
                malformed_count=0,
                missing_timestamp_count=missing,
                event_id=self._event_id(self.host, self.counter, topic, window_start_ms, window_ms, sequence),
                emitted_at_ms=emitted_at_ms,
                counter=self.counter,
                sequence=sequence,
            )
            for (topic, window_start_ms), (count, size, missing) in sorted(cells.items())
        ]

    def totals(self) -> dict[tuple[str, int], WindowCounts]:
        """Everything confirmed since the counter started, per (topic, window start) (a copy)."""
        with self._lock:
            return {
                key: WindowCounts(c.count, c.bytes, c.missing_timestamp_count)
                for key, c in self._totals.items()
            }
