"""Reading the audit topic: every event published so far, decoded, for :func:`audit.audit_report.reconcile`.

:func:`read_audit_events` takes the log end of every partition of the audit topic first, then reads each
partition from its log start up to that end with a :class:`~broker.client.consumer.consumer.Consumer`
(explicit assignment, no group) and decodes each value with :class:`~audit.audit_codec.AuditEventCodec`.
Events published while it reads are left for the next read. A record that is not an audit event (no
value, bad framing, an unknown schema id, bytes that do not decode) is counted as unreadable and skipped;
deduplication by id is the reconciliation's job (:func:`audit.audit_report.dedupe`).

Events about one topic share a partition (the key is the counted topic), but nothing here depends on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from audit.audit_codec import AuditEventCodec
from audit.audit_event import AuditEvent
from audit.errors import AuditError
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import ClientError, UnknownTopicError
from broker.record.topic_partition import TopicPartition
from schemas.errors import SerdeError

_POLL_MS = 200


@dataclass(frozen=True)
class AuditRead:
    """What one read of the audit topic found."""

    events: tuple[AuditEvent, ...]
    records: int
    unreadable: int
    #: partition -> (log start, log end) when the read started
    extents: dict[int, tuple[int, int]]


def read_audit_events(
    config: ConsumerConfig,
    codec: AuditEventCodec,
    *,
    topic: str,
    zookeeper_connect: str | None = None,
    stall_timeout_ms: int | None = None,
) -> AuditRead:
    """Every event of ``topic`` up to its current end (see the module docstring).

    Raises :class:`AuditError` when the topic does not exist or a partition stops delivering records
    before its end for ``stall_timeout_ms`` (default: twice ``request_timeout_ms``)."""
    settings = config.replace(auto_offset_reset="earliest", client_id=f"{config.client_id}-audit")
    stall_s = (stall_timeout_ms if stall_timeout_ms is not None else 2 * config.request_timeout_ms) / 1000
    try:
        consumer = Consumer(
            settings, zookeeper_connect=None if settings.bootstrap_servers else zookeeper_connect
        )
    except ClientError as exc:
        raise AuditError(f"cannot reach the cluster to read the audit topic {topic}: {exc}") from exc
    try:
        try:
            partitions = consumer.partitions_for(topic)
        except UnknownTopicError as exc:
            raise AuditError(
                f"the audit topic {topic} does not exist: no audited producer or load job has published to "
                "it yet ([producer] audit_interval_ms, [audit] publish_load_counts)"
            ) from exc
        starts = consumer.beginning_offsets(partitions)
        ends = consumer.end_offsets(partitions)
        todo = {tp: ends[tp] for tp in partitions if ends[tp] > starts[tp]}
        consumer.assign(list(todo))
        for tp in todo:
            consumer.seek(tp, starts[tp])
        events: list[AuditEvent] = []
        records = unreadable = 0
        next_offsets = dict(starts)
        last_progress = time.monotonic()
        while todo:
            batch = consumer.poll(timeout_ms=_POLL_MS)
            if not batch:
                if time.monotonic() - last_progress > stall_s:
                    behind = ", ".join(
                        f"{tp} at {next_offsets[tp]} of {end}" for tp, end in sorted(todo.items())
                    )
                    raise AuditError(f"reading the audit topic stalled: {behind}")
                continue
            last_progress = time.monotonic()
            for record in batch:
                tp = TopicPartition(record.topic, record.partition)
                end = todo.get(tp)
                if end is None or record.offset >= end:
                    continue
                next_offsets[tp] = record.offset + 1
                records += 1
                if record.value is None:
                    unreadable += 1
                    continue
                try:
                    events.append(codec.decode(record.value))
                except SerdeError:
                    unreadable += 1
            for tp in [tp for tp, end in todo.items() if next_offsets[tp] >= end]:
                del todo[tp]
        return AuditRead(
            tuple(events),
            records,
            unreadable,
            {tp.partition: (starts[tp], ends[tp]) for tp in partitions},
        )
    except ClientError as exc:
        raise AuditError(f"cannot read the audit topic {topic}: {exc}") from exc
    finally:
        consumer.close()
