"""The broker's protocol layer (Kafka's ``KafkaApis``): a request's bytes in, its response's bytes out.

Handler threads (:mod:`broker.server.handler_pool`) and, with ``[broker] inline_requests``, the network
processors call :meth:`KafkaApis.handle` with each request the network layer read. This layer decodes it,
dispatches it by API key, calls the part of the broker that does the work, and encodes the answer: the
:class:`~broker.server.replica_manager.ReplicaManager` for everything done to partitions (Produce, Fetch,
ListOffsets), the :class:`~broker.server.admin_manager.AdminManager` for topic administration, the cluster
watcher for metadata. It holds no partition state of its own. What each API answers:

* **ApiVersions**: the supported APIs and ranges; a request newer than Lumber's gets the v0-format
  UNSUPPORTED_VERSION fallback, so the client retries with a version both speak.
* **Metadata**: :class:`~broker.server.metadata_apis.MetadataApis` (the live brokers at the listener the
  request came in on, the topics the principal may describe, auto-creation).
* **Produce**: Produce v3+ with acks 0, 1 or -1 (else UNSUPPORTED_FOR_MESSAGE_FORMAT or
  INVALID_REQUIRED_ACKS for every partition); the replica manager appends and says when to answer
  (``acks=-1``: once every in-sync replica has the batches, or, with ``[log] flush_on_ack``, once they are
  fsynced; REQUEST_TIMED_OUT after ``timeout_ms``). ``acks=0`` gets no response: a failure closes the
  connection, so that the producer notices (as Kafka does). A refused partition has nothing appended. A
  connection's learnt one-partition request and a pipelined ``acks=0`` run take the fast paths of
  :mod:`broker.server.produce_fast_path`, with the same answers.
* **Fetch**: whole batches as file regions that the network layer sends with ``sendfile`` (the broker never
  decodes a batch to serve it); ``min_bytes`` and ``max_wait_ms`` as the replica manager applies them.
* **Fetch sessions** (KIP-227, Fetch v7+): a full fetch with ``session_epoch`` 0 opens a session when
  ``[broker] max_incremental_fetch_session_cache_slots`` leave room; incremental fetches then name only
  the partitions that changed and are answered only the partitions with news
  (:mod:`broker.server.fetch_session_cache`); a session error (FETCH_SESSION_ID_NOT_FOUND,
  INVALID_FETCH_SESSION_EPOCH) is the response's top-level error, with no partition.
* **Fetch** from a follower (``replica_id`` >= 0): read up to the log end; its fetch offset is its log end
  offset, which moves the ISR and the high watermark (the replica manager). Every partition's
  ``current_leader_epoch`` is fenced (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
* **ListOffsets, OffsetForLeaderEpoch**: :class:`~broker.server.offset_apis.OffsetApis`.
* **CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs**:
  answered by :class:`~broker.server.admin_apis.AdminApis` through the admin manager.
* **AlterPartitionReassignments, ListPartitionReassignments**: answered by
  :class:`~broker.server.reassignment_apis.ReassignmentApis` on the active controller (others:
  NOT_CONTROLLER). **DeleteRecords, DescribeLogDirs, DescribeProducers**: :mod:`broker.server.log_admin_apis`.
  **DescribeCluster**: :class:`~broker.server.cluster_apis.ClusterApis`.
* **FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
  DescribeGroups, DeleteGroups, OffsetDelete**: answered by :class:`~broker.server.group_apis.GroupApis`
  through the group coordinator.
* **SaslHandshake, SaslAuthenticate** reaching this layer (the network layer answers a SASL listener's
  exchange before authentication): ILLEGAL_SASL_STATE, as Kafka.
* **InitProducerId**: as Kafka answers an idempotent (non-transactional) producer: a fresh producer id,
  unique across brokers and restarts (:mod:`broker.cluster.producer_id_manager`), and epoch 0; a
  transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Lumber has no transactions).
* **DescribeAcls, CreateAcls, DeleteAcls**: :class:`~broker.server.acl_apis.AclApis`.

**Authorization** (``[broker] authorizer = "acl"``, :mod:`broker.server.authorizer`; without it every
check passes): Produce needs WRITE on each topic (a refused topic's partitions answer
TOPIC_AUTHORIZATION_FAILED, nothing of them appended; an ``acks=0`` run stops at a refused request, which
:meth:`KafkaApis.handle` then answers by closing); a consumer's Fetch READ on each topic, a follower's
CLUSTER_ACTION on the cluster (refused partitions answer TOPIC_AUTHORIZATION_FAILED in their places);
InitProducerId IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka 3+, KIP-679; else
CLUSTER_AUTHORIZATION_FAILED). The other APIs' checks are in their modules.

A request that does not decode, an unknown API key, or an unsupported version of any API but ApiVersions
closes its connection, with the reason logged, as Kafka does; every other client is unaffected. Every
error a partition or a topic meets is an exception, answered with the code
:mod:`broker.server.error_codes` (the one table) gives it. Thread-safe: any number of handler and processor
threads may call :meth:`KafkaApis.handle` and :meth:`KafkaApis.handle_run` (no state of its own changes
but the fetch sessions, which their cache guards).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.cluster.acl_watcher import AclWatcher
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ClusterError
from broker.cluster.producer_id_manager import ProducerIdManager
from broker.config import BrokerConfig
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
from broker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from broker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from broker.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.acl_apis import AclApis
from broker.server.admin_apis import AdminApis
from broker.server.admin_manager import AdminManager
from broker.server.auth_helper import AuthHelper, authorization_error
from broker.server.authorizer import AclAuthorizer
from broker.server.cluster_apis import ClusterApis
from broker.server.delayed_produce import ProduceResult
from broker.server.error_codes import ANSWERED_ERRORS, PRODUCE_ERRORS_WITHOUT_LOG_START, error_code_of
from broker.server.errors import (
    InvalidRequiredAcksError,
    ServerError,
    UnsupportedMessageFormatError,
)
from broker.server.fetch_session import CachedPartition
from broker.server.fetch_session_cache import FetchSessionCache
from broker.server.group.group_coordinator import GroupCoordinator
from broker.server.group_apis import GroupApis
from broker.server.log_admin_apis import LogAdminApis
from broker.server.metadata_apis import MetadataApis
from broker.server.offset_apis import OffsetApis
from broker.server.produce_fast_path import ProduceFastPath
from broker.server.reassignment_apis import Alter, ReassignmentApis
from broker.server.replica_manager import FetchPartitionResult, FetchRead, ReplicaManager
from broker.server.sasl_apis import SaslApis

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
_ANSWERED = ANSWERED_ERRORS
_NO_LOG_START = frozenset(int(code) for code in PRODUCE_ERRORS_WITHOUT_LOG_START)


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
        controller: Callable[[], Alter | None] = lambda: None,
        authorizer: AclAuthorizer | None = None,
        acl_watcher: AclWatcher | None = None,
    ) -> None:
        self._config = config
        self._auth = auth = AuthHelper(authorizer)
        self._replicas = replica_manager
        self._cluster = cluster
        self._channel = channel
        self._producer_ids = producer_ids
        self._fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.fast_produce = ProduceFastPath(
            replicas=replica_manager, cluster=cluster, auth=auth, channel=channel, answer=self._produce_answer
        )
        self._handlers: dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]] = {
            int(ApiKey.PRODUCE): self._produce,
            int(ApiKey.FETCH): self._fetch,
            int(ApiKey.API_VERSIONS): self._api_versions,
            int(ApiKey.INIT_PRODUCER_ID): self._init_producer_id,
            **MetadataApis(
                config=config,
                admin_manager=admin_manager,
                cluster=cluster,
                cluster_id=cluster_id,
                auth=auth,
                respond=self._respond,
            ).handlers(),
            **OffsetApis(replica_manager=replica_manager, auth=auth, respond=self._respond).handlers(),
            **SaslApis(respond=self._respond).handlers(),
            **AdminApis(
                admin_manager=admin_manager, cluster=cluster, auth=auth, respond=self._respond
            ).handlers(),
            **GroupApis(
                group_coordinator=group_coordinator, cluster=cluster, auth=auth, respond=self._respond
            ).handlers(),
            **ReassignmentApis(
                broker_id=config.broker_id,
                cluster=cluster,
                controller=controller,
                auth=auth,
                respond=self._respond,
            ).handlers(),
            **LogAdminApis(replica_manager, cluster, auth, self._respond).handlers(),
            **ClusterApis(cluster, cluster_id, auth, self._respond).handlers(),
            **AclApis(acls=acl_watcher, auth=auth, respond=self._respond).handlers(),
        }

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        """The broker's fetch sessions (for its metrics)."""
        return self._fetch_sessions

    # ------------------------------------------------------------------------------------ dispatch

    def handle(self, request: NetworkRequest) -> None:
        """Decode ``request``, answer it (now or later), or close its connection naming why; a learnt
        one-partition Produce takes the fast path (:mod:`broker.server.produce_fast_path`) instead."""
        try:
            if self.fast_produce.serve(request):
                return
        except Exception as exc:
            logger.exception("%s: a Produce request failed", request.peer)
            self._close(request, f"handling failed: {exc!r}")
            return
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

    def handle_run(self, requests: Iterable[NetworkRequest]) -> int:
        """Serve the leading ``acks=0`` Produce requests of ``requests`` (consecutive requests of one
        connection) together; returns how many were served
        (:meth:`~broker.server.produce_fast_path.ProduceFastPath.serve_run`)."""
        return self.fast_produce.serve_run(requests)

    def handle_pipelined(self, requests: Iterable[NetworkRequest]) -> None:
        """Serve a connection's pipelined requests in order as :meth:`handle` would, the learnt ones to one
        partition appended in one write
        (:meth:`~broker.server.produce_fast_path.ProduceFastPath.serve_pipelined`)."""
        self.fast_produce.serve_pipelined(requests, self.handle)

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
        refused: dict[TopicPartition, ProduceResult] = {}
        for topic_data in body.topic_data:
            refusal = self._auth.refusal(
                request.session, AclOperation.WRITE, ResourceType.TOPIC, topic_data.name
            )
            if refusal is not None:  # nothing of the topic appended (Kafka's unauthorizedTopicResponses)
                for partition_data in topic_data.partition_data:
                    refused[TopicPartition(topic_data.name, partition_data.index)] = ProduceResult(
                        refusal, None, None
                    )
                continue
            for partition_data in topic_data.partition_data:
                records = partition_data.records
                # concrete types: a runtime-checkable Protocol's isinstance costs microseconds
                entries.append(
                    (
                        TopicPartition(topic_data.name, partition_data.index),
                        records if isinstance(records, (bytes, bytearray, memoryview)) else None,
                    )
                )

        self.fast_produce.learn(request, header, body)

        def respond(results: dict[TopicPartition, ProduceResult]) -> None:
            self._produce_answer(request, header, body, {**results, **refused} if refused else results)

        if not entries:
            respond({})
            return
        with self._replicas.completing_here():  # the followers' waiting fetches are answered here
            self._replicas.append_records(entries, acks=acks, timeout_ms=body.timeout_ms, respond=respond)

    def _produce_answer(
        self,
        request: NetworkRequest,
        header: RequestHeader,
        body: ProduceRequest,
        results: dict[TopicPartition, ProduceResult],
    ) -> None:
        """Answer ``body`` with every partition's result (the fast path's errors and waits too)."""
        failed = [
            f"{tp}: {error_code_of(r.error).name}: {r.error}"
            for tp, r in results.items()
            if r.error is not None
        ]
        if failed:
            logger.info("produce from %s: %s", request.peer, "; ".join(failed))
        if body.acks == 0:
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
                code = _NONE if error is None else int(error_code_of(error))
                partitions.append(
                    PartitionProduceResponse(
                        index=partition_data.index,
                        error_code=code,
                        base_offset=info.first_offset if info is not None and error is None else -1,
                        log_append_time_ms=info.log_append_time_ms if info is not None else -1,
                        log_start_offset=-1
                        if partition is None or code in _NO_LOG_START
                        else partition.log_start_offset,
                        error_message=None if error is None else str(error),
                    )
                )
            topics.append(TopicProduceResponse(name=name, partition_responses=partitions))
        self._respond(request, header, ProduceResponse(responses=topics))

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
        requested = {
            TopicPartition(t.topic, p.partition): CachedPartition(
                p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch
            )
            for t in body.topics
            for p in t.partitions
        }
        forgotten = [TopicPartition(t.topic, p) for t in body.forgotten_topics_data for p in t.partitions]
        context = self._fetch_sessions.new_context(
            body.session_id,
            body.session_epoch,
            follower=body.replica_id >= 0,
            requested=requested,
            forgotten=forgotten,
        )
        version, correlation_id = header.api_version, header.correlation_id

        def respond(results: list[FetchPartitionResult]) -> None:
            error, session_id, answered = context.answer(results)
            topics: list[FetchableTopicResponse] = []
            topic = ""
            partitions: list[PartitionData] = []
            for tp, result in answered:
                if tp.topic != topic and partitions:
                    topics.append(FetchableTopicResponse(topic=topic, partitions=partitions))
                    partitions = []
                topic = tp.topic
                partition_error = result.error
                high_watermark = result.high_watermark
                region = result.records
                partitions.append(
                    PartitionData(
                        partition_index=tp.partition,
                        error_code=_NONE if partition_error is None else int(error_code_of(partition_error)),
                        high_watermark=high_watermark,
                        last_stable_offset=high_watermark,
                        log_start_offset=result.log_start_offset,
                        aborted_transactions=None if partition_error is None else (),
                        records=region if region is not None else b"",
                    )
                )
            if partitions:
                topics.append(FetchableTopicResponse(topic=topic, partitions=partitions))
            response = FetchResponse(
                error_code=_NONE if error is None else int(error_code_of(error)),
                session_id=session_id,
                responses=topics,
            )
            self._send(request, encode_fetch_response(version, correlation_id, response))

        if context.error is not None:
            respond([])
            return
        reads = context.reads
        answer: Callable[[list[FetchPartitionResult]], None] = respond
        if self._auth.enabled:
            reads, answer = self._authorized_reads(request, body.replica_id, reads, respond)
            if not reads:
                answer([])
                return
        log_starts = None
        if body.replica_id >= 0:  # the follower's log start offsets: a waiting DeleteRecords needs them
            log_starts = {
                TopicPartition(t.topic, p.partition): p.log_start_offset
                for t in body.topics
                for p in t.partitions
            }
        with self._replicas.completing_here():  # a follower's fetch answers the produces it acknowledges
            self._replicas.fetch_messages(
                reads,
                max_bytes=body.max_bytes,
                min_bytes=body.min_bytes,
                max_wait_ms=body.max_wait_ms,
                respond=answer,
                replica_id=body.replica_id,
                log_starts=log_starts,
            )

    def _authorized_reads(
        self,
        request: NetworkRequest,
        replica_id: int,
        reads: list[FetchRead],
        respond: Callable[[list[FetchPartitionResult]], None],
    ) -> tuple[list[FetchRead], Callable[[list[FetchPartitionResult]], None]]:
        """The reads the session may do (a follower: CLUSTER_ACTION on the cluster; a consumer: READ on each
        topic), and a ``respond`` that answers the others TOPIC_AUTHORIZATION_FAILED in their places
        (Kafka's answer to both)."""
        session = request.session
        operation = AclOperation.READ
        if replica_id >= 0:
            operation = AclOperation.CLUSTER_ACTION
            cluster_action = self._auth.authorize_cluster(session, operation)
            denied = set() if cluster_action else {tp.topic for tp, *_ in reads}
        else:
            denied = self._auth.denied(
                session, AclOperation.READ, ResourceType.TOPIC, {tp.topic for tp, *_ in reads}
            )
        if not denied:
            return reads, respond
        errors = {
            topic: authorization_error(session, operation, ResourceType.TOPIC, topic) for topic in denied
        }

        def respond_all(results: list[FetchPartitionResult]) -> None:
            read = iter(results)
            respond(
                [
                    FetchPartitionResult(errors[tp.topic], -1, -1, None) if tp.topic in errors else next(read)
                    for tp, *_ in reads
                ]
            )

        return [r for r in reads if r[0].topic not in denied], respond_all

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
        session = request.session
        if not self._auth.authorize_cluster(
            session, AclOperation.IDEMPOTENT_WRITE
        ) and not self._auth.authorize_by_resource_type(session, AclOperation.WRITE, ResourceType.TOPIC):
            # Kafka 3+ (KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
            self._respond(
                request,
                header,
                InitProducerIdResponse(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)),
            )
            return
        try:
            producer_id = self._producer_ids.generate_producer_id()
        except ClusterError as exc:
            logger.warning("InitProducerId from %s: %s", request.peer, exc)
            self._respond(request, header, InitProducerIdResponse(error_code=int(error_code_of(exc))))
            return
        response = InitProducerIdResponse(error_code=_NONE, producer_id=producer_id, producer_epoch=0)
        self._respond(request, header, response)
