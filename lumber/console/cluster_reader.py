"""The cluster as the console shows it: brokers and topics from ZooKeeper, offsets from the brokers.

Brokers, topic assignments, the controller and each partition's state (leader, leader epoch, ISR) are read
from ZooKeeper (:mod:`broker.cluster.zk_reads`); the log start and log end offset of each partition whose
leader is live come from the brokers (ListOffsets through
:class:`~broker.client.consumer.consumer.Consumer`). A partition whose leader is not live is offline
(``leader`` is ``None``, its offsets unknown); one whose ISR is smaller than its replicas is
under-replicated; one whose ISR is smaller than its topic's
``min.insync.replicas`` (the topic's override, else ``[broker] min_insync_replicas``) is under min ISR
(acks=all produces are refused). A broker named as a replica that is not registered is down: ZooKeeper
forgets a broker when its session ends, the assignments still name it (Kafka's tools infer it the same way).
A partition being reassigned (:mod:`lumber.console.partition_move`) is under-replicated only when its ISR
is smaller than its replicas without the ones being added (KIP-455, as ``lumber topics describe`` counts).
:meth:`ClusterView.problems` says all of it in one list, which the pages show as a banner, the moves in
progress last.

Internal topics are those whose name starts with ``_`` (``__consumer_offsets``, ``_audit``): the pages
hide them unless asked (:func:`is_internal`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from broker.client.errors import ClientError
from broker.cluster import zk_paths, zk_reads
from broker.cluster.broker_info import BrokerInfo
from broker.cluster.replication_throttle import THROTTLED_REPLICAS_PATH
from broker.cluster.topic_config import min_insync_replicas
from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from lumber.console.errors import NotFoundError
from lumber.console.partition_move import PartitionMove, read_moves
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
    min_insync_replicas: int = 1
    move: PartitionMove | None = None

    @property
    def under_replicated(self) -> bool:
        adding = len(self.move.reassignment.adding) if self.move is not None else 0
        return len(self.isr) < len(self.replicas) - adding

    @property
    def under_min_isr(self) -> bool:
        return self.leader is not None and len(self.isr) < self.min_insync_replicas

    @property
    def marks(self) -> str:
        """What is wrong with it, in words ("" when nothing is)."""
        if self.leader is None:
            return "offline"
        found = ["under-replicated"] if self.under_replicated else []
        if self.under_min_isr:
            found.append(f"under min ISR ({len(self.isr)} < {self.min_insync_replicas})")
        if self.move is not None:
            found.append(self.move.text)
        return ", ".join(found)

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
            "min_insync_replicas": self.min_insync_replicas,
            "under_min_isr": self.under_min_isr,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "messages": self.messages,
            "reassignment": None if self.move is None else self.move.to_json(),
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

    @property
    def under_min_isr(self) -> int:
        return sum(1 for p in self.partitions if p.under_min_isr)

    @property
    def reassigning(self) -> int:
        return sum(1 for p in self.partitions if p.move is not None)

    @property
    def internal(self) -> bool:
        return is_internal(self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.name,
            "messages": self.messages,
            "offline_partitions": self.offline,
            "under_replicated_partitions": self.under_replicated,
            "under_min_isr_partitions": self.under_min_isr,
            "reassigning_partitions": self.reassigning,
            "internal": self.internal,
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass(frozen=True)
class ClusterView:
    cluster_id: str | None
    brokers: Mapping[int, BrokerInfo]
    topics: tuple[TopicView, ...]
    controller_id: int = -1

    @property
    def down_brokers(self) -> list[int]:
        """Brokers some partition names as a replica that are not registered."""
        named = {b for t in self.topics for p in t.partitions for b in p.replicas}
        return sorted(named - set(self.brokers))

    def problems(self) -> list[str]:
        """What an operator must know at once, one line each (empty when the cluster is healthy)."""
        found = [f"broker {b} is down (not registered in ZooKeeper)" for b in self.down_brokers]
        counts = (
            (sum(t.offline for t in self.topics), "offline (no live leader)"),
            (sum(t.under_min_isr for t in self.topics), "under min ISR (acks=all produces refused)"),
            (sum(t.under_replicated for t in self.topics), "under-replicated"),
        )
        for count, what in counts:
            if count:
                found.append(f"{count} partition{'s' if count != 1 else ''} {what}")
        if self.controller_id not in self.brokers:
            found.append("no active controller")
        moving = sum(t.reassigning for t in self.topics)
        if moving:
            found.append(f"{moving} partition{'s' if moving != 1 else ''} being reassigned")
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id,
            "brokers": [
                {"id": b.broker_id, "host": b.host, "port": b.port, "address": b.address, "state": "up"}
                for _, b in sorted(self.brokers.items())
            ]
            + [{"id": b, "state": "down"} for b in self.down_brokers],
            "problems": self.problems(),
            "topics": [t.to_json() for t in self.topics],
        }


def is_internal(topic: str) -> bool:
    """``__consumer_offsets``, ``_audit``: topics Lumber itself writes, hidden unless asked for."""
    return topic.startswith("_")


def read_cluster(sources: Sources) -> ClusterView:
    """Every broker and topic, with the offsets of every partition whose leader is live."""
    zk = sources.zk
    brokers = zk_reads.read_brokers(zk)
    nodes = zk_reads.read_assignments(zk, zk_reads.read_topic_names(zk))
    throttle_node = _throttle_node(sources)
    topics = tuple(
        _topic_view(sources, name, node, brokers, throttle_node)
        for name, node in nodes.items()
        if node is not None
    )
    return ClusterView(_cluster_id(sources), brokers, topics, zk_reads.read_controller(zk))


def read_topic(sources: Sources, topic: str) -> TopicView:
    """One topic (:class:`NotFoundError` when ZooKeeper does not know it, or the name is not a topic's)."""
    try:
        validate_topic_name(topic)
    except InvalidTopicError as exc:
        raise NotFoundError(f"no topic {topic!r}: {exc}") from exc
    node = zk_reads.read_assignments(sources.zk, [topic])[topic]
    if node is None:
        raise NotFoundError(f"no topic {topic!r} in ZooKeeper {sources.config.zookeeper.connect}")
    brokers = zk_reads.read_brokers(sources.zk)
    return _topic_view(sources, topic, node, brokers, _throttle_node(sources))


def _topic_view(
    sources: Sources,
    topic: str,
    node: zk_reads.TopicNode | zk_paths.ZkDataError,
    brokers: Mapping[int, BrokerInfo],
    throttle_node: bytes | None,
) -> TopicView:
    if isinstance(node, zk_paths.ZkDataError):
        raise node
    assignment = node.assignment
    states = zk_reads.read_states(
        sources.zk, [TopicPartition(topic, p) for p in sorted(assignment)], skip_bad=True
    )
    live = {
        tp.partition: state.leader
        for tp, state in states.items()
        if state is not None and state.leader in brokers
    }
    min_isr = min_insync_replicas(
        zk_reads.read_topic_config(sources.zk, topic) or {}, sources.config.broker.min_insync_replicas
    )
    tps = [TopicPartition(topic, p) for p in sorted(live)]
    starts, ends = _offsets(sources, tps)
    moves = read_moves(sources, topic, node, live, brokers, throttle_node)
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
                min_insync_replicas=min_isr,
                move=moves.get(p),
            )
        )
    return TopicView(topic, tuple(partitions))


def _offsets(
    sources: Sources, tps: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The log start and end offsets of ``tps``; a partition whose leader does not answer (it died and
    ZooKeeper does not know it yet, or the clients learned it first) is left out, its offsets unknown,
    rather than failing the page."""
    if not tps:
        return {}, {}
    consumer = sources.consumer
    try:
        return consumer.beginning_offsets(tps), consumer.end_offsets(tps)
    except ClientError:
        starts: dict[TopicPartition, int] = {}
        ends: dict[TopicPartition, int] = {}
        for tp in tps:
            with contextlib.suppress(ClientError):
                start, end = consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
                starts[tp], ends[tp] = start, end
        return starts, ends


def _throttle_node(sources: Sources) -> bytes | None:
    """The data of ``/config/throttled_replicas`` (None: no throttle was ever set)."""
    try:
        data, _ = sources.zk.get(THROTTLED_REPLICAS_PATH)
    except NoNodeError:
        return None
    return bytes(data)


def _cluster_id(sources: Sources) -> str | None:
    try:
        data, _ = sources.zk.get(zk_paths.CLUSTER_ID_PATH)
    except NoNodeError:
        return None
    return zk_paths.decode_cluster_id(zk_paths.CLUSTER_ID_PATH, data)
