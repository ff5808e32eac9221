"""A topic's part of a Metadata response, from the cluster view (Kafka's ``MetadataCache``).

Each partition answers its replicas from ZooKeeper's assignment and its leader, leader epoch and ISR from
its state znode (``leader``, ``leader_epoch``, ``isr``), as the cluster watcher keeps them; the replicas
that are not live are its offline replicas. A partition whose leader is not live (or that has no state yet)
answers LEADER_NOT_AVAILABLE, which clients retry.
A topic just auto-created but not yet in the view answers LEADER_NOT_AVAILABLE, which clients retry too.
``__consumer_offsets`` is marked internal, as Kafka marks it. A pure function of an immutable view:
thread-safe.
"""

from __future__ import annotations

from broker.cluster.cluster_view import ClusterView
from broker.protocol import ErrorCode
from broker.protocol.messages.metadata import MetadataResponsePartition, MetadataResponseTopic
from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC

_NONE = int(ErrorCode.NONE)


def topic_metadata(view: ClusterView, name: str, create_error: ErrorCode | None) -> MetadataResponseTopic:
    """The Metadata answer for topic ``name`` in ``view`` (``create_error``: what auto-creating it gave,
    None when it was not tried)."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return MetadataResponseTopic(error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION), name=name)
    assignment = view.topics.get(name)
    if assignment is None:
        if create_error is None:  # not created here
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif create_error == ErrorCode.NONE:  # created, not seen yet: clients retry on this one
            code = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            code = create_error
        return MetadataResponseTopic(error_code=int(code), name=name)
    partitions = []
    for number in sorted(assignment):
        replicas = list(assignment[number])
        leader = view.leader(name, number)
        state = view.states.get(TopicPartition(name, number))
        partitions.append(
            MetadataResponsePartition(
                error_code=_NONE if leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
                partition_index=number,
                leader_id=leader,
                leader_epoch=-1 if state is None else state.leader_epoch,
                replica_nodes=replicas,
                isr_nodes=[] if state is None else list(state.isr),
                offline_replicas=[r for r in replicas if r not in view.brokers],
            )
        )
    return MetadataResponseTopic(
        error_code=_NONE, name=name, is_internal=name == OFFSETS_TOPIC, partitions=partitions
    )
