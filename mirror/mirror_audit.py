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

**What the tier counts: distinct source records the target acknowledged.** Each record is counted by
its source (topic, partition, offset) (:meth:`~audit.audit_counter.AuditCounter.count_offsets`), at most
once per journal: with ``[audit] state_dir`` the counts *and the offset ranges counted* are journaled
before the stream acknowledges the positions to the group (:mod:`audit.audit_journal`,
``<state dir>/mirror-mirror-<group>.journal``), so a mirror killed with ``kill -9`` and restarted loses no
count, publishes what it had not, and does not count again the records its successor copies a second time
from the last committed offset. The tier then equals the source (the producer tier), exactly.

It cannot equal *the number of records the target holds*: the mirror is at-least-once (no transactions:
:mod:`mirror.mirror`), and a record copied again after a kill is on the target twice. Those second copies
are known, and counted in :attr:`~audit.audit_counter.AuditCounter.recopied` (logged at close), when the
first copy was journaled; a copy the target acknowledged in the instant between its acknowledgement and
the journal write before a ``kill -9`` is not (the restarted mirror counts the second copy as the first):
only writing the records and the count in one transaction of the target could. Without a state dir the
counts live in memory: a killed mirror loses those of its last interval, and its successor counts its
re-copies again.

The counted ranges are kept for the journal's life: a source topic deleted and created again under the
same name starts its offsets at 0 again, which the journal takes for copies already counted; delete the
journal (``[audit] state_dir``) when recreating a mirrored topic.

Several mirror processes of one group each journal the partitions they own; a partition that moves to
another process (not a restart of the same one) is counted from its committed offset there, so the
re-copies of that move are counted twice (the same bound as the target's duplicates).

Thread-safe: :meth:`MirrorAuditCounter.copied` takes the counter's lock.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from audit.audit_counter import AuditCounter
from audit.audit_emitter import AuditEmitter, open_journal
from audit.audit_journal import AuditJournal
from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.clock import Clock, system_clock_ms
from schemas.client import RegistryClientSettings


class MirrorAuditCounter(AuditCounter):
    """Counts the records a mirror copied per (topic, window of their timestamp); see the module doc. An
    :class:`~audit.audit_counter.AuditCounter` of tier ``mirror``."""

    def __init__(
        self,
        *,
        host: str,
        counter: str,
        window_ms: int,
        audit_topic: str,
        clock_ms: Clock = system_clock_ms,
        journal: AuditJournal | None = None,
    ) -> None:
        super().__init__(
            host=host,
            counter=counter,
            window_ms=window_ms,
            audit_topic=audit_topic,
            clock_ms=clock_ms,
            tier="mirror",
            journal=journal,
        )

    def copied(self, records: Sequence[ConsumerRecord]) -> None:
        """``records`` are acknowledged by the target: count them, once per source offset (records of the
        audit topic are not)."""
        by_partition: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        for record in records:
            value = record.value
            by_partition.setdefault((record.topic, record.partition), []).append(
                (record.offset, record.timestamp_ms, 0 if value is None else len(value))
            )
        for (topic, partition), found in by_partition.items():
            self.count_offsets(topic, partition, found)

    def copied_batches(self, batches: Sequence[FetchedBatch]) -> None:
        """The records of ``batches`` (each from its ``from_offset`` on) are acknowledged by the target:
        count them by their own timestamps, once per source offset (batches of the audit topic are not)."""
        for fetched in batches:
            tp = fetched.topic_partition
            if tp.topic != self.audit_topic:
                self.count_offsets(tp.topic, tp.partition, _offsets_timestamps_and_sizes(fetched))


class MirrorAuditEmitter(AuditEmitter):
    """Publishes a mirror's counts (:class:`MirrorAuditCounter`) through its target producer.

    ``config`` carries the audit settings (``audit_interval_ms``, ``audit_window_ms``, ``audit_topic``,
    ``audit_registry_url``, ``audit_state_dir``); the producer itself must not audit
    (``audit_interval_ms = 0``), or its sends would be counted a second time as the producer tier.
    """

    def __init__(
        self,
        producer: Producer,
        config: ProducerConfig,
        host: str,
        clock_ms: Clock = system_clock_ms,
        *,
        registry: RegistryClientSettings,
    ) -> None:
        counter = MirrorAuditCounter(
            host=host,
            counter=f"{config.client_id}-{secrets.token_hex(4)}",
            window_ms=config.audit_window_ms,
            audit_topic=config.audit_topic,
            clock_ms=clock_ms,
            journal=open_journal(config, "mirror"),
        )
        super().__init__(producer, config, counter, owns_producer=False, registry=registry)

    @property
    def mirror_counter(self) -> MirrorAuditCounter:
        counter = self.counter
        if not isinstance(counter, MirrorAuditCounter):  # pragma: no cover - set in __init__
            raise TypeError("MirrorAuditEmitter.counter must be a MirrorAuditCounter")
        return counter


def _offsets_timestamps_and_sizes(fetched: FetchedBatch) -> list[tuple[int, int, int]]:
    """(offset, timestamp, value bytes) of each record of ``fetched`` from its ``from_offset`` on, read by
    the one record walker (:meth:`FetchedBatch.walk`, which names what is wrong with a malformed batch)."""
    return [(r.offset, r.timestamp_ms, 0 if r.value is None else len(r.value)) for r in fetched.walk()]
