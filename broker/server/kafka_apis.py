"""The broker's protocol layer (Kafka's ``KafkaApis``): a request's bytes in, its response's bytes out.

Handler threads (:mod:`broker.server.handler_pool`) and, with ``[broker] inline_requests``, the network
processors call :meth:`KafkaApis.handle` with each request the network layer read. This layer decodes it,
dispatches it by API key, calls the part of the broker that does the work, and encodes the answer: the
:class:`~broker.server.replica_manager.ReplicaManager` for everything done to partitions (Produce, Fetch,
ListOffsets), the :class:`~broker.server.admin_manager.AdminManager` for topic administration, the cluster
watcher for metadata. It holds no partition state of its own. What each API answers:

* **ApiVersions**: the supported APIs and ranges; a request newer than Lumber's gets the v0-format
  UNSUPPORTED_VERSION fallback, so the client retries with a version both speak.
* **Metadata**: the live brokers and the asked-for topics from ZooKeeper (the cluster watcher's view);
  unknown topics are created when the request and ``[broker] auto_create_topics`` both allow it.
* **Produce**: Produce v3+ with acks 0, 1 or -1 (else UNSUPPORTED_FOR_MESSAGE_FORMAT or
  INVALID_REQUIRED_ACKS for every partition); the replica manager appends and says when to answer
  (``acks=-1``: once every in-sync replica has the batches, or, with ``[log] flush_on_ack``, once they are
  fsynced; REQUEST_TIMED_OUT after ``timeout_ms``). ``acks=0`` gets no response: a failure closes the
  connection, so that the producer notices (as Kafka does). A refused partition has nothing appended.
* **Fetch**: whole batches as file regions that the network layer sends with ``sendfile`` (the broker never
  decodes a batch to serve it); ``min_bytes`` and ``max_wait_ms`` as the replica manager applies them.
* **Fetch** from a follower (``replica_id`` >= 0): read up to the log end; its fetch offset is its log end
  offset, which moves the ISR and the high watermark (the replica manager). Every partition's
  ``current_leader_epoch`` is fenced (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
* **ListOffsets**: earliest (-2), latest (-1, the high watermark) and the first offset at or after a
  timestamp (-1 when there is none), with the leader epoch.
* **OffsetForLeaderEpoch**: where an epoch ends in the leader's log (followers truncate to it; consumers
  validate their position, KIP-320).
* **CreateTopics / DeleteTopics**: through the admin manager (replication factor, replica assignments
  and the topic configs); CreateTopics v5+ answers with the created topic's configs and their sources.
* **DescribeConfigs / AlterConfigs / IncrementalAlterConfigs**: TOPIC and BROKER resources, each answered
  on its own (its error does not fail the others) through the admin manager; a resource named twice in
  one request is INVALID_REQUEST, as in Kafka; other resource types (groups, broker loggers, client
  metrics) are INVALID_REQUEST naming the type. After a successful alter the cluster view is read again,
  so this broker's logs run with the new configs before the answer goes out (the others follow their
  ZooKeeper watch).
* **FindCoordinator** (group keys): the leader of the group's ``__consumer_offsets`` partition (the topic
  created on first use), COORDINATOR_NOT_AVAILABLE while it has none; transaction keys:
  COORDINATOR_NOT_AVAILABLE (Lumber has no transactions).
* **JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups,
  DeleteGroups, OffsetDelete**: through the group coordinator (:mod:`broker.server.group.group_coordinator`);
  JoinGroup, SyncGroup and OffsetCommit are answered later, from the coordinator's callbacks.
* **InitProducerId**: as Kafka answers an idempotent (non-transactional) producer: a fresh producer id,
  unique across brokers and restarts (:mod:`broker.cluster.producer_id_manager`), and epoch 0; a
  transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Lumber has no transactions).

A request that does not decode, an unknown API key, or an unsupported version of any API but ApiVersions
closes its connection, with the reason logged, as Kafka does; every other client is unaffected. Every
error a partition or a topic meets is an exception, answered with the code
:mod:`broker.server.error_codes` (the one table) gives it. Thread-safe: any number of handler and processor
threads may call :meth:`KafkaApis.handle` and :meth:`KafkaApis.handle_run` (no state of its own changes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ClusterError
from broker.cluster.producer_id_manager import ProducerIdManager
from broker.config import BrokerConfig
from broker.log.errors import LogError
from broker.log.log import Buffer
from broker.network.request_channel import NetworkRequest, NetworkResponse, RequestChannel
from broker.protocol import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    Region,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_response,
    decode_request,
    encode_api_versions_fallback,
    encode_fetch_response,
    encode_response,
)
from broker.protocol.codec import ProduceTemplate, produce_template
from broker.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from broker.protocol.messages.config_resource import ConfigResourceType, ConfigType
from broker.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from broker.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from broker.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from broker.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from broker.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from broker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from broker.protocol.messages.find_coordinator import (
    GROUP_KEY_TYPE,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from broker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from broker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from broker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from broker.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from broker.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from broker.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from broker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
)
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from broker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from broker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from broker.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from broker.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from broker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from broker.record.errors import InvalidTopicError, RecordError
from broker.record.topic_partition import TopicPartition
from broker.server.admin_manager import AdminManager
from broker.server.delayed_produce import ProduceResult
from broker.server.error_codes import error_code_of
from broker.server.errors import (
    InvalidRequestError,
    InvalidRequiredAcksError,
    ServerError,
    UnsupportedMessageFormatError,
)
from broker.server.group.group_coordinator import GroupCoordinator, JoinResult, MemberToLeave, SyncResult
from broker.server.group.offset_and_metadata import OffsetAndMetadata
from broker.server.partition import Partition
from broker.server.replica_manager import FetchPartitionResult, FetchRead, ReplicaManager
from broker.server.topic_metadata import topic_metadata

logger = logging.getLogger(__name__)

_NONE = int(ErrorCode.NONE)
#: The APIs whose handling never blocks its thread (a wait goes to the purgatory), so that the network
#: threads may serve them themselves (``[broker] inline_requests``); the others may talk to ZooKeeper.
#: The group coordinator's frequent requests qualify too: a commit's wait is the purgatory's, like an acks=-1
#: Produce's, and a Heartbeat or OffsetFetch only reads the coordinator's cache under a group's lock.
INLINE_API_KEYS = frozenset(
    int(key)
    for key in (
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.API_VERSIONS,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.HEARTBEAT,
    )
)
#: The APIs :meth:`KafkaApis.handle_run` serves in runs.
RUN_API_KEYS = frozenset({int(ApiKey.PRODUCE)})
#: The APIs a processor may serve while an earlier request of the connection waits for its answer (an
#: acks=-1 Produce waiting for its group commit), answering in order: one fsync then answers them all.
#: OffsetCommit too: a consumer's asynchronous commits, appended while the one before waits for the
#: in-sync replicas, are replicated by the same follower fetches (the coordinator's cache keeps the
#: commit appended last, see :class:`~broker.server.group.group_metadata.GroupMetadata`).
PIPELINE_API_KEYS = frozenset({int(ApiKey.PRODUCE), int(ApiKey.OFFSET_COMMIT)})
#: Produce v0-v2 carry the old message sets, which the log does not store.
_FIRST_RECORD_BATCH_PRODUCE_VERSION = 3
#: What a request's handling can raise that is the client's answer, not a bug (mapped to a code).
_ANSWERED = (LogError, RecordError, ServerError, ClusterError)


class KafkaApis:
    """Answers every API Lumber implements (see the module docstring)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        admin_manager: AdminManager,
        cluster: ClusterWatcher,
        channel: RequestChannel,
        cluster_id: str,
        producer_ids: ProducerIdManager,
        group_coordinator: GroupCoordinator,
    ) -> None:
        self._config = config
        self._replicas = replica_manager
        self._admin = admin_manager
        self._cluster = cluster
        self._channel = channel
        self._cluster_id = cluster_id
        self._producer_ids = producer_ids
        self._groups = group_coordinator
        self._handlers: dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]] = {
            int(ApiKey.PRODUCE): self._produce,
            int(ApiKey.FETCH): self._fetch,
            int(ApiKey.LIST_OFFSETS): self._list_offsets,
            int(ApiKey.METADATA): self._metadata,
            int(ApiKey.FIND_COORDINATOR): self._find_coordinator,
            int(ApiKey.API_VERSIONS): self._api_versions,
            int(ApiKey.CREATE_TOPICS): self._create_topics,
            int(ApiKey.DELETE_TOPICS): self._delete_topics,
            int(ApiKey.INIT_PRODUCER_ID): self._init_producer_id,
            int(ApiKey.OFFSET_FOR_LEADER_EPOCH): self._offset_for_leader_epoch,
            int(ApiKey.JOIN_GROUP): self._join_group,
            int(ApiKey.SYNC_GROUP): self._sync_group,
            int(ApiKey.HEARTBEAT): self._heartbeat,
            int(ApiKey.LEAVE_GROUP): self._leave_group,
            int(ApiKey.OFFSET_COMMIT): self._offset_commit,
            int(ApiKey.OFFSET_FETCH): self._offset_fetch,
            int(ApiKey.LIST_GROUPS): self._list_groups,
            int(ApiKey.DESCRIBE_GROUPS): self._describe_groups,
            int(ApiKey.DELETE_GROUPS): self._delete_groups,
            int(ApiKey.OFFSET_DELETE): self._offset_delete,
            int(ApiKey.DESCRIBE_CONFIGS): self._describe_configs,
            int(ApiKey.ALTER_CONFIGS): self._alter_configs,
            int(ApiKey.INCREMENTAL_ALTER_CONFIGS): self._incremental_alter_configs,
        }

    # ------------------------------------------------------------------------------------ dispatch

    def handle(self, request: NetworkRequest) -> None:
        """Decode ``request``, answer it (now or later), or close its connection naming why."""
        try:
            decoded = decode_request(request.frame)
        except UnsupportedVersionError as exc:
            if exc.api_key == int(ApiKey.API_VERSIONS):
                self._send(request, (encode_api_versions_fallback(exc.correlation_id),))
            else:
                self._close(request, str(exc))
            return
        except UnknownApiKeyError as exc:
            self._close(request, str(exc))
            return
        except ProtocolError as exc:
            self._close(request, f"malformed request: {exc}")
            return
        header, body = decoded
        try:
            self._handlers[header.api_key](request, header, body)
        except Exception as exc:
            logger.exception(
                "%s: %s v%d (correlation id %d) failed",
                request.peer,
                ApiKey(header.api_key).title,
                header.api_version,
                header.correlation_id,
            )
            self._close(request, f"handling failed: {exc!r}")

    def handle_run(self, requests: Sequence[NetworkRequest]) -> int:
        """Serve the leading ``acks=0`` Produce requests of ``requests`` (consecutive requests of one
        connection) together; returns how many were served. They get no response, as with :meth:`handle`.

        Served together means one append per run of requests to the same partition
        (:meth:`ReplicaManager.append_run`), with the same outcome as appending them one by one. A request
        that is not a single-partition ``acks=0`` Produce to a partition led here, or whose append fails,
        ends the run: it and the requests after it are left to :meth:`handle` (which answers or closes as
        usual), nothing of them appended.
        """
        view = self._cluster.view
        runs: list[tuple[Partition, list[Buffer]]] = []
        template: ProduceTemplate | None = None  # the last request decoded: the next are likely the same
        partition: Partition | None = None
        for request in requests:
            frame = request.frame
            records: Buffer | None = None if template is None else template.records_of(frame)
            if records is None:
                try:
                    header, body = decode_request(frame)
                except ProtocolError:
                    break
                if (
                    type(body) is not ProduceRequest
                    or body.acks != 0
                    or header.api_version < _FIRST_RECORD_BATCH_PRODUCE_VERSION
                    or len(body.topic_data) != 1
                    or len(body.topic_data[0].partition_data) != 1
                ):
                    break
                topic_data = body.topic_data[0]
                partition_data = topic_data.partition_data[0]
                decoded_records = partition_data.records
                if not isinstance(decoded_records, (bytes, bytearray, memoryview)):
                    break
                records = decoded_records
                try:
                    partition = self._replicas.leader_partition(
                        view, TopicPartition(topic_data.name, partition_data.index)
                    )
                except _ANSWERED:
                    break
                template = produce_template(header.api_version, header.client_id, body)
            # else: the same request as the template's (acks=0, same partition), other records
            if partition is None:  # unreachable: a template is only kept with its partition
                break
            if runs and runs[-1][0] is partition:
                runs[-1][1].append(records)
            else:
                runs.append((partition, [records]))
        return self._replicas.append_run(runs)

    def _send(self, request: NetworkRequest, chunks: Sequence[bytes | Region]) -> None:
        self._channel.send_response(NetworkResponse(request, tuple(chunks)))

    def _respond(self, request: NetworkRequest, header: RequestHeader, body: Any) -> None:
        self._send(request, (encode_response(header.api_version, header.correlation_id, body),))

    def _close(self, request: NetworkRequest, reason: str) -> None:
        logger.warning("closing the connection from %s: %s", request.peer, reason)
        self._channel.send_response(NetworkResponse(request, (), close_after=True, reason=reason))

    # ------------------------------------------------------------------------------------ ApiVersions

    def _api_versions(self, request: NetworkRequest, header: RequestHeader, _body: Any) -> None:
        self._respond(request, header, api_versions_response(header.api_version))

    # ------------------------------------------------------------------------------------ Metadata

    def _metadata(self, request: NetworkRequest, header: RequestHeader, body: MetadataRequest) -> None:
        view = self._cluster.view
        if self._config.broker_id not in view.brokers:
            # just registered (or about to deregister): the watcher may not have seen this broker's own
            # node yet, and a client told of no broker at all may not ask again for a while (librdkafka)
            view = self._cluster.refresh()
        if body.topics is None or (header.api_version == 0 and not body.topics):
            names = sorted(view.topics)
        else:
            names = [t.name for t in body.topics if t.name is not None]
        allow_create = self._config.auto_create_topics and (
            header.api_version < 4 or body.allow_auto_topic_creation
        )
        missing = [name for name in names if name not in view.topics]
        created_errors: dict[str, ErrorCode] = {}
        if missing and allow_create:
            for name in missing:
                created_errors[name] = self._auto_create(name)
            view = self._cluster.refresh()
        brokers = [
            MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=None)
            for b in sorted(view.brokers.values(), key=lambda b: b.broker_id)
        ]
        topics = [topic_metadata(view, name, created_errors.get(name)) for name in names]
        self._respond(
            request,
            header,
            MetadataResponse(
                brokers=brokers, cluster_id=self._cluster_id, controller_id=view.controller_id, topics=topics
            ),
        )

    def _auto_create(self, topic: str) -> ErrorCode:
        try:
            self._admin.auto_create_topic(topic)
        except InvalidTopicError:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        except ClusterError as exc:
            logger.warning("auto-creating topic %r failed: %s", topic, exc)
            return error_code_of(exc)
        return ErrorCode.NONE

    # ------------------------------------------------------------------------------------ Produce

    def _produce(self, request: NetworkRequest, header: RequestHeader, body: ProduceRequest) -> None:
        acks = body.acks
        if acks not in (0, 1, -1):
            self._produce_error_all(request, header, body, InvalidRequiredAcksError(acks))
            return
        if header.api_version < _FIRST_RECORD_BATCH_PRODUCE_VERSION:
            self._produce_error_all(
                request,
                header,
                body,
                UnsupportedMessageFormatError(
                    f"Produce v{header.api_version} carries old message sets; Lumber stores record batch v2 "
                    "(Produce v3+)"
                ),
            )
            return
        entries: list[tuple[TopicPartition, Buffer | None]] = []
        for topic_data in body.topic_data:
            for partition_data in topic_data.partition_data:
                records = partition_data.records
                # concrete types: a runtime-checkable Protocol's isinstance costs microseconds
                entries.append(
                    (
                        TopicPartition(topic_data.name, partition_data.index),
                        records if isinstance(records, (bytes, bytearray, memoryview)) else None,
                    )
                )

        def respond(results: dict[TopicPartition, ProduceResult]) -> None:
            failed = [
                f"{tp}: {error_code_of(r.error).name}: {r.error}"
                for tp, r in results.items()
                if r.error is not None
            ]
            if failed:
                logger.info("produce from %s: %s", request.peer, "; ".join(failed))
            if acks == 0:
                if failed:
                    # no response to carry the error: close, so that the producer notices (as Kafka does)
                    self._channel.send_response(
                        NetworkResponse(
                            request,
                            (),
                            close_after=True,
                            reason="acks=0 produce failed: " + "; ".join(failed),
                        )
                    )
                else:
                    self._channel.send_response(NetworkResponse(request, ()))
                return
            topics = []
            for topic_data in body.topic_data:
                name = topic_data.name
                partitions = []
                for partition_data in topic_data.partition_data:
                    result = results[TopicPartition(name, partition_data.index)]
                    error, info, partition = result.error, result.info, result.partition
                    partitions.append(
                        PartitionProduceResponse(
                            index=partition_data.index,
                            error_code=_NONE if error is None else int(error_code_of(error)),
                            base_offset=info.first_offset if info is not None and error is None else -1,
                            log_append_time_ms=-1,
                            log_start_offset=partition.log_start_offset if partition is not None else -1,
                            error_message=None if error is None else str(error),
                        )
                    )
                topics.append(TopicProduceResponse(name=name, partition_responses=partitions))
            self._respond(request, header, ProduceResponse(responses=topics))

        self._replicas.append_records(entries, acks=acks, timeout_ms=body.timeout_ms, respond=respond)

    def _produce_error_all(
        self, request: NetworkRequest, header: RequestHeader, body: ProduceRequest, error: ServerError
    ) -> None:
        message = str(error)
        logger.info("produce from %s refused: %s", request.peer, message)
        if body.acks == 0:
            self._close(request, message)
            return
        code = int(error_code_of(error))
        topics = [
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    PartitionProduceResponse(
                        index=p.index, error_code=code, base_offset=-1, error_message=message
                    )
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ]
        self._respond(request, header, ProduceResponse(responses=topics))

    # ------------------------------------------------------------------------------------ Fetch

    def _fetch(self, request: NetworkRequest, header: RequestHeader, body: FetchRequest) -> None:
        reads: list[FetchRead] = [
            (
                TopicPartition(t.topic, p.partition),
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
            )
            for t in body.topics
            for p in t.partitions
        ]

        def respond(results: list[FetchPartitionResult]) -> None:
            topics = []
            i = 0
            for fetch_topic in body.topics:
                partitions = []
                for fetch_partition in fetch_topic.partitions:
                    result = results[i]
                    i += 1
                    error = result.error
                    high_watermark = result.high_watermark
                    region = result.records
                    partitions.append(
                        PartitionData(
                            partition_index=fetch_partition.partition,
                            error_code=_NONE if error is None else int(error_code_of(error)),
                            high_watermark=high_watermark,
                            last_stable_offset=high_watermark,
                            log_start_offset=result.log_start_offset,
                            aborted_transactions=None if error is None else (),
                            records=region if region is not None else b"",
                        )
                    )
                topics.append(FetchableTopicResponse(topic=fetch_topic.topic, partitions=partitions))
            response = FetchResponse(error_code=_NONE, session_id=0, responses=topics)
            self._send(request, encode_fetch_response(header.api_version, header.correlation_id, response))

        self._replicas.fetch_messages(
            reads,
            max_bytes=body.max_bytes,
            min_bytes=body.min_bytes,
            max_wait_ms=body.max_wait_ms,
            respond=respond,
            replica_id=body.replica_id,
        )

    # ------------------------------------------------------------------------------------ ListOffsets

    def _list_offsets(self, request: NetworkRequest, header: RequestHeader, body: ListOffsetsRequest) -> None:
        topics = []
        for topic in body.topics:
            partitions = []
            for asked in topic.partitions:
                index = asked.partition_index
                try:
                    offset, epoch = self._replicas.fetch_offset_for_timestamp(
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
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                partitions.append(response)
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        self._respond(request, header, ListOffsetsResponse(topics=topics))

    # -------------------------------------------------------------------------------- OffsetForLeaderEpoch

    def _offset_for_leader_epoch(
        self, request: NetworkRequest, header: RequestHeader, body: OffsetForLeaderEpochRequest
    ) -> None:
        topics = []
        for topic in body.topics:
            partitions = []
            for asked in topic.partitions:
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

    # ------------------------------------------------------------------------------------ admin

    def _create_topics(
        self, request: NetworkRequest, header: RequestHeader, body: CreateTopicsRequest
    ) -> None:
        counts: dict[str, int] = {}
        for topic in body.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results = []
        for topic in body.topics:
            code, message, partitions, replication_factor = ErrorCode.NONE, None, -1, -1
            configs: list[CreatableTopicConfigs] = []
            try:
                if counts[topic.name] > 1:
                    raise InvalidRequestError(f"topic {topic.name!r} is named twice")
                partitions, replication_factor, overrides = self._admin.create_topic(
                    topic.name,
                    topic.num_partitions,
                    topic.replication_factor,
                    {a.partition_index: a.broker_ids for a in topic.assignments} or None,
                    {c.name: c.value for c in topic.configs},
                    validate_only=body.validate_only,
                )
                configs = [
                    CreatableTopicConfigs(
                        name=entry.name,
                        value=entry.value,
                        read_only=entry.read_only,
                        config_source=int(entry.source),
                    )
                    for entry in self._admin.topic_configs_of(overrides)
                ]
            except _ANSWERED as exc:
                code, message, partitions, replication_factor = error_code_of(exc), str(exc), -1, -1
            results.append(
                CreatableTopicResult(
                    name=topic.name,
                    error_code=int(code),
                    error_message=message,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=configs,
                )
            )
        if any(r.error_code == _NONE for r in results) and not body.validate_only:
            self._cluster.refresh()
        self._respond(request, header, CreateTopicsResponse(topics=results))

    def _delete_topics(
        self, request: NetworkRequest, header: RequestHeader, body: DeleteTopicsRequest
    ) -> None:
        names: list[str | None]
        names = [t.name for t in body.topics] if header.api_version >= 6 else list(body.topic_names)
        results = []
        for name in names:
            if name is None:
                results.append(
                    DeletableTopicResult(
                        name=None,
                        error_code=int(ErrorCode.UNKNOWN_TOPIC_ID),
                        error_message="Lumber has no topic ids: name the topic",
                    )
                )
                continue
            code, message = ErrorCode.NONE, None
            try:
                self._admin.delete_topic(name)
            except _ANSWERED as exc:
                code, message = error_code_of(exc), str(exc)
            results.append(DeletableTopicResult(name=name, error_code=int(code), error_message=message))
        self._cluster.refresh()
        self._respond(request, header, DeleteTopicsResponse(responses=results))

    # ------------------------------------------------------------------------------------ configs

    def _describe_configs(
        self, request: NetworkRequest, header: RequestHeader, body: DescribeConfigsRequest
    ) -> None:
        seen = _duplicates((r.resource_type, r.resource_name) for r in body.resources)
        results = []
        for resource in body.resources:
            code, message, configs = ErrorCode.NONE, None, []
            try:
                if (resource.resource_type, resource.resource_name) in seen:
                    raise InvalidRequestError(f"resource {resource.resource_name!r} is named twice")
                keys = resource.configuration_keys
                if resource.resource_type == ConfigResourceType.TOPIC:
                    entries = self._admin.describe_topic_configs(resource.resource_name, keys)
                elif resource.resource_type == ConfigResourceType.BROKER:
                    entries = self._admin.describe_broker_configs(resource.resource_name, keys)
                else:
                    raise _unsupported_resource(resource.resource_type)
                configs = [
                    DescribeConfigsResourceResult(
                        name=entry.name,
                        value=entry.value,
                        read_only=entry.read_only,
                        config_source=int(entry.source),
                        is_sensitive=False,
                        synonyms=[
                            DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
                            for s in entry.synonyms
                        ]
                        if body.include_synonyms
                        else [],
                        config_type=int(ConfigType[entry.type]),
                        documentation=entry.documentation if body.include_documentation else None,
                    )
                    for entry in entries
                ]
            except _ANSWERED as exc:
                code, message, configs = error_code_of(exc), str(exc), []
            results.append(
                DescribeConfigsResult(
                    error_code=int(code),
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=configs,
                )
            )
        self._respond(request, header, DescribeConfigsResponse(results=results))

    def _alter_configs(
        self, request: NetworkRequest, header: RequestHeader, body: AlterConfigsRequest
    ) -> None:
        def alter(resource_type: int, name: str, index: int) -> None:
            resource = body.resources[index]
            if resource_type == ConfigResourceType.TOPIC:
                self._admin.alter_topic_configs(
                    name, [(c.name, c.value) for c in resource.configs], validate_only=body.validate_only
                )
            elif resource_type == ConfigResourceType.BROKER:
                self._admin.refuse_broker_alter(name)
            else:
                raise _unsupported_resource(resource_type)

        responses = self._alter_each(
            [(r.resource_type, r.resource_name) for r in body.resources], alter, body.validate_only
        )
        self._respond(request, header, AlterConfigsResponse(responses=responses))

    def _incremental_alter_configs(
        self, request: NetworkRequest, header: RequestHeader, body: IncrementalAlterConfigsRequest
    ) -> None:
        def alter(resource_type: int, name: str, index: int) -> None:
            resource = body.resources[index]
            if resource_type == ConfigResourceType.TOPIC:
                self._admin.incremental_alter_topic_configs(
                    name,
                    [(c.name, c.config_operation, c.value) for c in resource.configs],
                    validate_only=body.validate_only,
                )
            elif resource_type == ConfigResourceType.BROKER:
                self._admin.refuse_broker_alter(name)
            else:
                raise _unsupported_resource(resource_type)

        responses = self._alter_each(
            [(r.resource_type, r.resource_name) for r in body.resources], alter, body.validate_only
        )
        self._respond(request, header, IncrementalAlterConfigsResponse(responses=responses))

    def _alter_each(
        self,
        resources: Sequence[tuple[int, str]],
        alter: Callable[[int, str, int], None],
        validate_only: bool,
    ) -> list[AlterConfigsResourceResponse]:
        """Each resource's answer; a resource named twice is refused (both times), as Kafka does."""
        seen = _duplicates(resources)
        responses = []
        for index, (resource_type, name) in enumerate(resources):
            code, message = ErrorCode.NONE, None
            try:
                if (resource_type, name) in seen:
                    raise InvalidRequestError(f"resource {name!r} is named twice")
                alter(resource_type, name, index)
            except _ANSWERED as exc:
                code, message = error_code_of(exc), str(exc)
            responses.append(
                AlterConfigsResourceResponse(
                    error_code=int(code),
                    error_message=message,
                    resource_type=resource_type,
                    resource_name=name,
                )
            )
        if not validate_only and any(r.error_code == _NONE for r in responses):
            self._cluster.refresh()
        return responses

    # ------------------------------------------------------------------------------------ groups

    def _find_coordinator(
        self, request: NetworkRequest, header: RequestHeader, body: FindCoordinatorRequest
    ) -> None:
        def answer(
            code: ErrorCode, message: str | None, node: int = -1, host: str = "", port: int = -1
        ) -> None:
            self._respond(
                request,
                header,
                FindCoordinatorResponse(
                    error_code=int(code), error_message=message, node_id=node, host=host, port=port
                ),
            )

        if body.key_type != GROUP_KEY_TYPE:
            answer(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "Lumber has no transactions: no transaction coordinator"
            )
            return
        if not body.key:
            answer(ErrorCode.INVALID_REQUEST, "no group id")
            return
        try:
            node = self._groups.coordinator_of(body.key)
        except _ANSWERED as exc:
            logger.warning("FindCoordinator for group %r: %s", body.key, exc)
            answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"__consumer_offsets cannot be created: {exc}")
            return
        broker = self._cluster.view.brokers.get(node)
        if broker is None:
            answer(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"group {body.key!r}: its __consumer_offsets partition has no leader yet",
            )
            return
        answer(ErrorCode.NONE, None, broker.broker_id, broker.host, broker.port)

    def _join_group(self, request: NetworkRequest, header: RequestHeader, body: JoinGroupRequest) -> None:
        version = header.api_version

        def respond(result: JoinResult) -> None:
            self._respond(
                request,
                header,
                JoinGroupResponse(
                    error_code=int(result.error),
                    generation_id=result.generation_id,
                    protocol_type=result.protocol_type,
                    protocol_name=result.protocol_name
                    if result.protocol_name is not None or version >= 7
                    else "",
                    leader=result.leader_id,
                    member_id=result.member_id,
                    members=[
                        JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=d)
                        for m, i, d in result.members
                    ],
                ),
            )

        self._groups.handle_join_group(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            require_known_member_id=version >= 4,
            client_id=header.client_id or "",
            client_host=request.peer.rsplit(":", 1)[0],
            rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else -1,
            session_timeout_ms=body.session_timeout_ms,
            protocol_type=body.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            respond=respond,
        )

    def _sync_group(self, request: NetworkRequest, header: RequestHeader, body: SyncGroupRequest) -> None:
        def respond(result: SyncResult) -> None:
            self._respond(
                request,
                header,
                SyncGroupResponse(
                    error_code=int(result.error),
                    protocol_type=result.protocol_type,
                    protocol_name=result.protocol_name,
                    assignment=result.assignment,
                ),
            )

        self._groups.handle_sync_group(
            group_id=body.group_id,
            generation_id=body.generation_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            protocol_type=body.protocol_type,
            protocol_name=body.protocol_name,
            assignments={a.member_id: bytes(a.assignment) for a in body.assignments},
            respond=respond,
        )

    def _heartbeat(self, request: NetworkRequest, header: RequestHeader, body: HeartbeatRequest) -> None:
        error = self._groups.handle_heartbeat(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            generation_id=body.generation_id,
        )
        self._respond(request, header, HeartbeatResponse(error_code=int(error)))

    def _leave_group(self, request: NetworkRequest, header: RequestHeader, body: LeaveGroupRequest) -> None:
        if header.api_version < 3:
            leaving = [MemberToLeave(body.member_id, None)]
        else:
            leaving = [MemberToLeave(m.member_id, m.group_instance_id) for m in body.members]
        error, member_errors = self._groups.handle_leave_group(body.group_id, leaving)
        if header.api_version < 3 and error == ErrorCode.NONE and member_errors:
            error = member_errors[0]
        self._respond(
            request,
            header,
            LeaveGroupResponse(
                error_code=int(error),
                members=[
                    MemberResponse(
                        member_id=who.member_id, group_instance_id=who.group_instance_id, error_code=int(e)
                    )
                    for who, e in zip(leaving, member_errors, strict=False)
                ],
            ),
        )

    def _offset_commit(
        self, request: NetworkRequest, header: RequestHeader, body: OffsetCommitRequest
    ) -> None:
        now = int(time.time() * 1000)
        offsets = {
            TopicPartition(t.name, p.partition_index): OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now
            )
            for t in body.topics
            for p in t.partitions
        }

        def respond(errors: dict[TopicPartition, ErrorCode]) -> None:
            self._respond(
                request,
                header,
                OffsetCommitResponse(
                    topics=[
                        OffsetCommitResponseTopic(
                            name=t.name,
                            partitions=[
                                OffsetCommitResponsePartition(
                                    partition_index=p.partition_index,
                                    error_code=int(
                                        errors.get(TopicPartition(t.name, p.partition_index), ErrorCode.NONE)
                                    ),
                                )
                                for p in t.partitions
                            ],
                        )
                        for t in body.topics
                    ]
                ),
            )

        self._groups.handle_commit_offsets(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            generation_id=body.generation_id_or_member_epoch,
            offsets=offsets,
            respond=respond,
        )

    def _offset_fetch(self, request: NetworkRequest, header: RequestHeader, body: OffsetFetchRequest) -> None:
        version = header.api_version
        if version >= 8:
            groups = []
            for asked in body.groups:
                partitions = (
                    None
                    if asked.topics is None
                    else [TopicPartition(t.name, p) for t in asked.topics for p in t.partition_indexes]
                )
                error, found = self._groups.handle_fetch_offsets(asked.group_id, partitions)
                groups.append(
                    OffsetFetchResponseGroup(
                        group_id=asked.group_id,
                        error_code=int(error),
                        topics=[
                            OffsetFetchResponseTopics(
                                name=topic,
                                partitions=[
                                    OffsetFetchResponsePartitions(
                                        partition_index=tp.partition,
                                        committed_offset=-1 if oam is None else oam.offset,
                                        committed_leader_epoch=-1 if oam is None else oam.leader_epoch,
                                        metadata="" if oam is None else oam.metadata,
                                    )
                                    for tp, oam in entries
                                ],
                            )
                            for topic, entries in _by_topic(found).items()
                        ],
                    )
                )
            self._respond(request, header, OffsetFetchResponse(groups=groups))
            return
        partitions = (
            None
            if body.topics is None
            else [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        )
        error, found = self._groups.handle_fetch_offsets(body.group_id, partitions)
        if error != ErrorCode.NONE and version < 2 and partitions is not None:
            found = dict.fromkeys(partitions, None)  # v0-v1 carry errors per partition only
        partition_error = int(error) if version < 2 else _NONE
        self._respond(
            request,
            header,
            OffsetFetchResponse(
                error_code=int(error),
                topics=[
                    OffsetFetchResponseTopic(
                        name=topic,
                        partitions=[
                            OffsetFetchResponsePartition(
                                partition_index=tp.partition,
                                committed_offset=-1 if oam is None else oam.offset,
                                committed_leader_epoch=-1 if oam is None else oam.leader_epoch,
                                metadata="" if oam is None else oam.metadata,
                                error_code=partition_error,
                            )
                            for tp, oam in entries
                        ],
                    )
                    for topic, entries in _by_topic(found).items()
                ],
            ),
        )

    def _list_groups(self, request: NetworkRequest, header: RequestHeader, body: ListGroupsRequest) -> None:
        types = {t.lower() for t in body.types_filter}
        error, listed = self._groups.handle_list_groups(body.states_filter)
        if types and "classic" not in types:
            listed = []
        self._respond(
            request,
            header,
            ListGroupsResponse(
                error_code=int(error),
                groups=[
                    ListedGroup(group_id=g, protocol_type=t, group_state=s, group_type="classic")
                    for g, t, s in listed
                ],
            ),
        )

    def _describe_groups(
        self, request: NetworkRequest, header: RequestHeader, body: DescribeGroupsRequest
    ) -> None:
        described = []
        for group_id in body.groups:
            summary = self._groups.handle_describe_group(group_id)
            described.append(
                DescribedGroup(
                    error_code=int(summary.error),
                    group_id=group_id,
                    group_state=summary.state,
                    protocol_type=summary.protocol_type,
                    protocol_data=summary.protocol,
                    members=[
                        DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in summary.members
                    ],
                )
            )
        self._respond(request, header, DescribeGroupsResponse(groups=described))

    def _delete_groups(
        self, request: NetworkRequest, header: RequestHeader, body: DeleteGroupsRequest
    ) -> None:
        results = self._groups.handle_delete_groups(body.groups_names)
        self._respond(
            request,
            header,
            DeleteGroupsResponse(
                results=[
                    DeletableGroupResult(group_id=g, error_code=int(results[g])) for g in body.groups_names
                ]
            ),
        )

    def _offset_delete(
        self, request: NetworkRequest, header: RequestHeader, body: OffsetDeleteRequest
    ) -> None:
        partitions = [TopicPartition(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        error, errors = self._groups.handle_delete_offsets(body.group_id, partitions)
        self._respond(
            request,
            header,
            OffsetDeleteResponse(
                error_code=int(error),
                topics=[]
                if error != ErrorCode.NONE
                else [
                    OffsetDeleteResponseTopic(
                        name=t.name,
                        partitions=[
                            OffsetDeleteResponsePartition(
                                partition_index=p.partition_index,
                                error_code=int(
                                    errors.get(TopicPartition(t.name, p.partition_index), ErrorCode.NONE)
                                ),
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in body.topics
                ],
            ),
        )

    # ------------------------------------------------------------------------------------ the rest

    def _init_producer_id(
        self, request: NetworkRequest, header: RequestHeader, body: InitProducerIdRequest
    ) -> None:
        if body.transactional_id is not None:
            self._respond(
                request,
                header,
                InitProducerIdResponse(error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
            )
            return
        try:
            producer_id = self._producer_ids.generate_producer_id()
        except ClusterError as exc:
            logger.warning("InitProducerId from %s: %s", request.peer, exc)
            self._respond(request, header, InitProducerIdResponse(error_code=int(error_code_of(exc))))
            return
        epoch = 0
        self._respond(
            request,
            header,
            InitProducerIdResponse(error_code=_NONE, producer_id=producer_id, producer_epoch=epoch),
        )


def _by_topic(
    found: dict[TopicPartition, OffsetAndMetadata | None],
) -> dict[str, list[tuple[TopicPartition, OffsetAndMetadata | None]]]:
    """``found`` grouped by topic, topics and partitions in order."""
    topics: dict[str, list[tuple[TopicPartition, OffsetAndMetadata | None]]] = {}
    for tp in sorted(found):
        topics.setdefault(tp.topic, []).append((tp, found[tp]))
    return topics


def _duplicates(resources: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    """The resources named more than once."""
    seen: set[tuple[int, str]] = set()
    twice: set[tuple[int, str]] = set()
    for resource in resources:
        (twice if resource in seen else seen).add(resource)
    return twice


def _unsupported_resource(resource_type: int) -> InvalidRequestError:
    try:
        name = ConfigResourceType(resource_type).name
    except ValueError:
        name = str(resource_type)
    return InvalidRequestError(
        f"unsupported config resource type {name}: Lumber has configs for topics (2) and brokers (4) only"
    )
