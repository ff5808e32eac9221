"""The protocol layer's partition reassignment APIs: AlterPartitionReassignments and
ListPartitionReassignments (KIP-455; part of Kafka's ``KafkaApis``, split out as
:mod:`broker.server.admin_apis` is).

Only the active controller answers them, as in Kafka's ZooKeeper mode: any other broker answers
NOT_CONTROLLER at the top level, and Kafka's admin clients send them to the controller that Metadata
names. AlterPartitionReassignments hands the targets to the controller thread
(:meth:`broker.server.controller.Controller.alter_reassignments`) and answers each partition with its
outcome (:mod:`broker.server.partition_reassigner`: INVALID_REPLICA_ASSIGNMENT,
UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS, through :mod:`broker.server.error_codes`); a
partition named twice in one request is INVALID_REQUEST, both times. ListPartitionReassignments answers
from the cluster view (the topic nodes' ``adding_replicas`` and ``removing_replicas``). With ``[broker]
authorizer``, moving needs ALTER on the cluster and listing DESCRIBE (else CLUSTER_AUTHORIZATION_FAILED).

Thread-safe: no state of its own; a request handler thread waits for the controller at most the request's
``timeout_ms`` (capped at :data:`MAX_WAIT_S`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import NotControllerError
from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from broker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from broker.record.topic_partition import TopicPartition
from broker.security.acl_binding import AclOperation
from broker.server.auth_helper import AuthHelper
from broker.server.error_codes import error_code_of
from broker.server.errors import InvalidRequestError
from broker.server.partition_reassigner import Outcome

#: Longest a request handler thread waits for the controller thread.
MAX_WAIT_S = 30.0

#: ``alter(targets, timeout_s)``: the active controller's
#: :meth:`~broker.server.controller.Controller.alter_reassignments`, or None when this broker is not it.
Alter = Callable[[Mapping[TopicPartition, Sequence[int] | None], float], dict[TopicPartition, Outcome]]
Respond = Callable[[NetworkRequest, RequestHeader, Any], None]


class ReassignmentApis:
    """Answers AlterPartitionReassignments and ListPartitionReassignments (see the module docstring)."""

    def __init__(
        self,
        *,
        broker_id: int,
        cluster: ClusterWatcher,
        controller: Callable[[], Alter | None],
        auth: AuthHelper,
        respond: Respond,
    ) -> None:
        self._auth = auth
        self._broker_id = broker_id
        self._cluster = cluster
        self._controller = controller
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {
            int(ApiKey.ALTER_PARTITION_REASSIGNMENTS): self._alter,
            int(ApiKey.LIST_PARTITION_REASSIGNMENTS): self._list,
        }

    def _not_controller(self) -> NotControllerError:
        return NotControllerError(self._broker_id, self._cluster.view.controller_id)

    def _alter(
        self, request: NetworkRequest, header: RequestHeader, body: AlterPartitionReassignmentsRequest
    ) -> None:
        alter = self._controller()
        if not self._auth.authorize_cluster(request.session, AclOperation.ALTER):
            self._respond(request, header, AlterPartitionReassignmentsResponse(**_denied()))
            return
        if alter is None:
            error = self._not_controller()
            self._respond(
                request,
                header,
                AlterPartitionReassignmentsResponse(
                    error_code=int(error_code_of(error)), error_message=str(error)
                ),
            )
            return
        named: dict[TopicPartition, int] = {}
        for topic in body.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                named[tp] = named.get(tp, 0) + 1
        targets = {
            TopicPartition(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
            for t in body.topics
            for p in t.partitions
            if named[TopicPartition(t.name, p.partition_index)] == 1
        }
        outcomes: dict[TopicPartition, Outcome] = {}
        if targets:
            outcomes = alter(targets, min(max(body.timeout_ms, 0) / 1000, MAX_WAIT_S))
        moved = [o for o in outcomes.values() if isinstance(o, NotControllerError)]
        if moved and len(moved) == len(outcomes):  # resigned while the request waited
            self._respond(request, header, AlterPartitionReassignmentsResponse(**_top(moved[0])))
            return
        responses = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                outcome: Outcome = (
                    InvalidRequestError(f"{tp} is named more than once")
                    if named[tp] > 1
                    else outcomes.get(tp)
                )
                partitions.append(
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index,
                        error_code=int(ErrorCode.NONE if outcome is None else error_code_of(outcome)),
                        error_message=None if outcome is None else str(outcome),
                    )
                )
            responses.append(ReassignableTopicResponse(name=topic.name, partitions=partitions))
        self._respond(request, header, AlterPartitionReassignmentsResponse(responses=responses))

    def _list(
        self, request: NetworkRequest, header: RequestHeader, body: ListPartitionReassignmentsRequest
    ) -> None:
        if not self._auth.authorize_cluster(request.session, AclOperation.DESCRIBE):
            self._respond(request, header, ListPartitionReassignmentsResponse(**_denied()))
            return
        if self._controller() is None:
            error = self._not_controller()
            self._respond(
                request,
                header,
                ListPartitionReassignmentsResponse(
                    error_code=int(error_code_of(error)), error_message=str(error)
                ),
            )
            return
        moving = self._cluster.view.reassignments
        if body.topics is None:
            chosen = sorted(moving)
        else:
            chosen = sorted(
                {TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes} & set(moving)
            )
        topics: dict[str, list[OngoingPartitionReassignment]] = {}
        for tp in chosen:
            r = moving[tp]
            topics.setdefault(tp.topic, []).append(
                OngoingPartitionReassignment(
                    partition_index=tp.partition,
                    replicas=r.replicas,
                    adding_replicas=r.adding,
                    removing_replicas=r.removing,
                )
            )
        self._respond(
            request,
            header,
            ListPartitionReassignmentsResponse(
                topics=[OngoingTopicReassignment(name=n, partitions=ps) for n, ps in topics.items()]
            ),
        )


def _top(error: NotControllerError) -> dict[str, Any]:
    """A response's top-level error fields."""
    return {"error_code": int(error_code_of(error)), "error_message": str(error)}


def _denied() -> dict[str, Any]:
    """A refusal's top-level fields (Kafka: ALTER on the cluster to move, DESCRIBE to list)."""
    return {"error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "error_message": None}
