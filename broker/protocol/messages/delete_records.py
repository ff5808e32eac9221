"""DeleteRecords (key 21), v0-v2: raise partitions' log start offsets (records below them are gone).

Kafka 4.4's range (v2 flexible). Seen sent: confluent-kafka's ``AdminClient.delete_records`` (v1... as its
ApiVersions pick) and kafka-python 3.0's ``delete_records``. An offset of -1 means the high watermark;
only the partition's leader answers (others: NOT_LEADER_OR_FOLLOWER); ``low_watermark`` is the new log
start offset.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire

#: ``offset`` meaning "the high watermark" (Kafka's ``DeleteRecordsRequest.HIGH_WATERMARK``).
HIGH_WATERMARK = -1


class DeleteRecordsPartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    offset: Annotated[int, wire("int64")] = 0


class DeleteRecordsTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[DeleteRecordsPartition], wire(array(DeleteRecordsPartition))] = ()


class DeleteRecordsRequest(NamedTuple):
    topics: Annotated[Sequence[DeleteRecordsTopic], wire(array(DeleteRecordsTopic))] = ()
    timeout_ms: Annotated[int, wire("int32")] = 60_000


class DeleteRecordsPartitionResult(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    low_watermark: Annotated[int, wire("int64")] = -1
    error_code: Annotated[int, wire("int16")] = 0


class DeleteRecordsTopicResult(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[DeleteRecordsPartitionResult], wire(array(DeleteRecordsPartitionResult))
    ] = ()


class DeleteRecordsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    topics: Annotated[Sequence[DeleteRecordsTopicResult], wire(array(DeleteRecordsTopicResult))] = ()


DELETE_RECORDS = ApiSpec(
    key=ApiKey.DELETE_RECORDS,
    request=DeleteRecordsRequest,
    response=DeleteRecordsResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
