"""The audit's settings: the ``[audit]`` section of ``lumber.toml``.

The audit (paper section 4) compares what producers counted with what the load committed, per topic and
window. Producers publish their counts when ``[producer] audit_interval_ms`` is above 0; load jobs publish
theirs after every commit when ``publish_load_counts`` is on (:mod:`pipeline.load_audit_publisher`);
``lumber audit verify`` reconciles them (:mod:`audit.audit_report`), with ``grace_ms`` and ``tolerance``
as the defaults of its ``--grace`` and ``--tolerance``.

The audit topic (``topic``) is created by its publishers when it is missing, with ``[producer]
audit_topic_partitions`` partitions (:mod:`broker.client.internal_topic`): the producers' audit lives in
the client package, which reads ``[producer]`` and never this section, so the count is that one key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from audit.audit_tolerance import Tolerance

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def setting(default: Any, doc: str, **limits: Any) -> Any:
    """A key of the section (as :func:`pipeline.config.setting`, which this module cannot import: the config
    module composes this section)."""
    return field(default=default, metadata={"doc": doc, **limits})


@dataclass(frozen=True)
class AuditConfig:
    """The audit trail: where the counts go, and how `lumber audit verify` judges them."""

    topic: str = setting(
        "_audit",
        "Topic of the audit events (Avro, schema subject '<topic>-value'); keep it equal to [producer] "
        "audit_topic. Its publishers create it if it is missing ([producer] audit_topic_partitions).",
    )
    publish_load_counts: bool = setting(
        True,
        "After each commit, the load job publishes its committed counts per topic, partition and window to "
        "the audit topic (and any that a crashed run left unpublished). Publishing again never counts twice.",
    )
    grace_ms: int = setting(
        3_600_000,
        "Default of `audit verify --grace`: a window is OPEN, not INCOMPLETE, until this long after its end.",
        min=0,
    )
    tolerance: str = setting(
        "0",
        "Default of `audit verify --tolerance`: how many messages a window may miss or duplicate and still "
        "be COMPLETE, as a count ('5') or a share of the expected count ('0.1%').",
    )
    window_ms: int = setting(
        0,
        "Width of the windows `audit verify` reports in (every event's window must divide it). 0: the loads' "
        "interval, [schedule] every_ms (an hour by default), when the events' windows divide it; else the "
        "widest window among the events read.",
        min=0,
    )

    def __post_init__(self) -> None:
        # ValueError: pipeline.config.build_section turns it into a ConfigError naming the file
        if not _TOPIC_NAME.fullmatch(self.topic):
            raise ValueError(
                f"audit.topic must be a topic name (letters, digits, '.', '_', '-'), got {self.topic!r}"
            )
        Tolerance.parse(self.tolerance, "audit.tolerance")
