"""The cluster as the console shows it: brokers and topics from ZooKeeper, offsets from the brokers.

Brokers, topic assignments, the controller and each partition's state (leader, leader epoch, ISR) are read
from ZooKeeper (:mod:`broker.cluster.zk_reads`); the log start and log end offset of each partition whose
leader is live come from the brokers (ListOffsets through :class:`~broker.client.consumer.consumer.Consumer`).
A partition whose leader is not live is offline (``leader`` is ``None``, its offsets unknown); one whose ISR
is smaller than its replicas is under-replicated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from broker.cluster import zk_paths, zk_reads
from broker.cluster.broker_info import BrokerInfo
from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from lumber.console.errors import NotFoundError
from lumber.console.sources import Sources


@dataclass(frozen=True)
class PartitionView:
    """One partition: its replicas, live leader, ISR and offsets (``None`` while its leader is down)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    isr: tuple[int, ...] = ()
    leader_epoch: int = -1

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def messages(self) -> int | None:
        if self.log_start_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.log_start_offset

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "replicas": list(self.replicas),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "under_replicated": self.under_replicated,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "messages": self.messages,
        }


@dataclass(frozen=True)
class TopicView:
    name: str
    partitions: tuple[PartitionView, ...]

    @property
    def messages(self) -> int:
        return sum(p.messages or 0 for p in self.partitions)

    @property
    def offline(self) -> int:
        return sum(1 for p in self.partitions if p.leader is None)

    @property
    def under_replicated(self) -> int:
        return sum(1 for p in self.partitions if p.under_replicated)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.name,
            "messages": self.messages,
            "offline_partitions": self.offline,
            "under_replicated_partitions": self.under_replicated,
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str | None
    brokers: Mapping[int, BrokerInfo]
    topics: tuple[TopicView, ...]
    controller_id: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id,
            "brokers": [
                {"id": b.broker_id, "host": b.host, "port": b.port, "address": b.address}
                for _, b in sorted(self.brokers.items())
            ],
            "topics": [t.to_json() for t in self.topics],
        }


def read_cluster(sources: Sources) -> ClusterView:
    """Every broker and topic, with the offsets of every partition whose leader is live."""
    zk = sources.zk
    brokers = zk_reads.read_brokers(zk)
    assignments = {}
    for name in zk_reads.read_topic_names(zk):
        found = zk_reads.read_assignment(zk, name)
        if found is not None:
            assignments[name] = found
    topics = tuple(_topic_view(sources, name, found, brokers) for name, found in assignments.items())
    return ClusterView(_cluster_id(sources), brokers, topics, zk_reads.read_controller(zk))


def read_topic(sources: Sources, topic: str) -> TopicView:
    """One topic (:class:`NotFoundError` when ZooKeeper does not know it, or the name is not a topic's)."""
    try:
        validate_topic_name(topic)
    except InvalidTopicError as exc:
        raise NotFoundError(f"no topic {topic!r}: {exc}") from exc
    assignment = zk_reads.read_assignment(sources.zk, topic)
    if assignment is None:
        raise NotFoundError(f"no topic {topic!r} in ZooKeeper {sources.config.zookeeper.connect}")
    return _topic_view(sources, topic, assignment, zk_reads.read_brokers(sources.zk))


def _topic_view(
    sources: Sources,
    topic: str,
    assignment: Mapping[int, tuple[int, ...]],
    brokers: Mapping[int, BrokerInfo],
) -> TopicView:
    states = zk_reads.read_states(
        sources.zk, [TopicPartition(topic, p) for p in sorted(assignment)], skip_bad=True
    )
    live = {
        tp.partition: state.leader
        for tp, state in states.items()
        if state is not None and state.leader in brokers
    }
    tps = [TopicPartition(topic, p) for p in sorted(live)]
    starts = sources.consumer.beginning_offsets(tps) if tps else {}
    ends = sources.consumer.end_offsets(tps) if tps else {}
    partitions = []
    for p, replicas in sorted(assignment.items()):
        tp = TopicPartition(topic, p)
        state = states.get(tp)
        partitions.append(
            PartitionView(
                topic,
                p,
                tuple(replicas),
                live.get(p),
                starts.get(tp),
                ends.get(tp),
                isr=() if state is None else tuple(state.isr),
                leader_epoch=-1 if state is None else state.leader_epoch,
            )
        )
    return TopicView(topic, tuple(partitions))


def _cluster_id(sources: Sources) -> str | None:
    try:
        data, _ = sources.zk.get(zk_paths.CLUSTER_ID_PATH)
    except NoNodeError:
        return None
    return zk_paths.decode_cluster_id(zk_paths.CLUSTER_ID_PATH, data)
