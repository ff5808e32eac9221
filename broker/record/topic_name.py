"""Kafka's rules for topic names and partition numbers, in one place.

A topic name is 1 to 249 of ``[a-zA-Z0-9._-]`` and neither ``.`` nor ``..``; a partition is an int32 at or
above 0. Storage relies on them (a partition folder ``<topic>-<partition>`` can never hold a path separator
or be ``.``/``..``: see :mod:`broker.log.file_names`), and so do the clients, the cluster's topic admin
and the broker's auto-creation, which reject a bad name before it reaches ZooKeeper or a log dir.
"""

from __future__ import annotations

import re

from broker.record.errors import InvalidTopicError

__all__ = ["MAX_PARTITION", "MAX_TOPIC_NAME_LENGTH", "validate_partition", "validate_topic_name"]

MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITION = 2**31 - 1

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(topic: str) -> None:
    """Kafka's rules: 1 to 249 of ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``."""
    if not isinstance(topic, str):
        raise InvalidTopicError(f"topic name must be a string, got {type(topic).__name__}")
    if not topic:
        raise InvalidTopicError("topic name is empty")
    if topic in {".", ".."}:
        raise InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters long, at most {MAX_TOPIC_NAME_LENGTH} are allowed"
        )
    if not _TOPIC_NAME.fullmatch(topic):
        bad = sorted({c for c in topic if not _TOPIC_NAME.fullmatch(c)})
        raise InvalidTopicError(
            f"topic name {topic!r} contains {''.join(bad)!r}; only ASCII letters, digits, '.', '_' and '-' "
            "are allowed"
        )


def validate_partition(partition: int) -> None:
    """A partition number is an int32 at or above 0 (and not a ``bool``)."""
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise InvalidTopicError(f"partition must be an integer, got {partition!r}")
    if not 0 <= partition <= MAX_PARTITION:
        raise InvalidTopicError(f"partition {partition} is outside [0, {MAX_PARTITION}]")
