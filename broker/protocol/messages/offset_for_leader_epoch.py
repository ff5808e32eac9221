"""OffsetForLeaderEpoch (key 23), v2-v4: where a leader epoch ends in the leader's log (KIP-101, KIP-279).

A follower that becomes one (after a restart or a leader change) asks the leader for the end offset of the
latest epoch in its own log and truncates to the divergence point (:mod:`broker.server.replica_fetcher`);
consumers ask it after a leader change to validate their position (KIP-320), which librdkafka does once
Metadata answers real leader epochs. v2 is the floor: it adds ``current_leader_epoch``, which fences a
client or follower with old metadata (FENCED_LEADER_EPOCH when it is older than the leader's,
UNKNOWN_LEADER_EPOCH when newer); v0-v1 are deprecated in Kafka and sent by no client Lumber supports.
v3 adds ``replica_id`` (a follower's broker id; -1 for a consumer, Kafka's default -2 for an older
request), v4 is flexible. An unknown epoch answers ``leader_epoch`` -1 and ``end_offset`` -1 (Kafka's
UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class OffsetForLeaderPartition(NamedTuple):
    partition: Annotated[int, wire("int32")] = 0
    current_leader_epoch: Annotated[int, wire("int32", "2+")] = -1
    leader_epoch: Annotated[int, wire("int32")] = -1


class OffsetForLeaderTopic(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[OffsetForLeaderPartition], wire(array(OffsetForLeaderPartition))] = ()


class OffsetForLeaderEpochRequest(NamedTuple):
    replica_id: Annotated[int, wire("int32", "3+")] = -2
    topics: Annotated[Sequence[OffsetForLeaderTopic], wire(array(OffsetForLeaderTopic))] = ()


class EpochEndOffset(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    partition: Annotated[int, wire("int32")] = 0
    leader_epoch: Annotated[int, wire("int32", "1+")] = -1
    end_offset: Annotated[int, wire("int64")] = -1


class OffsetForLeaderTopicResult(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[EpochEndOffset], wire(array(EpochEndOffset))] = ()


class OffsetForLeaderEpochResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "2+")] = 0
    topics: Annotated[Sequence[OffsetForLeaderTopicResult], wire(array(OffsetForLeaderTopicResult))] = ()


OFFSET_FOR_LEADER_EPOCH = ApiSpec(
    key=ApiKey.OFFSET_FOR_LEADER_EPOCH,
    request=OffsetForLeaderEpochRequest,
    response=OffsetForLeaderEpochResponse,
    min_version=2,
    max_version=4,
    flexible_from=4,
)
