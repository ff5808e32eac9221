"""The protocol layer's consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete (part of Kafka's
``KafkaApis``, split out of :mod:`broker.server.kafka_apis`).

:class:`GroupApis` decodes nothing and encodes nothing itself: :class:`~broker.server.kafka_apis.KafkaApis`
dispatches the decoded requests to it (:meth:`GroupApis.handlers`) and it answers through the ``respond``
it was given. The work is the group coordinator's (:mod:`broker.server.group.group_coordinator`):

* **FindCoordinator** (group keys): the leader of the group's ``__consumer_offsets`` partition (the topic
  created on first use), COORDINATOR_NOT_AVAILABLE while it has none; transaction keys:
  COORDINATOR_NOT_AVAILABLE (Lumber has no transactions).
* **JoinGroup, SyncGroup and OffsetCommit** are answered later, from the coordinator's callbacks (a join
  waits for the rebalance, a sync for the leader's assignment, a commit for its replicas).
* **Heartbeat, LeaveGroup, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete** are
  answered at once from the coordinator's cache.

With ``[broker] authorizer`` (Kafka's checks): FindCoordinator needs DESCRIBE on the group; JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and OffsetCommit READ on the group (else GROUP_AUTHORIZATION_FAILED), and
OffsetCommit READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, nothing of them
committed); OffsetFetch DESCRIBE on the group and on each topic asked for (a fetch of every committed
offset leaves out the topics it may not describe); DescribeGroups DESCRIBE and DeleteGroups DELETE on each
group; OffsetDelete DELETE on the group and READ on each topic; ListGroups lists every group to a principal
with DESCRIBE on the cluster, else only the groups it may describe. DescribeGroups v3+ asked for the
authorized operations (KIP-430) answers, for each group described without an error, the group's operations
the principal may do (every supported one without an authorizer).

Thread-safe as :class:`~broker.server.kafka_apis.KafkaApis` is: no state of its own changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from broker.protocol.messages.describe_groups import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from broker.protocol.messages.find_coordinator import (
    GROUP_KEY_TYPE,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from broker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from broker.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberResponse
from broker.protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
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
from broker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.auth_helper import AuthHelper
from broker.server.error_codes import ANSWERED_ERRORS as _ANSWERED
from broker.server.group.group_coordinator import GroupCoordinator
from broker.server.group.group_coordinator_types import JoinResult, MemberToLeave, SyncResult
from broker.server.group.offset_and_metadata import OffsetAndMetadata

logger = logging.getLogger(__name__)

_NONE = int(ErrorCode.NONE)
_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
#: How :class:`GroupApis` answers: ``respond(request, header, response body)``.
Respond = Callable[[NetworkRequest, RequestHeader, Any], None]


class GroupApis:
    """Answers the consumer group APIs through the group coordinator (see the module docstring)."""

    def __init__(
        self,
        *,
        group_coordinator: GroupCoordinator,
        cluster: ClusterWatcher,
        auth: AuthHelper,
        respond: Respond,
    ) -> None:
        self._groups = group_coordinator
        self._cluster = cluster
        self._auth = auth
        self._respond = respond

    def _group_allowed(self, request: NetworkRequest, operation: AclOperation, group_id: str) -> bool:
        return self._auth.authorize(request.session, operation, ResourceType.GROUP, group_id)

    def _topics_denied(self, request: NetworkRequest, operation: AclOperation, topics: Any) -> set[str]:
        return self._auth.denied(request.session, operation, ResourceType.TOPIC, topics)

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        """The handler of each API key this class answers."""
        return {
            int(ApiKey.FIND_COORDINATOR): self._find_coordinator,
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
        }

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
            if not self._auth.authorize(
                request.session, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, body.key
            ):
                answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
                return
            answer(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "Lumber has no transactions: no transaction coordinator"
            )
            return
        if not body.key:
            answer(ErrorCode.INVALID_REQUEST, "no group id")
            return
        if not self._group_allowed(request, AclOperation.DESCRIBE, body.key):
            answer(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
            return
        try:
            node = self._groups.coordinator_of(body.key)
        except _ANSWERED as exc:
            logger.warning("FindCoordinator for group %r: %s", body.key, exc)
            answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"__consumer_offsets cannot be created: {exc}")
            return
        broker = self._cluster.view.brokers.get(node)
        endpoint = None if broker is None else broker.endpoint(request.session.listener_name)
        if broker is None or endpoint is None:
            answer(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"group {body.key!r}: its __consumer_offsets partition has no leader yet"
                if broker is None
                else f"group {body.key!r}: its coordinator, broker {node}, has no listener "
                f"{request.session.listener_name}",
            )
            return
        answer(ErrorCode.NONE, None, broker.broker_id, endpoint.host, endpoint.port)

    def _join_group(self, request: NetworkRequest, header: RequestHeader, body: JoinGroupRequest) -> None:
        version = header.api_version
        if not self._group_allowed(request, AclOperation.READ, body.group_id):
            self._respond(
                request, header, JoinGroupResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            )
            return

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
        if not self._group_allowed(request, AclOperation.READ, body.group_id):
            self._respond(
                request, header, SyncGroupResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            )
            return

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
        if not self._group_allowed(request, AclOperation.READ, body.group_id):
            self._respond(
                request, header, HeartbeatResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            )
            return
        error = self._groups.handle_heartbeat(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            generation_id=body.generation_id,
        )
        self._respond(request, header, HeartbeatResponse(error_code=int(error)))

    def _leave_group(self, request: NetworkRequest, header: RequestHeader, body: LeaveGroupRequest) -> None:
        if not self._group_allowed(request, AclOperation.READ, body.group_id):
            self._respond(
                request, header, LeaveGroupResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
            )
            return
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
        refused: dict[TopicPartition, ErrorCode] = {}
        if not self._group_allowed(request, AclOperation.READ, body.group_id):
            refused = {
                TopicPartition(t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
                for t in body.topics
                for p in t.partitions
            }
        else:
            denied = self._topics_denied(request, AclOperation.READ, (t.name for t in body.topics))
            refused = {
                TopicPartition(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                for t in body.topics
                if t.name in denied
                for p in t.partitions
            }
        offsets = {
            TopicPartition(t.name, p.partition_index): OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now
            )
            for t in body.topics
            for p in t.partitions
            if TopicPartition(t.name, p.partition_index) not in refused
        }

        def respond(errors: dict[TopicPartition, ErrorCode]) -> None:
            errors = {**errors, **refused}
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

        if refused and not offsets:
            respond({})
            return
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
                error, found, denied = self._fetch_offsets(request, asked.group_id, partitions)
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
                                        error_code=_TOPIC_DENIED if topic in denied else _NONE,
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
        error, found, denied = self._fetch_offsets(request, body.group_id, partitions)
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
                                error_code=_TOPIC_DENIED if topic in denied else partition_error,
                            )
                            for tp, oam in entries
                        ],
                    )
                    for topic, entries in _by_topic(found).items()
                ],
            ),
        )

    def _fetch_offsets(
        self, request: NetworkRequest, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None], set[str]]:
        """One group's committed offsets as the session may see them, and the topics asked for that it may
        not describe (their partitions answered TOPIC_AUTHORIZATION_FAILED; a fetch of every committed
        offset leaves such topics out)."""
        if not self._group_allowed(request, AclOperation.DESCRIBE, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, set()
        if partitions is None:
            error, found = self._groups.handle_fetch_offsets(group_id, None)
            hidden = self._auth.denied(
                request.session,
                AclOperation.DESCRIBE,
                ResourceType.TOPIC,
                {tp.topic for tp in found},
                log_if_denied=False,
            )
            return error, {tp: oam for tp, oam in found.items() if tp.topic not in hidden}, set()
        denied = self._topics_denied(request, AclOperation.DESCRIBE, {tp.topic for tp in partitions})
        error, found = self._groups.handle_fetch_offsets(
            group_id, [tp for tp in partitions if tp.topic not in denied]
        )
        if denied and error == ErrorCode.NONE:
            found = {**found, **{tp: None for tp in partitions if tp.topic in denied}}
        return error, found, denied

    def _list_groups(self, request: NetworkRequest, header: RequestHeader, body: ListGroupsRequest) -> None:
        types = {t.lower() for t in body.types_filter}
        error, listed = self._groups.handle_list_groups(body.states_filter)
        if not self._auth.authorize_cluster(request.session, AclOperation.DESCRIBE):
            listed = [g for g in listed if self._group_allowed(request, AclOperation.DESCRIBE, g[0])]
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
        asks_operations = header.api_version >= 3 and body.include_authorized_operations
        for group_id in body.groups:
            if not self._group_allowed(request, AclOperation.DESCRIBE, group_id):
                described.append(
                    DescribedGroup(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), group_id=group_id)
                )
                continue
            summary = self._groups.handle_describe_group(group_id)
            operations = AUTHORIZED_OPERATIONS_OMITTED
            if asks_operations and summary.error == ErrorCode.NONE:
                operations = self._auth.authorized_operations(request.session, ResourceType.GROUP, group_id)
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
                    authorized_operations=operations,
                )
            )
        self._respond(request, header, DescribeGroupsResponse(groups=described))

    def _delete_groups(
        self, request: NetworkRequest, header: RequestHeader, body: DeleteGroupsRequest
    ) -> None:
        denied = {g for g in body.groups_names if not self._group_allowed(request, AclOperation.DELETE, g)}
        results = self._groups.handle_delete_groups([g for g in body.groups_names if g not in denied])
        results.update(dict.fromkeys(denied, ErrorCode.GROUP_AUTHORIZATION_FAILED))
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
        errors: dict[TopicPartition, ErrorCode]
        if not self._group_allowed(request, AclOperation.DELETE, body.group_id):
            error, errors = ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
        else:
            denied = self._topics_denied(request, AclOperation.READ, (t.name for t in body.topics))
            error, errors = self._groups.handle_delete_offsets(
                body.group_id, [tp for tp in partitions if tp.topic not in denied]
            )
            errors.update(
                {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp.topic in denied}
            )
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


def _by_topic(
    found: dict[TopicPartition, OffsetAndMetadata | None],
) -> dict[str, list[tuple[TopicPartition, OffsetAndMetadata | None]]]:
    """``found`` grouped by topic, topics and partitions in order."""
    topics: dict[str, list[tuple[TopicPartition, OffsetAndMetadata | None]]] = {}
    for tp in sorted(found):
        topics.setdefault(tp.topic, []).append((tp, found[tp]))
    return topics
