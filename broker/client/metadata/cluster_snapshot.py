"""What a client knows about the cluster at one moment: brokers, and each topic's partitions and leaders.

A :class:`ClusterSnapshot` is immutable; :class:`~broker.client.metadata.cluster_metadata.ClusterMetadata`
swaps in a new one after each refresh, so readers never lock. ``leader`` is -1 while a partition has no live
leader. ``leader_epoch`` is the leader's epoch as the source knows it (Metadata v7+, the partition's state
node), -1 when unknown: the consumer sends it as ``current_leader_epoch`` in Fetch and ListOffsets (KIP-320),
so that a broker that is no longer, or not yet, the leader of that epoch answers FENCED_LEADER_EPOCH or
UNKNOWN_LEADER_EPOCH instead of serving from a stale log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.protocol.error_code import ErrorCode

NO_LEADER = -1
#: Kafka's "leader epoch not known": sent as ``current_leader_epoch``, the broker skips the epoch check.
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """A live broker: its id and where it listens."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return (
            f"{self.host}:{self.port} (broker {self.node_id})"
            if self.node_id >= 0
            else f"{self.host}:{self.port}"
        )


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition: its leader (``NO_LEADER`` when none is live), replicas, leader epoch (-1: unknown)
    and in-sync replicas."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    error_code: int = 0
    leader_epoch: int = NO_LEADER_EPOCH
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class ClusterSnapshot:
    """Brokers by id, partitions by topic (sorted by partition), and the error of each topic not found."""

    brokers: Mapping[int, BrokerAddress] = field(default_factory=dict)
    topics: Mapping[str, tuple[PartitionInfo, ...]] = field(default_factory=dict)
    #: topic -> Kafka error code, for requested topics that have no partitions (UNKNOWN_TOPIC_OR_PARTITION...)
    topic_errors: Mapping[str, int] = field(default_factory=dict)
    controller_id: int = -1

    def partitions(self, topic: str) -> tuple[PartitionInfo, ...] | None:
        """The partitions of ``topic``, or ``None`` when the snapshot does not know it."""
        return self.topics.get(topic)

    def partition_count(self, topic: str) -> int | None:
        found = self.topics.get(topic)
        return len(found) if found else None

    def leader(self, topic: str, partition: int) -> BrokerAddress | None:
        """The live broker leading ``topic-partition``, or ``None`` when unknown or down."""
        found = self.topics.get(topic)
        if found is None or not 0 <= partition < len(found):
            return None
        info = found[partition]
        if info.leader == NO_LEADER:
            return None
        return self.brokers.get(info.leader)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch of ``topic-partition`` in this snapshot, ``NO_LEADER_EPOCH`` when unknown."""
        found = self.topics.get(topic)
        if found is None or not 0 <= partition < len(found):
            return NO_LEADER_EPOCH
        return found[partition].leader_epoch

    def topic_error(self, topic: str) -> str:
        """Why ``topic`` is missing, for error messages."""
        code = self.topic_errors.get(topic)
        if code is None:
            return "not asked for yet"
        return f"{ErrorCode.name_of(code)} (error code {code})"
