"""The protocol layer's APIs on the partitions' logs themselves (part of Kafka's ``KafkaApis``, split out as
:mod:`broker.server.admin_apis` is): DeleteRecords.

* **DeleteRecords**: each partition's leader raises its log start offset to the asked offset (-1: the high
  watermark) through :meth:`~broker.log.log_cleanup.LogCleanup.delete_records_before`: reads below it are
  OFFSET_OUT_OF_RANGE at once, the segments wholly below it are deleted, and followers raise theirs from
  the leader's fetch responses. An offset past the high watermark, or negative, is OFFSET_OUT_OF_RANGE; a
  log whose ``cleanup_policy`` lacks ``delete`` is POLICY_VIOLATION; a partition not led here
  NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION (Kafka's checks, in its order). A
  partition named twice keeps the answer of its last mention. Where Lumber differs from Kafka: the answer's
  ``low_watermark`` is the leader's new log start offset, sent at once; Kafka waits (up to ``timeout_ms``)
  until every live replica's log start offset reached it and answers their lowest.

Thread-safe: no state of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.log.errors import OffsetOutOfRangeError
from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.delete_records import (
    HIGH_WATERMARK,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from broker.record.topic_partition import TopicPartition
from broker.server.error_codes import ANSWERED_ERRORS, error_code_of
from broker.server.errors import PolicyViolationError
from broker.server.replica_manager import ReplicaManager

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]


class LogAdminApis:
    """Answers DeleteRecords (see the module docstring)."""

    def __init__(self, replica_manager: ReplicaManager, cluster: ClusterWatcher, respond: Respond) -> None:
        self._replicas = replica_manager
        self._cluster = cluster
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {int(ApiKey.DELETE_RECORDS): self._delete_records}

    def _delete_records(
        self, request: NetworkRequest, header: RequestHeader, body: DeleteRecordsRequest
    ) -> None:
        topics = []
        for topic in body.topics:
            partitions: dict[int, DeleteRecordsPartitionResult] = {}
            for asked in topic.partitions:
                index = asked.partition_index
                try:
                    low_watermark = self.delete_records(TopicPartition(topic.name, index), asked.offset)
                except ANSWERED_ERRORS as exc:
                    partitions[index] = DeleteRecordsPartitionResult(
                        partition_index=index, error_code=int(error_code_of(exc))
                    )
                else:
                    partitions[index] = DeleteRecordsPartitionResult(
                        partition_index=index, low_watermark=low_watermark, error_code=int(ErrorCode.NONE)
                    )
            topics.append(DeleteRecordsTopicResult(name=topic.name, partitions=list(partitions.values())))
        self._respond(request, header, DeleteRecordsResponse(topics=topics))

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Raise ``tp``'s log start offset to ``offset`` (-1: the high watermark) on its leader, here;
        returns the new log start offset (see the module docstring for the errors)."""
        partition = self._replicas.leader_partition(self._cluster.view, tp)
        log = partition.log
        if "delete" not in log.config.cleanup_policy:
            raise PolicyViolationError(
                f"{tp}: records cannot be deleted: cleanup.policy is {log.config.cleanup_policy}"
            )
        target = log.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise OffsetOutOfRangeError(str(tp), target, log.log_start_offset, log.high_watermark)
        return log.delete_records_before(target)
