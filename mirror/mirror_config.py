"""The mirror's own settings (:mod:`mirror.mirror`), the ``[mirror]`` section of ``lumber.toml``; the
consumer, group and producer keep theirs.

A :class:`~broker.config_section.ConfigSection` (every key documented); ``lumber mirror``'s flags override
the section. The audit keys are derived, not keys of ``[mirror]``: ``[audit] topic`` and ``window_ms`` and
``[registry] url`` are the one key each for every tier, filled in by the app's config. This module must not
import :mod:`pipeline` nor :mod:`lumber`.
"""

from __future__ import annotations

import re

from pydantic import field_validator

from audit.audit_event import AUDIT_TOPIC, DEFAULT_WINDOW_MS
from broker.config_section import ConfigSection, setting
from mirror.mirror_errors import MirrorConfigError


class MirrorConfig(ConfigSection):
    """Which topics a mirror copies, in which group, with how many streams, and how it audits."""

    error_type = MirrorConfigError

    topics: str = setting(
        "",
        "Regular expression a source topic's whole name must match to be mirrored (required, here or as "
        "`lumber mirror --topics-regex`).",
    )
    group: str = setting(
        "lumber-mirror", "Consumer group on the source cluster; mirror processes of one group share the work."
    )
    streams: int = setting(1, "Streams (threads) per mirrored topic in this process.", ge=1)
    max_records_per_poll: int = setting(
        10_000,
        "Records a stream takes from the source at a time (whole batches, at least one); they "
        "are sent at once and committed once the target acknowledged them.",
        ge=1,
    )
    max_in_flight_records: int = setting(
        200_000,
        "Records a stream has sent that the target has not acknowledged yet, at most (it stops "
        "taking more from the source meanwhile); also the most a killed mirror copies twice per "
        "stream, on top of one auto-commit interval.",
        ge=1,
    )
    max_in_flight_bytes: int = setting(
        32 * 1024 * 1024,
        "Bytes of batches a stream has sent that the target has not acknowledged yet, at most "
        "(the memory the window holds).",
        ge=1,
    )
    topic_refresh_ms: int = setting(
        10_000,
        "Look for new source topics matching `topics` this often (they are created on the "
        "target and mirrored too). 0: only when the mirror starts.",
        ge=0,
    )
    poll_timeout_ms: int = setting(
        200, "How long a stream waits for records before checking whether to stop.", ge=1
    )
    send_retry_backoff_ms: int = setting(
        500, "Pause before records the target did not acknowledge are sent again.", ge=1
    )
    audit_interval_ms: int = setting(
        10_000,
        "Publish the mirror tier's counts to audit_topic on the target every this many ms, and "
        "on a clean stop. 0: no audit.",
        ge=0,
    )
    audit_window_ms: int = setting(
        DEFAULT_WINDOW_MS,
        "Width of the audit windows (by record timestamp).",
        ge=1,
        derived="audit.window_ms",
    )
    audit_topic: str = setting(
        AUDIT_TOPIC, "Audit topic on the target (its own records are never counted).", derived="audit.topic"
    )
    audit_registry_url: str = setting(
        "",
        "Schema registry of the audit event schema; needed when audit_interval_ms > 0.",
        derived="registry.url",
    )
    audit_state_dir: str = setting(
        "",
        "Directory of the mirror tier's audit journal (mirror-mirror-<group>.journal); empty: in memory.",
        derived="audit.state_dir",
    )

    @field_validator("topics")
    @classmethod
    def _check_topics(cls, topics: str) -> str:
        try:
            re.compile(topics)
        except re.error as exc:
            raise ValueError(f"MirrorConfig.topics: not a regular expression: {topics!r}: {exc}") from exc
        return topics

    def check_audit(self) -> None:
        """Raise :class:`MirrorConfigError` unless the audit can run: a ``[mirror]`` section read from a
        file has no registry of its own (the app fills it in), so this is checked when a mirror is made."""
        if self.audit_interval_ms > 0 and not (self.audit_topic and self.audit_registry_url):
            raise MirrorConfigError(
                "MirrorConfig: audit_interval_ms > 0 needs an audit_topic and an audit_registry_url "
                "(or set audit_interval_ms = 0)"
            )

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one of the mirrored topics."""
        return re.fullmatch(self.topics, topic) is not None
