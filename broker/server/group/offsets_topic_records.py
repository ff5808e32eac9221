"""The records of ``__consumer_offsets``: Kafka's own key and value layouts, so Kafka's tooling reads the
topic (``kafka-console-consumer --formatter ...OffsetsMessageFormatter``,
``kafka-dump-log --offsets-decoder``), and the partition a group's records go to.

A group's records all go to partition ``abs(h) % partitions`` of the topic (:func:`partition_for`), where
``h`` is Java's ``String.hashCode`` of the group id and ``abs`` is Kafka's ``Utils.abs``
(``Integer.MIN_VALUE`` -> 0): the coordinator writes there, and readers of a group's commits (the console's
lag history, :mod:`lumber.console.offsets_topic_reader`) read there.

Every record has a key and, but for tombstones, a value; each starts with an int16 version, then the fields
of that version in Kafka's non-flexible encoding (int16-length strings and int32-length bytes, big-endian),
exactly as Kafka's ``group-coordinator/src/main/resources/common/message/*.json`` declare them:

=========================  =======  =====================================================================
record                     version  fields
=========================  =======  =====================================================================
OffsetCommitKey            0, 1     group string, topic string, partition int32 (Lumber writes 1)
OffsetCommitValue          0        offset int64, metadata string, commitTimestamp int64
                           1        ... as 0, then expireTimestamp int64 (OffsetCommit v1's retention)
                           2        as 0
                           3        offset int64, leaderEpoch int32, metadata string, commitTimestamp
                                    int64 (Lumber writes 3, as Kafka does)
GroupMetadataKey           2        group string
GroupMetadataValue         0        protocolType string, generation int32, protocol string (nullable),
                                    leader string (nullable), members [memberId, clientId, clientHost,
                                    sessionTimeout int32, subscription bytes, assignment bytes]
                           1        members gain rebalanceTimeout int32 after clientHost
                           2        currentStateTimestamp int64 after leader
                           3        members gain groupInstanceId string (nullable) after memberId (Lumber
                                    writes 3, as Kafka does for classic groups)
=========================  =======  =====================================================================

Key versions 0 and 1 are offset commits, 2 is a group's metadata. A tombstone (null value) deletes: an
offset commit key with a null value drops that partition's offset, a group metadata key with a null value
drops the group (written when a group is deleted or expires). Version 4 values (flexible, Kafka 3.5+) are
read too; keys and values of other versions are refused naming the version. The layouts are declared with
:mod:`broker.protocol.schema`, the wire codec's own declarations, and encoded by its compiler. Pure
functions: thread-safe.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple

from broker.protocol import compiler
from broker.protocol.errors import ProtocolError
from broker.protocol.schema import array, wire
from broker.server.errors import ServerError

#: Kafka's name of the offsets topic.
OFFSETS_TOPIC = "__consumer_offsets"
_VERSION = _INT16 = struct.Struct(">h")
#: OffsetCommitValue v3 up to the metadata's bytes: version, offset, leader epoch, metadata length.
_VALUE_V3_HEAD = struct.Struct(">hqih")
_INT64 = struct.Struct(">q")
_MAX_STRING_BYTES = 0x7FFF
OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
_FLEXIBLE_VALUE_VERSION = 4


class OffsetsRecordError(ServerError):
    """A record of ``__consumer_offsets`` that is not one of Kafka's layouts (the message says where)."""


class OffsetCommitKey(NamedTuple):
    group: Annotated[str, wire("string", "0-1")] = ""
    topic: Annotated[str, wire("string", "0-1")] = ""
    partition: Annotated[int, wire("int32", "0-1")] = 0


class OffsetCommitValue(NamedTuple):
    offset: Annotated[int, wire("int64")] = 0
    leader_epoch: Annotated[int, wire("int32", "3+")] = -1
    metadata: Annotated[str, wire("string")] = ""
    commit_timestamp: Annotated[int, wire("int64")] = 0
    expire_timestamp: Annotated[int, wire("int64", "1")] = -1


class GroupMetadataKey(NamedTuple):
    group: Annotated[str, wire("string", "2")] = ""


class MemberMetadataValue(NamedTuple):
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None
    client_id: Annotated[str, wire("string")] = ""
    client_host: Annotated[str, wire("string")] = ""
    rebalance_timeout: Annotated[int, wire("int32", "1+")] = -1
    session_timeout: Annotated[int, wire("int32")] = 0
    subscription: Annotated[bytes, wire("bytes")] = b""
    assignment: Annotated[bytes, wire("bytes")] = b""


class GroupMetadataValue(NamedTuple):
    protocol_type: Annotated[str, wire("string")] = ""
    generation: Annotated[int, wire("int32")] = 0
    protocol: Annotated[str | None, wire("string", nullable="0+")] = None
    leader: Annotated[str | None, wire("string", nullable="0+")] = None
    current_state_timestamp: Annotated[int, wire("int64", "2+")] = -1
    members: Annotated[Sequence[MemberMetadataValue], wire(array(MemberMetadataValue))] = ()


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as an int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=4096)
def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``: Kafka's ``Utils.abs(hashCode) % partitions``
    (cached: every group request asks it, and the hash walks the id in Python)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _encode(version: int, obj: tuple[Any, ...]) -> bytes:
    chunks = compiler.encode(
        obj, type(obj), version, flexible=False, context=f"{type(obj).__name__} v{version}"
    )
    return _VERSION.pack(version) + b"".join(bytes(c) for c in chunks)


def _decode(cls: Any, data: bytes, versions: range, where: str) -> tuple[int, Any]:
    if len(data) < 2:
        raise OffsetsRecordError(f"{where}: {len(data)} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version not in versions:
        raise OffsetsRecordError(
            f"{where}: {cls.__name__} version {version} is not one Lumber reads ({versions.start}-"
            f"{versions.stop - 1})"
        )
    flexible = (
        cls is not OffsetCommitKey and cls is not GroupMetadataKey and version >= _FLEXIBLE_VALUE_VERSION
    )
    view = memoryview(data)
    try:
        obj, _ = compiler.decode(cls, view, 2, version, flexible=flexible, context=f"{where}: {cls.__name__}")
    except ProtocolError as exc:
        raise OffsetsRecordError(str(exc)) from exc
    return version, obj


@functools.lru_cache(maxsize=65536)
def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Cached: a group commits the same partitions over and over."""
    return _encode(OFFSET_COMMIT_KEY_VERSION, OffsetCommitKey(group, topic, partition))


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp_ms: int) -> bytes:
    """Version 3, packed directly (one per commit; the same bytes as the declared layout's encoding, which
    also gives the error for a value out of range)."""
    data = metadata.encode()
    if len(data) <= _MAX_STRING_BYTES:
        try:
            return (
                _VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, len(data))
                + data
                + _INT64.pack(commit_timestamp_ms)
            )
        except struct.error:
            pass
    value = OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp_ms)
    return _encode(OFFSET_COMMIT_VALUE_VERSION, value)


def group_metadata_key(group: str) -> bytes:
    return _encode(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _encode(GROUP_METADATA_VALUE_VERSION, value)


def group_key_prefix(group: str) -> bytes:
    """The bytes after the version of every key of ``group``'s records (the keys of all versions start
    with the group string): a reader of one group's records skips the others' without decoding them."""
    data = group.encode()
    return _INT16.pack(len(data)) + data


def decode_key(data: bytes, where: str) -> OffsetCommitKey | GroupMetadataKey:
    """An offset commit key (versions 0-1) or a group metadata key (version 2)."""
    if len(data) >= 2 and _VERSION.unpack_from(data, 0)[0] == GROUP_METADATA_KEY_VERSION:
        return _decode(GroupMetadataKey, data, range(2, 3), where)[1]  # type: ignore[no-any-return]
    return _decode(OffsetCommitKey, data, range(2), where)[1]  # type: ignore[no-any-return]


def decode_offset_commit_value(data: bytes, where: str) -> OffsetCommitValue:
    return _decode(OffsetCommitValue, data, range(5), where)[1]  # type: ignore[no-any-return]


def decode_group_metadata_value(data: bytes, where: str) -> GroupMetadataValue:
    return _decode(GroupMetadataValue, data, range(5), where)[1]  # type: ignore[no-any-return]
