"""The mirror tier of the audit: what a mirror copied and the target acknowledged, per (topic, window).

The paper's offline cluster pulls from the live ones (section 4); its audit compares every tier's count per
topic and window of creation time. The mirror reuses the producer tier's machinery:

* :class:`MirrorAuditCounter` is an :class:`~broker.client.audit_counter.AuditCounter` fed by the mirror
  (:meth:`MirrorAuditCounter.copied`, called once the target acknowledged a stream's records, with
  ``acks=all``) instead of by a producer's delivery path, whose events carry tier ``mirror`` and an id of
  their own (:func:`mirror_event_id`: host, counter instance, topic, window, sequence);
* :class:`MirrorAuditEmitter` is the producer's :class:`~broker.client.audit_emitter.AuditEmitter` (outbox,
  retries, same id on resend, a last emission on close) publishing those events through the mirror's target
  producer.

The counts are what reached the target: records copied twice after a crash (at-least-once, see
:mod:`broker.mirror`) are counted twice, exactly as they are present twice on the target; a mirror killed
before its next emission loses the counts of that interval (the records themselves are not lost).

Thread-safe: :meth:`MirrorAuditCounter.copied` takes the counter's lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from collections.abc import Sequence

from broker.client.audit_counter import AuditCounter, WindowCounts
from broker.client.audit_emitter import AuditEmitter
from broker.client.audit_event import AuditEvent, window_start
from broker.client.consumer_record import ConsumerRecord
from broker.client.producer import Producer
from broker.client.producer_config import ProducerConfig
from broker.log.clock import Clock, system_clock_ms


def mirror_event_id(
    host: str, counter: str, topic: str, window_start_ms: int, window_ms: int, sequence: int
) -> str:
    """The id of a mirror-tier event: SHA-256 of (host, mirror instance, topic, window, sequence)."""
    text = "|".join(str(p) for p in ("mirror", host, counter, topic, window_start_ms, window_ms, sequence))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class MirrorAuditCounter(AuditCounter):
    """Counts the records a mirror copied per (topic, window of their timestamp); see the module doc."""

    def copied(self, records: Sequence[ConsumerRecord]) -> None:
        """``records`` are acknowledged by the target: count them (records of the audit topic are not)."""
        window_ms = self.window_ms
        tally: dict[tuple[str, int | None], WindowCounts] = {}
        for record in records:
            if record.topic == self.audit_topic:
                continue
            ts = record.timestamp_ms
            key = (record.topic, None if ts < 0 else window_start(ts, window_ms))
            counts = tally.get(key)
            if counts is None:
                counts = tally[key] = WindowCounts()
            if ts < 0:
                counts.missing_timestamp_count += 1
            else:
                counts.count += 1
            counts.bytes += 0 if record.value is None else len(record.value)
        if not tally:
            return
        now = self._clock_ms()
        with self._lock:
            for (topic, start), counts in tally.items():
                at = (topic, window_start(now, window_ms) if start is None else start)
                for table in (self._unreported, self._totals):
                    found = table.get(at)
                    if found is None:
                        found = table[at] = WindowCounts()
                    found.add(counts)

    def take(self) -> list[AuditEvent]:
        """The counts since the last take as mirror-tier events of the next sequence ([] when none)."""
        return [
            dataclasses.replace(
                event,
                tier="mirror",
                event_id=mirror_event_id(
                    event.host,
                    event.counter,
                    event.topic,
                    event.window_start_ms,
                    event.window_ms,
                    event.sequence,
                ),
            )
            for event in super().take()
        ]


class MirrorAuditEmitter(AuditEmitter):
    """Publishes a mirror's counts (:class:`MirrorAuditCounter`) through its target producer.

    ``config`` carries the audit settings (``audit_interval_ms``, ``audit_window_ms``, ``audit_topic``,
    ``audit_registry_url``); the producer itself must not audit (``audit_interval_ms = 0``), or its sends
    would be counted a second time as the producer tier.
    """

    def __init__(
        self, producer: Producer, config: ProducerConfig, host: str, clock_ms: Clock = system_clock_ms
    ) -> None:
        super().__init__(producer, config, host, clock_ms)
        # The emitter's thread first takes counts audit_interval_ms after it started, so the counter is
        # swapped well before it is first read.
        self.counter = MirrorAuditCounter(
            host=host,
            counter=f"{config.client_id}-{secrets.token_hex(4)}",
            window_ms=config.audit_window_ms,
            audit_topic=config.audit_topic,
            clock_ms=clock_ms,
        )

    @property
    def mirror_counter(self) -> MirrorAuditCounter:
        counter = self.counter
        if not isinstance(counter, MirrorAuditCounter):  # pragma: no cover - set in __init__
            raise TypeError("MirrorAuditEmitter.counter must be a MirrorAuditCounter")
        return counter
