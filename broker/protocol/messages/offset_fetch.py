"""OffsetFetch (key 9), v1-v9: a group's committed offsets, from the coordinator's cache.

Kafka 4.0's range (v0 read ZooKeeper). Seen sent: librdkafka 2.16 v9 (v8+: the groups batched),
kafka-python 3.0 v8. v2 allows null topics (every partition of the group) and a top-level error,
v5 answers the committed leader epoch, v6 is flexible, v7 has ``require_stable`` (Lumber has no
transactions, so every offset is stable), v8 batches groups, v9 adds the member id and epoch (KIP-848,
unchecked for classic groups as in Kafka). v10 names topics by id, which Lumber lacks.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class OffsetFetchRequestTopic(NamedTuple):
    name: Annotated[str, wire("string", "0-7")] = ""
    partition_indexes: Annotated[Sequence[int], wire(array("int32"), "0-7")] = ()


class OffsetFetchRequestTopics(NamedTuple):
    name: Annotated[str, wire("string", "8+")] = ""
    partition_indexes: Annotated[Sequence[int], wire(array("int32"), "8+")] = ()


class OffsetFetchRequestGroup(NamedTuple):
    group_id: Annotated[str, wire("string", "8+")] = ""
    member_id: Annotated[str | None, wire("string", "9+", nullable="9+")] = None
    member_epoch: Annotated[int, wire("int32", "9+")] = -1
    topics: Annotated[
        Sequence[OffsetFetchRequestTopics] | None,
        wire(array(OffsetFetchRequestTopics), "8+", nullable="8+"),
    ] = ()


class OffsetFetchRequest(NamedTuple):
    group_id: Annotated[str, wire("string", "0-7")] = ""
    topics: Annotated[
        Sequence[OffsetFetchRequestTopic] | None, wire(array(OffsetFetchRequestTopic), "0-7", nullable="2-7")
    ] = ()
    groups: Annotated[Sequence[OffsetFetchRequestGroup], wire(array(OffsetFetchRequestGroup), "8+")] = ()
    require_stable: Annotated[bool, wire("bool", "7+")] = False


class OffsetFetchResponsePartition(NamedTuple):
    partition_index: Annotated[int, wire("int32", "0-7")] = 0
    committed_offset: Annotated[int, wire("int64", "0-7")] = -1
    committed_leader_epoch: Annotated[int, wire("int32", "5-7")] = -1
    metadata: Annotated[str | None, wire("string", "0-7", nullable="0-7")] = ""
    error_code: Annotated[int, wire("int16", "0-7")] = 0


class OffsetFetchResponseTopic(NamedTuple):
    name: Annotated[str, wire("string", "0-7")] = ""
    partitions: Annotated[
        Sequence[OffsetFetchResponsePartition], wire(array(OffsetFetchResponsePartition), "0-7")
    ] = ()


class OffsetFetchResponsePartitions(NamedTuple):
    partition_index: Annotated[int, wire("int32", "8+")] = 0
    committed_offset: Annotated[int, wire("int64", "8+")] = -1
    committed_leader_epoch: Annotated[int, wire("int32", "8+")] = -1
    metadata: Annotated[str | None, wire("string", "8+", nullable="8+")] = ""
    error_code: Annotated[int, wire("int16", "8+")] = 0


class OffsetFetchResponseTopics(NamedTuple):
    name: Annotated[str, wire("string", "8+")] = ""
    partitions: Annotated[
        Sequence[OffsetFetchResponsePartitions], wire(array(OffsetFetchResponsePartitions), "8+")
    ] = ()


class OffsetFetchResponseGroup(NamedTuple):
    group_id: Annotated[str, wire("string", "8+")] = ""
    topics: Annotated[Sequence[OffsetFetchResponseTopics], wire(array(OffsetFetchResponseTopics), "8+")] = ()
    error_code: Annotated[int, wire("int16", "8+")] = 0


class OffsetFetchResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "3+")] = 0
    topics: Annotated[Sequence[OffsetFetchResponseTopic], wire(array(OffsetFetchResponseTopic), "0-7")] = ()
    error_code: Annotated[int, wire("int16", "2-7")] = 0
    groups: Annotated[Sequence[OffsetFetchResponseGroup], wire(array(OffsetFetchResponseGroup), "8+")] = ()


OFFSET_FETCH = ApiSpec(
    key=ApiKey.OFFSET_FETCH,
    request=OffsetFetchRequest,
    response=OffsetFetchResponse,
    min_version=1,
    max_version=9,
    flexible_from=6,
)
