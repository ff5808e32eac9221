"""The protocol layer's APIs on the partitions' logs themselves (part of Kafka's ``KafkaApis``, split out as
:mod:`broker.server.admin_apis` is): DeleteRecords, DescribeLogDirs, DescribeProducers.

* **DeleteRecords**: each partition's leader raises its log start offset to the asked offset (-1: the high
  watermark) through :meth:`~broker.log.log_cleanup.LogCleanup.delete_records_before`: reads below it are
  OFFSET_OUT_OF_RANGE at once, the segments wholly below it are deleted, and followers raise theirs from
  the leader's fetch responses. An offset past the high watermark, or negative, is OFFSET_OUT_OF_RANGE; a
  log whose ``cleanup_policy`` lacks ``delete`` is POLICY_VIOLATION; a partition not led here
  NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION (Kafka's checks, in its order). A
  partition named twice keeps the answer of its last mention. As in Kafka, the answer waits (up to
  ``timeout_ms``) until every live replica's log start offset reached the offset, and its
  ``low_watermark`` is their lowest (:mod:`broker.server.delayed_delete_records`).
* **DescribeLogDirs**: every log dir of this broker (``[log] log_dirs``) with the asked partitions whose
  logs lie in it (null ``topics``: every partition; one not here is left out, as in Kafka): each log's
  size in bytes, an offset lag of 0 (Kafka's for a current log: its high watermark is never past its log
  end; Lumber has no future logs, which a move between a broker's dirs would make), and from v4 the dir's
  file system's total and usable bytes (``statvfs``). A dir that cannot be read answers KAFKA_STORAGE_ERROR.
* **DescribeProducers**: the idempotent producers whose state a partition's local log holds (leader or
  follower, as in Kafka): id, epoch, last sequence and last timestamp; no transactions, so no coordinator
  epoch and no transaction start offset (-1). A partition with no log here is NOT_LEADER_OR_FOLLOWER, or
  UNKNOWN_TOPIC_OR_PARTITION when the cluster does not have it.

Thread-safe: no state of its own.
"""

from __future__ import annotations

import logging
import os
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
from broker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from broker.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.auth_helper import AuthHelper
from broker.server.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsResult
from broker.server.error_codes import ANSWERED_ERRORS, error_code_of
from broker.server.errors import PolicyViolationError
from broker.server.partition import Partition
from broker.server.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]
#: DescribeLogDirs v4 adds the dir's total and usable bytes.
_FIRST_VERSION_WITH_BYTES = 4


class LogAdminApis:
    """Answers DeleteRecords, DescribeLogDirs and DescribeProducers (see the module docstring)."""

    def __init__(
        self, replica_manager: ReplicaManager, cluster: ClusterWatcher, auth: AuthHelper, respond: Respond
    ) -> None:
        self._replicas = replica_manager
        self._cluster = cluster
        self._auth = auth
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {
            int(ApiKey.DELETE_RECORDS): self._delete_records,
            int(ApiKey.DESCRIBE_LOG_DIRS): self._describe_log_dirs,
            int(ApiKey.DESCRIBE_PRODUCERS): self._describe_producers,
        }

    def _delete_records(
        self, request: NetworkRequest, header: RequestHeader, body: DeleteRecordsRequest
    ) -> None:
        answers: dict[TopicPartition, DeleteRecordsResult] = {}
        waiting: dict[TopicPartition, tuple[Partition, int]] = {}
        for topic in body.topics:
            for asked in topic.partitions:
                tp = TopicPartition(topic.name, asked.partition_index)
                waiting.pop(tp, None)
                try:
                    self._auth.check(request.session, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
                    waiting[tp] = self.delete_records(tp, asked.offset)
                except ANSWERED_ERRORS as exc:
                    answers[tp] = (-1, exc)

        def respond(done: dict[TopicPartition, DeleteRecordsResult]) -> None:
            by_topic: dict[str, list[DeleteRecordsPartitionResult]] = {}
            for tp, (low_watermark, error) in (answers | done).items():
                by_topic.setdefault(tp.topic, []).append(
                    DeleteRecordsPartitionResult(
                        partition_index=tp.partition,
                        low_watermark=low_watermark,
                        error_code=int(ErrorCode.NONE if error is None else error_code_of(error)),
                    )
                )
            topics = [DeleteRecordsTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]
            self._respond(request, header, DeleteRecordsResponse(topics=topics))

        if waiting:
            self._replicas.watch(DelayedDeleteRecords(waiting, body.timeout_ms, respond))
        else:
            respond({})

    def delete_records(self, tp: TopicPartition, offset: int) -> tuple[Partition, int]:
        """Raise ``tp``'s log start offset to ``offset`` (-1: the high watermark) on its leader, here;
        returns the partition and the offset its replicas must reach (see the module docstring for the
        errors)."""
        partition = self._replicas.leader_partition(self._cluster.view, tp)
        log = partition.log
        if "delete" not in log.config.cleanup_policy:
            raise PolicyViolationError(
                f"{tp}: records cannot be deleted: cleanup.policy is {log.config.cleanup_policy}"
            )
        target = log.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise OffsetOutOfRangeError(str(tp), target, log.log_start_offset, log.high_watermark)
        return partition, log.delete_records_before(target)

    # ------------------------------------------------------------------------------------ DescribeLogDirs

    def _describe_log_dirs(
        self, request: NetworkRequest, header: RequestHeader, body: DescribeLogDirsRequest
    ) -> None:
        asked = (
            None
            if body.topics is None
            else {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
        )
        if not self._auth.authorize_cluster(request.session, AclOperation.DESCRIBE):
            # Kafka's answer: the error (v3+), no dirs
            self._respond(
                request,
                header,
                DescribeLogDirsResponse(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), results=[]),
            )
            return
        logs = self._replicas.log_manager.all_logs()
        results = []
        for directory in self._replicas.log_manager.log_dirs:
            by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
            for log in logs:
                tp = log.topic_partition
                if log.dir.parent != directory or (asked is not None and tp not in asked):
                    continue
                by_topic.setdefault(tp.topic, []).append(
                    DescribeLogDirsPartition(partition_index=tp.partition, partition_size=log.size_bytes)
                )
            topics = [DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in by_topic.items()]
            try:
                stats = os.statvfs(directory)
            except OSError as exc:
                logger.warning("DescribeLogDirs: %s: %s", directory, exc)
                results.append(
                    DescribeLogDirsResult(
                        error_code=int(ErrorCode.KAFKA_STORAGE_ERROR), log_dir=str(directory)
                    )
                )
                continue
            total, usable = -1, -1
            if header.api_version >= _FIRST_VERSION_WITH_BYTES:
                total, usable = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
            results.append(
                DescribeLogDirsResult(
                    log_dir=str(directory.resolve()), topics=topics, total_bytes=total, usable_bytes=usable
                )
            )
        self._respond(request, header, DescribeLogDirsResponse(results=results))

    # ------------------------------------------------------------------------------------ DescribeProducers

    def _describe_producers(
        self, request: NetworkRequest, header: RequestHeader, body: DescribeProducersRequest
    ) -> None:
        topics = []
        for topic in body.topics:
            partitions = []
            for index in topic.partition_indexes:
                try:
                    self._auth.check(request.session, AclOperation.READ, ResourceType.TOPIC, topic.name)
                    producers = self.active_producers(TopicPartition(topic.name, index))
                except ANSWERED_ERRORS as exc:
                    answer = PartitionResponse(
                        partition_index=index, error_code=int(error_code_of(exc)), error_message=str(exc)
                    )
                else:
                    answer = PartitionResponse(partition_index=index, active_producers=producers)
                partitions.append(answer)
            topics.append(TopicResponse(name=topic.name, partitions=partitions))
        self._respond(request, header, DescribeProducersResponse(topics=topics))

    def active_producers(self, tp: TopicPartition) -> list[ProducerState]:
        """The producers ``tp``'s local log holds state for (see the module docstring for the errors)."""
        partition = self._replicas.get_partition(tp)
        if partition is None:  # not here: the leader lookup names why (unknown, or led elsewhere)
            partition = self._replicas.leader_partition(self._cluster.view, tp)
        return [
            ProducerState(producer_id=pid, producer_epoch=epoch, last_sequence=sequence, last_timestamp=at)
            for pid, epoch, sequence, at in partition.log.active_producers()
        ]
