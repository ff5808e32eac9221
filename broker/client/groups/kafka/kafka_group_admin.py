"""Looking at Kafka-protocol consumer groups, resetting their offsets and deleting them (``lumber groups``).

What ``kafka-consumer-groups`` does, with the same requests: ListGroups to every broker (each answers the
groups it coordinates), and to the group's coordinator
(:mod:`broker.client.groups.kafka.group_coordinator_lookup`) DescribeGroups (state, protocol, members with
their client ids, hosts and assignments, decoded as Kafka's consumer protocol,
:mod:`broker.client.groups.kafka.consumer_protocol`), OffsetFetch of every partition (null topics, v2+),
OffsetCommit outside any generation (generation -1, no member id) for a reset, and DeleteGroups. As in Kafka,
offsets are reset and groups deleted only while the group has no members (state ``Empty``): the coordinator
itself refuses a commit from outside the generation of an active group and answers NON_EMPTY_GROUP to a
delete. Log end offsets (for the lag) come from the caller (``end_offsets`` of a
:class:`~broker.client.consumer.consumer.Consumer`), and a partition is described as in
:mod:`broker.client.groups.zookeeper.group_admin`: both are :mod:`broker.client.groups.group_partition`.

Thread safety: one thread uses an admin.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import BrokerConnectionError, ClientError, GroupError
from broker.client.groups.group_partition import GroupPartition, OffsetLookup, log_ends, partitions_json
from broker.client.groups.kafka.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
)
from broker.client.groups.kafka.group_coordinator_lookup import (
    CoordinatorNotFoundError,
    find_group_coordinator,
)
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata, metadata_source
from broker.client.metadata.cluster_snapshot import BrokerAddress
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.messages.delete_groups import DeleteGroupsRequest
from broker.protocol.messages.describe_groups import DescribeGroupsRequest
from broker.protocol.messages.list_groups import ListGroupsRequest
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.record.topic_partition import TopicPartition

#: The state of a group without members (Kafka's ``Empty``); ``Dead`` groups are gone.
EMPTY_STATE = "Empty"
DEAD_STATE = "Dead"
_OFFSET_FETCH_MAX_VERSION = 7
#: What the admin retries (after finding the coordinator again).
_RETRY_CODES = frozenset(
    {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)


class KafkaGroupAdminError(GroupError):
    """The coordinator refused or could not answer (the message names the group, request and code)."""


@dataclass(frozen=True)
class KafkaGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    #: the partitions of its assignment (empty while the group rebalances, or not a consumer group)
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class KafkaPartitionState(GroupPartition):
    """One partition of a group: its member (whose assignment names it), and the committed offset and lag."""

    member: KafkaGroupMember | None

    def holder_json(self) -> dict[str, Any]:
        return {"member": None if self.member is None else self.member.member_id}


@dataclass(frozen=True)
class KafkaGroupDescription:
    group: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: BrokerAddress
    members: list[KafkaGroupMember]
    partitions: list[KafkaPartitionState]

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "kind": "kafka",
            "state": self.state,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "coordinator": self.coordinator.node_id,
            "members": [
                {
                    "id": m.member_id,
                    "instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "host": m.client_host,
                    "assignment": [str(tp) for tp in m.assignment],
                }
                for m in self.members
            ],
            **partitions_json(self.partitions),
        }


@dataclass(frozen=True)
class ListedKafkaGroup:
    group: str
    protocol_type: str
    state: str


class KafkaGroupAdmin:
    """Kafka-protocol groups through the brokers (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: Sequence[str] = (),
        *,
        zookeeper_connect: str | None = None,
        config: ConsumerConfig | None = None,
    ) -> None:
        settings = config if config is not None else ConsumerConfig()
        servers = list(bootstrap_servers) or list(settings.bootstrap_servers)
        self._pool = BrokerPool(
            client_id=settings.client_id,
            request_timeout_ms=settings.request_timeout_ms,
            connect_timeout_ms=settings.connect_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            security=settings.client_security("consumer"),
        )
        self._retry_for_s = (settings.connect_timeout_ms + settings.request_timeout_ms) / 1000
        self._retry_backoff_s = max(settings.retry_backoff_ms, 50) / 1000
        self._metadata = ClusterMetadata(
            metadata_source(
                servers,
                None if servers else zookeeper_connect,
                self._pool,
                section="consumer",
                timeout_ms=settings.connect_timeout_ms,
            ),
            retry_backoff_ms=settings.retry_backoff_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
        )

    def list_groups(self) -> list[ListedKafkaGroup]:
        """Every group of every live broker, sorted by name."""
        snapshot = self._metadata.update()
        found: dict[str, ListedKafkaGroup] = {}
        for broker in snapshot.brokers.values():
            response = self._pool.get(broker).request(ListGroupsRequest())
            if response.error_code != ErrorCode.NONE:
                raise KafkaGroupAdminError(
                    f"ListGroups at {broker}: {ErrorCode.name_of(response.error_code)} "
                    f"(error code {response.error_code})"
                )
            for group in response.groups:
                found[group.group_id] = ListedKafkaGroup(
                    group.group_id, group.protocol_type, group.group_state
                )
        return [found[name] for name in sorted(found)]

    def exists(self, group: str) -> bool:
        """Whether the coordinator knows ``group`` (members or committed offsets)."""
        return self.state(group) != DEAD_STATE

    def state(self, group: str) -> str:
        """The group's state as DescribeGroups answers it (``Dead``: no such group)."""
        return str(self._describe(group)[1].group_state)

    def members(self, group: str) -> list[KafkaGroupMember]:
        """The group's members, sorted by id (DescribeGroups only)."""
        return _members(self._describe(group)[1])

    def describe(self, group: str, end_offsets: OffsetLookup | None = None) -> KafkaGroupDescription:
        coordinator, described = self._describe(group)
        members = _members(described)
        committed = self._offset_fetch(group, None)
        owners = {tp: m for m in members for tp in m.assignment}
        partitions = sorted(set(committed) | set(owners))
        ends = log_ends(end_offsets, partitions)
        states = [
            KafkaPartitionState(
                topic=tp.topic,
                partition=tp.partition,
                committed=committed.get(tp),
                log_end=ends.get(tp),
                member=owners.get(tp),
            )
            for tp in partitions
        ]
        return KafkaGroupDescription(
            group,
            described.group_state,
            described.protocol_type,
            described.protocol_data,
            coordinator,
            members,
            states,
        )

    def committed(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        wanted = sorted(partitions)
        found = self._offset_fetch(group, wanted)
        return {tp: found.get(tp) for tp in wanted}

    def reset_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group``, which must have no members (as ``kafka-consumer-groups``; a
        group the coordinator does not know yet is created with them)."""
        state = self.state(group)
        if state not in (EMPTY_STATE, DEAD_STATE):
            raise KafkaGroupAdminError(
                f"group {group!r} is {state}: offsets are reset only while a kafka group has no members "
                "(stop its consumers first)"
            )
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(OffsetCommitRequestPartition(tp.partition, offset))
        response = self._to_coordinator(
            group,
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[OffsetCommitRequestTopic(name, parts) for name, parts in by_topic.items()],
            ),
            lambda r: next((int(p.error_code) for t in r.topics for p in t.partitions), 0),
        )[1]
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != ErrorCode.NONE:
                    raise KafkaGroupAdminError(
                        f"group {group!r}: OffsetCommit of {topic.name}-{part.partition_index}: "
                        f"{ErrorCode.name_of(part.error_code)} (error code {part.error_code})"
                    )

    def delete(self, group: str) -> None:
        """Delete an empty group and its offsets (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND raise)."""
        response = self._to_coordinator(
            group, DeleteGroupsRequest(groups_names=[group]), lambda r: int(r.results[0].error_code)
        )[1]
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaGroupAdminError(
                    f"group {group!r}: DeleteGroups: {ErrorCode.name_of(result.error_code)} "
                    f"(error code {result.error_code})"
                )

    # ------------------------------------------------------------------------------ requests

    def _describe(self, group: str) -> tuple[BrokerAddress, Any]:
        coordinator, response = self._to_coordinator(
            group, DescribeGroupsRequest(groups=[group]), lambda r: int(r.groups[0].error_code)
        )
        described = response.groups[0]
        if described.error_code != ErrorCode.NONE:
            raise KafkaGroupAdminError(
                f"group {group!r}: DescribeGroups: {ErrorCode.name_of(described.error_code)} "
                f"(error code {described.error_code})"
            )
        return coordinator, described

    def _offset_fetch(self, group: str, partitions: list[TopicPartition] | None) -> dict[TopicPartition, int]:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [OffsetFetchRequestTopic(name, numbers) for name, numbers in by_topic.items()]
        coordinator, response = self._to_coordinator(
            group,
            OffsetFetchRequest(group_id=group, topics=topics),
            lambda r: (
                int(r.error_code) or next((int(p.error_code) for t in r.topics for p in t.partitions), 0)
            ),
            (ApiKey.OFFSET_FETCH, _OFFSET_FETCH_MAX_VERSION),
        )
        if response.error_code != ErrorCode.NONE:
            raise KafkaGroupAdminError(
                f"group {group!r}: OffsetFetch at {coordinator}: {ErrorCode.name_of(response.error_code)} "
                f"(error code {response.error_code})"
            )
        found: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == ErrorCode.NONE and part.committed_offset >= 0:
                    found[TopicPartition(topic.name, part.partition_index)] = part.committed_offset
        return found

    def _to_coordinator(
        self,
        group: str,
        body: Any,
        error_of: Callable[[Any], int] = lambda response: int(response.error_code),
        version_cap: tuple[ApiKey, int] | None = None,
    ) -> tuple[BrokerAddress, Any]:
        """Send ``body`` to the group's coordinator. While there is none yet, it is loading the group
        (COORDINATOR_LOAD_IN_PROGRESS: ``__consumer_offsets`` was just created or moved) or it moved
        (NOT_COORDINATOR, a lost connection), find it again and retry, for up to ``connect_timeout_ms``
        plus ``request_timeout_ms``; then raise the last error."""
        deadline = time.monotonic() + self._retry_for_s
        while True:
            try:
                coordinator = find_group_coordinator(self._pool, self._metadata, group)
                connection = self._pool.get(coordinator)
                version = None
                if version_cap is not None:  # a newer version's layout this admin does not send
                    api_key, highest = version_cap
                    version = min(connection.api_version(int(api_key)), highest)
                response = connection.request(body, version=version)
            except (BrokerConnectionError, CoordinatorNotFoundError) as exc:
                last: ClientError = exc
                self._metadata.request_update()
            else:
                code = error_of(response)
                if code not in _RETRY_CODES:
                    return coordinator, response
                last = KafkaGroupAdminError(
                    f"group {group!r}: {type(body).__name__[: -len('Request')]} at {coordinator}: "
                    f"{ErrorCode.name_of(code)} (error code {code})"
                )
            if time.monotonic() >= deadline:
                raise last
            time.sleep(self._retry_backoff_s)

    def close(self) -> None:
        self._pool.close()
        self._metadata.close()

    def __enter__(self) -> KafkaGroupAdmin:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _members(described: Any) -> list[KafkaGroupMember]:
    """A DescribeGroups answer's members, their assignments decoded when it is a consumer group."""
    members = []
    for m in described.members:
        assignment: tuple[TopicPartition, ...] = ()
        if described.protocol_type == CONSUMER_PROTOCOL_TYPE:
            try:
                assignment = Assignment.decode(bytes(m.member_assignment), f"member {m.member_id}").partitions
            except ConsumerProtocolError:
                assignment = ()  # not Kafka's consumer protocol after all: shown without an assignment
        members.append(
            KafkaGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment)
        )
    return sorted(members, key=lambda m: m.member_id)
