"""ListOffsets (key 2), v1-v7: the offset for a timestamp, or the earliest (-2), latest (-1) or max-timestamp
(-3) offset.

v1 is the floor (v0's list of old-style offsets is gone since Kafka 4.0; librdkafka's time-based offsets
need v1); v2 adds the isolation level, v4 leader epochs, v6 is flexible, v7 the MAX_TIMESTAMP (-3) query
(KIP-734: the record with the largest timestamp, as AdminClient's ``OffsetSpec.max_timestamp`` asks). v8's
-4 and v9's -5 name tiered storage's offsets, which Lumber has not: the range stops at v7.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire

#: ``timestamp`` values with a special meaning.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class ListOffsetsPartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    current_leader_epoch: Annotated[int, wire("int32", "4+")] = -1
    timestamp: Annotated[int, wire("int64")] = 0


class ListOffsetsTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[ListOffsetsPartition], wire(array(ListOffsetsPartition))] = ()


class ListOffsetsRequest(NamedTuple):
    replica_id: Annotated[int, wire("int32")] = -1
    isolation_level: Annotated[int, wire("int8", "2+")] = 0
    topics: Annotated[Sequence[ListOffsetsTopic], wire(array(ListOffsetsTopic))] = ()


class ListOffsetsPartitionResponse(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    timestamp: Annotated[int, wire("int64", "1+")] = -1
    offset: Annotated[int, wire("int64", "1+")] = -1
    leader_epoch: Annotated[int, wire("int32", "4+")] = -1


class ListOffsetsTopicResponse(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[ListOffsetsPartitionResponse], wire(array(ListOffsetsPartitionResponse))
    ] = ()


class ListOffsetsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "2+")] = 0
    topics: Annotated[Sequence[ListOffsetsTopicResponse], wire(array(ListOffsetsTopicResponse))] = ()


LIST_OFFSETS = ApiSpec(
    key=ApiKey.LIST_OFFSETS,
    request=ListOffsetsRequest,
    response=ListOffsetsResponse,
    min_version=1,
    max_version=7,
    flexible_from=6,
)
