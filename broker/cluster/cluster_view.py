"""An immutable snapshot of the cluster as ZooKeeper describes it: live brokers and topic assignments.

Lumber keeps one replica per partition (the paper's brokers do not replicate), so a partition's leader is
its first replica while that broker is registered, and no broker at all (-1) otherwise. The controller is
the lowest live broker id (Lumber has no controller election; this is only what Metadata reports).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from broker.cluster.broker_info import BrokerInfo
from broker.record.topic_partition import TopicPartition

#: Kafka's "no broker" id: the leader of a partition whose broker is down, the controller of an empty cluster.
NO_BROKER = -1


@dataclass(frozen=True)
class ClusterView:
    """Live brokers and topics (topic -> partition -> replicas). Immutable: the mappings are read-only
    copies made at construction, ordered by broker id, topic name and partition. Thread-safe."""

    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, Mapping[int, tuple[int, ...]]]

    def __post_init__(self) -> None:
        brokers = MappingProxyType({b: self.brokers[b] for b in sorted(self.brokers)})
        topics = MappingProxyType(
            {
                name: MappingProxyType({p: tuple(self.topics[name][p]) for p in sorted(self.topics[name])})
                for name in sorted(self.topics)
            }
        )
        object.__setattr__(self, "brokers", brokers)
        object.__setattr__(self, "topics", topics)

    @property
    def controller_id(self) -> int:
        """The lowest live broker id, -1 if no broker is live."""
        return min(self.brokers, default=NO_BROKER)

    def leader(self, topic: str, partition: int) -> int:
        """The partition's first replica if that broker is live; -1 if it is not, or if the partition is
        unknown."""
        replicas = self.topics.get(topic, {}).get(partition)
        if not replicas or replicas[0] not in self.brokers:
            return NO_BROKER
        return replicas[0]

    def partitions_of(self, broker_id: int) -> list[TopicPartition]:
        """The partitions assigned to ``broker_id`` (live or not), sorted."""
        return sorted(
            TopicPartition(topic, partition)
            for topic, assignment in self.topics.items()
            for partition, replicas in assignment.items()
            if broker_id in replicas
        )


EMPTY_VIEW = ClusterView(brokers={}, topics={})
