"""Looking at consumer groups in ZooKeeper, resetting their offsets and deleting them (``lumber groups``).

Reads only what the members write (:mod:`broker.cluster.zk_paths`): the registrations, the generation,
the owner nodes and the committed offsets. Log end offsets (for the lag) and offsets by time come from
the brokers, through the :data:`~broker.client.groups.group_partition.OffsetLookup` the caller passes (a
:class:`~broker.client.consumer.consumer.Consumer`'s ``end_offsets``). A reset goes through
:meth:`~broker.client.groups.zookeeper.group_offsets.GroupOffsets.rewind`, so it is safe on a live group: the
owners adopt the new offsets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError

from broker.client.errors import GroupError
from broker.client.groups.group_partition import GroupPartition, OffsetLookup, log_ends, partitions_json
from broker.client.groups.zookeeper.committed_offset import CommittedOffset
from broker.client.groups.zookeeper.group_assignment import GroupAssignment
from broker.client.groups.zookeeper.group_offsets import GroupOffsets
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.client.groups.zookeeper.partition_owner import PartitionOwner
from broker.cluster import zk_paths, zk_reads
from broker.record.topic_partition import TopicPartition


class UnknownGroupError(GroupError):
    """No such consumer group in ZooKeeper."""

    def __init__(self, group: str) -> None:
        self.group = group
        super().__init__(f"consumer group {group!r} does not exist")


class NonEmptyGroupError(GroupError):
    """The group has members, so it cannot be deleted."""


@dataclass(frozen=True)
class PartitionState(GroupPartition):
    """One partition of a group: who owns it (its owner node's member), and the committed offset and lag."""

    owner: str | None

    def holder_json(self) -> dict[str, Any]:
        return {"owner": self.owner}


@dataclass(frozen=True)
class GroupDescription:
    group: str
    members: list[MemberRegistration]
    generation: GroupAssignment | None
    partitions: list[PartitionState]

    def to_json(self) -> dict[str, Any]:
        """The description as JSON: ``lumber groups describe --json`` and the console's group page."""
        generation = self.generation
        return {
            "group": self.group,
            "kind": "zookeeper",
            "generation": None if generation is None else generation.generation,
            "leader": None if generation is None else generation.leader,
            "strategy": None if generation is None else generation.strategy,
            "members": [
                {"id": m.consumer_id, "host": m.host, "pid": m.pid, "subscription": m.subscription}
                for m in self.members
            ],
            **partitions_json(self.partitions),
        }


class GroupAdmin:
    """Consumer groups, read from ZooKeeper through a started kazoo client."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client

    def list_groups(self) -> list[str]:
        return zk_reads.read_children(self._client, zk_paths.CONSUMERS_PATH)

    def exists(self, group: str) -> bool:
        return self._client.exists(zk_paths.group_path(group)) is not None

    def members(self, group: str) -> list[MemberRegistration]:
        found = []
        for member in zk_reads.read_children(self._client, zk_paths.group_ids_path(group)):
            path = zk_paths.group_member_path(group, member)
            try:
                data, _ = self._client.get(path)
            except NoNodeError:
                continue
            found.append(MemberRegistration.decode(member, path, data))
        return found

    def generation(self, group: str) -> GroupAssignment | None:
        path = zk_paths.group_assignment_path(group)
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return None
        return GroupAssignment.decode(path, data)

    def partitions(self, group: str, topics: Iterable[str] | None = None) -> list[TopicPartition]:
        """Every partition of ``topics`` (default: those the members subscribe to or that have offsets)."""
        names = set(topics) if topics is not None else self._topics_of(group)
        found: list[TopicPartition] = []
        for topic in sorted(names):
            assignment = zk_reads.read_assignment(self._client, topic)
            if assignment is not None:
                found.extend(TopicPartition(topic, p) for p in sorted(assignment))
        return found

    def describe(self, group: str, end_offsets: OffsetLookup | None = None) -> GroupDescription:
        if not self.exists(group):
            raise UnknownGroupError(group)
        members = self.members(group)
        partitions = self.partitions(group)
        committed = GroupOffsets(self._client, group).read(partitions)
        ends = log_ends(end_offsets, partitions)
        states = []
        for tp in partitions:
            found = committed.get(tp)
            states.append(
                PartitionState(
                    topic=tp.topic,
                    partition=tp.partition,
                    committed=None if found is None else found.offset,
                    log_end=ends.get(tp),
                    owner=self._owner(group, tp),
                )
            )
        return GroupDescription(group, members, self.generation(group), states)

    def reset_offsets(self, group: str, offsets: dict[TopicPartition, int], requested_by: str) -> None:
        """Set the group's committed offsets (live members adopt them)."""
        if not self.exists(group):
            raise UnknownGroupError(group)
        GroupOffsets(self._client, group).rewind(offsets, requested_by=requested_by)

    def delete(self, group: str) -> None:
        """Delete ``group`` and its offsets; refused while members are registered (NonEmptyGroupError)."""
        if not self.exists(group):
            raise UnknownGroupError(group)
        members = self.members(group)
        if members:
            raise NonEmptyGroupError(
                f"consumer group {group!r} (zookeeper) has {len(members)} members "
                f"({', '.join(m.consumer_id for m in members)}): stop them before deleting it"
            )
        try:
            self._client.delete(zk_paths.group_path(group), recursive=True)
        except NotEmptyError:
            raise NonEmptyGroupError(
                f"consumer group {group!r} (zookeeper): a member joined while it was being deleted"
            ) from None

    def committed(self, group: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        found = GroupOffsets(self._client, group).read(partitions)
        return {tp: (None if c is None else c.offset) for tp, c in found.items()}

    def committed_offsets(
        self, group: str, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, CommittedOffset | None]:
        """The committed offsets with who committed them and when (for the lag evaluation)."""
        return GroupOffsets(self._client, group).read(partitions)

    def _owner(self, group: str, tp: TopicPartition) -> str | None:
        path = zk_paths.group_owner_path(group, tp.topic, tp.partition)
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return None
        return PartitionOwner.decode(path, data).owner

    def _topics_of(self, group: str) -> set[str]:
        topics = {topic for member in self.members(group) for topic in member.subscription}
        topics |= set(zk_reads.read_children(self._client, zk_paths.group_offsets_path(group)))
        return topics
