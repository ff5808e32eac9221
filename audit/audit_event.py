"""The audit's monitoring event (paper section 4): one tier's count of one topic in one time window.

Every tier of the pipeline counts the messages of each topic per fixed window of their creation timestamp
and publishes :class:`AuditEvent` records to the audit topic (``_audit``), Avro-encoded with the shipped
schema ``schemas/avro/audit_event.avsc`` (:mod:`audit.audit_codec`):

* the **producer** tier (:mod:`audit.audit_counter`): what one producer object had confirmed by the
  brokers, as deltas: each emission carries the counts since the previous one, numbered by ``sequence``;
* the **load** tier (:mod:`pipeline.load_audit_publisher`): the rows and quarantined records a load run
  committed, per partition, straight from the run's manifest;
* the **mirror** tier (:class:`~audit.audit_counter.AuditCounter` of tier ``mirror``, fed by the mirror
  with what the target acknowledged): as the producer tier, with ids of its own (:func:`mirror_event_id`).

Event ids are deterministic (:func:`producer_event_id`, :func:`mirror_event_id`, :func:`load_event_id`),
so publishing an event again (a retry, a recovery) repeats its id, and readers (:mod:`audit.audit_reader`)
count every id once: the publication is at least once, the counting exactly once in effect.

This module is plain data: no I/O, no registry; it must not import :mod:`pipeline`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

AuditTier = Literal["producer", "load", "mirror"]
TIERS: tuple[AuditTier, ...] = ("producer", "load", "mirror")
#: The audit topic's default name (``[audit] topic``).
AUDIT_TOPIC = "_audit"
#: The default window: 10 minutes.
DEFAULT_WINDOW_MS = 600_000


def window_start(timestamp_ms: int, window_ms: int) -> int:
    """The start of the window of ``window_ms`` holding ``timestamp_ms`` (a multiple of ``window_ms``)."""
    return timestamp_ms - timestamp_ms % window_ms


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def producer_event_id(
    host: str, counter: str, topic: str, window_start_ms: int, window_ms: int, sequence: int
) -> str:
    """The id of a producer-tier event: SHA-256 of (host, producer instance, topic, window, sequence)."""
    return _digest("producer", host, counter, topic, window_start_ms, window_ms, sequence)


def mirror_event_id(
    host: str, counter: str, topic: str, window_start_ms: int, window_ms: int, sequence: int
) -> str:
    """The id of a mirror-tier event: SHA-256 of (host, mirror instance, topic, window, sequence)."""
    return _digest("mirror", host, counter, topic, window_start_ms, window_ms, sequence)


def load_event_id(
    job: str, run_id: str, topic: str, partition: int, window_start_ms: int, window_ms: int
) -> str:
    """The id of a load-tier event: SHA-256 of (job, run, topic, partition, window)."""
    return _digest("load", job, run_id, topic, partition, window_start_ms, window_ms)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One record of the audit topic (the fields of ``audit_event.avsc``, documented there)."""

    topic: str
    tier: AuditTier
    host: str
    window_start_ms: int
    window_ms: int
    count: int
    bytes: int
    malformed_count: int
    missing_timestamp_count: int
    event_id: str
    emitted_at_ms: int
    partition: int | None = None
    counter: str = ""
    job: str | None = None
    sequence: int = 0

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"audit event {self.event_id}: tier {self.tier!r} is not one of {TIERS}")
        if self.window_ms <= 0 or self.window_start_ms % self.window_ms != 0:
            raise ValueError(
                f"audit event {self.event_id}: window_start_ms {self.window_start_ms} is not a multiple of "
                f"window_ms {self.window_ms}"
            )
        for name in ("count", "bytes", "malformed_count", "missing_timestamp_count"):
            if getattr(self, name) < 0:
                raise ValueError(f"audit event {self.event_id}: {name} is negative ({getattr(self, name)})")

    @property
    def window_end_ms(self) -> int:
        return self.window_start_ms + self.window_ms

    @property
    def received(self) -> int:
        """Messages this tier accounted for in the window: counted plus malformed."""
        return self.count + self.malformed_count

    def to_record(self) -> dict[str, Any]:
        """The Avro record (field names of the schema)."""
        return {
            "topic": self.topic,
            "tier": self.tier,
            "host": self.host,
            "window_start_ms": self.window_start_ms,
            "window_ms": self.window_ms,
            "count": self.count,
            "bytes": self.bytes,
            "malformed_count": self.malformed_count,
            "missing_timestamp_count": self.missing_timestamp_count,
            "event_id": self.event_id,
            "emitted_at_ms": self.emitted_at_ms,
            "partition": self.partition,
            "counter": self.counter,
            "job": self.job,
            "sequence": self.sequence,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> AuditEvent:
        """From a decoded Avro record (events written with the first schema version get the defaults)."""
        partition = record.get("partition")
        job = record.get("job")
        return cls(
            topic=str(record["topic"]),
            tier=record["tier"],
            host=str(record["host"]),
            window_start_ms=int(record["window_start_ms"]),
            window_ms=int(record["window_ms"]),
            count=int(record["count"]),
            bytes=int(record["bytes"]),
            malformed_count=int(record.get("malformed_count", 0)),
            missing_timestamp_count=int(record.get("missing_timestamp_count", 0)),
            event_id=str(record["event_id"]),
            emitted_at_ms=int(record["emitted_at_ms"]),
            partition=None if partition is None else int(partition),
            counter=str(record.get("counter", "")),
            job=None if job is None else str(job),
            sequence=int(record.get("sequence", 0)),
        )

    def same_counts(self, other: AuditEvent) -> bool:
        """Whether ``other`` (with the same id) says the same thing; ``host`` and ``emitted_at_ms`` may
        differ when another process re-published it."""
        return (
            self.topic,
            self.tier,
            self.window_start_ms,
            self.window_ms,
            self.count,
            self.malformed_count,
            self.missing_timestamp_count,
            self.partition,
        ) == (
            other.topic,
            other.tier,
            other.window_start_ms,
            other.window_ms,
            other.count,
            other.malformed_count,
            other.missing_timestamp_count,
            other.partition,
        )
