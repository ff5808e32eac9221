"""The protocol layer's topic administration: CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs (part of Kafka's ``KafkaApis``, split out of :mod:`broker.server.kafka_apis`).

:class:`AdminApis` decodes nothing and encodes nothing itself: :class:`~broker.server.kafka_apis.KafkaApis`
dispatches the decoded requests to it (:meth:`AdminApis.handlers`) and it answers through the ``respond``
it was given. The work is the :class:`~broker.server.admin_manager.AdminManager`'s:

* **CreatePartitions**: more partitions for a topic (:meth:`AdminManager.add_partitions`), placed as
  Kafka places them or by the request's assignments; answered by any broker, as CreateTopics is (Kafka's
  ZooKeeper-mode brokers send it to the controller). A topic named twice is INVALID_REQUEST.
* **CreateTopics / DeleteTopics**: replication factor, replica assignments and the topic configs;
  CreateTopics v5+ answers with the created topic's configs and their sources. A topic named twice in one
  request is INVALID_REQUEST.
* **ElectLeaders** (preferred replica elections; any broker answers, as Kafka's controller does): an
  unknown partition is UNKNOWN_TOPIC_OR_PARTITION, one its first replica leads ELECTION_NOT_NEEDED (left
  out of the answer when every partition is asked for, as in Kafka), one whose first replica is not live
  and in the ISR PREFERRED_LEADER_NOT_AVAILABLE; the others are handed to the controller through
  ``/admin/preferred_replica_election`` (:meth:`AdminManager.request_preferred_election`, a request still
  pending retried meanwhile) and answered once the cluster view shows their first replica leading, or
  REQUEST_TIMED_OUT after ``timeout_ms`` (at most :data:`MAX_ELECTION_WAIT_S`). Where Lumber differs from
  Kafka: an UNCLEAN election is not run on request (the controller elects an out-of-sync leader by
  ``unclean.leader.election.enable`` only): a partition with a live leader is ELECTION_NOT_NEEDED, one
  without ELIGIBLE_LEADERS_NOT_AVAILABLE.
* **DescribeConfigs / AlterConfigs / IncrementalAlterConfigs**: TOPIC and BROKER resources, each answered
  on its own (its error does not fail the others); a resource named twice in one request is INVALID_REQUEST,
  as in Kafka; other resource types (groups, broker loggers, client metrics) are INVALID_REQUEST naming the
  type. After a successful create, delete or alter the cluster view is read again, so this broker's logs run
  with the new state before the answer goes out (the others follow their ZooKeeper watch).

With ``[broker] authorizer`` each topic or resource is checked on its own (Kafka's operations; a refusal
answers that one only): CreateTopics needs CREATE on the cluster or on the topic, DeleteTopics DELETE,
CreatePartitions ALTER on the topic; DescribeConfigs DESCRIBE_CONFIGS and the alters ALTER_CONFIGS, on the
topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker's configs, on the cluster
(CLUSTER_AUTHORIZATION_FAILED).

Thread-safe as :class:`~broker.server.kafka_apis.KafkaApis` is: no state of its own changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ZooKeeperError
from broker.network.request_channel import NetworkRequest
from broker.network.session import Session
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from broker.protocol.messages.config_resource import ConfigResourceType, ConfigType
from broker.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from broker.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
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
from broker.protocol.messages.elect_leaders import (
    UNCLEAN,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from broker.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.admin_manager import AdminManager
from broker.server.auth_helper import AuthHelper
from broker.server.error_codes import ANSWERED_ERRORS as _ANSWERED
from broker.server.error_codes import error_code_of
from broker.server.errors import InvalidRequestError

_NONE = int(ErrorCode.NONE)
#: Longest ElectLeaders waits for the controller to have elected the preferred replicas.
MAX_ELECTION_WAIT_S = 30.0
_ELECTION_POLL_S = 0.05
#: How :class:`AdminApis` answers: ``respond(request, header, response body)``.
Respond = Callable[[NetworkRequest, RequestHeader, Any], None]


class AdminApis:
    """Answers the topic and config administration APIs (see the module docstring)."""

    def __init__(
        self, *, admin_manager: AdminManager, cluster: ClusterWatcher, auth: AuthHelper, respond: Respond
    ) -> None:
        self._admin = admin_manager
        self._cluster = cluster
        self._auth = auth
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        """The handler of each API key this class answers."""
        return {
            int(ApiKey.CREATE_TOPICS): self._create_topics,
            int(ApiKey.DELETE_TOPICS): self._delete_topics,
            int(ApiKey.CREATE_PARTITIONS): self._create_partitions,
            int(ApiKey.DESCRIBE_CONFIGS): self._describe_configs,
            int(ApiKey.ALTER_CONFIGS): self._alter_configs,
            int(ApiKey.INCREMENTAL_ALTER_CONFIGS): self._incremental_alter_configs,
            int(ApiKey.ELECT_LEADERS): self._elect_leaders,
        }

    # ------------------------------------------------------------------------------------ topics

    def _create_topics(
        self, request: NetworkRequest, header: RequestHeader, body: CreateTopicsRequest
    ) -> None:
        counts: dict[str, int] = {}
        for topic in body.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results = []
        session = request.session
        create_any = self._auth.authorize_cluster(session, AclOperation.CREATE)
        for topic in body.topics:
            code, message, partitions, replication_factor = ErrorCode.NONE, None, -1, -1
            configs: list[CreatableTopicConfigs] = []
            try:
                if counts[topic.name] > 1:
                    raise InvalidRequestError(f"topic {topic.name!r} is named twice")
                if not create_any:
                    self._auth.check(session, AclOperation.CREATE, ResourceType.TOPIC, topic.name)
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
                self._auth.check(request.session, AclOperation.DELETE, ResourceType.TOPIC, name)
                self._admin.delete_topic(name)
            except _ANSWERED as exc:
                code, message = error_code_of(exc), str(exc)
            results.append(DeletableTopicResult(name=name, error_code=int(code), error_message=message))
        self._cluster.refresh()
        self._respond(request, header, DeleteTopicsResponse(responses=results))

    def _create_partitions(
        self, request: NetworkRequest, header: RequestHeader, body: CreatePartitionsRequest
    ) -> None:
        counts: dict[str, int] = {}
        for topic in body.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results = []
        for topic in body.topics:
            code, message = ErrorCode.NONE, None
            try:
                if counts[topic.name] > 1:
                    raise InvalidRequestError(f"topic {topic.name!r} is named twice")
                self._auth.check(request.session, AclOperation.ALTER, ResourceType.TOPIC, topic.name)
                assignment = None if topic.assignments is None else [a.broker_ids for a in topic.assignments]
                self._admin.add_partitions(
                    topic.name, topic.count, assignment, validate_only=body.validate_only
                )
            except _ANSWERED as exc:
                code, message = error_code_of(exc), str(exc)
            results.append(
                CreatePartitionsTopicResult(name=topic.name, error_code=int(code), error_message=message)
            )
        if any(r.error_code == _NONE for r in results) and not body.validate_only:
            self._cluster.refresh()
        self._respond(request, header, CreatePartitionsResponse(results=results))

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
                self._check_config(
                    request.session,
                    AclOperation.DESCRIBE_CONFIGS,
                    resource.resource_type,
                    resource.resource_name,
                )
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
            request.session,
            [(r.resource_type, r.resource_name) for r in body.resources],
            alter,
            body.validate_only,
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
            request.session,
            [(r.resource_type, r.resource_name) for r in body.resources],
            alter,
            body.validate_only,
        )
        self._respond(request, header, IncrementalAlterConfigsResponse(responses=responses))

    def _check_config(self, session: Session, operation: AclOperation, resource_type: int, name: str) -> None:
        """The authorization of a config resource: the topic's, or the cluster's for a broker's configs."""
        if resource_type == ConfigResourceType.TOPIC:
            self._auth.check(session, operation, ResourceType.TOPIC, name)
        elif resource_type == ConfigResourceType.BROKER:
            self._auth.check_cluster(session, operation)

    def _alter_each(
        self,
        session: Session,
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
                self._check_config(session, AclOperation.ALTER_CONFIGS, resource_type, name)
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

    # ------------------------------------------------------------------------------------ ElectLeaders

    def _elect_leaders(
        self, request: NetworkRequest, header: RequestHeader, body: ElectLeadersRequest
    ) -> None:
        if not self._auth.authorize_cluster(request.session, AclOperation.ALTER):
            # Kafka's answer: the top-level error and every asked partition refused
            refused = [
                ReplicaElectionResult(
                    topic=topic.topic,
                    partition_result=[
                        PartitionResult(
                            partition_id=index, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                        )
                        for index in topic.partitions
                    ],
                )
                for topic in body.topic_partitions or ()
            ]
            self._respond(
                request,
                header,
                ElectLeadersResponse(
                    error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), replica_election_results=refused
                ),
            )
            return
        view = self._cluster.view
        every = body.topic_partitions is None
        if body.topic_partitions is None:
            asked = {name: sorted(partitions) for name, partitions in sorted(view.topics.items())}
        else:
            asked = {}
            for topic in body.topic_partitions:
                asked.setdefault(topic.topic, []).extend(topic.partitions)
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        to_elect: list[TopicPartition] = []
        for name, partitions in asked.items():
            for index in partitions:
                tp = TopicPartition(name, index)
                refusal = _refusal(view, tp, body.election_type)
                if refusal is None:
                    to_elect.append(tp)
                else:
                    results[tp] = refusal
        if to_elect:
            results.update(self._elect_preferred(to_elect, body.timeout_ms))
        answer = [
            ReplicaElectionResult(
                topic=name,
                partition_result=[
                    PartitionResult(partition_id=tp.partition, error_code=int(code), error_message=message)
                    for tp in sorted(results)
                    if tp.topic == name
                    for code, message in (results[tp],)
                    if not (every and code == ErrorCode.ELECTION_NOT_NEEDED)
                ],
            )
            for name in asked
        ]
        self._respond(request, header, ElectLeadersResponse(replica_election_results=answer))

    def _elect_preferred(
        self, partitions: list[TopicPartition], timeout_ms: int
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Hand ``partitions`` to the controller and wait until their first replicas lead (see the module
        docstring)."""
        deadline = time.monotonic() + min(max(timeout_ms, 0) / 1000, MAX_ELECTION_WAIT_S)
        requested = False
        while True:
            if not requested:
                try:
                    self._admin.request_preferred_election(partitions)
                    requested = True
                except ZooKeeperError as exc:
                    if not exc.retriable:
                        return {tp: (error_code_of(exc), str(exc)) for tp in partitions}
            view = self._cluster.view
            pending = [tp for tp in partitions if not _preferred_leads(view, tp)]
            if requested and not pending:
                return dict.fromkeys(partitions, (ErrorCode.NONE, None))
            if time.monotonic() >= deadline:
                return {
                    tp: (
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"{tp}: its first replica did not become leader in time",
                    )
                    if tp in pending
                    else (ErrorCode.NONE, None)
                    for tp in partitions
                }
            time.sleep(_ELECTION_POLL_S)


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


_Result = tuple[ErrorCode, str | None]


def _preferred_leads(view: ClusterView, tp: TopicPartition) -> bool:
    replicas = view.topics.get(tp.topic, {}).get(tp.partition, ())
    state = view.states.get(tp)
    return bool(replicas) and state is not None and state.leader == replicas[0]


def _refusal(
    view: ClusterView, tp: TopicPartition, election_type: int
) -> tuple[ErrorCode, str | None] | None:
    """Why ``tp`` gets no election of ``election_type`` now (Kafka's checks and messages), or None."""
    replicas = view.topics.get(tp.topic, {}).get(tp.partition)
    if replicas is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp.topic}-{tp.partition}"
    state = view.states.get(tp)
    leader_live = state is not None and state.leader in view.brokers
    if election_type == UNCLEAN:
        if leader_live:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        return (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            f"{tp}: Lumber elects an out-of-sync leader only by unclean.leader.election.enable",
        )
    if _preferred_leads(view, tp):
        return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
    preferred = replicas[0] if replicas else -1
    if state is None or preferred not in view.brokers or preferred not in state.isr:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"{tp}: the preferred leader {preferred} is not live and in the in-sync replicas",
        )
    return None
