"""The mirror tier of the audit: what a mirror copied and the target acknowledged, per (topic, window).

The paper's offline cluster pulls from the live ones (section 4); its audit compares every tier's count per
topic and window of creation time. The mirror reuses the producer tier's machinery:

* :class:`MirrorAuditCounter` is an :class:`~audit.audit_counter.AuditCounter` fed by the mirror
  (:meth:`MirrorAuditCounter.copied_batches`, called once the target acknowledged (``acks=all``) a
  stream's batches, or :meth:`MirrorAuditCounter.copied` for records) instead of by a producer's delivery
  path; a batch passed through unchanged is still counted record by record, by each record's timestamp
  (its records are walked for their timestamps and value sizes, not decoded into objects). Its events
  carry tier ``mirror`` and an id of their own (:func:`audit.audit_event.mirror_event_id`: host, counter
  instance, topic, window, sequence);
* :class:`MirrorAuditEmitter` is the audit's :class:`~audit.audit_emitter.AuditEmitter` (outbox,
  retries, same id on resend, a last emission on close) publishing those events through the mirror's target
  producer (not a delivery listener of it: the mirror feeds its counter).

The counts are what reached the target: records copied twice after a crash (at-least-once, see
:mod:`mirror.mirror`) are counted twice, exactly as they are present twice on the target; a mirror killed
before its next emission loses the counts of that interval (the records themselves are not lost).

Thread-safe: :meth:`MirrorAuditCounter.copied` takes the counter's lock.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from audit.audit_counter import AuditCounter
from audit.audit_emitter import AuditEmitter
from broker.client.consumer_record import ConsumerRecord
from broker.client.fetched_batch import FetchedBatch
from broker.client.producer import Producer
from broker.client.producer_config import ProducerConfig
from broker.clock import Clock, system_clock_ms


class MirrorAuditCounter(AuditCounter):
    """Counts the records a mirror copied per (topic, window of their timestamp); see the module doc. An
    :class:`~audit.audit_counter.AuditCounter` of tier ``mirror``."""

    def __init__(
        self, *, host: str, counter: str, window_ms: int, audit_topic: str, clock_ms: Clock = system_clock_ms
    ) -> None:
        super().__init__(
            host=host,
            counter=counter,
            window_ms=window_ms,
            audit_topic=audit_topic,
            clock_ms=clock_ms,
            tier="mirror",
        )

    def copied(self, records: Sequence[ConsumerRecord]) -> None:
        """``records`` are acknowledged by the target: count them (records of the audit topic are not)."""
        by_topic: dict[str, list[tuple[int, int, int]]] = {}
        for record in records:
            value = record.value
            by_topic.setdefault(record.topic, []).append(
                (record.timestamp_ms, 1, 0 if value is None else len(value))
            )
        for topic, runs in by_topic.items():
            self.count_runs(topic, runs)

    def copied_batches(self, batches: Sequence[FetchedBatch]) -> None:
        """The records of ``batches`` (each from its ``from_offset`` on) are acknowledged by the target:
        count them by their own timestamps (batches of the audit topic are not)."""
        for fetched in batches:
            topic = fetched.topic_partition.topic
            if topic != self.audit_topic:
                self.count_runs(topic, ((ts, 1, size) for ts, size in _timestamps_and_sizes(fetched)))


class MirrorAuditEmitter(AuditEmitter):
    """Publishes a mirror's counts (:class:`MirrorAuditCounter`) through its target producer.

    ``config`` carries the audit settings (``audit_interval_ms``, ``audit_window_ms``, ``audit_topic``,
    ``audit_registry_url``); the producer itself must not audit (``audit_interval_ms = 0``), or its sends
    would be counted a second time as the producer tier.
    """

    def __init__(
        self, producer: Producer, config: ProducerConfig, host: str, clock_ms: Clock = system_clock_ms
    ) -> None:
        counter = MirrorAuditCounter(
            host=host,
            counter=f"{config.client_id}-{secrets.token_hex(4)}",
            window_ms=config.audit_window_ms,
            audit_topic=config.audit_topic,
            clock_ms=clock_ms,
        )
        super().__init__(producer, config, counter, owns_producer=False)

    @property
    def mirror_counter(self) -> MirrorAuditCounter:
        counter = self.counter
        if not isinstance(counter, MirrorAuditCounter):  # pragma: no cover - set in __init__
            raise TypeError("MirrorAuditEmitter.counter must be a MirrorAuditCounter")
        return counter


def _timestamps_and_sizes(fetched: FetchedBatch) -> list[tuple[int, int]]:
    """(timestamp, value bytes) of each record of ``fetched`` from its ``from_offset`` on, read by the one
    record walker (:meth:`FetchedBatch.walk`, which names what is wrong with a malformed batch)."""
    return [(r.timestamp_ms, 0 if r.value is None else len(r.value)) for r in fetched.walk()]
