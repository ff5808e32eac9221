"""The mirror's own settings (:mod:`broker.mirror`); the consumer, group and producer keep theirs.

A frozen dataclass, ready to become a ``[mirror]`` section of ``lumber.toml`` (every field has a ``doc``).
This module must not import :mod:`pipeline`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from audit.audit_event import AUDIT_TOPIC, DEFAULT_WINDOW_MS
from broker.mirror_errors import MirrorConfigError


@dataclass(frozen=True)
class MirrorConfig:
    """Which topics a mirror copies, in which group, with how many streams, and how it audits."""

    topics: str = field(
        metadata={"doc": "Regular expression a source topic's whole name must match to be mirrored."}
    )
    group: str = field(
        default="lumber-mirror",
        metadata={
            "doc": "Consumer group on the source cluster; mirror processes of one group share the work."
        },
    )
    streams: int = field(
        default=1,
        metadata={"doc": "Streams (threads) per mirrored topic in this process.", "min": 1},
    )
    max_records_per_poll: int = field(
        default=10_000,
        metadata={
            "doc": "Records a stream takes from the source at a time (whole batches, at least one); they "
            "are sent at once and committed once the target acknowledged them.",
            "min": 1,
        },
    )
    max_in_flight_records: int = field(
        default=200_000,
        metadata={
            "doc": "Records a stream has sent that the target has not acknowledged yet, at most (it stops "
            "taking more from the source meanwhile); also the most a killed mirror copies twice per "
            "stream, on top of one auto-commit interval.",
            "min": 1,
        },
    )
    max_in_flight_bytes: int = field(
        default=32 * 1024 * 1024,
        metadata={
            "doc": "Bytes of batches a stream has sent that the target has not acknowledged yet, at most "
            "(the memory the window holds).",
            "min": 1,
        },
    )
    topic_refresh_ms: int = field(
        default=10_000,
        metadata={
            "doc": "Look for new source topics matching `topics` this often (they are created on the "
            "target and mirrored too). 0: only when the mirror starts.",
            "min": 0,
        },
    )
    poll_timeout_ms: int = field(
        default=200,
        metadata={"doc": "How long a stream waits for records before checking whether to stop.", "min": 1},
    )
    send_retry_backoff_ms: int = field(
        default=500,
        metadata={"doc": "Pause before records the target did not acknowledge are sent again.", "min": 1},
    )
    audit_interval_ms: int = field(
        default=10_000,
        metadata={
            "doc": "Publish the mirror tier's counts to audit_topic on the target every this many ms, and "
            "on a clean stop. 0: no audit.",
            "min": 0,
        },
    )
    audit_window_ms: int = field(
        default=DEFAULT_WINDOW_MS,
        metadata={
            "doc": "Width of the audit windows (by record timestamp); as [producer] audit_window_ms.",
            "min": 1,
        },
    )
    audit_topic: str = field(
        default=AUDIT_TOPIC,
        metadata={"doc": "Audit topic on the target (its own records are never counted)."},
    )
    audit_registry_url: str = field(
        default="",
        metadata={"doc": "Schema registry of the audit event schema; needed when audit_interval_ms > 0."},
    )

    def __post_init__(self) -> None:
        try:
            re.compile(self.topics)
        except re.error as exc:
            raise MirrorConfigError(
                f"MirrorConfig.topics: not a regular expression: {self.topics!r}: {exc}"
            ) from exc
        for name in (
            "streams",
            "max_records_per_poll",
            "max_in_flight_records",
            "max_in_flight_bytes",
            "poll_timeout_ms",
            "send_retry_backoff_ms",
            "audit_window_ms",
        ):
            if getattr(self, name) < 1:
                raise MirrorConfigError(f"MirrorConfig.{name} must be at least 1, got {getattr(self, name)}")
        if self.topic_refresh_ms < 0:
            raise MirrorConfigError(
                f"MirrorConfig.topic_refresh_ms must be >= 0, got {self.topic_refresh_ms}"
            )
        if self.audit_interval_ms < 0:
            raise MirrorConfigError(
                f"MirrorConfig.audit_interval_ms must be >= 0, got {self.audit_interval_ms}"
            )
        if self.audit_interval_ms > 0 and not (self.audit_topic and self.audit_registry_url):
            raise MirrorConfigError(
                "MirrorConfig: audit_interval_ms > 0 needs an audit_topic and an audit_registry_url "
                "(or set audit_interval_ms = 0)"
            )

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one of the mirrored topics."""
        return re.fullmatch(self.topics, topic) is not None
