"""The audit's settings: the ``[audit]`` section of ``lumber.toml``.

The audit (paper section 4) compares what producers counted with what the load committed, per topic and
window. Producers publish their counts when ``[producer] audit_interval_ms`` is above 0; load jobs publish
theirs after every commit when ``publish_load_counts`` is on (:mod:`pipeline.load_audit_publisher`);
``lumber audit verify`` reconciles them (:mod:`audit.audit_report`), with ``grace_ms`` and ``tolerance``
as the defaults of its ``--grace`` and ``--tolerance``.

This section holds the keys every tier of the audit shares, once: ``topic``, ``topic_partitions`` and
``window_ms`` are read by the producers, the mirrors and the load jobs alike (the producer's and mirror's
``audit_topic``, ``audit_topic_partitions`` and ``audit_window_ms`` are derived from them, and their
``audit_state_dir`` from ``state_dir``, the outbox's journals: :mod:`audit.audit_journal`; the old
``[producer] audit_topic``, ``audit_topic_partitions``, ``audit_window_ms`` and ``[load] window_ms`` are read
as these keys, with a warning). The width `lumber audit verify` reports in is ``report_window_ms``.
"""

from __future__ import annotations

import re
from typing import Self

from pydantic import model_validator

from audit.audit_tolerance import Tolerance
from broker.config_section import ConfigSection, setting

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class AuditConfig(ConfigSection):
    """The audit trail: where the counts go, and how `lumber audit verify` judges them."""

    topic: str = setting(
        "_audit",
        "Topic of the audit events (Avro, schema subject '<topic>-value'), for every tier: producers, "
        "mirrors and load jobs. Its publishers create it if it is missing (topic_partitions).",
    )
    topic_partitions: int = setting(
        1,
        "Partitions of the audit topic when an audit publisher creates it: producers, mirrors and load jobs "
        "create it if it is missing, as Kafka creates its internal topics, whatever [broker] "
        "auto_create_topics says. An existing audit topic is used as it is.",
        ge=1,
        le=10_000,
    )
    window_ms: int = setting(
        600_000,
        "Width of the audit windows, for every tier: producers, mirrors and load jobs count messages per "
        "topic (and partition) and window of this many ms of record timestamp.",
        ge=1000,
    )
    state_dir: str = setting(
        "",
        "Directory of the audit outbox's journals (one file per producer client_id and per mirror): the "
        "producer and mirror tiers write what they counted there before they forget it, so that a process "
        "killed (kill -9) and restarted with the same state_dir and client_id publishes its counts exactly "
        "once. Empty: the counts not yet published live in memory only and die with the process.",
    )
    publish_load_counts: bool = setting(
        True,
        "After each commit, the load job publishes its committed counts per topic, partition and window to "
        "the audit topic (and any that a crashed run left unpublished). Publishing again never counts twice.",
    )
    grace_ms: int = setting(
        3_600_000,
        "Default of `audit verify --grace`: a window is OPEN, not INCOMPLETE, until this long after its end.",
        ge=0,
    )
    tolerance: str = setting(
        "0",
        "Default of `audit verify --tolerance`: how many messages a window may miss or duplicate and still "
        "be COMPLETE, as a count ('5') or a share of the expected count ('0.1%').",
    )
    report_window_ms: int = setting(
        0,
        "Width of the windows `audit verify` reports in (every event's window must divide it). 0: the loads' "
        "interval, [schedule] every_ms (an hour by default), when the events' windows divide it; else the "
        "widest window among the events read.",
        ge=0,
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not _TOPIC_NAME.fullmatch(self.topic):
            raise ValueError(
                f"audit.topic must be a topic name (letters, digits, '.', '_', '-'), got {self.topic!r}"
            )
        Tolerance.parse(self.tolerance, "audit.tolerance")
        return self
