"""ListOffsets and OffsetForLeaderEpoch as KafkaApis answers them (Kafka's ``handleListOffsetRequest`` and
``handleOffsetForLeaderEpochRequest``): questions about a partition's offsets, answered by the replica
manager.

* **ListOffsets**: earliest (-2), latest (-1, the high watermark) and the first offset at or after a
  timestamp (-1 when there is none), with the leader epoch. Needs DESCRIBE on the topic (with
  ``[broker] authorizer``), else TOPIC_AUTHORIZATION_FAILED for each of its partitions.
* **OffsetForLeaderEpoch**: where an epoch ends in the leader's log (followers truncate to it; consumers
  validate their position, KIP-320). A follower's (``replica_id`` >= 0) needs CLUSTER_ACTION on the cluster,
  a consumer's DESCRIBE on the topic; a refusal is TOPIC_AUTHORIZATION_FAILED for each partition, as Kafka.

Thread-safe (the replica manager is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from broker.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.auth_helper import AuthHelper
from broker.server.error_codes import ANSWERED_ERRORS, error_code_of
from broker.server.replica_manager import ReplicaManager

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]
_NONE = int(ErrorCode.NONE)
_ANSWERED = ANSWERED_ERRORS


class OffsetApis:
    """The ListOffsets and OffsetForLeaderEpoch handlers (see the module docstring)."""

    def __init__(self, *, replica_manager: ReplicaManager, auth: AuthHelper, respond: Respond) -> None:
        self._replicas = replica_manager
        self._auth = auth
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {
            int(ApiKey.LIST_OFFSETS): self._list_offsets,
            int(ApiKey.OFFSET_FOR_LEADER_EPOCH): self._offset_for_leader_epoch,
        }

    def _list_offsets(self, request: NetworkRequest, header: RequestHeader, body: ListOffsetsRequest) -> None:
        topics = []
        denied = self._auth.denied(
            request.session, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics)
        )
        for topic in body.topics:
            partitions = []
            for asked in topic.partitions:
                index = asked.partition_index
                if topic.name in denied:
                    partitions.append(
                        ListOffsetsPartitionResponse(
                            partition_index=index, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                        )
                    )
                    continue
                try:
                    offset, found_timestamp, epoch = self._replicas.fetch_offset_for_timestamp(
                        TopicPartition(topic.name, index), asked.timestamp, asked.current_leader_epoch
                    )
                except _ANSWERED as exc:
                    response = ListOffsetsPartitionResponse(
                        partition_index=index, error_code=int(error_code_of(exc))
                    )
                else:
                    response = ListOffsetsPartitionResponse(
                        partition_index=index,
                        error_code=_NONE,
                        timestamp=found_timestamp,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                partitions.append(response)
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        self._respond(request, header, ListOffsetsResponse(topics=topics))

    def _offset_for_leader_epoch(
        self, request: NetworkRequest, header: RequestHeader, body: OffsetForLeaderEpochRequest
    ) -> None:
        topics = []
        session = request.session
        names = {t.topic for t in body.topics}
        if body.replica_id >= 0:  # a follower (Kafka: CLUSTER_ACTION, else every topic refused)
            denied = set() if self._auth.authorize_cluster(session, AclOperation.CLUSTER_ACTION) else names
        else:
            denied = self._auth.denied(session, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        for topic in body.topics:
            partitions = []
            for asked in topic.partitions:
                if topic.topic in denied:
                    code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    partitions.append(EpochEndOffset(error_code=code, partition=asked.partition))
                    continue
                try:
                    epoch, end_offset = self._replicas.last_offset_for_leader_epoch(
                        TopicPartition(topic.topic, asked.partition),
                        asked.leader_epoch,
                        asked.current_leader_epoch,
                    )
                except _ANSWERED as exc:
                    answer = EpochEndOffset(error_code=int(error_code_of(exc)), partition=asked.partition)
                else:
                    answer = EpochEndOffset(
                        error_code=_NONE, partition=asked.partition, leader_epoch=epoch, end_offset=end_offset
                    )
                partitions.append(answer)
            topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions))
        self._respond(request, header, OffsetForLeaderEpochResponse(topics=topics))
