"""OffsetCommit (key 8), v2-v9: a group's consumed positions, stored in ``__consumer_offsets``.

Kafka 4.0's range (v0-v1 are gone from it: v0 stored offsets in ZooKeeper, v1 had per-partition commit
timestamps). Seen sent: librdkafka 2.16 v9, kafka-python 3.0 v8. v2-v4 carry a
retention time (ignored since Kafka 2.1, KIP-211: retention is the broker's ``offsets_retention_ms``), v6
the committed leader epoch, v7 the ``group_instance_id``, v8 is flexible, v9 renames the generation to
"generation id or member epoch" (KIP-848), which for a classic group is still the generation. v10 names
topics by id, which Lumber lacks.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class OffsetCommitRequestPartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    committed_offset: Annotated[int, wire("int64")] = 0
    committed_leader_epoch: Annotated[int, wire("int32", "6+")] = -1
    committed_metadata: Annotated[str | None, wire("string", nullable="0+")] = ""


class OffsetCommitRequestTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[OffsetCommitRequestPartition], wire(array(OffsetCommitRequestPartition))
    ] = ()


class OffsetCommitRequest(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    generation_id_or_member_epoch: Annotated[int, wire("int32")] = -1
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "7+", nullable="7+")] = None
    retention_time_ms: Annotated[int, wire("int64", "2-4")] = -1
    topics: Annotated[Sequence[OffsetCommitRequestTopic], wire(array(OffsetCommitRequestTopic))] = ()


class OffsetCommitResponsePartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0


class OffsetCommitResponseTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[OffsetCommitResponsePartition], wire(array(OffsetCommitResponsePartition))
    ] = ()


class OffsetCommitResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "3+")] = 0
    topics: Annotated[Sequence[OffsetCommitResponseTopic], wire(array(OffsetCommitResponseTopic))] = ()


OFFSET_COMMIT = ApiSpec(
    key=ApiKey.OFFSET_COMMIT,
    request=OffsetCommitRequest,
    response=OffsetCommitResponse,
    min_version=2,
    max_version=9,
    flexible_from=8,
)
