"""One partition of a consumer group as ``lumber groups describe`` shows it, for both kinds of group.

A ZooKeeper group (:mod:`broker.client.groups.zookeeper.group_admin`) and a Kafka-protocol group
(:mod:`broker.client.groups.kafka.kafka_group_admin`) describe each partition the same way: what the group
committed, where the log ends (from the brokers, through the caller's :data:`OffsetLookup`, a
:class:`~broker.client.consumer.consumer.Consumer`'s ``end_offsets``) and the lag between them; only who
holds the partition differs (an owner node's member, or the member whose assignment names it), which each
kind adds to :class:`GroupPartition`. The JSON of both (``lumber groups describe --json``, the console's
group page) is :meth:`GroupPartition.to_json` and :func:`partitions_json`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.record.topic_partition import TopicPartition

#: ``[partitions]`` -> ``{partition: offset}`` from the brokers.
OffsetLookup = Callable[[list[TopicPartition]], dict[TopicPartition, int]]


def partition_lag(committed: int | None, log_end: int | None) -> int | None:
    """How far ``committed`` is behind ``log_end`` (never negative); None when either is unknown."""
    if committed is None or log_end is None:
        return None
    return max(log_end - committed, 0)


def log_ends(end_offsets: OffsetLookup | None, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The log end offsets of ``partitions`` through ``end_offsets`` (none asked without a lookup or a
    partition)."""
    return end_offsets(partitions) if end_offsets is not None and partitions else {}


@dataclass(frozen=True)
class GroupPartition:
    """One partition of a group: what is committed, how far behind the log end (each kind adds its holder)."""

    topic: str
    partition: int
    committed: int | None
    log_end: int | None

    @property
    def lag(self) -> int | None:
        return partition_lag(self.committed, self.log_end)

    def to_json(self) -> dict[str, Any]:
        """The partition as JSON, its holder (``holder_json``) after its topic and number."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            **self.holder_json(),
            "committed": self.committed,
            "log_end": self.log_end,
            "lag": self.lag,
        }

    def holder_json(self) -> dict[str, Any]:
        """Who holds the partition, as JSON (none here: each kind of group says)."""
        return {}


def partitions_json(partitions: Sequence[GroupPartition]) -> dict[str, Any]:
    """The ``partitions`` and ``total_lag`` of a group description's JSON."""
    return {
        "partitions": [p.to_json() for p in partitions],
        "total_lag": sum(p.lag or 0 for p in partitions),
    }
