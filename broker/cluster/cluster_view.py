"""An immutable snapshot of the cluster as ZooKeeper describes it: live brokers, topic assignments, partition
states, topic configs, the controller and the brokers shutting down.

A partition's leader is the leader of its state node (``/brokers/topics/<t>/partitions/<p>/state``,
:class:`~broker.cluster.partition_state.PartitionState`) while that broker is registered, and no broker at
all (-1) otherwise, or while the partition has no state node (a topic of an older Lumber, until the
controller creates its states). ``controller_id`` is the broker in ``/controller`` (-1 when none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.cluster.partition_state import PartitionState
from broker.record.topic_partition import TopicPartition

#: Kafka's "no broker" id: the leader of a partition whose broker is down, the controller of an empty cluster.
NO_BROKER = -1

_EMPTY: Mapping[object, object] = MappingProxyType({})


@dataclass(frozen=True)
class ClusterView:
    """Live brokers, topics (topic -> partition -> replicas), partition states, topic configs (only the
    overrides in ``/config/topics/<t>``; topics without any are absent), the controller and the brokers with
    a controlled-shutdown request. Immutable: the mappings are read-only copies made at construction,
    ordered by broker id, topic name and partition. Compared by value (a state's ``zk_version`` counts).
    Thread-safe."""

    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, Mapping[int, tuple[int, ...]]]
    states: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    controller_id: int = NO_BROKER
    shutting_down: frozenset[int] = frozenset()
    #: The partitions moving (:mod:`broker.cluster.partition_reassignment`); the others are absent.
    reassignments: Mapping[TopicPartition, PartitionReassignment] = field(default_factory=dict)
    #: Each topic node's znode version (the controller's reassignment writes are conditional on it). Not
    #: compared: a node rewritten with the same data is the same view.
    topic_versions: Mapping[str, int] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        brokers = MappingProxyType({b: self.brokers[b] for b in sorted(self.brokers)})
        topics = MappingProxyType(
            {
                name: MappingProxyType({p: tuple(self.topics[name][p]) for p in sorted(self.topics[name])})
                for name in sorted(self.topics)
            }
        )
        states = MappingProxyType({tp: self.states[tp] for tp in sorted(self.states)})
        configs = MappingProxyType(
            {name: MappingProxyType(dict(self.topic_configs[name])) for name in sorted(self.topic_configs)}
        )
        object.__setattr__(self, "brokers", brokers)
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "states", states)
        object.__setattr__(self, "topic_configs", configs)
        object.__setattr__(self, "shutting_down", frozenset(self.shutting_down))
        moving = MappingProxyType({tp: self.reassignments[tp] for tp in sorted(self.reassignments)})
        object.__setattr__(self, "reassignments", moving)
        object.__setattr__(self, "topic_versions", MappingProxyType(dict(self.topic_versions)))

    def state(self, tp: TopicPartition) -> PartitionState | None:
        """The partition's state as read from ZooKeeper; None if it has none (or is unknown)."""
        return self.states.get(tp)

    def leader(self, topic: str, partition: int) -> int:
        """The state's leader if that broker is live; -1 if it is not, if the partition has no state node
        yet, or if the partition is unknown."""
        state = self.states.get(TopicPartition(topic, partition))
        if state is None or state.leader not in self.brokers:
            return NO_BROKER
        if partition not in self.topics.get(topic, _EMPTY):
            return NO_BROKER
        return state.leader

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The state's leader epoch; -1 without a state."""
        state = self.states.get(tp)
        return -1 if state is None else state.leader_epoch

    def isr(self, tp: TopicPartition) -> tuple[int, ...]:
        """The state's in-sync replicas; ``()`` without a state."""
        state = self.states.get(tp)
        return () if state is None else state.isr

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """The partition's assigned replicas; ``()`` if it is unknown."""
        return tuple(self.topics.get(tp.topic, _EMPTY).get(tp.partition, ()))  # type: ignore[arg-type]

    def reassignment(self, tp: TopicPartition) -> PartitionReassignment:
        """The partition's RS, AR and RR (AR and RR empty when it is not moving)."""
        return self.reassignments.get(tp) or PartitionReassignment(self.replicas(tp))

    def under_replicated(self, tp: TopicPartition) -> bool:
        """True if the partition has a state whose ISR is smaller than its replicas; while it moves, the
        replicas being added do not count (Kafka's replication factor of an ongoing reassignment)."""
        state = self.states.get(tp)
        if state is None:
            return False
        moving = self.reassignments.get(tp)
        adding = len(moving.adding) if moving is not None else 0
        return len(state.isr) < len(self.replicas(tp)) - adding

    def topic_config(self, topic: str) -> Mapping[str, str]:
        """The topic's config overrides (empty when it has none)."""
        return self.topic_configs.get(topic, MappingProxyType({}))

    def partitions_of(self, broker_id: int) -> list[TopicPartition]:
        """The partitions assigned to ``broker_id`` (live or not), sorted."""
        return sorted(
            TopicPartition(topic, partition)
            for topic, assignment in self.topics.items()
            for partition, replicas in assignment.items()
            if broker_id in replicas
        )

    def partitions_without_state(self) -> dict[str, dict[int, tuple[int, ...]]]:
        """Topic -> partition -> replicas of the partitions with no state node (what the controller gives
        :func:`~broker.cluster.partition_state_store.create_missing_states`)."""
        missing: dict[str, dict[int, tuple[int, ...]]] = {}
        for topic, assignment in self.topics.items():
            for partition, replicas in assignment.items():
                if TopicPartition(topic, partition) not in self.states:
                    missing.setdefault(topic, {})[partition] = replicas
        return missing


EMPTY_VIEW = ClusterView(brokers={}, topics={})
