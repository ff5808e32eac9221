"""Kafka's consumer protocol: what a ``"consumer"`` group's members put in JoinGroup and SyncGroup.

The group coordinator treats a member's subscription (JoinGroup's protocol metadata) and assignment
(SyncGroup's) as opaque bytes; the members agree on their layout. Kafka's clients (``ConsumerProtocol``,
librdkafka, kafka-python) all use ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``
(``clients/src/main/resources/common/message/*.json``); Lumber encodes the same bytes, so Lumber members
and Kafka clients can share a group whoever leads it. Each starts with an int16 version, then the fields of
that version in Kafka's non-flexible encoding (int16-length strings, int32-length bytes, int32-counted
arrays, big-endian)::

    ConsumerProtocolSubscription                      ConsumerProtocolAssignment
    v0  topics [string], user_data bytes (nullable)   v0-v3  assigned_partitions [topic string,
    v1  + owned_partitions [topic string,                                         partitions [int32]],
                            partitions [int32]]              user_data bytes (nullable)
    v2  + generation_id int32 (-1: unknown)
    v3  + rack_id string (nullable)

Lumber writes version 3 subscriptions (its owned partitions and generation, for sticky assignors of other
clients; no rack) and version 0 assignments, as Kafka's eager assignors do. Reading follows Kafka's rule:
a newer version is read with the newest layout known (versions only append fields), so later fields are
ignored. An empty assignment (a leader that failed to assign) reads as no partitions. Pure functions:
thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

from broker.client.errors import GroupError
from broker.protocol import compiler
from broker.protocol.errors import ProtocolError
from broker.protocol.schema import array, wire
from broker.record.topic_partition import TopicPartition

#: JoinGroup's ``protocol_type`` of consumer groups.
CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 0
#: The newest layouts this module knows; newer versions are read with them.
_NEWEST = 3
_VERSION = struct.Struct(">h")


class ConsumerProtocolError(GroupError):
    """A subscription or assignment that is not Kafka's consumer protocol (the message says whose)."""


class _TopicPartitions(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[int], wire(array("int32"))] = ()


class _Subscription(NamedTuple):
    topics: Annotated[Sequence[str], wire(array("string"))] = ()
    user_data: Annotated[bytes | None, wire("bytes", nullable="0+")] = None
    owned_partitions: Annotated[Sequence[_TopicPartitions], wire(array(_TopicPartitions), "1+")] = ()
    generation_id: Annotated[int, wire("int32", "2+")] = -1
    rack_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None


class _Assignment(NamedTuple):
    assigned_partitions: Annotated[Sequence[_TopicPartitions], wire(array(_TopicPartitions))] = ()
    user_data: Annotated[bytes | None, wire("bytes", nullable="0+")] = None


@dataclass(frozen=True)
class Subscription:
    """A member's subscription: its topics (sorted), and what it owns in which generation."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None

    def encode(self, version: int = SUBSCRIPTION_VERSION) -> bytes:
        body = _Subscription(
            sorted(self.topics),
            self.user_data,
            _group(self.owned_partitions),
            self.generation_id,
            self.rack_id,
        )
        return _encode(body, version)

    @classmethod
    def decode(cls, data: bytes, where: str) -> Subscription:
        """``where`` names whose subscription it is (for the error)."""
        body = _decode(_Subscription, data, f"{where}: subscription")
        owned = tuple(TopicPartition(t.topic, p) for t in body.owned_partitions for p in t.partitions)
        return cls(tuple(body.topics), _bytes(body.user_data), owned, body.generation_id, body.rack_id)


@dataclass(frozen=True)
class Assignment:
    """What the leader gives one member: its partitions (sorted)."""

    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)
    user_data: bytes | None = None

    def encode(self, version: int = ASSIGNMENT_VERSION) -> bytes:
        return _encode(_Assignment(_group(self.partitions), self.user_data), version)

    @classmethod
    def decode(cls, data: bytes, where: str) -> Assignment:
        if not data:
            return cls()
        body = _decode(_Assignment, data, f"{where}: assignment")
        found = sorted(TopicPartition(t.topic, p) for t in body.assigned_partitions for p in t.partitions)
        return cls(tuple(found), _bytes(body.user_data))

    def by_topic(self) -> dict[str, list[int]]:
        topics: dict[str, list[int]] = {}
        for tp in self.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        return topics


def _group(partitions: Sequence[TopicPartition]) -> list[_TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [_TopicPartitions(topic, numbers) for topic, numbers in by_topic.items()]


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _encode(body: tuple[Any, ...], version: int) -> bytes:
    if not 0 <= version <= _NEWEST:
        raise ValueError(f"{type(body).__name__} version {version}: Lumber writes versions 0-{_NEWEST}")
    chunks = compiler.encode(body, type(body), version, flexible=False, context=type(body).__name__)
    return _VERSION.pack(version) + b"".join(bytes(c) for c in chunks)


def _decode(cls: Any, data: bytes, where: str) -> Any:
    if len(data) < 2:
        raise ConsumerProtocolError(f"{where}: {len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise ConsumerProtocolError(f"{where}: version {version} (expected 0 or more)")
    try:
        body, _ = compiler.decode(
            cls, memoryview(data), 2, min(version, _NEWEST), flexible=False, context=where
        )
    except ProtocolError as exc:
        raise ConsumerProtocolError(f"{where}: not Kafka's consumer protocol: {exc}") from exc
    return body


def subscriptions_of(members: Mapping[str, Subscription]) -> dict[str, dict[str, int]]:
    """The members' subscriptions as :mod:`broker.client.groups.partition_assignor` takes them: one stream per
    topic per member (the group assigns to members; a member spreads its partitions over its streams)."""
    return {member: dict.fromkeys(sub.topics, 1) for member, sub in members.items()}
