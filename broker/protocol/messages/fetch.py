"""Fetch (key 1), v4-v12: read record batches from partitions.

v4 is the floor: record batch v2 (librdkafka's MsgVer2 needs it) and the isolation level; v5 log start
offsets, v7 fetch sessions (KIP-227), v9 current leader epochs, v10 is what librdkafka needs to enable zstd,
v11 rack-aware reads, v12 is flexible and the highest version kafka-python sends. v13 replaces topic names
by topic ids, which Lumber does not have. Fetch sessions: ``session_id``, ``session_epoch`` and
``forgotten_topics_data`` (v7+) as :mod:`broker.server.fetch_session` describes them; v4-v6 requests decode
with the defaults 0 and -1, a sessionless fetch. Response ``records`` may be a region
(:mod:`broker.protocol.region`) that :func:`broker.protocol.codec.encode_fetch_response` leaves to the
server to ``sendfile``.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.region import RecordsData
from broker.protocol.schema import array, wire


class FetchPartition(NamedTuple):
    partition: Annotated[int, wire("int32")] = 0
    current_leader_epoch: Annotated[int, wire("int32", "9+")] = -1
    fetch_offset: Annotated[int, wire("int64")] = 0
    last_fetched_epoch: Annotated[int, wire("int32", "12+")] = -1
    log_start_offset: Annotated[int, wire("int64", "5+")] = -1
    partition_max_bytes: Annotated[int, wire("int32")] = 0


class FetchTopic(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[FetchPartition], wire(array(FetchPartition))] = ()


class ForgottenTopic(NamedTuple):
    topic: Annotated[str, wire("string", "7+")] = ""
    partitions: Annotated[Sequence[int], wire(array("int32"), "7+")] = ()


class FetchRequest(NamedTuple):
    cluster_id: Annotated[str | None, wire("string", "12+", nullable="12+", tag=0)] = None
    replica_id: Annotated[int, wire("int32")] = -1
    max_wait_ms: Annotated[int, wire("int32")] = 0
    min_bytes: Annotated[int, wire("int32")] = 0
    max_bytes: Annotated[int, wire("int32", "3+")] = 0x7FFFFFFF
    isolation_level: Annotated[int, wire("int8", "4+")] = 0
    session_id: Annotated[int, wire("int32", "7+")] = 0
    session_epoch: Annotated[int, wire("int32", "7+")] = -1
    topics: Annotated[Sequence[FetchTopic], wire(array(FetchTopic))] = ()
    forgotten_topics_data: Annotated[Sequence[ForgottenTopic], wire(array(ForgottenTopic), "7+")] = ()
    rack_id: Annotated[str, wire("string", "11+")] = ""


class EpochEndOffset(NamedTuple):
    epoch: Annotated[int, wire("int32", "12+")] = -1
    end_offset: Annotated[int, wire("int64", "12+")] = -1


class LeaderIdAndEpoch(NamedTuple):
    leader_id: Annotated[int, wire("int32", "12+")] = -1
    leader_epoch: Annotated[int, wire("int32", "12+")] = -1


class SnapshotId(NamedTuple):
    end_offset: Annotated[int, wire("int64")] = -1
    epoch: Annotated[int, wire("int32")] = -1


class AbortedTransaction(NamedTuple):
    producer_id: Annotated[int, wire("int64", "4+")] = 0
    first_offset: Annotated[int, wire("int64", "4+")] = 0


class PartitionData(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    high_watermark: Annotated[int, wire("int64")] = 0
    last_stable_offset: Annotated[int, wire("int64", "4+")] = -1
    log_start_offset: Annotated[int, wire("int64", "5+")] = -1
    diverging_epoch: Annotated[EpochEndOffset | None, wire(EpochEndOffset, "12+", tag=0)] = None
    current_leader: Annotated[LeaderIdAndEpoch | None, wire(LeaderIdAndEpoch, "12+", tag=1)] = None
    snapshot_id: Annotated[SnapshotId | None, wire(SnapshotId, "12+", tag=2)] = None
    aborted_transactions: Annotated[
        Sequence[AbortedTransaction] | None, wire(array(AbortedTransaction), "4+", nullable="4+")
    ] = ()
    preferred_read_replica: Annotated[int, wire("int32", "11+")] = -1
    records: Annotated[RecordsData | None, wire("records", nullable="0+")] = None


class FetchableTopicResponse(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[PartitionData], wire(array(PartitionData))] = ()


class FetchResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    error_code: Annotated[int, wire("int16", "7+")] = 0
    session_id: Annotated[int, wire("int32", "7+")] = 0
    responses: Annotated[Sequence[FetchableTopicResponse], wire(array(FetchableTopicResponse))] = ()


FETCH = ApiSpec(
    key=ApiKey.FETCH,
    request=FetchRequest,
    response=FetchResponse,
    min_version=4,
    max_version=12,
    flexible_from=12,
)
