"""The broker's request handling (Kafka's ``KafkaApis``): a decoded request in, its response out.

Handler threads (:mod:`broker.server.handler_pool`) call :meth:`RequestHandler.handle` with each request the
network layer read; the handler answers through the request channel at once or, for a Fetch long-poll or
an ``acks=-1`` Produce, from the purgatory when the request can be answered. What each API does here:

* **ApiVersions**: the supported APIs and ranges; a request newer than Lumber's gets the v0-format
  UNSUPPORTED_VERSION fallback, so the client retries with a version both speak.
* **Metadata**: the live brokers and the asked-for topics from ZooKeeper (the cluster watcher's view);
  unknown topics are created when the request and ``[broker] auto_create_topics`` both allow it.
* **Produce**: each partition's batches are validated (magic, lengths, CRC, sizes) and appended by the log
  with offsets assigned there; ``acks=0`` gets no response (an error closes the connection, so the
  producer notices), ``acks=1`` is answered once appended, ``acks=-1`` once every in-sync replica has
  the batches (Kafka's definition; the ISR is the leader alone, so that is right after the append too) or,
  with ``[log] flush_on_ack``, once they are fsynced (group commit: the request wakes the flusher and one
  fsync answers every waiter); REQUEST_TIMED_OUT after ``timeout_ms``. ``expose = "flushed"`` only holds
  back consumers, never producers. Records are validated before they are appended
  (:mod:`broker.log.log_validator`): a refused partition gets CORRUPT_MESSAGE or INVALID_RECORD and has
  nothing appended.
* **Fetch**: whole batches from the segment files as regions that the network layer sends with
  ``sendfile``; the broker never decodes a batch to serve it. ``partition_max_bytes`` and the request's
  ``max_bytes`` are honoured (only the first partition with data may exceed them, by one batch, as in
  KIP-74); fewer than ``min_bytes`` waits up to ``max_wait_ms``.
* **ListOffsets**: earliest (-2), latest (-1, the high watermark) and the first offset at or after a
  timestamp (-1 when there is none).
* **CreateTopics / DeleteTopics**: through ZooKeeper (:class:`~broker.cluster.topic_admin.TopicAdmin`);
  one replica per partition, so a replication factor above 1 is INVALID_REPLICATION_FACTOR.
* **FindCoordinator**: COORDINATOR_NOT_AVAILABLE (groups coordinate through ZooKeeper, not a broker).
* **InitProducerId**: what Kafka answers an idempotent (non-transactional) producer: a fresh producer
  id, unique across brokers and restarts (claimed in blocks through ZooKeeper,
  :mod:`broker.cluster.producer_id_manager`), and epoch 0, whatever id and epoch the request carries
  (Kafka bumps an epoch only for transactional ids; Lumber has no transactions and answers a
  transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
  Each partition's log checks the producers' sequences (:mod:`broker.log.producer_state`): a retried batch
  gets its original offsets, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch INVALID_PRODUCER_EPOCH.

A request that does not decode, an unknown API key, or an unsupported version of any API but ApiVersions
closes its connection, with the reason logged, as Kafka does; every other client is unaffected. Partition
errors use Kafka's codes: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the view names another
leader), OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TOPIC_EXCEPTION, INVALID_RECORD,
INVALID_REQUIRED_ACKS, UNSUPPORTED_FOR_MESSAGE_FORMAT (Produce v0-v2 message sets),
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH and KAFKA_STORAGE_ERROR. Thread-safe: any number of
handler threads may call :meth:`RequestHandler.handle`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ClusterError
from broker.cluster.producer_id_manager import ProducerIdManager
from broker.cluster.topic_admin import TopicAdmin
from broker.config import BrokerConfig
from broker.errors import BrokerError
from broker.log.errors import LogError, OffsetOutOfRangeError
from broker.log.log import AppendInfo, Buffer, Log
from broker.log.log_manager import LogManager
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
from broker.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from broker.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from broker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from broker.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from broker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from broker.protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from broker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from broker.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from broker.record.errors import InvalidTopicError, RecordError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from broker.server.delayed_operation import DelayedOperation
from broker.server.purgatory import Purgatory

logger = logging.getLogger(__name__)

_NONE = int(ErrorCode.NONE)
_UNKNOWN_TOPIC = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
#: The APIs whose handling never blocks its thread (a wait goes to the purgatory), so that the network
#: threads may serve them themselves (``[broker] inline_requests``); the others may talk to ZooKeeper.
INLINE_API_KEYS = frozenset(
    int(key) for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.API_VERSIONS)
)
#: The APIs :meth:`RequestHandler.handle_run` serves in runs.
RUN_API_KEYS = frozenset({int(ApiKey.PRODUCE)})
#: The APIs a processor may serve while an earlier request of the connection waits for its answer (an
#: acks=-1 Produce waiting for its group commit), answering in order: one fsync then answers them all.
PIPELINE_API_KEYS = frozenset({int(ApiKey.PRODUCE)})
#: Produce v0-v2 carry the old message sets, which the log does not store.
_FIRST_RECORD_BATCH_PRODUCE_VERSION = 3


class PartitionLookupError(Exception):
    """Why a partition cannot be served here: a Kafka error code and a message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class RequestHandler:
    """Answers every API Lumber implements (see the module docstring)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        log_manager: LogManager,
        cluster: ClusterWatcher,
        admin: TopicAdmin,
        channel: RequestChannel,
        purgatory: Purgatory,
        cluster_id: str,
        producer_ids: ProducerIdManager,
    ) -> None:
        self._config = config
        self._broker_id = config.broker_id
        self._logs = log_manager
        self._cluster = cluster
        self._admin = admin
        self._channel = channel
        self._purgatory = purgatory
        self._cluster_id = cluster_id
        self._producer_ids = producer_ids
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

        Served together means one :meth:`Log.append` per run of requests to the same partition, with the
        same outcome as appending them one by one. A request that is not a single-partition ``acks=0``
        Produce to a partition led here, or whose append fails, ends the run: it and the requests after it
        are left to :meth:`handle` (which answers or closes as usual), nothing of them appended.
        """
        view = self._cluster.view
        groups: list[tuple[Log, list[Buffer]]] = []
        template: ProduceTemplate | None = None  # the last request decoded: the next are likely the same
        log: Log | None = None
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
                    log = self._leader_log(view, topic_data.name, partition_data.index)
                except PartitionLookupError:
                    break
                template = produce_template(header.api_version, header.client_id, body)
            # else: the same request as the template's (acks=0, same partition, same log), other records
            assert log is not None
            if groups and groups[-1][0] is log:
                groups[-1][1].append(records)
            else:
                groups.append((log, [records]))
        served = 0
        for log, parts in groups:
            try:
                log.append(parts[0] if len(parts) == 1 else b"".join(parts))
            except (LogError, RecordError):
                # one of them is bad: append one at a time up to it; handle() reports it
                for part in parts:
                    try:
                        log.append(part)
                    except (LogError, RecordError):
                        return served
                    served += 1
            else:
                served += len(parts)
        return served

    def _send(self, request: NetworkRequest, chunks: Sequence[bytes | Region]) -> None:
        self._channel.send_response(NetworkResponse(request, tuple(chunks)))

    def _respond(self, request: NetworkRequest, header: RequestHeader, body: Any) -> None:
        self._send(request, (encode_response(header.api_version, header.correlation_id, body),))

    def _close(self, request: NetworkRequest, reason: str) -> None:
        logger.warning("closing the connection from %s: %s", request.peer, reason)
        self._channel.send_response(NetworkResponse(request, (), close_after=True, reason=reason))

    # ------------------------------------------------------------------------------------ partitions

    def _leader_log(self, view: ClusterView, topic: str, partition: int) -> Log:
        """The log of a partition this broker leads; :class:`PartitionLookupError` says why not."""
        try:
            validate_topic_name(topic)
        except InvalidTopicError as exc:
            raise PartitionLookupError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
        assignment = view.topics.get(topic)
        if assignment is None or partition not in assignment:
            raise PartitionLookupError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}: no such topic or partition"
            )
        leader = view.leader(topic, partition)
        if leader != self._broker_id:
            raise PartitionLookupError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{topic}-{partition}: led by broker {leader}, not by broker {self._broker_id}",
            )
        log = self._logs.get_log(topic, partition)
        if log is None:
            # the view is newer than the partition manager's last pass: create it now
            try:
                log = self._logs.get_or_create_log(topic, partition)
            except (LogError, RecordError) as exc:
                raise PartitionLookupError(ErrorCode(exc.kafka_error_code), str(exc)) from exc
        return log

    # ------------------------------------------------------------------------------------ ApiVersions

    def _api_versions(self, request: NetworkRequest, header: RequestHeader, _body: Any) -> None:
        self._respond(request, header, api_versions_response(header.api_version))

    # ------------------------------------------------------------------------------------ Metadata

    def _metadata(self, request: NetworkRequest, header: RequestHeader, body: MetadataRequest) -> None:
        view = self._cluster.view
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
        topics = [self._topic_metadata(view, name, created_errors.get(name)) for name in names]
        self._respond(
            request,
            header,
            MetadataResponse(
                brokers=brokers, cluster_id=self._cluster_id, controller_id=view.controller_id, topics=topics
            ),
        )

    def _auto_create(self, topic: str) -> ErrorCode:
        try:
            validate_topic_name(topic)
        except InvalidTopicError:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        try:
            self._admin.create_topic(topic, self._config.num_partitions)
        except ClusterError as exc:
            code = ErrorCode(getattr(exc, "kafka_error_code", int(ErrorCode.UNKNOWN_SERVER_ERROR)))
            if code != ErrorCode.TOPIC_ALREADY_EXISTS:
                logger.warning("auto-creating topic %r failed: %s", topic, exc)
                return code
        logger.info("auto-created topic %r with %d partitions", topic, self._config.num_partitions)
        return ErrorCode.NONE

    def _topic_metadata(
        self, view: ClusterView, name: str, create_error: ErrorCode | None
    ) -> MetadataResponseTopic:
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
            live = [r for r in replicas if r in view.brokers]
            partitions.append(
                MetadataResponsePartition(
                    error_code=_NONE if leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
                    partition_index=number,
                    leader_id=leader,
                    leader_epoch=-1,
                    replica_nodes=replicas,
                    isr_nodes=live,
                    offline_replicas=[r for r in replicas if r not in view.brokers],
                )
            )
        return MetadataResponseTopic(error_code=_NONE, name=name, is_internal=False, partitions=partitions)

    # ------------------------------------------------------------------------------------ Produce

    def _produce(self, request: NetworkRequest, header: RequestHeader, body: ProduceRequest) -> None:
        acks = body.acks
        if acks not in (0, 1, -1):
            self._produce_error_all(
                request, header, body, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1"
            )
            return
        if header.api_version < _FIRST_RECORD_BATCH_PRODUCE_VERSION:
            self._produce_error_all(
                request,
                header,
                body,
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                f"Produce v{header.api_version} carries old message sets; Lumber stores record batch v2 "
                "(Produce v3+)",
            )
            return
        view = self._cluster.view
        results: dict[TopicPartition, tuple[int, str | None, AppendInfo | None, Log | None]] = {}
        order: list[tuple[str, list[int]]] = []
        failed: list[str] = []
        for topic_data in body.topic_data:
            numbers: list[int] = []
            order.append((topic_data.name, numbers))
            for partition_data in topic_data.partition_data:
                number = partition_data.index
                numbers.append(number)
                tp = TopicPartition(topic_data.name, number)
                try:
                    log = self._leader_log(view, topic_data.name, number)
                    records = partition_data.records
                    # concrete types: a runtime-checkable Protocol's isinstance costs microseconds
                    if not isinstance(records, (bytes, bytearray, memoryview)):
                        raise PartitionLookupError(  # noqa: TRY301 - answered like the lookup's own
                            ErrorCode.INVALID_RECORD, f"{tp}: the request has no records"
                        )
                    info = log.append(records)
                except PartitionLookupError as exc:
                    results[tp] = (int(exc.code), str(exc), None, None)
                    failed.append(f"{tp}: {ErrorCode(exc.code).name}: {exc}")
                except (LogError, RecordError) as exc:
                    results[tp] = (exc.kafka_error_code, str(exc), None, None)
                    failed.append(f"{tp}: {ErrorCode(exc.kafka_error_code).name}: {exc}")
                else:
                    results[tp] = (_NONE, None, info, log)
        if failed:
            logger.info("produce from %s: %s", request.peer, "; ".join(failed))
        if acks == 0:
            if failed:
                # no response to carry the error: close, so that the producer notices (as Kafka does)
                self._channel.send_response(
                    NetworkResponse(
                        request, (), close_after=True, reason="acks=0 produce failed: " + "; ".join(failed)
                    )
                )
            else:
                self._channel.send_response(NetworkResponse(request, ()))
            return

        def respond(timed_out: frozenset[TopicPartition] = frozenset()) -> None:
            topics = []
            for name, numbers in order:
                partitions = []
                for number in numbers:
                    tp = TopicPartition(name, number)
                    code, message, info, log = results[tp]
                    if tp in timed_out:
                        flushing = log is not None and log.config.flush_on_ack
                        waited_for = "flushed" if flushing else "replicated"
                        code, message = (
                            int(ErrorCode.REQUEST_TIMED_OUT),
                            f"{tp}: not {waited_for} within {body.timeout_ms} ms",
                        )
                    partitions.append(
                        PartitionProduceResponse(
                            index=number,
                            error_code=code,
                            base_offset=info.first_offset if info is not None and code == _NONE else -1,
                            log_append_time_ms=-1,
                            log_start_offset=log.log_start_offset if log is not None else -1,
                            error_message=message,
                        )
                    )
                topics.append(TopicProduceResponse(name=name, partition_responses=partitions))
            self._respond(request, header, ProduceResponse(responses=topics))

        if acks == 1:
            respond()
            return
        waiting = {
            tp: (log, info.last_offset + 1)
            for tp, (_code, _message, info, log) in results.items()
            if info is not None and log is not None
        }
        flush_on_ack = any(log.config.flush_on_ack for log, _end in waiting.values())
        if flush_on_ack:
            for log, end in waiting.values():
                log.request_flush(end)
        self._purgatory.watch(_DelayedProduce(waiting, body.timeout_ms, respond, flush_on_ack=flush_on_ack))

    def _produce_error_all(
        self,
        request: NetworkRequest,
        header: RequestHeader,
        body: ProduceRequest,
        code: ErrorCode,
        message: str,
    ) -> None:
        logger.info("produce from %s refused: %s", request.peer, message)
        if body.acks == 0:
            self._close(request, message)
            return
        topics = [
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    PartitionProduceResponse(
                        index=p.index, error_code=int(code), base_offset=-1, error_message=message
                    )
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ]
        self._respond(request, header, ProduceResponse(responses=topics))

    # ------------------------------------------------------------------------------------ Fetch

    def _fetch(self, request: NetworkRequest, header: RequestHeader, body: FetchRequest) -> None:
        keys = [TopicPartition(t.topic, p.partition) for t in body.topics for p in t.partitions]

        def respond(response: FetchResponse) -> None:
            chunks = encode_fetch_response(header.api_version, header.correlation_id, response)
            self._send(request, chunks)

        response, size, errors = self._read_fetch(body)
        if body.max_wait_ms <= 0 or size >= body.min_bytes or errors or not keys:
            respond(response)
            return
        self._purgatory.watch(_DelayedFetch(self, body, keys, respond))

    def _read_fetch(self, body: FetchRequest) -> tuple[FetchResponse, int, bool]:
        """The response to ``body`` now: its partitions, the record bytes in it, and whether any failed."""
        view = self._cluster.view
        remaining = body.max_bytes if body.max_bytes > 0 else 0x7FFFFFFF
        total = 0
        errors = False
        first_with_data = True
        topics = []
        for fetch_topic in body.topics:
            partitions = []
            for fetch_partition in fetch_topic.partitions:
                number = fetch_partition.partition
                try:
                    log = self._leader_log(view, fetch_topic.topic, number)
                except PartitionLookupError as exc:
                    errors = True
                    partitions.append(
                        PartitionData(
                            partition_index=number, error_code=int(exc.code), high_watermark=-1, records=b""
                        )
                    )
                    continue
                high_watermark = log.high_watermark
                log_start = log.log_start_offset
                limit = min(fetch_partition.partition_max_bytes, remaining)
                region = None
                code = _NONE
                if limit > 0 or first_with_data:
                    try:
                        region = log.read(fetch_partition.fetch_offset, max(limit, 1))
                    except OffsetOutOfRangeError:
                        code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                        errors = True
                    except (LogError, RecordError) as exc:
                        code = exc.kafka_error_code
                        errors = True
                if region is not None and region.size_bytes > limit and not first_with_data:
                    region = None  # only the first partition with data may go over (KIP-74)
                if region is not None:
                    first_with_data = False
                    remaining -= region.size_bytes
                    total += region.size_bytes
                partitions.append(
                    PartitionData(
                        partition_index=number,
                        error_code=code,
                        high_watermark=high_watermark,
                        last_stable_offset=high_watermark,
                        log_start_offset=log_start,
                        aborted_transactions=None if code == _NONE else (),
                        records=region if region is not None else b"",
                    )
                )
            topics.append(FetchableTopicResponse(topic=fetch_topic.topic, partitions=partitions))
        return FetchResponse(error_code=_NONE, session_id=0, responses=topics), total, errors

    # ------------------------------------------------------------------------------------ ListOffsets

    def _list_offsets(self, request: NetworkRequest, header: RequestHeader, body: ListOffsetsRequest) -> None:
        view = self._cluster.view
        topics = []
        for topic in body.topics:
            partitions = []
            for asked in topic.partitions:
                try:
                    log = self._leader_log(view, topic.name, asked.partition_index)
                    if asked.timestamp == EARLIEST_TIMESTAMP:
                        offset = log.log_start_offset
                    elif asked.timestamp == LATEST_TIMESTAMP:
                        offset = log.high_watermark
                    elif asked.timestamp < 0:
                        raise PartitionLookupError(  # noqa: TRY301 - answered like the lookup's own
                            ErrorCode.INVALID_REQUEST, f"timestamp {asked.timestamp} is not -1, -2 or a time"
                        )
                    else:
                        found = log.offset_for_timestamp(asked.timestamp)
                        offset = -1 if found is None else found
                except PartitionLookupError as exc:
                    partitions.append(
                        ListOffsetsPartitionResponse(
                            partition_index=asked.partition_index, error_code=int(exc.code)
                        )
                    )
                    continue
                except (LogError, RecordError) as exc:
                    partitions.append(
                        ListOffsetsPartitionResponse(
                            partition_index=asked.partition_index, error_code=exc.kafka_error_code
                        )
                    )
                    continue
                partitions.append(
                    ListOffsetsPartitionResponse(
                        partition_index=asked.partition_index, error_code=_NONE, timestamp=-1, offset=offset
                    )
                )
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
        self._respond(request, header, ListOffsetsResponse(topics=topics))

    # ------------------------------------------------------------------------------------ admin

    def _create_topics(
        self, request: NetworkRequest, header: RequestHeader, body: CreateTopicsRequest
    ) -> None:
        counts: dict[str, int] = {}
        for topic in body.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results = []
        for topic in body.topics:
            code: ErrorCode
            message: str | None
            if counts[topic.name] > 1:
                code, message, partitions = (
                    ErrorCode.INVALID_REQUEST,
                    f"topic {topic.name!r} is named twice",
                    -1,
                )
            else:
                code, message, partitions = self._create_topic(topic, validate_only=body.validate_only)
            results.append(
                CreatableTopicResult(
                    name=topic.name,
                    error_code=int(code),
                    error_message=message,
                    num_partitions=partitions,
                    replication_factor=1 if code == ErrorCode.NONE else -1,
                    configs=(),
                )
            )
        if any(r.error_code == _NONE for r in results) and not body.validate_only:
            self._cluster.refresh()
        self._respond(request, header, CreateTopicsResponse(topics=results))

    def _create_topic(
        self, topic: CreatableTopic, *, validate_only: bool
    ) -> tuple[ErrorCode, str | None, int]:
        try:
            validate_topic_name(topic.name)
        except InvalidTopicError as exc:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc), -1
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
        if assignment is not None:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                return (
                    ErrorCode.INVALID_REQUEST,
                    "give either an assignment or partitions and replication factor",
                    -1,
                )
            if any(len(replicas) != 1 for replicas in assignment.values()):
                return (
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Lumber keeps exactly one replica per partition",
                    -1,
                )
            partitions = len(assignment)
        else:
            partitions = self._config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
            if topic.replication_factor not in (-1, 1):
                return (
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"replication factor {topic.replication_factor}: Lumber keeps one replica per partition",
                    -1,
                )
            if partitions < 1:
                return ErrorCode.INVALID_PARTITIONS, f"{partitions} partitions: a topic needs at least 1", -1
        if topic.configs:
            names = ", ".join(c.name for c in topic.configs)
            return (
                ErrorCode.INVALID_CONFIG,
                f"per-topic configs are not supported ({names}); use lumber.toml",
                -1,
            )
        if validate_only:
            exists = topic.name in self._cluster.refresh().topics
            if exists:
                return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists", -1
            return ErrorCode.NONE, None, partitions
        try:
            created = self._admin.create_topic(topic.name, partitions, assignment=assignment)
        except (ClusterError, InvalidTopicError) as exc:
            code = ErrorCode(getattr(exc, "kafka_error_code", int(ErrorCode.UNKNOWN_SERVER_ERROR)))
            return code, str(exc), -1
        logger.info("created topic %r: %s", topic.name, created)
        return ErrorCode.NONE, None, len(created)

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
                validate_topic_name(name)
                self._admin.delete_topic(name)
                logger.info("deleted topic %r", name)
            except (ClusterError, InvalidTopicError) as exc:
                code = ErrorCode(getattr(exc, "kafka_error_code", int(ErrorCode.UNKNOWN_SERVER_ERROR)))
                message = str(exc)
            results.append(DeletableTopicResult(name=name, error_code=int(code), error_message=message))
        self._cluster.refresh()
        self._respond(request, header, DeleteTopicsResponse(responses=results))

    # ------------------------------------------------------------------------------------ the rest

    def _find_coordinator(
        self, request: NetworkRequest, header: RequestHeader, _body: FindCoordinatorRequest
    ) -> None:
        self._respond(
            request,
            header,
            FindCoordinatorResponse(
                error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                error_message="Lumber's consumer groups coordinate through ZooKeeper, not through a broker",
                node_id=-1,
                host="",
                port=-1,
            ),
        )

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
            self._respond(request, header, InitProducerIdResponse(error_code=exc.kafka_error_code))
            return
        epoch = 0
        self._respond(
            request,
            header,
            InitProducerIdResponse(error_code=_NONE, producer_id=producer_id, producer_epoch=epoch),
        )


class _DelayedProduce(DelayedOperation):
    """An ``acks=-1`` Produce: answered once every appended partition's acknowledged offset is past its
    batches, or REQUEST_TIMED_OUT for those that are not at the deadline.

    The acknowledged offset is what every in-sync replica has: the ISR's lowest log end offset, which is
    the leader's own log end while Lumber keeps one replica (so the operation is ready as soon as it is
    watched); with ``flush_on_ack`` it is the flushed offset, which the flusher advances (group commit).
    """

    def __init__(
        self,
        waiting: dict[TopicPartition, tuple[Log, int]],
        timeout_ms: int,
        respond: Callable[[frozenset[TopicPartition]], None],
        *,
        flush_on_ack: bool,
    ) -> None:
        super().__init__(list(waiting), timeout_ms)
        self._waiting = waiting
        self._respond = respond
        self._flush_on_ack = flush_on_ack

    def _acknowledged(self, log: Log) -> int:
        return log.flushed_offset if self._flush_on_ack else log.log_end_offset

    def ready(self) -> bool:
        return all(self._acknowledged(log) >= end or log.closed for log, end in self._waiting.values())

    def on_complete(self, *, expired: bool) -> None:
        timed_out = frozenset(tp for tp, (log, end) in self._waiting.items() if self._acknowledged(log) < end)
        self._respond(timed_out if expired else frozenset())


class _DelayedFetch(DelayedOperation):
    """A Fetch long-poll: answered once ``min_bytes`` are there, or at ``max_wait_ms`` with what there is."""

    def __init__(
        self,
        handler: RequestHandler,
        body: FetchRequest,
        keys: list[TopicPartition],
        respond: Callable[[FetchResponse], None],
    ) -> None:
        super().__init__(keys, body.max_wait_ms)
        self._handler = handler
        self._body = body
        self._respond = respond
        self._ready: FetchResponse | None = None

    def ready(self) -> bool:
        try:
            response, size, errors = self._handler._read_fetch(self._body)
        except BrokerError:
            return True
        if size >= self._body.min_bytes or errors:
            self._ready = response
            return True
        return False

    def on_complete(self, *, expired: bool) -> None:
        response = self._ready
        if response is None or expired:
            response = self._handler._read_fetch(self._body)[0]
        self._respond(response)
