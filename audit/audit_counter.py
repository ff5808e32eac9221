"""The producer tier of the audit: count what the brokers confirmed, per (topic, window of creation time).

The paper's producers "periodically generate a monitoring event, which records the number of messages
published by that producer for each topic within a fixed time window" (section 4). An :class:`AuditCounter`
does the counting for one producer object; :mod:`audit.audit_emitter` publishes what it counted.

How a record is counted, in the producer's delivery path:

1. :meth:`AuditCounter.drained`: when the sender takes a batch for its first request (its records are still
   segments: :class:`~broker.client.record_encoder.Segment`), the batch's records are tallied per window of
   their timestamp (count and value bytes) and the tally is held for the batch;
2. :meth:`AuditCounter.done`: when the batch completes, its tally is added to the counts if it succeeded,
   and dropped (counted as failed) if it failed. With ``acks`` 1 or ``all`` completion is the broker's
   confirmation, so only confirmed records count; with ``acks`` 0 a batch succeeds when it is written to
   the socket (nothing better is known). A batch that never reached a request (expired, closed) was never
   tallied;
3. :meth:`AuditCounter.take`: the counts since the previous take become :class:`AuditEvent` deltas, one per
   (topic, window), all numbered with the next ``sequence`` (1, 2, ...). The event id is derived from
   (host, this counter's instance id, topic, window, sequence), so a re-sent event repeats its id.

Records of the audit topic itself are not counted. A record whose timestamp is negative (no creation time)
is counted as ``missing_timestamp_count`` in the window of the moment it was confirmed, not in ``count``.
The counts are per producer object (``counter``: client id plus a random suffix): two producers on one host
emit distinct events, and a restarted producer never reuses an id.

Thread-safe: one lock guards the counts; ``drained`` runs in the sender thread, ``done`` in whichever thread
completes a batch, ``take`` in the emitter's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from audit.audit_event import AuditEvent, producer_event_id
from broker.log.clock import Clock, system_clock_ms

if TYPE_CHECKING:
    from broker.client.producer_batch import ProducerBatch


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


@dataclass(slots=True)
class _BatchTally:
    """A drained batch's records per window start (``None``: records without a timestamp)."""

    topic: str
    windows: dict[int | None, WindowCounts] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(c.count + c.missing_timestamp_count for c in self.windows.values())


def _value_bytes(values: object, start: int, stop: int) -> int:
    chunk = values[start:stop]  # type: ignore[index]
    try:
        return sum(map(len, chunk))
    except TypeError:  # null values
        return sum(len(v) for v in chunk if v is not None)


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
    ) -> None:
        if window_ms <= 0:
            raise ValueError(f"audit window_ms must be positive, got {window_ms}")
        self.host = host
        self.counter = counter
        self.window_ms = window_ms
        self.audit_topic = audit_topic
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._drained: dict[ProducerBatch, _BatchTally] = {}
        #: confirmed since the last take, per (topic, window start)
        self._unreported: dict[tuple[str, int], WindowCounts] = {}
        #: confirmed since the counter started, per (topic, window start)
        self._totals: dict[tuple[str, int], WindowCounts] = {}
        self._sequence = 0
        self.failed_records = 0

    # ---------------------------------------------------------------------------------- delivery path

    def drained(self, batch: ProducerBatch) -> None:
        """Tally ``batch``'s records (call before its first :meth:`~ProducerBatch.build`, while it still
        holds its segments; later calls for the same batch are ignored)."""
        if batch.topic == self.audit_topic:
            return
        window_ms = self.window_ms
        tally = _BatchTally(batch.topic)
        windows = tally.windows
        for segment in batch.segments:
            start, stop, timestamp_ms = segment.start, segment.stop, segment.timestamp_ms
            if stop - start == 1:
                value = segment.values[start]
                size = 0 if value is None else len(value)
            else:
                size = _value_bytes(segment.values, start, stop)
            key = None if timestamp_ms < 0 else timestamp_ms - timestamp_ms % window_ms
            counts = windows.get(key)
            if counts is None:
                counts = windows[key] = WindowCounts()
            if key is None:
                counts.missing_timestamp_count += stop - start
            else:
                counts.count += stop - start
            counts.bytes += size
        with self._lock:
            self._drained.setdefault(batch, tally)

    def done(self, batch: ProducerBatch, error: BaseException | None) -> None:
        """``batch`` completed: count its tally if it succeeded (see the module docstring)."""
        with self._lock:
            tally = self._drained.pop(batch, None)
            if tally is None:
                return
            if error is not None:
                self.failed_records += tally.records
                return
            for start, counts in tally.windows.items():
                if start is None:
                    now = self._clock_ms()
                    key = (tally.topic, now - now % self.window_ms)
                else:
                    key = (tally.topic, start)
                for table in (self._unreported, self._totals):
                    found = table.get(key)
                    if found is None:
                        found = table[key] = WindowCounts()
                    found.add(counts)

    # ---------------------------------------------------------------------------------- reporting

    def take(self) -> list[AuditEvent]:
        """The counts confirmed since the last take, as events of the next sequence ([] when none)."""
        with self._lock:
            if not self._unreported:
                return []
            self._sequence += 1
            sequence = self._sequence
            unreported, self._unreported = self._unreported, {}
        emitted_at_ms = self._clock_ms()
        return [
            AuditEvent(
                topic=topic,
                tier="producer",
                host=self.host,
                window_start_ms=window_start_ms,
                window_ms=self.window_ms,
                count=counts.count,
                bytes=counts.bytes,
                malformed_count=0,
                missing_timestamp_count=counts.missing_timestamp_count,
                event_id=producer_event_id(
                    self.host, self.counter, topic, window_start_ms, self.window_ms, sequence
                ),
                emitted_at_ms=emitted_at_ms,
                counter=self.counter,
                sequence=sequence,
            )
            for (topic, window_start_ms), counts in sorted(unreported.items())
        ]

    def totals(self) -> dict[tuple[str, int], WindowCounts]:
        """Everything confirmed since the counter started, per (topic, window start) (a copy)."""
        with self._lock:
            return {
                key: WindowCounts(c.count, c.bytes, c.missing_timestamp_count)
                for key, c in self._totals.items()
            }

    @property
    def in_flight_batches(self) -> int:
        """Batches tallied and not completed yet."""
        with self._lock:
            return len(self._drained)
